package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

var levelNames = map[int]string{levelGeneric: "generic", levelAVX2: "avx2", levelAVX512: "avx512"}

// forLevels runs f once per implementation this machine can execute.
func forLevels(t *testing.T, f func(t *testing.T)) {
	saved := level
	defer func() { level = saved }()
	for _, l := range availableLevels() {
		level = l
		t.Run(levelNames[l], f)
	}
}

func randF32(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.Float64()*2 - 1)
	}
	return s
}

var gemmKs = []int{1, 7, 8, 15, 16, 17, 31, 33, 63, 64, 100, 2048 + 3}

type gemmCase struct {
	name  string
	run   func(dst []float32, ldd int, x []float32, m, n, k int, off int)
	wval  func(j, kk int) float64 // exact weight value for the reference
	setup func(r *rand.Rand, n, k, off int)
}

// gemmCases builds weights of each dtype; weights are stored at offset off
// into their backing slice so unaligned starts get exercised.
func gemmCases() []*gemmCase {
	var wb, wh []uint16
	var wf []float32
	var K, O int
	return []*gemmCase{
		{
			name: "bf16",
			setup: func(r *rand.Rand, n, k, off int) {
				K, O = k, off
				wb = make([]uint16, off+n*k)
				for i := range wb {
					wb[i] = BF16(float32(r.Float64()*2 - 1))
				}
			},
			wval: func(j, kk int) float64 { return float64(BF16ToFloat(wb[O+j*K+kk])) },
			run: func(dst []float32, ldd int, x []float32, m, n, k, off int) {
				GemmBF16(dst, ldd, x, wb[off:off+n*k], m, n, k)
			},
		},
		{
			name: "f16",
			setup: func(r *rand.Rand, n, k, off int) {
				K, O = k, off
				wh = make([]uint16, off+n*k)
				for i := range wh {
					wh[i] = F16(float32(r.Float64()*2 - 1))
				}
			},
			wval: func(j, kk int) float64 { return float64(F16ToFloat(wh[O+j*K+kk])) },
			run: func(dst []float32, ldd int, x []float32, m, n, k, off int) {
				GemmF16(dst, ldd, x, wh[off:off+n*k], m, n, k)
			},
		},
		{
			name: "f32",
			setup: func(r *rand.Rand, n, k, off int) {
				K, O = k, off
				wf = make([]float32, off+n*k)
				for i := range wf {
					wf[i] = float32(r.Float64()*2 - 1)
				}
			},
			wval: func(j, kk int) float64 { return float64(wf[O+j*K+kk]) },
			run: func(dst []float32, ldd int, x []float32, m, n, k, off int) {
				GemmF32(dst, ldd, x, wf[off:off+n*k], m, n, k)
			},
		},
	}
}

// TestGemm compares every (m, n, k) in the brief's grid with a float64
// reference. The reference is computed once per k for the largest m and n:
// entry (i, j) depends only on x row i and w row j, so smaller shapes are
// prefixes of it. The tolerance is relative to sum |x*w|, which bounds f32
// accumulation error independently of cancellation.
func TestGemm(t *testing.T) {
	const M, N = 9, 33
	for _, gc := range gemmCases() {
		for _, k := range gemmKs {
			for _, off := range []int{0, 1} {
				r := rand.New(rand.NewPCG(uint64(k), uint64(off)))
				gc.setup(r, N, k, off)
				xs := randF32(r, off+M*k)
				x := xs[off:]
				ref := make([]float64, M*N)
				mag := make([]float64, M*N)
				for i := 0; i < M; i++ {
					for j := 0; j < N; j++ {
						var s, a float64
						for kk := 0; kk < k; kk++ {
							p := float64(x[i*k+kk]) * gc.wval(j, kk)
							s += p
							a += math.Abs(p)
						}
						ref[i*N+j], mag[i*N+j] = s, a
					}
				}
				t.Run(fmt.Sprintf("%s/k=%d/off=%d", gc.name, k, off), func(t *testing.T) {
					forLevels(t, func(t *testing.T) {
						for m := 1; m <= M; m++ {
							for n := 1; n <= N; n++ {
								ldd := n + m%3 // some padded dst strides
								dst := make([]float32, m*ldd+1)
								for i := range dst {
									dst[i] = float32(math.NaN())
								}
								gc.run(dst, ldd, x[:m*k], m, n, k, off)
								checkGemmOut(t, dst, ldd, ref, mag, N, m, n, k)
								if t.Failed() {
									return
								}
							}
						}
					})
				})
			}
		}
	}
}

