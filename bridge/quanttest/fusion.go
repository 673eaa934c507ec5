package quanttest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/half"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// The biased fusion cases' sizes: a hidden size of 256, q of 75 rows, k and
// v of 37 (GQA; heights no GPU tile of rows divides, so a fused GEMV's
// segments meet inside a tile), an attention output of 64, an MLP of 128,
// a GELU'd GEMV of 131; every depth is whole q4 and q8_0 blocks.
const (
	fDim   = 256
	fQ     = 75
	fKV    = 37
	fAttn  = 64
	fInter = 128
	fFC    = 131
	fEps   = 1e-5
)

// FusionWeight is a weight type the biased fusion cases run: a float dtype
// or a packed spec.
type FusionWeight struct {
	Name string
	DT   bridge.DType
	Spec *quant.Spec
}

// FusionWeights: float weights in each dtype a checkpoint stores and two
// packings (MLX's 4-bit affine, GGUF's Q8_0).
var FusionWeights = []FusionWeight{
	{"f32", bridge.F32, nil},
	{"f16", bridge.F16, nil},
	{"bf16", bridge.BF16, nil},
	{"q4", 0, &quant.Spec{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16}},
	{"q8_0", 0, &quant.Spec{Type: quant.Q8_0}},
}

// FusionRows: a decode GEMV's one row, a few rows of a batch, and the
// most a Metal GEMV takes by default (MatVecMaxM).
var FusionRows = []int{1, 3, 8}

// FusionCase is a short op list as runner/engine builds a layer's, with
// biases on its matmuls (Qwen2's q/k/v, Llama's attention_bias and
// mlp_bias, GPT-2's): build appends its ops to fb, and the tensors named
// in Check are compared after the step. Fuses says the backend's fusion
// table is expected to take some of its ops together, One that a backend
// fusing every variant (Metal) takes them all in one dispatch.
type FusionCase struct {
	Name  string
	Build func(fb *FusionBuilder)
	Check []string
	Fuses bool
	One   bool
}

// FusionCases are the biased variants of the GEMV fusions (docs/architecture.md,
// "The fusion tables today"): a norm before GEMVs of one input, GEMVs of one
// input alone, bias on some of them only, gate and up before SwiGLU, a
// GEMV whose output the residual add after it takes, the GELU after one.
var FusionCases = []FusionCase{
	{"rmsnorm+qkv, all biased (qwen2, attention_bias)", func(fb *FusionBuilder) {
		fb.RMSNorm("h", "x")
		fb.QKV("h", true, true, true)
	}, []string{"q", "k", "v"}, true, true},
	{"rmsnorm+qkv, q and k biased", func(fb *FusionBuilder) {
		fb.RMSNorm("h", "x")
		fb.QKV("h", true, true, false)
	}, []string{"q", "k", "v"}, true, true},
	{"rmsnorm+qkv, v biased", func(fb *FusionBuilder) {
		fb.RMSNorm("h", "x")
		fb.QKV("h", false, false, true)
	}, []string{"q", "k", "v"}, true, true},
	{"qkv of x, all biased", func(fb *FusionBuilder) {
		fb.QKV("x", true, true, true)
	}, []string{"q", "k", "v"}, true, true},
	{"qkv of x, k biased", func(fb *FusionBuilder) {
		fb.QKV("x", false, true, false)
	}, []string{"q", "k", "v"}, true, true},
	{"rmsnorm+gate/up+swiglu, biased (mlp_bias)", func(fb *FusionBuilder) {
		fb.RMSNorm("h", "x")
		fb.MatMul("g", "h", fInter, true)
		fb.MatMul("u", "h", fInter, true)
		fb.SiLUMul("g", "u")
	}, []string{"g"}, true, true},
	// Gate and up of which one only is biased share a dispatch, each
	// segment with its own bias or none, added before the SiLU·mul.
	{"rmsnorm+gate/up+swiglu, gate biased", func(fb *FusionBuilder) {
		fb.RMSNorm("h", "x")
		fb.MatMul("g", "h", fInter, true)
		fb.MatMul("u", "h", fInter, false)
		fb.SiLUMul("g", "u")
	}, []string{"g"}, true, true},
	{"rmsnorm+gate/up+swiglu, up biased", func(fb *FusionBuilder) {
		fb.RMSNorm("h", "x")
		fb.MatMul("g", "h", fInter, false)
		fb.MatMul("u", "h", fInter, true)
		fb.SiLUMul("g", "u")
	}, []string{"g"}, true, true},
	{"gate/up+swiglu of x, biased", func(fb *FusionBuilder) {
		fb.MatMul("g", "x", fInter, true)
		fb.MatMul("u", "x", fInter, true)
		fb.SiLUMul("g", "u")
	}, []string{"g"}, true, true},
	{"o+residual+rmsnorm+gate/up+swiglu+down+residual, biased (llama both biases)", func(fb *FusionBuilder) {
		fb.Act("a", fAttn)
		fb.MatMul("o", "a", fDim, true)
		fb.AddRMSNorm("h", "x", "o")
		fb.MatMul("g", "h", fInter, true)
		fb.MatMul("u", "h", fInter, true)
		fb.SiLUMul("g", "u")
		fb.MatMul("d", "g", fDim, true)
		fb.AddRMSNorm("h2", "x", "d")
	}, []string{"x", "h2"}, true, false},
	{"layernorm+qkv, biased (gpt-2 ln_1, c_attn)", func(fb *FusionBuilder) {
		fb.LayerNorm("h", "x")
		fb.MatMul("q", "h", fQ, true)
		fb.MatMul("k", "h", fQ, true)
		fb.MatMul("v", "h", fQ, true)
	}, []string{"q", "k", "v"}, true, true},
	{"c_proj+residual+layernorm+c_fc+gelu+c_proj+residual, biased (gpt-2)", func(fb *FusionBuilder) {
		fb.Act("a", fAttn)
		fb.MatMul("o", "a", fDim, true)
		fb.AddLayerNorm("h", "x", "o")
		fb.MatMul("f", "h", fInter, true)
		fb.GELU("f")
		fb.MatMul("d", "f", fDim, true)
		fb.AddLayerNorm("h2", "x", "d")
	}, []string{"x", "h2"}, true, false},
	// The residual is the GEMV's own input: the add must wait for every
	// read of it.
	{"gemv of the residual+residual, biased", func(fb *FusionBuilder) {
		fb.MatMul("o", "x", fDim, true)
		fb.AddRMSNorm("h", "x", "o")
	}, []string{"x", "h"}, false, false},
	// A GEMV after the first writes over the norm's input, which a fused
	// dispatch's other threadgroups still read.
	{"rmsnorm+q, k over the norm's input, biased", func(fb *FusionBuilder) {
		fb.RMSNorm("h", "x")
		fb.MatMul("q", "h", fQ, true)
		fb.MatMul("x", "h", fDim, true)
	}, []string{"q", "x"}, false, false},
	{"gemv+gelu, biased", func(fb *FusionBuilder) {
		fb.MatMul("f", "x", fFC, true)
		fb.GELU("f")
	}, []string{"f"}, true, true},
}

