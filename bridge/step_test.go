package bridge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/kernels"
)

// recorder is a Backend that writes down each op it is asked to run.
type recorder struct {
	Backend // nil: any method not below panics
	calls   []string
	table   []Pattern
}

type name string

func (name) DType() DType { return F32 }
func (name) Shape() []int { return nil }
func (name) Len() int     { return 0 }

func (r *recorder) Mark(layer int, component, op string) {
	r.calls = append(r.calls, fmt.Sprintf("mark:%s", op))
}
func (r *recorder) RMSNorm(out, x, w Tensor, eps float32) {
	r.calls = append(r.calls, fmt.Sprintf("rmsnorm(%s)", x))
}
func (r *recorder) AddRMSNorm(out, res, x, w Tensor, eps float32) {
	r.calls = append(r.calls, fmt.Sprintf("addrmsnorm(%s)", x))
}
func (r *recorder) MatMul(out, x, w, bias Tensor) {
	r.calls = append(r.calls, fmt.Sprintf("matmul(%s)", w))
}
func (r *recorder) SiLUMul(out, gate, up Tensor) { r.calls = append(r.calls, "silu") }
func (r *recorder) Fusions() []Pattern           { return r.table }

// normMatMul fuses an RMSNorm into the MatMul reading its output.
func (r *recorder) normMatMul(ops []Op, span int) (int, Op) {
	ops = ops[:span]
	if len(ops) < 2 {
		return 0, nil
	}
	n, ok := ops[0].(*RMSNormOp)
	m, ok2 := ops[1].(*MatMulOp)
	if !ok || !ok2 || m.X != n.Out {
		return 0, nil
	}
	r.calls = append(r.calls, fmt.Sprintf("norm_matmul(%s)", m.W))
	return 2, nil
}

// matMulResidual takes an AddRMSNorm's add into the MatMul before it and
// leaves the norm, as a stand-in, to run next.
func (r *recorder) matMulResidual(ops []Op, span int) (int, Op) {
	ops = ops[:span]
	if len(ops) < 2 {
		return 0, nil
	}
	m, ok := ops[0].(*MatMulOp)
	a, ok2 := ops[1].(*AddRMSNormOp)
	if !ok || !ok2 || a.X != m.Out {
		return 0, nil
	}
	r.calls = append(r.calls, fmt.Sprintf("matmul_add(%s)", m.W))
	return 1, &RMSNormOp{At: a.At, Out: a.Out, X: a.Residual, W: a.W}
}

// pair runs two MatMuls of one input as one.
func (r *recorder) pair(ops []Op, span int) (int, Op) {
	ops = ops[:span]
	if len(ops) < 2 {
		return 0, nil
	}
	a, ok := ops[0].(*MatMulOp)
	b, ok2 := ops[1].(*MatMulOp)
	if !ok || !ok2 || a.X != b.X {
		return 0, nil
	}
	r.calls = append(r.calls, fmt.Sprintf("pair(%s,%s)", a.W, b.W))
	return 2, nil
}

func TestRunnerFusionTable(t *testing.T) {
	at := func(n string) At { return At{Layer: 0, Component: "c", Name: n} }
	// o_proj, then the post-attention norm, then gate and up (one position).
	ops := []Op{
		&MatMulOp{At: at("o"), Out: name("o"), X: name("attn"), W: name("wo")},
		&AddRMSNormOp{At: at("norm"), Out: name("h"), Residual: name("resid"), X: name("o"), W: name("wn")},
		&MatMulOp{At: at("gu"), Out: name("g"), X: name("h"), W: name("wg")},
		&MatMulOp{At: at("gu"), Out: name("u"), X: name("h"), W: name("wu")},
		&SiLUMulOp{At: at("silu"), Out: name("g"), Gate: name("g"), Up: name("u")},
	}
	for _, c := range []struct {
		name          string
		fuse, profile bool
		want          string
	}{
		{"fused", true, false, "mark:o matmul_add(wo) mark:norm norm_matmul(wg) mark:gu matmul(wu) mark:silu silu"},
		{"unfused keeps Always patterns", false, false, "mark:o matmul(wo) mark:norm addrmsnorm(o) mark:gu pair(wg,wu) mark:silu silu"},
		{"profile fuses within a position only", true, true, "mark:o matmul(wo) mark:norm addrmsnorm(o) mark:gu pair(wg,wu) mark:silu silu"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{}
			r.table = []Pattern{
				{Name: "norm_matmul", Try: r.normMatMul},
				{Name: "matmul_residual", Try: r.matMulResidual},
				{Name: "pair", Try: r.pair, Always: true},
			}
			var run Runner
			before := fmt.Sprint(ops)
			run.Run(r, ops, c.fuse, c.profile)
			if got := strings.Join(r.calls, " "); got != c.want {
				t.Errorf("ran\n %s\nwant\n %s", got, c.want)
			}
			if fmt.Sprint(ops) != before {
				t.Error("the step's op list was changed")
			}
		})
	}
}

