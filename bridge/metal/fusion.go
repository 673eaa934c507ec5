package metal

import "github.com/mtlbench/mtlbench/bridge"

// Fusions is the Metal backend's fusion table (bridge.Pattern), tried in
// order at each op of a step: what a decode step's small ops cost as
// dispatches of their own goes into the dispatch that reads or writes the
// same data. docs/architecture.md explains the model.
func (b *Backend) Fusions() []bridge.Pattern {
	if b.fusions == nil {
		b.fusions = []bridge.Pattern{
			{Name: "rope_attention", Doc: "RoPE and QK-norm of q and the new k inside the decode attention that writes the KV cache", Try: b.tryRoPEAttention},
			{Name: "rmsnorm_gemv", Doc: "the GEMVs that read an RMSNorm's output normalise their input as they read it", Try: b.tryNormGemv},
			{Name: "layernorm_gemv", Doc: "the GEMVs that read a LayerNorm's output (GPT-2's ln_1, ln_2, ln_f) normalise their input as they read it, and a lone one takes the GELU after it", Try: b.tryLayerNormGemv},
			{Name: "rmsnorm_moe", Doc: "a decode step's MoE block normalises its input in its router and gate/up GEMVs, and with moe_residual adds its output into the residual", Try: b.tryNormMoE},
			{Name: "gemv_residual", Doc: "a GEMV adds its output into the residual the AddRMSNorm (AddLayerNorm) after it would add", Try: b.tryGemvResidual},
			{Name: "gemv_argmax", Doc: "a single-row GEMV, float or packed (the LM head), also finds each threadgroup's largest output, and the greedy argmax after it only merges those", Try: b.tryGemvArgmax},
			{Name: "gemv_gelu", Doc: "a GEMV applies the GELU after it (GPT-2's c_fc) as it writes its output", Try: b.tryGemvGELU},
			{Name: "moe_residual", Doc: "the MoE combine adds its output into the residual the AddRMSNorm after it would add", Try: b.tryMoEResidual},
			{Name: "moe_router_topk", Doc: "the MoE router GEMV, softmax and top-k in one dispatch", Try: b.tryMoERoute},
			{Name: "gemv_shared_input", Doc: "GEMVs of one input (q, k, v; gate, up) in one dispatch, SwiGLU applied as gate and up are written", Try: b.tryGemvGroup},
		}
	}
	return b.fusions
}

// fusing reports whether the named pattern is in the table: patterns that
// take another's work in check it, so a table without it stays exact.
func (b *Backend) fusing(name string) bool {
	for _, p := range b.Fusions() {
		if p.Name == name {
			return true
		}
	}
	return false
}

// SetFusions keeps only the named patterns in the table (tests measure one
// pattern at a time); no names restores the whole table.
func (b *Backend) SetFusions(names ...string) {
	b.fusions = nil
	if len(names) == 0 {
		return
	}
	b.fusions = bridge.KeepPatterns(b.Fusions(), names)
}

// tryRoPEAttention: RoPE of q and k, then the attention over them, in a
// decode step whose attention writes the new keys itself.
func (b *Backend) tryRoPEAttention(ops []bridge.Op, span int) (int, bridge.Op) {
	if span < 2 {
		return 0, nil
	}
	r, ok := ops[0].(*bridge.RoPEOp)
	a, ok2 := ops[1].(*bridge.AttentionOp)
	if !ok || !ok2 || a.Q != r.Q || a.K != r.K || a.Heads != r.Heads || a.KVHeads != r.KVHeads || a.HeadDim != r.HeadDim ||
		r.HeadDim%2 != 0 || (r.QNorm == nil) != (r.KNorm == nil) {
		return 0, nil
	}
	m := b.step.meta
	if m.MaxQueryLen != 1 || b.tuning.AttnTwoPhase || bridge.ReadLater(ops[2:], r.Q) || bridge.ReadLater(ops[2:], r.K) {
		return 0, nil
	}
	// A tuning that sends 1-token queries to the tiled kernel has it write
	// the new keys before reading them, unrotated: RoPE stays apart there.
	if kc := tt(a.Cache.K); kc == nil || prefillTiled(&b.tuning, 1, a.Cache.BlockSize, a.HeadDim, kc.dt) {
		return 0, nil
	}
	q, k, qn, kn := tt(r.Q), tt(r.K), tt(r.QNorm), tt(r.KNorm)
	if !b.checkF32("rope", q, k, qn, kn) {
		return 0, nil
	}
	freqs := b.ropeFreqs(r.HeadDim, r.Rotary)
	if freqs == nil {
		return 0, nil
	}
	b.attention(a.Out, a.Q, a.K, a.V, a.Cache, a.Heads, a.KVHeads, a.HeadDim, a.Scale, a.Window, &attnRoPE{freqs: freqs, qn: qn, kn: kn, eps: r.Eps})
	return 2, nil
}