// BiasedFusions runs every FusionCase at every FusionWeight and FusionRows
// on be twice, through its fusion table and with fusion off (only Always
// patterns), and fails where either's relative error (root of summed
// squares) against the reference exceeds tol. On every backend a bias
// never costs a dispatch: fused, each case takes no more dispatches than
// the same ops without biases. With fewer, a case marked Fuses must take
// fewer dispatches fused than unfused, and one marked One a single
// dispatch.
func BiasedFusions(t *testing.T, be bridge.Backend, tol float64, fewer bool) {
	t.Helper()
	for _, wt := range FusionWeights {
		if wt.Spec != nil {
			if qs, ok := be.(bridge.QuantSupport); ok {
				if err := qs.SupportsQuant(*wt.Spec); err != nil {
					t.Logf("%s: %v", wt.Name, err)
					continue
				}
			}
		}
		for _, c := range FusionCases {
			for _, m := range FusionRows {
				name := fmt.Sprintf("%s/%s/m=%d", c.Name, wt.Name, m)
				var disp [2]int
				for i, fuse := range []bool{true, false} {
					errs, n, err := runFusionCase(be, c, wt, m, fuse, true)
					if err != nil {
						t.Errorf("%s (fused %v): %v", name, fuse, err)
						continue
					}
					disp[i] = n
					for j, e := range errs {
						if !(e <= tol) {
							t.Errorf("%s (fused %v): %s: relative error %.3g > %g", name, fuse, c.Check[j], e, tol)
						}
					}
					t.Logf("%s (fused %v): relative errors %.2g, %d dispatches", name, fuse, errs, n)
				}
				if _, plain, err := runFusionCase(be, c, wt, m, true, false); err != nil {
					t.Errorf("%s (fused, no biases): %v", name, err)
				} else if disp[0] > plain {
					t.Errorf("%s: %d dispatches fused, %d without the biases: a bias kept ops apart", name, disp[0], plain)
				}
				if fewer && c.Fuses && disp[0] >= disp[1] {
					t.Errorf("%s: %d dispatches fused, not fewer than %d unfused", name, disp[0], disp[1])
				}
				if fewer && c.One && disp[0] != 1 {
					t.Errorf("%s: %d dispatches fused, not one", name, disp[0])
				}
			}
		}
	}
}

