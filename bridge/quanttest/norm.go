package quanttest

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/half"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// NormShapes are the norm folds' GEMV shapes: one decode row, three rows,
// eight rows over a depth too long for a GPU kernel to stage them whole
// (Metal's LayerNorm then finds the statistics in device memory), and a
// depth of no whole 16-byte vectors (float weights only).
var NormShapes = []Shape{{1, 300, 768}, {3, 77, 768}, {8, 64, 768}, {2, 50, 100}}

// normWeights are the weights NormGEMV runs its folds over: float ones in
// two dtypes and two packings (MLX affine and a GGUF K-quant).
var normWeights = []struct {
	dt   bridge.DType
	spec *quant.Spec
}{
	{bridge.F32, nil},
	{bridge.F16, nil},
	{0, &Specs[1]},
	{0, &quant.Spec{Type: quant.Q6_K}},
}

// NormGEMV runs, through be's fusion table, an RMSNorm, a LayerNorm (with
// its bias) and a LayerNorm with the GELU after the GEMV (GPT-2's ln_2,
// c_fc, GELU), each before a GEMV of float and packed weights, and fails
// where the output's relative error against the reference exceeds tol.
// Activation row 0 sits far from zero, so a LayerNorm that finds the
// variance in one pass (E[x²] − mean²) loses it. With dispatches > 0 each
// step must take at most that many dispatches (its fusions took the
// norm and the GELU in).
func NormGEMV(t *testing.T, be bridge.Backend, tol float64, dispatches int) {
	t.Helper()
	r := rand.New(rand.NewPCG(13, 17))
	for _, wt := range normWeights {
		for _, c := range NormShapes {
			if wt.spec != nil && wt.spec.Validate(c.K) != nil {
				continue // packed rows are whole blocks
			}
			for _, kind := range []string{"rmsnorm", "layernorm", "layernorm+gelu"} {
				what := wt.dt.String()
				if wt.spec != nil {
					what = wt.spec.String()
				}
				name := fmt.Sprintf("%s, %s, m=%d n=%d k=%d", kind, what, c.M, c.N, c.K)
				e, n, err := normGemv(be, r, kind, wt.dt, wt.spec, c)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				t.Logf("%s: relative error %.2g, %d dispatches", name, e, n)
				if !(e <= tol) {
					t.Errorf("%s: relative error %.3g > %g", name, e, tol)
				}
				if dispatches > 0 && n > dispatches {
					t.Errorf("%s: %d dispatches, want at most %d", name, n, dispatches)
				}
			}
		}
	}
}

func normGemv(be bridge.Backend, r *rand.Rand, kind string, dt bridge.DType, spec *quant.Spec, c Shape) (float64, int, error) {
	x := randn(r, c.M*c.K)
	for i := range c.K {
		x[i] += 100
	}
	g, nb, bias := randn(r, c.K), randn(r, c.K), randn(r, c.N)
	for i := range g {
		g[i] = 1 + 0.2*g[i]
	}
	const eps = 1e-5

	// The reference: the norm, then the matmul on the weights as the
	// backend holds them, then the GELU.
	h := make([]float32, len(x))
	if kind == "rmsnorm" {
		kernels.RMSNorm(h, x, g, c.K, eps)
	} else {
		kernels.LayerNorm(h, x, g, nb, c.K, eps)
	}
	want := make([]float32, c.M*c.N)
	m := &matmul{be: be}
	defer m.free()
	var err error
	if spec != nil {
		qb, ok := be.(bridge.QuantBackend)
		if !ok {
			return 0, 0, fmt.Errorf("%T runs no packed weights", be)
		}
		gs := c.N * spec.Groups(c.K) * spec.Scale.Size()
		var sc, bi []byte
		if spec.Type == quant.Affine {
			sc, bi = make([]byte, gs), make([]byte, gs)
		}
		w := quant.Random(*spec, c.N, c.K, 0.1, r, make([]byte, c.N*spec.RowBytes(c.K)), sc, bi)
		quant.MatMul(want, h, bias, w, c.M)
		if m.w, err = m.keep(qb.QuantWeight(*spec, []int{c.N, c.K}, w.Data, w.Scales, w.Biases)); err != nil {
			return 0, 0, err
		}
	} else {
		w := randn(r, c.N*c.K)
		for i := range w {
			w[i] *= 0.1
		}
		raw := F32Bytes(w)
		if dt == bridge.F16 {
			u := make([]uint16, len(w))
			half.F32ToF16(u, w)
			half.F16ToF32(w, u)
			raw = make([]byte, 2*len(u))
			for i, v := range u {
				raw[2*i], raw[2*i+1] = byte(v), byte(v>>8)
			}
		}
		kernels.MatMul(want, h, w, bias, c.M, c.N, c.K)
		if m.w, err = m.keep(be.Weight(dt, []int{c.N, c.K}, raw)); err != nil {
			return 0, 0, err
		}
	}
	if kind == "layernorm+gelu" {
		kernels.GELU(want, want)
	}

	up := func(v []float32, shape ...int) bridge.Tensor {
		t, e := m.keep(be.Weight(bridge.F32, shape, F32Bytes(v)))
		err = cmp.Or(err, e)
		return t
	}
	m.x, m.bias = up(x, c.M, c.K), up(bias, c.N)
	gt, bt := up(g, c.K), up(nb, c.K)
	hn, e1 := m.keep(be.Alloc(bridge.F32, c.M, c.K))
	var e2 error
	m.out, e2 = m.keep(be.Alloc(bridge.F32, c.M, c.N))
	if err = cmp.Or(err, e1, e2); err != nil {
		return 0, 0, err
	}
	at := bridge.At{Layer: 0, Component: bridge.CompMLP, Name: kind}
	var ops []bridge.Op
	if kind == "rmsnorm" {
		ops = append(ops, &bridge.RMSNormOp{At: at, Out: hn, X: m.x, W: gt, Eps: eps})
	} else {
		ops = append(ops, &bridge.LayerNormOp{At: at, Out: hn, X: m.x, W: gt, B: bt, Eps: eps})
	}
	if spec != nil {
		ops = append(ops, &bridge.QMatMulOp{At: at, Out: m.out, X: hn, W: m.w, Bias: m.bias})
	} else {
		ops = append(ops, &bridge.MatMulOp{At: at, Out: m.out, X: hn, W: m.w, Bias: m.bias})
	}
	if kind == "layernorm+gelu" {
		ops = append(ops, &bridge.GELUOp{At: at, Out: m.out, X: m.out})
	}
	if err := be.BeginStep(stepMeta(c.M), make([]int32, c.M), false); err != nil {
		return 0, 0, err
	}
	var run bridge.Runner
	run.Run(be, ops, true, false)
	st, err := be.EndStep()
	if err != nil {
		return 0, 0, err
	}
	got := make([]float32, c.M*c.N)
	if err := be.Read(m.out, got); err != nil {
		return 0, 0, err
	}
	return RelErr(got, want), st.Dispatches, nil
}