func checkGemmOut(t *testing.T, dst []float32, ldd int, ref, mag []float64, N, m, n, k int) {
	t.Helper()
	for i := 0; i < m; i++ {
		for j := 0; j < ldd; j++ {
			got := dst[i*ldd+j]
			if j >= n {
				if !math.IsNaN(float64(got)) {
					t.Errorf("m=%d n=%d k=%d: wrote outside the tile at (%d,%d)", m, n, k, i, j)
					return
				}
				continue
			}
			want := ref[i*N+j]
			if d := math.Abs(float64(got) - want); !(d <= 1e-5*mag[i*N+j]+1e-30) {
				t.Errorf("m=%d n=%d k=%d: dst[%d][%d] = %g, want %g (|diff| %g, sum|xw| %g)", m, n, k, i, j, got, want, d, mag[i*N+j])
				return
			}
		}
	}
	if v := dst[m*ldd]; !math.IsNaN(float64(v)) {
		t.Errorf("m=%d n=%d k=%d: wrote past the last row", m, n, k)
	}
}

// TestGemmLarge covers k-blocking of the activations (xBlockBytes) and big n.
func TestGemmLarge(t *testing.T) {
	for _, c := range [][3]int{{70, 37, 1500}, {1, 1003, 515}} {
		testGemmLarge(t, c[0], c[1], c[2])
	}
}

func testGemmLarge(t *testing.T, m, n, k int) {
	r := rand.New(rand.NewPCG(7, 7))
	x := randF32(r, m*k)
	w := make([]uint16, n*k)
	for i := range w {
		w[i] = BF16(float32(r.Float64()*2 - 1))
	}
	forLevels(t, func(t *testing.T) {
		dst := make([]float32, m*n)
		GemmBF16(dst, n, x, w, m, n, k)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s, a float64
				for kk := 0; kk < k; kk++ {
					p := float64(x[i*k+kk]) * float64(BF16ToFloat(w[j*k+kk]))
					s += p
					a += math.Abs(p)
				}
				if d := math.Abs(float64(dst[i*n+j]) - s); d > 1e-5*a {
					t.Fatalf("dst[%d][%d] = %g, want %g", i, j, dst[i*n+j], s)
				}
			}
		}
	})
}

func TestGemmEdge(t *testing.T) {
	forLevels(t, func(t *testing.T) {
		dst := []float32{5, 5, 5, 5}
		GemmF32(dst, 2, nil, nil, 2, 2, 0) // k == 0: empty sums
		for _, v := range dst {
			if v != 0 {
				t.Fatalf("k=0: got %v", dst)
			}
		}
		GemmBF16(nil, 0, nil, nil, 0, 0, 5)
		defer func() {
			if recover() == nil {
				t.Fatal("short slices did not panic")
			}
		}()
		GemmBF16(make([]float32, 4), 2, make([]float32, 7), make([]uint16, 8), 2, 2, 4)
	})
}

var vecLens = func() []int {
	var ls []int
	for n := 0; n <= 70; n++ {
		ls = append(ls, n)
	}
	return append(ls, 100, 127, 128, 129, 1000, 2048+3)
}()

func TestDotAxpy(t *testing.T) {
	forLevels(t, func(t *testing.T) {
		for _, n := range vecLens {
			for _, off := range []int{0, 1, 3} {
				r := rand.New(rand.NewPCG(uint64(n), uint64(off)))
				a := randF32(r, off+n)[off:]
				b := randF32(r, off+n+2)[off:] // b longer than a is allowed
				var s, mag float64
				for i := range a {
					s += float64(a[i]) * float64(b[i])
					mag += math.Abs(float64(a[i]) * float64(b[i]))
				}
				if got := DotF32(a, b); math.Abs(float64(got)-s) > 1e-5*mag+1e-30 {
					t.Fatalf("DotF32 n=%d off=%d: got %g want %g", n, off, got, s)
				}

				alpha := float32(r.Float64()*4 - 2)
				y := append([]float32(nil), b...)
				AxpyF32(alpha, a, y)
				for i := range y {
					want, tol := float64(b[i]), 0.0
					if i < n {
						p := float64(alpha) * float64(a[i])
						want += p
						tol = 1e-6 * (math.Abs(float64(b[i])) + math.Abs(p))
					}
					if math.Abs(float64(y[i])-want) > tol {
						t.Fatalf("AxpyF32 n=%d off=%d: y[%d] = %g want %g", n, off, i, y[i], want)
					}
				}
			}
		}
	})
}

