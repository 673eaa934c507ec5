package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu/vec"
	"github.com/mtlbench/mtlbench/bridge/quanttest"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// quantSpecs are every packing the CPU runs.
var quantSpecs = []quant.Spec{
	{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16},
	{Type: quant.Affine, Bits: 8, Group: 32, Scale: quant.F16},
	{Type: quant.Affine, Bits: 4, Group: 128, Scale: quant.F32},
	{Type: quant.Affine, Bits: 2, Group: 64, Scale: quant.BF16},
	{Type: quant.Affine, Bits: 3, Group: 64, Scale: quant.BF16},
	{Type: quant.Affine, Bits: 5, Group: 32, Scale: quant.F16},
	{Type: quant.Affine, Bits: 6, Group: 64, Scale: quant.BF16},
	{Type: quant.Q8_0}, {Type: quant.Q4_0}, {Type: quant.Q4_K}, {Type: quant.Q6_K}, {Type: quant.Q2_K},
	{Type: quant.IQ2_XXS}, {Type: quant.IQ2_XS}, {Type: quant.IQ2_S}, {Type: quant.IQ3_XXS}, {Type: quant.IQ3_S},
	{Type: quant.IQ1_S}, {Type: quant.IQ1_M},
}

func randomMatrix(t testing.TB, s quant.Spec, rows, k int, seed uint64) *quant.Matrix {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	sb := rows * s.Groups(k) * s.Scale.Size()
	var sc, bi []byte
	if s.Type == quant.Affine {
		sc, bi = make([]byte, sb), make([]byte, sb)
	}
	m := quant.Random(s, rows, k, 0.5, rng, make([]byte, rows*s.RowBytes(k)), sc, bi)
	if err := m.Check("random"); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestQMatMulMatchesReference: GEMV and GEMM on packed weights against
// kernels/quant's float64 reference, relative error 1e-5 of the row scale,
// plus, where rows are dotted in integers, the bound of x's rounding
// (vec.QBound).
func TestQMatMulMatchesReference(t *testing.T) {
	be := New(Options{Threads: 2})
	for _, s := range quantSpecs {
		for _, m := range []int{1, 3} {
			t.Run(s.String(), func(t *testing.T) {
				const n, k = 37, 512
				w := randomMatrix(t, s, n, k, 7)
				rng := rand.New(rand.NewPCG(3, 4))
				x := make([]float32, m*k)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				want := make([]float32, m*n)
				quant.MatMul(want, x, nil, w, m)
				wt, err := be.QuantWeight(s, []int{n, k}, w.Data, w.Scales, w.Biases)
				if err != nil {
					t.Fatal(err)
				}
				xt, _ := be.Weight(bridge.F32, []int{m, k}, f32bytes(x))
				out, _ := be.Alloc(bridge.F32, m, n)
				be.QMatMul(out, xt, wt, nil)
				got := f32s(out)
				var scale float64
				for _, v := range want {
					scale = math.Max(scale, math.Abs(float64(v)))
				}
				for i := range want {
					tol := 1e-5*scale + 1e-6 + vec.QBound(w, i%n, x[i/n*k:(i/n+1)*k])
					if d := math.Abs(float64(got[i] - want[i])); d > tol {
						t.Fatalf("m=%d out[%d] = %g, reference %g (diff %g, scale %g)", m, i, got[i], want[i], d, scale)
					}
				}
			})
		}
	}
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		u := math.Float32bits(x)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return b
}

// BenchmarkQMatMul: a packed GEMV of TinyLlama's gate projection (n=5632,
// k=2048), reported as packed bytes read per second.
func BenchmarkQMatMul(b *testing.B) {
	be := New(Options{})
	for _, s := range []quant.Spec{
		{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16},
		{Type: quant.Affine, Bits: 8, Group: 64, Scale: quant.BF16},
		{Type: quant.Q8_0}, {Type: quant.Q4_K}, {Type: quant.Q6_K}, {Type: quant.Q2_K},
		{Type: quant.IQ2_XXS}, {Type: quant.IQ3_S}, {Type: quant.IQ1_M},
	} {
		b.Run(s.String(), func(b *testing.B) {
			const n, k = 5632, 2048
			w := randomMatrix(b, s, n, k, 1)
			wt, _ := be.QuantWeight(s, []int{n, k}, w.Data, w.Scales, w.Biases)
			x := make([]float32, k)
			for i := range x {
				x[i] = float32(i%7) - 3
			}
			xt, _ := be.Weight(bridge.F32, []int{1, k}, f32bytes(x))
			out, _ := be.Alloc(bridge.F32, 1, n)
			b.SetBytes(s.Bytes(n*k, k))
			for b.Loop() {
				be.QMatMul(out, xt, wt, nil)
			}
		})
	}
}

// TestQGemmGroup: packed matmuls of one input run as one group
// (qgemm_shared_input) give what each gives alone, bit for bit, with and
// without biases, for a decode row and a batch; a matmul of another input
// or packing ends the group.
func TestQGemmGroup(t *testing.T) {
	be := New(Options{Threads: 2})
	for _, s := range []quant.Spec{{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16}, {Type: quant.Q4_K}} {
		for _, m := range []int{1, 3} {
			const k = 512
			rng := rand.New(rand.NewPCG(9, uint64(m)))
			x := make([]float32, m*k)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			xt, _ := be.Weight(bridge.F32, []int{m, k}, f32bytes(x))
			x2, _ := be.Weight(bridge.F32, []int{m, k}, f32bytes(x))
			var ops []bridge.Op
			var want [][]float32
			for i, n := range []int{96, 16, 16, 40} {
				w := randomMatrix(t, s, n, k, uint64(20+i))
				wt, err := be.QuantWeight(s, []int{n, k}, w.Data, w.Scales, w.Biases)
				if err != nil {
					t.Fatal(err)
				}
				var bias bridge.Tensor
				if i == 1 {
					bv := make([]float32, n)
					for j := range bv {
						bv[j] = float32(j)
					}
					bias, _ = be.Weight(bridge.F32, []int{n}, f32bytes(bv))
				}
				in := xt
				if i == 3 {
					in = x2 // another input: not in the group
				}
				out, _ := be.Alloc(bridge.F32, m, n)
				ops = append(ops, &bridge.QMatMulOp{Out: out, X: in, W: wt, Bias: bias})
				ref, _ := be.Alloc(bridge.F32, m, n)
				be.QMatMul(ref, in, wt, bias)
				want = append(want, f32s(ref))
			}
			n, next := be.tryQGemmGroup(ops, len(ops))
			if n != 3 || next != nil {
				t.Fatalf("%v m=%d: group of %d ops, want 3", s, m, n)
			}
			for i := 0; i < 3; i++ {
				got := f32s(ops[i].(*bridge.QMatMulOp).Out)
				for j := range got {
					if got[j] != want[i][j] {
						t.Fatalf("%v m=%d: matmul %d out[%d] = %g grouped, %g alone", s, m, i, j, got[j], want[i][j])
					}
				}
			}
			if n, _ := be.tryQGemmGroup(ops[3:], 1); n != 0 {
				t.Fatalf("a lone matmul made a group of %d", n)
			}
		}
	}
}

// TestPackedGEMVMatchesReference: bridge/quanttest's packed GEMVs (every
// affine group size and scale type, every GGUF format) against the
// reference.
func TestPackedGEMVMatchesReference(t *testing.T) {
	quanttest.GEMV(t, New(Options{Threads: 2}), 1e-5)
}

// TestHeldTwice: weights handed out twice for the same host bytes, as two
// builds over one cached checkpoint get them, outlive the first hand-out's
// Free (bridge/quanttest).
func TestHeldTwice(t *testing.T) {
	quanttest.HeldTwice(t, New(Options{Threads: 2}), 1e-5)
}

// TestPackedGEMVArgmax: the LM head's packed GEMV and the argmax after it, through the
// fusion table (bridge/quanttest).
func TestPackedGEMVArgmax(t *testing.T) {
	quanttest.GEMVArgmax(t, New(Options{Threads: 2}))
}

// TestNormGEMV: norms before GEMVs and the GELU after, through the fusion
// table (bridge/quanttest).
func TestNormGEMV(t *testing.T) {
	quanttest.NormGEMV(t, New(Options{Threads: 2}), 2e-5, 0)
}

// TestBiasedFusions: the fusions' biased variants, fused and unfused,
// against the reference (bridge/quanttest).
func TestBiasedFusions(t *testing.T) {
	quanttest.BiasedFusions(t, New(Options{Threads: 2}), 2e-5, false)
}

func TestShortBias(t *testing.T) {
	quanttest.ShortBias(t, New(Options{Threads: 2}))
}

// TestLongContextRoPE: RoPE at the positions Qwen3's yarn runs to, past its
// original context and its max_position_embeddings, against the reference
// with the yarn frequencies (bridge/quanttest).
func TestLongContextRoPE(t *testing.T) {
	quanttest.LongContextRoPE(t, New(Options{Threads: 2}), 1e-5)
}

// TestLongContextRoPEAttention: RoPE and the decode attention after it,
// fused where the backend folds RoPE into the attention, at the positions
// Qwen3's yarn runs to, against the reference (bridge/quanttest).
func TestLongContextRoPEAttention(t *testing.T) {
	quanttest.LongContextRoPEAttention(t, New(Options{Threads: 2}), 1e-5)
}