// mvFused is one matvec_fused dispatch.
type mvFused struct {
	x     *tensor
	m, k  int
	dt    bridge.DType
	w     [3]*tensor
	out   [3]*tensor
	bias  [3]*tensor
	nsegs int
	norm  *tensor // RMSNorm (LayerNorm with normB) weight: normalise x as it is read
	normB *tensor // LayerNorm bias
	eps   float32
	resid *tensor // add the output into it
	swig  bool    // silu(segment 0)·segment 1 into out[0]
	gelu  bool    // GELU of the output (a lone segment)
	pick  *tensor // gemv_argmax: the greedy pick of the lone output row (i32), merged after
}

// mvOf returns op as a one-segment matvec_fused, when it runs as a matvec.
func (b *Backend) mvOf(op *bridge.MatMulOp) (mvFused, bool) {
	o, x, w, bias := tt(op.Out), tt(op.X), tt(op.W), tt(op.Bias)
	if o == nil || x == nil || w == nil || o.dt != bridge.F32 || x.dt != bridge.F32 || (bias != nil && bias.dt != bridge.F32) ||
		len(w.shape) != 2 || matvecFusedKernel[w.dt] == "" {
		return mvFused{}, false
	}
	n, k := w.shape[0], w.shape[1]
	if k == 0 || x.n%k != 0 {
		return mvFused{}, false
	}
	m := x.n / k
	if m == 0 || m > b.matmulTuning(w.dt, m, n, k).MatVecMaxM || o.n < m*n || (bias != nil && bias.n < n) {
		return mvFused{}, false
	}
	return mvFused{x: x, m: m, k: k, dt: w.dt, w: [3]*tensor{w}, out: [3]*tensor{o}, bias: [3]*tensor{bias}, nsegs: 1}, true
}

// growMV adds to f (made from ops[0]) the matmuls of the same input that
// follow, and a SiLUMul of the first two outputs (each with its bias, if
// any, added before it), within the first span ops; it returns the ops
// taken.
func (b *Backend) growMV(f *mvFused, ops []bridge.Op, span int) int {
	if !b.fusing("gemv_shared_input") {
		return 1
	}
	x := ops[0].(*bridge.MatMulOp).X
	n := 1
	for ; n < span && f.nsegs < 3; n++ {
		mm, ok := ops[n].(*bridge.MatMulOp)
		if !ok || mm.X != x {
			break
		}
		g, ok := b.mvOf(mm)
		if !ok || g.m != f.m || g.k != f.k || g.dt != f.dt || g.out[0].sameStart(f.x) {
			break
		}
		if anyStartsAt(f.out[:f.nsegs], g.out[0]) {
			break
		}
		f.w[f.nsegs], f.out[f.nsegs], f.bias[f.nsegs] = g.w[0], g.out[0], g.bias[0]
		f.nsegs++
	}
	if f.nsegs == 2 && n < span && f.w[0].shape[0] == f.w[1].shape[0] && takesSiLUMul(ops, n, f.out[0], f.out[1]) {
		f.swig = true
		n++
	}
	return n
}

// takesSiLUMul: ops[n] is the SiLUMul of a two-matrix GEMV's outputs
// (gate, up) into gate's, and nothing after reads up.
func takesSiLUMul(ops []bridge.Op, n int, gate, up *tensor) bool {
	sm, ok := ops[n].(*bridge.SiLUMulOp)
	return ok && tt(sm.Gate) == gate && tt(sm.Up) == up && tt(sm.Out) == gate && !bridge.ReadLater(ops[n+1:], sm.Up)
}