// FusionBuilder holds a FusionCase's tensors on a backend and on the host:
// each method appends an op and runs its reference on the host values.
type FusionBuilder struct {
	be   bridge.Backend
	wt   FusionWeight
	m    int
	r    *rand.Rand
	err  error
	ops  []bridge.Op
	host map[string][]float32
	dev  map[string]bridge.Tensor
	kept matmul
	// unbiased drops every matmul's bias: the case's ops without them
	unbiased bool
}

func (fb *FusionBuilder) keep(t bridge.Tensor, err error) bridge.Tensor {
	if fb.err == nil && err != nil {
		fb.err = err
	}
	t, _ = fb.kept.keep(t, err)
	return t
}

// upload puts a copy of v on the backend as an f32 tensor: a backend may
// keep the bytes it is given, and the reference goes on to change v.
func (fb *FusionBuilder) upload(v []float32, shape ...int) bridge.Tensor {
	return fb.keep(fb.be.Weight(bridge.F32, shape, F32Bytes(slices.Clone(v))))
}

// Act gives name m rows of n random activations (row 0 far from zero).
func (fb *FusionBuilder) Act(name string, n int) {
	v := randn(fb.r, fb.m*n)
	fb.host[name], fb.dev[name] = v, fb.upload(v, fb.m, n)
}

// out is name's tensor of m rows of n, made (zero on the host) if new.
func (fb *FusionBuilder) out(name string, n int) bridge.Tensor {
	if t, ok := fb.dev[name]; ok {
		return t
	}
	fb.host[name] = make([]float32, fb.m*n)
	fb.dev[name] = fb.keep(fb.be.Alloc(bridge.F32, fb.m, n))
	return fb.dev[name]
}

func (fb *FusionBuilder) at(name string) bridge.At {
	return bridge.At{Layer: 0, Component: bridge.CompOther, Name: name}
}

// normWeight is a norm's weight, about 1.
func (fb *FusionBuilder) normWeight(n int) []float32 {
	g := randn(fb.r, n)
	for i := range g {
		g[i] = 1 + 0.2*g[i]
	}
	return g
}

// RMSNorm: out = RMSNorm(x).
func (fb *FusionBuilder) RMSNorm(out, x string) {
	k := len(fb.host[x]) / fb.m
	g := fb.normWeight(k)
	o := fb.out(out, k)
	fb.ops = append(fb.ops, &bridge.RMSNormOp{At: fb.at(out), Out: o, X: fb.dev[x], W: fb.upload(g, k), Eps: fEps})
	kernels.RMSNorm(fb.host[out], fb.host[x], g, k, fEps)
}

// LayerNorm: out = LayerNorm(x), with a bias.
func (fb *FusionBuilder) LayerNorm(out, x string) {
	k := len(fb.host[x]) / fb.m
	g, b := fb.normWeight(k), randn(fb.r, k)
	o := fb.out(out, k)
	fb.ops = append(fb.ops, &bridge.LayerNormOp{At: fb.at(out), Out: o, X: fb.dev[x], W: fb.upload(g, k), B: fb.upload(b, k), Eps: fEps})
	kernels.LayerNorm(fb.host[out], fb.host[x], g, b, k, fEps)
}

// AddRMSNorm: res += x, out = RMSNorm(res).
func (fb *FusionBuilder) AddRMSNorm(out, res, x string) {
	k := len(fb.host[res]) / fb.m
	g := fb.normWeight(k)
	o := fb.out(out, k)
	fb.ops = append(fb.ops, &bridge.AddRMSNormOp{At: fb.at(out), Out: o, Residual: fb.dev[res], X: fb.dev[x], W: fb.upload(g, k), Eps: fEps})
	kernels.AddRMSNorm(fb.host[out], fb.host[res], fb.host[x], g, k, fEps)
}

// AddLayerNorm: res += x, out = LayerNorm(res), with a bias.
func (fb *FusionBuilder) AddLayerNorm(out, res, x string) {
	k := len(fb.host[res]) / fb.m
	g, b := fb.normWeight(k), randn(fb.r, k)
	o := fb.out(out, k)
	fb.ops = append(fb.ops, &bridge.AddLayerNormOp{At: fb.at(out), Out: o, Residual: fb.dev[res], X: fb.dev[x],
		W: fb.upload(g, k), B: fb.upload(b, k), Eps: fEps})
	kernels.AddLayerNorm(fb.host[out], fb.host[res], fb.host[x], g, b, k, fEps)
}