// counter is a Backend that only counts the ops it runs.
type counter struct {
	Backend
	n int
}

func (c *counter) Mark(int, string, string)                                         {}
func (c *counter) RMSNorm(_, _, _ Tensor, _ float32)                                { c.n++ }
func (c *counter) AddRMSNorm(_, _, _, _ Tensor, _ float32)                          { c.n++ }
func (c *counter) MatMul(_, _, _, _ Tensor)                                         { c.n++ }
func (c *counter) SiLUMul(_, _, _ Tensor)                                           { c.n++ }
func (c *counter) Embedding(_, _ Tensor)                                            { c.n++ }
func (c *counter) Argmax(_, _ Tensor)                                               { c.n++ }
func (c *counter) RoPE(_, _, _, _ Tensor, _, _, _ int, _ kernels.Rotary, _ float32) { c.n++ }
func (c *counter) Attention(_, _, _, _ Tensor, _ KVCache, _, _, _ int, _ float32, _ int) {
	c.n++
}

// BenchmarkRunnerStep is the host's cost of handing a 22-layer decode
// step's op list (TinyLlama's) to a backend: what the op model adds to a
// step over calling the backend's methods directly.
func BenchmarkRunnerStep(b *testing.B) {
	at := At{Component: "c"}
	ops := []Op{&EmbeddingOp{At: at}}
	for range 22 {
		ops = append(ops, &AddRMSNormOp{At: at}, &MatMulOp{At: at}, &MatMulOp{At: at}, &MatMulOp{At: at}, &RoPEOp{At: at},
			&AttentionOp{At: at}, &MatMulOp{At: at}, &AddRMSNormOp{At: at}, &MatMulOp{At: at}, &MatMulOp{At: at},
			&SiLUMulOp{At: at}, &MatMulOp{At: at})
	}
	ops = append(ops, &AddRMSNormOp{At: at}, &MatMulOp{At: at}, &ArgmaxOp{At: at})
	be := &counter{}
	var r Runner
	b.ReportAllocs()
	for b.Loop() {
		r.Run(be, ops, true, false)
	}
	b.ReportMetric(float64(len(ops)), "ops/step")
}

// KeepPatterns keeps the named patterns in the table's order and ignores
// names the table lacks; naming none of them keeps an empty table, not nil,
// which a backend would read as its table not built yet.
func TestKeepPatterns(t *testing.T) {
	table := []Pattern{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"b"}, "b"},
		{[]string{"c", "a"}, "a c"},
		{[]string{"a", "zz", "c"}, "a c"},
		{[]string{"zz"}, ""},
		{nil, ""},
	} {
		got := KeepPatterns(table, tc.names)
		var names []string
		for _, p := range got {
			names = append(names, p.Name)
		}
		if got == nil || strings.Join(names, " ") != tc.want {
			t.Errorf("KeepPatterns(%q) = %q (nil %v), want %q", tc.names, names, got == nil, tc.want)
		}
	}
	if got := KeepPatterns(nil, []string{"a"}); got == nil || len(got) != 0 {
		t.Errorf("KeepPatterns of no table = %v, want empty and not nil", got)
	}
}