// tryNormGemv: an RMSNorm whose output only the GEMVs after it read.
func (b *Backend) tryNormGemv(ops []bridge.Op, span int) (int, bridge.Op) {
	if span < 2 {
		return 0, nil
	}
	nm, ok := ops[0].(*bridge.RMSNormOp)
	if !ok {
		return 0, nil
	}
	return b.normGemv(ops, span, foldedNorm{out: nm.Out, x: nm.X, w: nm.W, eps: nm.Eps})
}

// tryLayerNormGemv: a LayerNorm (GPT-2's, with a bias) whose output only
// the GEMVs after it read; a lone GEMV (c_fc) also takes the GELU after
// it, as gemv_gelu does.
func (b *Backend) tryLayerNormGemv(ops []bridge.Op, span int) (int, bridge.Op) {
	if span < 2 {
		return 0, nil
	}
	nm, ok := ops[0].(*bridge.LayerNormOp)
	if !ok || nm.B == nil {
		return 0, nil
	}
	return b.normGemv(ops, span, foldedNorm{out: nm.Out, x: nm.X, w: nm.W, b: nm.B, eps: nm.Eps})
}

// foldedNorm is the norm ops[0] of a normGemv: its output, input, weight,
// bias (a LayerNorm's; nil for an RMSNorm) and eps.
type foldedNorm struct {
	out, x, w, b bridge.Tensor
	eps          float32
}

// normGemv records the GEMVs after ops[0], the norm nm, that read its
// output (grown as gemv_shared_input grows them), float or packed, with
// the norm computed as they stage their input; it takes nothing unless
// they are the norm's only readers.
func (b *Backend) normGemv(ops []bridge.Op, span int, nm foldedNorm) (int, bridge.Op) {
	x, w, nb := tt(nm.x), tt(nm.w), tt(nm.b)
	if nm.out == nm.x || x == nil || w == nil || x.dt != bridge.F32 || w.dt != bridge.F32 ||
		nm.b != nil && (nb == nil || nb.dt != bridge.F32 || nb.n != w.n) {
		return 0, nil
	}
	switch mm := ops[1].(type) {
	case *bridge.QMatMulOp:
		f, ok := b.qmvOf(mm)
		if mm.X != nm.out || !ok || f.q[0].Dims[1] != w.n || f.x.n != x.n {
			return 0, nil
		}
		n := 1 + b.growQMV(&f, ops[1:], span-1)
		if anyStartsAt(f.out[:f.nsegs], x) {
			return 0, nil
		}
		if n, f.gelu, ok = b.normTail(ops, n, span, nm, f.nsegs == 1 && !f.swig, f.out[0], f.m*f.q[0].Dims[0]); !ok {
			return 0, nil
		}
		if n < span { // the final norm, the LM head and the pick
			if f.pick = b.argmaxOf(ops[n], f.lmHead()); f.pick != nil {
				n++
			}
		}
		f.x, f.g, f.gb, f.eps = x, w, nb, nm.eps
		b.encodeQMV(&f)
		return n, nil
	case *bridge.MatMulOp:
		f, ok := b.mvOf(mm)
		if mm.X != nm.out || !ok || w.n != f.k || f.x.n != x.n {
			return 0, nil
		}
		n := 1 + b.growMV(&f, ops[1:], span-1)
		if anyStartsAt(f.out[:f.nsegs], x) {
			return 0, nil
		}
		if n, f.gelu, ok = b.normTail(ops, n, span, nm, f.nsegs == 1 && !f.swig, f.out[0], f.m*f.w[0].shape[0]); !ok {
			return 0, nil
		}
		if n < span {
			if f.pick = b.argmaxOf(ops[n], f.lmHead()); f.pick != nil {
				n++
			}
		}
		f.x, f.norm, f.normB, f.eps = x, w, nb, nm.eps
		b.matvecFused(&f)
		return n, nil
	}
	return 0, nil
}

// anyStartsAt: one of outs begins where x does, so a fused dispatch writing
// outs would clobber x (an input, another GEMV's output) mid-dispatch.
func anyStartsAt(outs []*tensor, x *tensor) bool {
	for _, o := range outs {
		if o.sameStart(x) {
			return true
		}
	}
	return false
}

// normTail finishes a normGemv whose GEMVs are ops[1:n]: a lone one (its
// output out, of elems values) after a LayerNorm takes the GELU at ops[n];
// it returns the ops taken, whether the GELU was, and whether the fold may
// go ahead (nothing after reads the norm's output).
func (b *Backend) normTail(ops []bridge.Op, n, span int, nm foldedNorm, lone bool, out *tensor, elems int) (int, bool, bool) {
	gelu := nm.b != nil && lone && n < span && b.takesGELU(ops[n], out, elems)
	if gelu {
		n++
	}
	return n, gelu, !bridge.ReadLater(ops[n:], nm.out)
}

