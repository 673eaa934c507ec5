package vec

import (
	"fmt"
	"github.com/mtlbench/mtlbench/bridge/half"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// benchLevels runs f per implementation; generic only when asked, since it
// is orders of magnitude slower on the big shapes.
func benchLevels(b *testing.B, withGeneric bool, f func(b *testing.B)) {
	saved := level
	defer func() { level = saved }()
	for _, l := range availableLevels() {
		if l == levelGeneric && !withGeneric {
			continue
		}
		level = l
		b.Run(levelNames[l], f)
	}
}

func randBF16(n int) []uint16 {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	w := make([]uint16, n) // written, so no page is the shared zero page
	for i := range w {
		w[i] = half.BF16(float32(r.Float64()*2 - 1))
	}
	return w
}

// gemmShapes: the decode projections of a 1.1B model (hidden 2048, MLP 5632)
// plus a 64 MiB matrix that no cache holds, for comparison with SumBytes.
// The first two partly stay in the 32 MiB L3 across iterations, so their
// GB/s overstate DRAM speed; TestBandwidthReport flushes between calls.
var gemmShapes = [][2]int{{2048, 2048}, {5632, 2048}, {16384, 2048}}

func BenchmarkGemmBF16(b *testing.B) {
	for _, nk := range gemmShapes {
		n, k := nk[0], nk[1]
		w := randBF16(n * k)
		for _, m := range []int{1, 8, 16} {
			x := randF32(rand.New(rand.NewPCG(2, 3)), m*k)
			dst := make([]float32, m*n)
			b.Run(fmt.Sprintf("m=%d/n=%d/k=%d", m, n, k), func(b *testing.B) {
				benchLevels(b, n == 2048 && m <= 8, func(b *testing.B) {
					b.SetBytes(int64(n * k * 2))
					for b.Loop() {
						GemmBF16(dst, n, x, w, m, n, k)
					}
					b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			})
		}
	}
}

func BenchmarkGemmF16(b *testing.B) {
	n, k := 2048, 2048
	w := make([]uint16, n*k)
	for i, v := range randF32(rand.New(rand.NewPCG(4, 5)), n*k) {
		w[i] = half.F16(v)
	}
	for _, m := range []int{1, 8} {
		x := randF32(rand.New(rand.NewPCG(2, 3)), m*k)
		dst := make([]float32, m*n)
		b.Run(fmt.Sprintf("m=%d/n=%d/k=%d", m, n, k), func(b *testing.B) {
			benchLevels(b, false, func(b *testing.B) {
				b.SetBytes(int64(n * k * 2))
				for b.Loop() {
					GemmF16(dst, n, x, w, m, n, k)
				}
				b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		})
	}
}

func BenchmarkGemmF32(b *testing.B) {
	n, k := 2048, 2048
	w := randF32(rand.New(rand.NewPCG(4, 5)), n*k)
	for _, m := range []int{1, 8} {
		x := randF32(rand.New(rand.NewPCG(2, 3)), m*k)
		dst := make([]float32, m*n)
		b.Run(fmt.Sprintf("m=%d/n=%d/k=%d", m, n, k), func(b *testing.B) {
			benchLevels(b, false, func(b *testing.B) {
				b.SetBytes(int64(n * k * 4))
				for b.Loop() {
					GemmF32(dst, n, x, w, m, n, k)
				}
				b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		})
	}
}

func BenchmarkSumBytes(b *testing.B) {
	for _, mib := range []int{64, 256} {
		buf := make([]byte, mib<<20)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			benchLevels(b, false, func(b *testing.B) {
				b.SetBytes(int64(len(buf)))
				for b.Loop() {
					SumBytes(buf)
				}
			})
		})
	}
}

func BenchmarkDotF32(b *testing.B) {
	r := rand.New(rand.NewPCG(6, 7))
	x, y := randF32(r, 128), randF32(r, 128)
	benchLevels(b, true, func(b *testing.B) {
		b.SetBytes(128 * 8)
		var s float32
		for b.Loop() {
			s += DotF32(x, y)
		}
		_ = s
	})
}

// TestBandwidthReport (VEC_REPORT=1, VEC_REPS=n) interleaves SumBytes and
// GemmBF16 at m=1..16 over 64 MiB weights, on one goroutine and then split
// over two, and keeps each one's best time, so the ratios hold up on a machine
// shared with other work. A 128 MiB read between timed calls evicts the
// 32 MiB L3, so every call streams from DRAM.
func TestBandwidthReport(t *testing.T) {
	if os.Getenv("VEC_REPORT") == "" {
		t.Skip("set VEC_REPORT=1")
	}
	n, k := 16384, 2048
	w := randBF16(n * k)
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}
	buf, big, flush := fill(n*k*2), fill(256<<20), fill(128<<20)
	ms := []int{1, 2, 4, 8, 16}
	xs := map[int][]float32{}
	for _, m := range ms {
		xs[m] = randF32(rand.New(rand.NewPCG(1, 1)), m*k)
	}
	dst := make([]float32, 16*n)
	reps := 15
	if s := os.Getenv("VEC_REPS"); s != "" {
		reps, _ = strconv.Atoi(s)
	}
	saved := level
	defer func() { level = saved }()
	for _, l := range availableLevels()[1:] {
		level = l
		best := make([]time.Duration, len(ms)+2)
		for i := range best {
			best[i] = time.Hour
		}
		timed := func(i int, f func()) {
			SumBytes(flush)
			t0 := time.Now()
			f()
			best[i] = min(best[i], time.Since(t0))
		}
		for rep := 0; rep < reps; rep++ {
			timed(0, func() { SumBytes(buf) })
			timed(1, func() { SumBytes(big) })
			for i, m := range ms {
				timed(i+2, func() { GemmBF16(dst, n, xs[m], w, m, n, k) })
			}
		}
		// The same on two goroutines, each taking half the rows (half the
		// buffer), as the backend splits work across cores.
		par := func(f func(lo, hi int)) {
			var wg sync.WaitGroup
			for h := range 2 {
				wg.Go(func() { f(h*n/2, (h+1)*n/2) })
			}
			wg.Wait()
		}
		best2 := []time.Duration{time.Hour, time.Hour, time.Hour}
		timed2 := func(i int, f func(lo, hi int)) {
			SumBytes(flush)
			t0 := time.Now()
			par(f)
			best2[i] = min(best2[i], time.Since(t0))
		}
		for rep := 0; rep < reps; rep++ {
			timed2(0, func(lo, hi int) { SumBytes(buf[lo*k*2 : hi*k*2]) })
			for i, m := range []int{1, 8} {
				timed2(i+1, func(lo, hi int) {
					// dst columns lo..hi of an [m][n] result.
					GemmBF16(dst[lo:], n, xs[m], w[lo*k:hi*k], m, hi-lo, k)
				})
			}
		}
		gbs := func(bytes int, d time.Duration) float64 { return float64(bytes) / d.Seconds() / 1e9 }
		t.Logf("%s: 2 goroutines: SumBytes %.1f GB/s; GemmBF16 m=1 %.1f GB/s (%.0f%%), m=8 %.3f ms = %.2fx m=1 (%.1f GFLOP/s)",
			levelNames[l], gbs(len(buf), best2[0]), gbs(len(buf), best2[1]), 100*best2[0].Seconds()/best2[1].Seconds(),
			best2[2].Seconds()*1e3, best2[2].Seconds()/best2[1].Seconds(), 2*float64(8*n*k)/best2[2].Seconds()/1e9)
		ref := gbs(len(buf), best[0])
		t.Logf("%s: SumBytes 64MiB %.1f GB/s, 256MiB %.1f GB/s", levelNames[l], ref, gbs(len(big), best[1]))
		for i, m := range ms {
			d := best[i+2]
			t.Logf("%s: GemmBF16 m=%-2d %7.3f ms  %5.1f GB/s (%3.0f%% of SumBytes 64MiB)  %5.1f GFLOP/s  time/m1 %.2fx",
				levelNames[l], m, d.Seconds()*1e3, gbs(len(buf), d), 100*gbs(len(buf), d)/ref,
				2*float64(m*n*k)/d.Seconds()/1e9, d.Seconds()/best[2].Seconds())
		}
	}
}

// BenchmarkSiLUMul: the SwiGLU activation over TinyLlama's 5632-wide row.
func BenchmarkSiLUMul(b *testing.B) {
	r := rand.New(rand.NewPCG(6, 7))
	g, u := randF32(r, 5632), randF32(r, 5632)
	out := make([]float32, len(g))
	benchLevels(b, true, func(b *testing.B) {
		b.SetBytes(int64(len(g)) * 12)
		for b.Loop() {
			SiLUMul(out, g, u)
		}
	})
}

// BenchmarkGELU: GPT-2's MLP activation over its 3072-wide row.
func BenchmarkGELU(b *testing.B) {
	r := rand.New(rand.NewPCG(6, 7))
	x := randF32(r, 3072)
	out := make([]float32, len(x))
	benchLevels(b, true, func(b *testing.B) {
		b.SetBytes(int64(len(x)) * 8)
		for b.Loop() {
			GELU(out, x)
		}
	})
}
