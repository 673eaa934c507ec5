package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/half"
	"github.com/mtlbench/mtlbench/kernels"
)

var levelNames = map[int]string{levelGeneric: "generic", levelAVX2: "avx2", levelAVX512: "avx512", levelVNNI: "vnni"}

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
					wb[i] = half.BF16(float32(r.Float64()*2 - 1))
				}
			},
			wval: func(j, kk int) float64 { return float64(half.BF16ToFloat(wb[O+j*K+kk])) },
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
					wh[i] = half.F16(float32(r.Float64()*2 - 1))
				}
			},
			wval: func(j, kk int) float64 { return float64(half.F16ToFloat(wh[O+j*K+kk])) },
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
		w[i] = half.BF16(float32(r.Float64()*2 - 1))
	}
	forLevels(t, func(t *testing.T) {
		dst := make([]float32, m*n)
		GemmBF16(dst, n, x, w, m, n, k)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s, a float64
				for kk := 0; kk < k; kk++ {
					p := float64(x[i*k+kk]) * float64(half.BF16ToFloat(w[j*k+kk]))
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

func TestDotF32(t *testing.T) {
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

// TestDotBytes: the byte-widening dots against their definition, every
// length around the 8- and 16-value steps.
func TestDotBytes(t *testing.T) {
	for n := 0; n <= 70; n++ {
		x := make([]float32, n)
		q := make([]byte, n)
		for i := range x {
			x[i] = float32(i%5) - 1.5
			q[i] = byte(i*37 + 11)
		}
		var wu, wi float64
		for i := range q {
			wu += float64(x[i]) * float64(q[i])
			wi += float64(x[i]) * float64(int8(q[i]))
		}
		if got := DotU8F32(x, q); math.Abs(float64(got)-wu) > 1e-3*(1+math.Abs(wu)) {
			t.Errorf("n=%d: DotU8F32 = %g, want %g", n, got, wu)
		}
		if got := DotI8F32(x, q); math.Abs(float64(got)-wi) > 1e-3*(1+math.Abs(wi)) {
			t.Errorf("n=%d: DotI8F32 = %g, want %g", n, got, wi)
		}
		h := make([]float32, n)
		var wn float64
		for i := range h {
			h[i] = float32(i%3) + 0.25
			wn += float64(x[i])*float64(q[i]&15) + float64(h[i])*float64(q[i]>>4)
		}
		if got := DotNibF32(x, h, q); math.Abs(float64(got)-wn) > 1e-3*(1+math.Abs(wn)) {
			t.Errorf("n=%d: DotNibF32 = %g, want %g", n, got, wn)
		}
	}
}

// TestSiLUMul holds the vector SiLU to the reference's (kernels.SiLUMul,
// e^x in float64) within 8·2^-24 of the result (4.4 seen), over every
// length up to a few vectors (the tails), gates from -100 to 100 (past
// where e^-x leaves float32), zeros and NaN, and out aliasing gate.
func TestSiLUMul(t *testing.T) {
	special := []float32{0, float32(math.Copysign(0, -1)), -100, -89, -88.5, -88.3, -87, -30, -1e-30, 1e-30, 30, 88.5, 100, float32(math.NaN())}
	forLevels(t, func(t *testing.T) {
		for _, n := range vecLens {
			r := rand.New(rand.NewPCG(uint64(n), 9))
			gate, up := make([]float32, n), randF32(r, n)
			for i := range gate {
				gate[i] = float32(r.Float64()*40 - 20)
				if i%5 == 4 {
					gate[i] = special[(i/5)%len(special)]
				}
			}
			want := make([]float32, n)
			kernels.SiLUMul(want, gate, up)
			got := slices.Clone(gate) // out aliasing gate
			SiLUMul(got, got, up)
			for i := range want {
				w, g := float64(want[i]), float64(got[i])
				if math.IsNaN(w) != math.IsNaN(g) || math.Abs(g-w) > 8*0x1p-24*math.Abs(w)+1e-35 {
					t.Fatalf("n=%d: silu(%g)·%g = %g, reference %g", n, gate[i], up[i], g, w)
				}
			}
		}
	})
}

// TestExpSub holds softmax's numerators to float32(math.Exp) within
// 4·2^-24 of each value (0 where e^x is below float32's normal range) and
// their sum to 1e-6 of it, over every length up to a few vectors.
func TestExpSub(t *testing.T) {
	forLevels(t, func(t *testing.T) {
		for _, n := range vecLens {
			r := rand.New(rand.NewPCG(uint64(n), 11))
			x := make([]float32, n)
			m := float32(3)
			for i := range x {
				x[i] = m - float32(r.ExpFloat64()*8)
				if i%7 == 6 {
					x[i] = m - float32(80+r.Float64()*30) // around where e^x leaves float32
				}
			}
			want := make([]float32, n)
			var ws float64
			for i, v := range x {
				want[i] = float32(math.Exp(float64(v - m)))
				ws += float64(want[i])
			}
			got := slices.Clone(x)
			s := ExpSub(got, m)
			for i := range want {
				w, g := float64(want[i]), float64(got[i])
				if math.Abs(g-w) > 4*0x1p-24*w && !(w < 0x1p-126 && g < 0x1p-126) {
					t.Fatalf("n=%d: e^(%g-%g) = %g, math.Exp %g", n, x[i], m, g, w)
				}
			}
			if math.Abs(float64(s)-ws) > 1e-6*ws {
				t.Fatalf("n=%d: sum %g, want %g", n, s, ws)
			}
		}
	})
}

// TestGELU holds the vector GELU to the reference's (kernels.GELU, tanh in
// float64) within 8·2^-24 of the result plus 2^-24 of |x|: for x below -3
// the result is x·e^-2u, whose float32 exponent 2u carries its rounding
// into the result's relative error times 2u, while the result stays within
// half an ulp of x. Every length up to a few vectors, x from -12 to 12,
// zeros, ±100 and NaN, out aliasing x.
func TestGELU(t *testing.T) {
	special := []float32{0, float32(math.Copysign(0, -1)), -100, -12, -1e-20, 1e-20, 12, 100, float32(math.NaN())}
	forLevels(t, func(t *testing.T) {
		for _, n := range vecLens {
			r := rand.New(rand.NewPCG(uint64(n), 13))
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.Float64()*24 - 12)
				if i%5 == 4 {
					x[i] = special[(i/5)%len(special)]
				}
			}
			want := make([]float32, n)
			kernels.GELU(want, x)
			got := slices.Clone(x)
			GELU(got, got)
			for i := range want {
				w, g := float64(want[i]), float64(got[i])
				if math.IsNaN(w) != math.IsNaN(g) || math.Abs(g-w) > 0x1p-24*(8*math.Abs(w)+math.Abs(float64(x[i]))) {
					t.Fatalf("n=%d: gelu(%g) = %g, reference %g", n, x[i], g, w)
				}
			}
		}
	})
}

// TestAxpyRows holds the weighted row sums to a float64 sum, within 1e-6
// of the magnitudes added, for head sizes around the kernel's 64- and
// 8-column chunks and any number of rows; columns past d stay untouched.
func TestAxpyRows(t *testing.T) {
	forLevels(t, func(t *testing.T) {
		for _, d := range []int{1, 7, 8, 9, 63, 64, 65, 72, 80, 96, 128, 130, 256} {
			for _, n := range []int{0, 1, 2, 5, 17} {
				r := rand.New(rand.NewPCG(uint64(d), uint64(n)))
				p, v := randF32(r, n), randF32(r, n*d)
				acc := randF32(r, d+3)
				want, mag := make([]float64, d), make([]float64, d)
				for i := range want {
					want[i], mag[i] = float64(acc[i]), math.Abs(float64(acc[i]))
					for j := range n {
						x := float64(p[j]) * float64(v[j*d+i])
						want[i] += x
						mag[i] += math.Abs(x)
					}
				}
				past := slices.Clone(acc[d:])
				AxpyRows(acc, p, v, d)
				for i := range want {
					if math.Abs(float64(acc[i])-want[i]) > 1e-6*mag[i] {
						t.Fatalf("d=%d n=%d: acc[%d] = %g, want %g", d, n, i, acc[i], want[i])
					}
				}
				if !slices.Equal(acc[d:], past) {
					t.Fatalf("d=%d n=%d: wrote past d", d, n)
				}
			}
		}
	})
}