// takesGELU: op is the GELU, in place, of a lone GEMV's output out (its
// rows elements), and gemv_gelu is in the table.
func (b *Backend) takesGELU(op bridge.Op, out *tensor, elems int) bool {
	ge, ok := op.(*bridge.GELUOp)
	if !ok || !b.fusing("gemv_gelu") {
		return false
	}
	o, x := tt(ge.Out), tt(ge.X)
	return o != nil && x != nil && o.sameStart(out) && x.sameStart(o) && o.n == elems
}

// lmHead is what gemv_argmax asks of a GEMV, float or packed: its lone
// output row (out, rows values) written as computed, and whether it is
// one (one activation row, one matrix, no SwiGLU, GELU or residual).
type lmHead struct {
	out  *tensor
	rows int
	lone bool
}

func (f *qmv) lmHead() lmHead {
	return lmHead{f.out[0], f.q[0].Dims[0], f.m == 1 && f.nsegs == 1 && !f.swig && !f.gelu && f.resid == nil}
}

func (f *mvFused) lmHead() lmHead {
	return lmHead{f.out[0], f.w[0].shape[0], f.m == 1 && f.nsegs == 1 && !f.swig && !f.gelu && f.resid == nil}
}

// argmaxOf returns the output of op when op is the greedy argmax of h's
// row, all of its values, and gemv_argmax is in the table; nil otherwise.
// The logits are still written, so later readers of them need not be
// checked.
func (b *Backend) argmaxOf(op bridge.Op, h lmHead) *tensor {
	am, ok := op.(*bridge.ArgmaxOp)
	if !ok || !h.lone || !b.fusing("gemv_argmax") {
		return nil
	}
	o, l := tt(am.Out), tt(am.Logits)
	if o == nil || l == nil || o.dt != bridge.I32 || o.n != 1 || l.dt != bridge.F32 || !l.sameStart(h.out) || l.n != h.rows {
		return nil
	}
	return o
}

// tryGemvArgmax: a single-row GEMV, float or packed, whose output the
// greedy argmax after it picks from (the LM head of a decode step at
// batch 1).
func (b *Backend) tryGemvArgmax(ops []bridge.Op, span int) (int, bridge.Op) {
	if span < 2 {
		return 0, nil
	}
	switch mm := ops[0].(type) {
	case *bridge.QMatMulOp:
		f, ok := b.qmvOf(mm)
		if !ok {
			return 0, nil
		}
		if f.pick = b.argmaxOf(ops[1], f.lmHead()); f.pick == nil {
			return 0, nil
		}
		b.encodeQMV(&f)
	case *bridge.MatMulOp:
		f, ok := b.mvOf(mm)
		if !ok {
			return 0, nil
		}
		if f.pick = b.argmaxOf(ops[1], f.lmHead()); f.pick == nil {
			return 0, nil
		}
		b.matvecFused(&f)
	default:
		return 0, nil
	}
	return 2, nil
}

// gemvParts binds the argmax partials of a gemv_argmax GEMV of groups
// threadgroups at slots v and v+1: a partition a threadgroup, where
// argmax_part would write them (docs/metal-kernels.md, "Argmax").
func (b *Backend) gemvParts(groups, v int) (pv, pi view) {
	pv, pi = b.scratchView("argmax.v", 4*groups), b.scratchView("argmax.i", 4*groups)
	b.bind(v, pv, true)
	b.bind(v+1, pi, true)
	return pv, pi
}

// gemvPick merges a gemv_argmax GEMV's partials (gemvParts) into pick:
// n values, part of them a threadgroup.
func (b *Backend) gemvPick(pv, pi view, n, part, groups int, pick *tensor) {
	b.argmaxMerge(argmaxArgs{Rows: 1, N: uint32(n), Part: uint32(part), Parts: uint32(groups)}, pv, pi, pick)
}