// Reference conversions: decode by arithmetic, encode by searching the sorted
// table of representable values, so they share no bit tricks with the code.

func refF16Value(h uint16) float64 {
	s := 1.0
	if h&0x8000 != 0 {
		s = -1
	}
	e := int(h>>10) & 0x1f
	f := float64(h & 0x3ff)
	switch e {
	case 0:
		return s * math.Ldexp(f, -24)
	case 0x1f:
		if f == 0 {
			return math.Inf(int(s))
		}
		return math.NaN()
	}
	return s * math.Ldexp(1024+f, e-25)
}

func refBF16Value(h uint16) float64 { return float64(math.Float32frombits(uint32(h) << 16)) }

// roundToTable returns the pattern in [0, maxFinite] nearest to a >= 0 (ties
// to the even pattern), or inf when a rounds beyond maxFinite, given val
// increasing over patterns and top = the value one step past maxFinite.
func roundToTable(a float64, maxFinite uint16, inf uint16, top float64, val func(uint16) float64) uint16 {
	p := uint16(sort.Search(int(maxFinite)+1, func(i int) bool { return val(uint16(i)) > a }) - 1)
	lo := val(p)
	if lo == a {
		return p
	}
	hi, next := top, inf
	if p < maxFinite {
		hi, next = val(p+1), p+1
	}
	mid := (lo + hi) / 2
	switch {
	case a < mid:
		return p
	case a > mid:
		return next
	}
	if p&1 == 0 {
		return p
	}
	return next
}

func refF32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	if f != f {
		return sign | 0x7e00 | uint16(b&0x7fffff>>13)
	}
	return sign | roundToTable(math.Abs(float64(f)), 0x7bff, 0x7c00, 65536, refF16Value)
}

func refF32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	if f != f {
		return uint16(b>>16) | 0x40
	}
	return sign | roundToTable(math.Abs(float64(f)), 0x7f7f, 0x7f80, math.Ldexp(1, 128), refBF16Value)
}

func TestHalfToF32Exhaustive(t *testing.T) {
	src := make([]uint16, 1<<16+5)
	for i := range src {
		src[i] = uint16(i)
	}
	forLevels(t, func(t *testing.T) {
		for _, off := range []int{0, 5} {
			s := src[off:]
			db := make([]float32, len(s))
			dh := make([]float32, len(s))
			BF16ToF32(db, s)
			F16ToF32(dh, s)
			for i, h := range s {
				if got, want := math.Float32bits(db[i]), uint32(h)<<16; got != want {
					t.Fatalf("BF16ToF32(%#04x) = %#08x, want %#08x", h, got, want)
				}
				if got := math.Float32bits(BF16ToFloat(h)); got != uint32(h)<<16 {
					t.Fatalf("BF16ToFloat(%#04x) = %#08x", h, got)
				}
				var want uint32
				if v := refF16Value(h); v != v {
					want = uint32(h&0x8000)<<16 | 0x7fc00000 | uint32(h&0x3ff)<<13 // quiet NaN, payload kept
				} else {
					want = math.Float32bits(float32(v))
				}
				if got := math.Float32bits(dh[i]); got != want {
					t.Fatalf("F16ToF32(%#04x) = %#08x, want %#08x", h, got, want)
				}
				if got := math.Float32bits(F16ToFloat(h)); got != want {
					t.Fatalf("F16ToFloat(%#04x) = %#08x, want %#08x", h, got, want)
				}
			}
		}
	})
}