// MatMul: out = x·Wᵀ (+ a bias) of a new n-row weight of the builder's
// type, a MatMulOp or a QMatMulOp.
func (fb *FusionBuilder) MatMul(out, x string, n int, biased bool) {
	k := len(fb.host[x]) / fb.m
	o := fb.out(out, n)
	var bias []float32
	var bt bridge.Tensor
	if biased && !fb.unbiased {
		bias = randn(fb.r, n)
		bt = fb.upload(bias, n)
	}
	at := fb.at(out)
	if s := fb.wt.Spec; s != nil {
		g := n * s.Groups(k) * s.Scale.Size()
		var sc, bi []byte
		if s.Type == quant.Affine {
			sc, bi = make([]byte, g), make([]byte, g)
		}
		w := quant.Random(*s, n, k, 0.1, fb.r, make([]byte, n*s.RowBytes(k)), sc, bi)
		quant.MatMul(fb.host[out], fb.host[x], bias, w, fb.m)
		qb, ok := fb.be.(bridge.QuantBackend)
		if !ok {
			fb.err = fmt.Errorf("%T runs no packed weights", fb.be)
			return
		}
		wt := fb.keep(qb.QuantWeight(*s, []int{n, k}, w.Data, w.Scales, w.Biases))
		fb.ops = append(fb.ops, &bridge.QMatMulOp{At: at, Out: o, X: fb.dev[x], W: wt, Bias: bt})
		return
	}
	w := randn(fb.r, n*k)
	for i := range w {
		w[i] *= 0.1
	}
	raw := F32Bytes(w)
	if fb.wt.DT == bridge.F16 || fb.wt.DT == bridge.BF16 {
		// The reference multiplies the weights as the backend holds them.
		u := make([]uint16, len(w))
		if fb.wt.DT == bridge.F16 {
			half.F32ToF16(u, w)
			half.F16ToF32(w, u)
		} else {
			half.F32ToBF16(u, w)
			half.BF16ToF32(w, u)
		}
		raw = make([]byte, 2*len(u))
		for i, v := range u {
			raw[2*i], raw[2*i+1] = byte(v), byte(v>>8)
		}
	}
	kernels.MatMul(fb.host[out], fb.host[x], w, bias, fb.m, n, k)
	wt := fb.keep(fb.be.Weight(fb.wt.DT, []int{n, k}, raw))
	fb.ops = append(fb.ops, &bridge.MatMulOp{At: at, Out: o, X: fb.dev[x], W: wt, Bias: bt})
}

// QKV adds Llama's q, k and v projections of in, each biased as asked.
func (fb *FusionBuilder) QKV(in string, bq, bk, bv bool) {
	fb.MatMul("q", in, fQ, bq)
	fb.MatMul("k", in, fKV, bk)
	fb.MatMul("v", in, fKV, bv)
}

// SiLUMul: gate = silu(gate)·up.
func (fb *FusionBuilder) SiLUMul(gate, up string) {
	fb.ops = append(fb.ops, &bridge.SiLUMulOp{At: fb.at(gate), Out: fb.dev[gate], Gate: fb.dev[gate], Up: fb.dev[up]})
	kernels.SiLUMul(fb.host[gate], fb.host[gate], fb.host[up])
}

// GELU: x = gelu(x), in place.
func (fb *FusionBuilder) GELU(x string) {
	fb.ops = append(fb.ops, &bridge.GELUOp{At: fb.at(x), Out: fb.dev[x], X: fb.dev[x]})
	kernels.GELU(fb.host[x], fb.host[x])
}

// runFusionCase runs c once on be, fused or not, its matmuls biased as the
// case says or all without, and returns each checked tensor's relative
// error against the reference and the step's dispatches.
func runFusionCase(be bridge.Backend, c FusionCase, wt FusionWeight, m int, fuse, biased bool) ([]float64, int, error) {
	fb := &FusionBuilder{be: be, wt: wt, m: m, r: rand.New(rand.NewPCG(23, 29)),
		host: map[string][]float32{}, dev: map[string]bridge.Tensor{}, kept: matmul{be: be}, unbiased: !biased}
	defer fb.kept.free()
	x := randn(fb.r, m*fDim)
	for i := range fDim {
		x[i] += 4 // row 0 off zero, as a residual stream is
	}
	fb.host["x"], fb.dev["x"] = x, fb.upload(x, m, fDim)
	c.Build(fb)
	if fb.err != nil {
		return nil, 0, fb.err
	}
	if err := be.BeginStep(stepMeta(m), make([]int32, m), false); err != nil {
		return nil, 0, err
	}
	var run bridge.Runner
	run.Run(be, fb.ops, fuse, false)
	st, err := be.EndStep()
	if err != nil {
		return nil, 0, err
	}
	errs := make([]float64, len(c.Check))
	for i, name := range c.Check {
		got := make([]float32, len(fb.host[name]))
		if err := be.Read(fb.dev[name], got); err != nil {
			return nil, 0, err
		}
		errs[i] = RelErr(got, fb.host[name])
	}
	return errs, st.Dispatches, nil
}