// tryGemvGELU: a lone GEMV (float or packed) whose output the GELU after it
// transforms in place.
func (b *Backend) tryGemvGELU(ops []bridge.Op, span int) (int, bridge.Op) {
	if span < 2 {
		return 0, nil
	}
	switch mm := ops[0].(type) {
	case *bridge.QMatMulOp:
		f, ok := b.qmvOf(mm)
		if !ok || !b.takesGELU(ops[1], f.out[0], f.m*f.q[0].Dims[0]) {
			return 0, nil
		}
		f.gelu = true
		b.encodeQMV(&f)
	case *bridge.MatMulOp:
		f, ok := b.mvOf(mm)
		if !ok || !b.takesGELU(ops[1], f.out[0], f.m*f.w[0].shape[0]) {
			return 0, nil
		}
		f.gelu = true
		b.matvecFused(&f)
	default:
		return 0, nil
	}
	return 2, nil
}

// growQMV adds to f (made from ops[0]) the packed matmuls of the same
// input, format and depth that follow, and a SiLUMul of the first two
// outputs; it returns the ops taken.
func (b *Backend) growQMV(f *qmv, ops []bridge.Op, span int) int {
	if !b.fusing("gemv_shared_input") {
		return 1
	}
	x := ops[0].(*bridge.QMatMulOp).X
	n := 1
	for ; n < span && f.nsegs < 3; n++ {
		mm, ok := ops[n].(*bridge.QMatMulOp)
		if !ok || mm.X != x {
			break
		}
		g, ok := b.qmvOf(mm)
		if !ok || g.m != f.m || g.q[0].Spec != f.q[0].Spec || g.q[0].Dims[1] != f.q[0].Dims[1] || g.out[0].sameStart(f.x) {
			break
		}
		if anyStartsAt(f.out[:f.nsegs], g.out[0]) {
			break
		}
		f.q[f.nsegs], f.out[f.nsegs], f.bias[f.nsegs] = g.q[0], g.out[0], g.bias[0]
		f.nsegs++
	}
	if f.nsegs == 2 && n < span && f.q[0].Dims[0] == f.q[1].Dims[0] && takesSiLUMul(ops, n, f.out[0], f.out[1]) {
		f.swig = true
		n++
	}
	return n
}

// tryGemvResidual: a GEMV whose output the AddRMSNorm (AddLayerNorm) after
// it adds into the residual; that op is left as a plain RMSNorm (LayerNorm)
// of the residual, which the GEMVs after it may take in turn.
func (b *Backend) tryGemvResidual(ops []bridge.Op, span int) (int, bridge.Op) {
	if span < 2 {
		return 0, nil
	}
	var xo, res bridge.Tensor
	switch an := ops[1].(type) {
	case *bridge.AddRMSNormOp:
		xo, res = an.X, an.Residual
	case *bridge.AddLayerNormOp:
		xo, res = an.X, an.Residual
	default:
		return 0, nil
	}
	r := tt(res)
	if res == xo || r == nil || r.dt != bridge.F32 {
		return 0, nil
	}
	switch mm := ops[0].(type) {
	case *bridge.MatMulOp:
		f, ok := b.mvOf(mm)
		if xo != mm.Out || !ok || !residualTakes(r, f.x, f.out[0], f.m*f.w[0].shape[0]) {
			return 0, nil
		}
		f.resid = r
		b.matvecFused(&f)
	case *bridge.QMatMulOp:
		f, ok := b.qmvOf(mm)
		if xo != mm.Out || !ok || !residualTakes(r, f.x, f.out[0], f.m*f.q[0].Dims[0]) {
			return 0, nil
		}
		f.resid = r
		b.encodeQMV(&f)
	default:
		return 0, nil
	}
	if an, ok := ops[1].(*bridge.AddLayerNormOp); ok {
		b.standInLN = bridge.LayerNormOp{At: an.At, Out: an.Out, X: an.Residual, W: an.W, B: an.B, Eps: an.Eps}
		return 1, &b.standInLN
	}
	return 1, b.residualNorm(ops[1].(*bridge.AddRMSNormOp))
}

// residualTakes: a GEMV of input x into out (elems values) can add its
// output into r as it writes it: r is out's size and is not x, which other
// threadgroups may still be reading when one adds into r.
func residualTakes(r, x, out *tensor, elems int) bool {
	return r.n == out.n && r.n == elems && !r.sameStart(x)
}