// f32Patterns mixes uniform random bit patterns with the interesting ones:
// exact ties and near-ties for both targets, half subnormals and their
// underflow boundary, the overflow boundary, f32 subnormals, inf and NaNs.
func f32Patterns() []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	var ps []float32
	add := func(b uint32) {
		ps = append(ps, math.Float32frombits(b), math.Float32frombits(b^0x80000000))
	}
	for i := 0; i < 200000; i++ {
		add(r.Uint32())
	}
	for i := 0; i < 20000; i++ {
		hi := r.Uint32() & 0xffff0000
		add(hi | 0x8000) // bf16 tie
		add(hi | 0x7fff)
		add(hi | 0x8001)
		// f16 ties between adjacent representable halves, subnormal ones too.
		h := uint16(r.IntN(0x7c00 - 1))
		mid := float32((refF16Value(h) + refF16Value(h+1)) / 2)
		add(math.Float32bits(mid))
		add(math.Float32bits(mid) + 1)
		add(math.Float32bits(mid) - 1)
		// Values in and just below the half subnormal range.
		add(math.Float32bits(float32(math.Ldexp(r.Float64(), -14-r.IntN(14)))))
		add(r.Uint32() & 0x807fffff) // f32 subnormals
		add(0x7f800000 | r.Uint32()&0x7fffff)
	}
	for _, v := range []float64{0, 65504, 65519, 65519.99, 65520, 65520.01, 65536, math.Ldexp(1, -24), math.Ldexp(1, -25),
		math.Ldexp(1.0000001, -25), math.Ldexp(1.5, -25), math.Ldexp(1, -26), math.Ldexp(1, -14), math.Ldexp(0.99999, -14),
		math.MaxFloat32, math.Inf(1), math.SmallestNonzeroFloat32} {
		add(math.Float32bits(float32(v)))
	}
	for _, b := range []uint32{0x7f800001, 0x7fc00000, 0x7fffffff, 0x7f802000, 0x7fa00000, 0x7f7fffff, 0x7f7f8000, 0x7f7f7fff} {
		add(b)
	}
	return ps
}

func TestF32ToHalf(t *testing.T) {
	ps := f32Patterns()
	wantB := make([]uint16, len(ps))
	wantH := make([]uint16, len(ps))
	for i, f := range ps {
		wantB[i] = refF32ToBF16(f)
		wantH[i] = refF32ToF16(f)
		if got := BF16(f); got != wantB[i] {
			t.Fatalf("BF16(%#08x) = %#04x, want %#04x", math.Float32bits(f), got, wantB[i])
		}
		if got := F16(f); got != wantH[i] {
			t.Fatalf("F16(%#08x) = %#04x, want %#04x", math.Float32bits(f), got, wantH[i])
		}
	}
	forLevels(t, func(t *testing.T) {
		for _, off := range []int{0, 3} {
			s := ps[off:]
			gb := make([]uint16, len(s))
			gh := make([]uint16, len(s))
			F32ToBF16(gb, s)
			F32ToF16(gh, s)
			for i, f := range s {
				if gb[i] != wantB[off+i] {
					t.Fatalf("F32ToBF16(%#08x) = %#04x, want %#04x", math.Float32bits(f), gb[i], wantB[off+i])
				}
				if gh[i] != wantH[off+i] {
					t.Fatalf("F32ToF16(%#08x) = %#04x, want %#04x", math.Float32bits(f), gh[i], wantH[off+i])
				}
			}
		}
		// Short slices take only the tail paths.
		for n := 0; n < 40; n++ {
			gb := make([]uint16, n)
			F32ToBF16(gb, ps[:n])
			for i := range gb {
				if gb[i] != wantB[i] {
					t.Fatalf("n=%d: F32ToBF16 mismatch at %d", n, i)
				}
			}
		}
	})
}

func TestSumBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 1<<20+77)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	ref := func(b []byte) uint64 {
		var s uint64
		i := 0
		for ; i+8 <= len(b); i += 8 {
			var w uint64
			for j := 7; j >= 0; j-- {
				w = w<<8 | uint64(b[i+j])
			}
			s += w
		}
		for ; i < len(b); i++ {
			s += uint64(b[i])
		}
		return s
	}
	forLevels(t, func(t *testing.T) {
		for _, n := range []int{0, 1, 7, 8, 9, 127, 128, 129, 255, 256, 257, 1000, 4096 + 13, len(buf) - 3} {
			for _, off := range []int{0, 1, 3} {
				b := buf[off : off+n]
				if got, want := SumBytes(b), ref(b); got != want {
					t.Fatalf("SumBytes(len %d, off %d) = %#x, want %#x", n, off, got, want)
				}
			}
		}
	})
}

func TestFeatures(t *testing.T) {
	t.Logf("Features() = %s", Features())
}