// tryGemvGroup: GEMVs of one input (at least two) in one dispatch, float
// or packed.
func (b *Backend) tryGemvGroup(ops []bridge.Op, span int) (int, bridge.Op) {
	if qm, ok := ops[0].(*bridge.QMatMulOp); ok {
		f, ok := b.qmvOf(qm)
		if !ok {
			return 0, nil
		}
		n := b.growQMV(&f, ops, span)
		if n < 2 {
			return 0, nil
		}
		b.encodeQMV(&f)
		return n, nil
	}
	mm, ok := ops[0].(*bridge.MatMulOp)
	if !ok {
		return 0, nil
	}
	f, ok := b.mvOf(mm)
	if !ok {
		return 0, nil
	}
	n := b.growMV(&f, ops, span)
	if n < 2 {
		return 0, nil
	}
	b.matvecFused(&f)
	return n, nil
}

// routeFused reports whether a MoE of x's tokens routes in its router's
// dispatch: decode steps, where the router is a GEMV.
func (b *Backend) routeFused(op *bridge.MoEOp) bool {
	x := tt(op.X)
	r := tt(op.W.Router)
	return b.fusing("moe_router_topk") && x != nil && op.W.Hidden > 0 && r != nil &&
		x.n/op.W.Hidden <= b.matmulTuning(r.dt, x.n/op.W.Hidden, len(op.W.Gate), op.W.Hidden).MatVecMaxM &&
		routerRouteKernel[r.dt] != "" && len(op.W.Gate) <= 1024
}

// tryMoEResidual: a MoE block whose output the AddRMSNorm after it adds
// into the residual; that op is left as a plain RMSNorm of the residual.
func (b *Backend) tryMoEResidual(ops []bridge.Op, span int) (int, bridge.Op) {
	if span < 2 {
		return 0, nil
	}
	an, ok := ops[1].(*bridge.AddRMSNormOp)
	if !ok || an.Residual == an.X {
		return 0, nil
	}
	r := tt(an.Residual)
	switch mo := ops[0].(type) { // float or packed experts
	case *bridge.MoEOp:
		o := tt(mo.Out)
		if an.X != mo.Out || r == nil || o == nil || r.dt != bridge.F32 || r.n != o.n {
			return 0, nil
		}
		b.moe(mo.Out, mo.X, mo.W, mo.Params, b.routeFused(mo), moeFold{residual: r})
	case *bridge.QMoEOp:
		o := tt(mo.Out)
		if an.X != mo.Out || r == nil || o == nil || r.dt != bridge.F32 || r.n != o.n || an.Residual == mo.X {
			return 0, nil
		}
		b.qmoe(mo.Out, mo.X, mo.W, mo.Params, moeFold{residual: r})
	default:
		return 0, nil
	}
	return 1, b.residualNorm(an)
}

// residualNorm is what stands in for an AddRMSNorm whose add a fused
// kernel before it took (gemv_residual, moe_residual): the plain RMSNorm of
// the residual.
func (b *Backend) residualNorm(an *bridge.AddRMSNormOp) bridge.Op {
	b.standIn = bridge.RMSNormOp{At: an.At, Out: an.Out, X: an.Residual, W: an.W, Eps: an.Eps}
	return &b.standIn
}

// tryNormMoE: an RMSNorm whose output only the MoE block after it reads,
// in a decode step (the block in three dispatches: moeDecode, qmoe): the
// router and the gate/up GEMVs normalise their input as they stage it, as
// rmsnorm_gemv's GEMVs do. With moe_residual the AddRMSNorm after the
// block is taken as tryMoEResidual takes it.
func (b *Backend) tryNormMoE(ops []bridge.Op, span int) (int, bridge.Op) {
	if span < 2 {
		return 0, nil
	}
	nm, ok := ops[0].(*bridge.RMSNormOp)
	if !ok || nm.X == nm.Out {
		return 0, nil
	}
	var out, in bridge.Tensor
	var w *bridge.MoEWeights
	var mp bridge.MoEParams
	switch mo := ops[1].(type) {
	case *bridge.MoEOp:
		out, in, w, mp = mo.Out, mo.X, mo.W, mo.Params
	case *bridge.QMoEOp:
		out, in, w, mp = mo.Out, mo.X, mo.W, mo.Params
	default:
		return 0, nil
	}
	x, g, xo := tt(nm.X), tt(nm.W), tt(in)
	H, E := w.Hidden, len(w.Gate)
	if in != nm.Out || x == nil || g == nil || xo == nil || x.dt != bridge.F32 || g.dt != bridge.F32 || H == 0 || E == 0 ||
		g.n != H || x.n != xo.n || x.n%H != 0 || mp.Unfused || bridge.ReadLater(ops[2:], nm.Out) {
		return 0, nil
	}
	T := x.n / H
	if !b.moeRouterFolds(w, T) {
		return 0, nil
	}
	packed := false
	if _, ok := ops[1].(*bridge.QMoEOp); ok {
		packed = true
		if tiled, _ := b.qmoeTiled(T, E, w.TopK, H, w.Inter); tiled {
			return 0, nil
		}
	} else if !b.moeBlock(w, T, mp) && !b.moeMatVec(w, T) {
		return 0, nil
	}
	fold := moeFold{g: g, eps: nm.Eps}
	stand := bridge.Op(nil)
	if span > 2 && b.fusing("moe_residual") {
		if an, ok := ops[2].(*bridge.AddRMSNormOp); ok && an.X == out && an.Residual != an.X {
			if r, o := tt(an.Residual), tt(out); r != nil && o != nil && r.dt == bridge.F32 && r.n == o.n {
				fold.residual, stand = r, b.residualNorm(an)
			}
		}
	}
	if packed {
		b.qmoe(out, nm.X, w, mp, fold)
	} else {
		b.moe(out, nm.X, w, mp, false, fold)
	}
	return 2, stand
}

// tryMoERoute: a decode step's MoE block with its routing in the router's
// dispatch.
func (b *Backend) tryMoERoute(ops []bridge.Op, span int) (int, bridge.Op) {
	mo, ok := ops[0].(*bridge.MoEOp)
	if !ok || !b.routeFused(mo) {
		return 0, nil
	}
	b.moe(mo.Out, mo.X, mo.W, mo.Params, true, moeFold{})
	return 1, nil
}

// matvecFused encodes one matvec_fused dispatch.
func (b *Backend) matvecFused(f *mvFused) {
	// The matvec's tuned rows and simdgroups at the first segment's shape.
	tu := b.matmulTuning(f.dt, f.m, f.w[0].shape[0], f.k)
	rows, sgs := tu.MatVecRows, tu.MatVecSimdgroups
	var n [3]int
	tiles := 0
	for i := 0; i < f.nsegs; i++ {
		n[i] = f.w[i].shape[0]
		if !f.swig || i == 0 {
			tiles += ceilDiv(n[i], rows)
		}
	}
	biases := int32(0) // mv_biases: a bit for each segment with a bias
	for i, bs := range f.bias[:f.nsegs] {
		if bs != nil {
			biases |= 1 << i
		}
	}
	p := b.pipeline(matvecFusedKernel[f.dt], fcMVFused, biases, int32(rows), int32(f.m), int32(f.nsegs),
		boolInt[f.norm != nil], boolInt[f.resid != nil], boolInt[f.swig], boolInt[f.normB != nil], boolInt[f.gelu], boolInt[f.pick != nil])
	sgs = simdgroupsFor(p, sgs) // tiles a simdgroup, as the plain matvec's
	b.args(argBytes(b, fusedMVArgs{M: uint32(f.m), K: uint32(f.k), N0: uint32(n[0]), N1: uint32(n[1]), N2: uint32(n[2]), Eps: f.eps}))
	b.in(1, f.x)
	for i := 0; i < f.nsegs; i++ {
		b.in(2+3*i, f.w[i])
		if i == 0 || !f.swig {
			b.out(3+3*i, f.out[i])
		}
		if f.bias[i] != nil { // up's too: added before the SiLU·mul
			b.in(4+3*i, f.bias[i])
		}
	}
	if f.norm != nil {
		b.in(11, f.norm)
	}
	if f.resid != nil {
		b.bind(12, f.resid.view(), true)
	}
	if f.normB != nil {
		b.in(13, f.normB)
	}
	groups := ceilDiv(tiles, sgs)
	var pv, pi view
	if f.pick != nil {
		pv, pi = b.gemvParts(groups, 14)
	}
	b.dispatchGroups(p, [3]int{groups, 1, 1}, [3]int{32 * sgs, 1, 1})
	if f.pick != nil {
		b.gemvPick(pv, pi, n[0], rows*sgs, groups, f.pick)
	}
}
