//go:build linux

package cuda

import "github.com/mtlbench/mtlbench/bridge"

// Fusions is the CUDA backend's fusion table (bridge.Pattern), tried in
// order at each op of a step. docs/architecture.md explains the model.
func (b *Backend) Fusions() []bridge.Pattern {
	if b.fusions == nil {
		b.fusions = []bridge.Pattern{
			{Name: "rope_attention", Doc: "RoPE (with QK-norm) in the decode attention kernel that writes the KV cache", Try: b.tryRoPEAttention},
			{Name: "rmsnorm_gemv", Doc: "a single-token GEMV (float, or affine packed) normalises its input: the RMSNorm before it costs no launch (and a packed one takes in the argmax after it, as qgemv_argmax)", Try: b.tryNormGemv},
			{Name: "layernorm_gemv", Doc: "a single-token GEMV takes in the LayerNorm before it (GPT-2), and the GELU after it", Try: b.tryLayerNormGemv},
			{Name: "rmsnorm_qmoe", Doc: "a single-token packed MoE's router kernel normalises its input, and its down projections add into the residual the AddRMSNorm after it would add", Try: b.tryNormQMoE},
			{Name: "qmoe_residual", Doc: "a packed MoE's down projections add into the residual the AddRMSNorm after it would add", Try: b.tryQMoEResidual},
			{Name: "gemv_residual", Doc: "a single-token GEMV (float, or affine packed) adds its output into the residual the AddRMSNorm (AddLayerNorm) after it would add", Try: b.tryGemvResidual},
			{Name: "qgemv_argmax", Doc: "a single-row affine packed GEMV (a decode step's LM head) finds the argmax after it: each block reads back its outputs, the last block writes the index", Try: b.tryQGemvArgmax},
			{Name: "gemv_gelu", Doc: "a GEMV applies the GELU after it (GPT-2's c_fc) as it writes its output", Try: b.tryGemvGELU},
			{Name: "gemv_shared_input", Doc: "matmuls of one input (q, k, v; gate, up) share a GEMV launch, with SiLU·up applied as gate and up are written; on cuBLAS they share the rounding of the input to half",
				Try: b.tryGemvGroup, Always: true},
			{Name: "qgemv_shared_input", Doc: "packed matmuls of one input and packing (q, k, v; gate, up) share a launch, with SiLU·up applied as gate and up are written",
				Try: b.tryQGemvGroup, Always: true},
			{Name: "flash_attention", Doc: "attention of a step of many tokens with half-precision weights on tensor cores (flash.cu)",
				Try: b.tryFlashAttention, Always: true},
		}
	}
	if b.opts.NoFuse {
		if b.always == nil {
			for _, p := range b.fusions {
				if p.Always {
					b.always = append(b.always, p)
				}
			}
		}
		return b.always
	}
	return b.fusions
}

// SetFusions keeps only the named patterns in the table (tests measure one
// pattern at a time); no names restores the whole table.
func (b *Backend) SetFusions(names ...string) {
	b.fusions, b.always = nil, nil
	if len(names) == 0 {
		return
	}
	b.fusions = bridge.KeepPatterns(b.Fusions(), names)
}

// tryRoPEAttention: RoPE of q and k, then attention over the same q and k,
// in a step of at most one query token per sequence.
func (b *Backend) tryRoPEAttention(ops []bridge.Op, span int) (int, bridge.Op) {
	ops = ops[:span]
	if len(ops) < 2 {
		return 0, nil
	}
	r, ok := ops[0].(*bridge.RoPEOp)
	a, ok2 := ops[1].(*bridge.AttentionOp)
	if !ok || !ok2 || a.Q != r.Q || a.K != r.K || a.Heads != r.Heads || a.KVHeads != r.KVHeads || a.HeadDim != r.HeadDim ||
		b.meta.MaxQueryLen > 1 || b.meta.NumTokens == 0 || b.asTensor(r.Q) == nil || b.asTensor(r.K) == nil {
		return 0, nil
	}
	args, ok := b.ropeArgs(r.QNorm, r.KNorm, r.HeadDim, r.Rotary, r.Eps)
	if !ok {
		return 0, nil
	}
	b.attention(a.Out, a.Q, a.K, a.V, a.Cache, a.Heads, a.KVHeads, a.HeadDim, a.Scale, a.Window, &args)
	return 2, nil
}

// tryNormGemv: an RMSNorm (residual already added) whose output a
// single-token GEMV group reads next.
func (b *Backend) tryNormGemv(ops []bridge.Op, span int) (int, bridge.Op) {
	ops = ops[:span]
	if len(ops) < 2 {
		return 0, nil
	}
	nm, ok := ops[0].(*bridge.RMSNormOp)
	if !ok {
		return 0, nil
	}
	if _, packed := ops[1].(*bridge.QMatMulOp); packed {
		return b.qnormGemv(ops, nm.Out, nm.X, nm.W, nm.Eps)
	}
	return b.normGemv(ops, nm.Out, nm.X, nm.W, nil, nm.Eps, false)
}

// tryLayerNormGemv: tryNormGemv for GPT-2's LayerNorm, and the GELU after
// the GEMV when it reads nothing else (c_fc).
func (b *Backend) tryLayerNormGemv(ops []bridge.Op, span int) (int, bridge.Op) {
	ops = ops[:span]
	if len(ops) < 2 {
		return 0, nil
	}
	nm, ok := ops[0].(*bridge.LayerNormOp)
	if !ok || nm.B == nil {
		return 0, nil
	}
	return b.normGemv(ops, nm.Out, nm.X, nm.W, nm.B, nm.Eps, true)
}

// normGemv records the GEMV group after ops[0], a norm of x (weight w,
// bias nb for a LayerNorm) into out, with the norm folded in; gelu lets it
// take a GELU after a lone GEMV too.
func (b *Backend) normGemv(ops []bridge.Op, out, x, w, nb bridge.Tensor, eps float32, gelu bool) (int, bridge.Op) {
	mm, ok := ops[1].(*bridge.MatMulOp)
	if !ok || out == x || mm.X != out {
		return 0, nil
	}
	o, xs, ws := b.asTensor(out), b.asTensor(x), b.asTensor(w)
	if o == nil || xs == nil || ws == nil || o.dt != bridge.F32 || xs.dt != bridge.F32 || ws.dt != bridge.F32 {
		return 0, nil
	}
	var bp uint64
	if nb != nil {
		bt := b.asTensor(nb)
		if bt == nil || bt.dt != bridge.F32 || bt.n != ws.n {
			return 0, nil
		}
		bp = bt.ptr
	}
	g, ok := b.gemvOf(mm.Out, mm.X, mm.W, mm.Bias, false)
	if !ok || g.m != 1 || g.k != ws.n || g.k%8 != 0 || g.k > gemvNormMaxK {
		return 0, nil
	}
	if c := b.gemvShape(g.m, g.segs[0].n, g.k, g.dt); c.M != 1 || b.fns[c.name+"_norm"] == 0 {
		return 0, nil
	}
	n := 1 + b.growGemv(&g, ops[1:])
	for _, s := range g.segs[:g.nsegs] {
		if s.out == xs.ptr { // other blocks may still be reading the norm's input
			return 0, nil
		}
	}
	if gelu {
		n += b.takeGELU(&g, ops[n:])
	}
	g.norm.x, g.norm.w, g.norm.b, g.norm.out, g.norm.eps = xs.ptr, ws.ptr, bp, o.ptr, eps
	b.launchGemv(&g)
	return n, nil
}

// takeGELU has a lone GEMV's output go through the GELU that ops[0]
// applies to it in place; it returns the ops taken (0 or 1).
func (b *Backend) takeGELU(g *gemv, ops []bridge.Op) int {
	if g.nsegs != 1 || g.silu || g.residual != 0 || len(ops) == 0 {
		return 0
	}
	ge, ok := ops[0].(*bridge.GELUOp)
	if !ok {
		return 0
	}
	o, x := b.asTensor(ge.Out), b.asTensor(ge.X)
	if o == nil || x == nil || o.ptr != g.segs[0].out || x.ptr != o.ptr || o.n != g.m*g.segs[0].n {
		return 0
	}
	g.gelu = true
	return 1
}

// tryGemvGELU: a GEMV whose output the GELU after it transforms in place.
func (b *Backend) tryGemvGELU(ops []bridge.Op, span int) (int, bridge.Op) {
	ops = ops[:span]
	if len(ops) < 2 {
		return 0, nil
	}
	mm, ok := ops[0].(*bridge.MatMulOp)
	if !ok {
		return 0, nil
	}
	g, ok := b.gemvOf(mm.Out, mm.X, mm.W, mm.Bias, false)
	if !ok || !b.onGemv(g.m) || b.takeGELU(&g, ops[1:]) == 0 {
		return 0, nil
	}
	b.launchGemv(&g)
	return 2, nil
}

// tryGemvResidual: a lone single-token GEMV whose output the AddRMSNorm
// (AddLayerNorm) after it adds into the residual; that op is left as a
// plain RMSNorm (LayerNorm) of the residual, which the next GEMV may take
// in turn.
func (b *Backend) tryGemvResidual(ops []bridge.Op, span int) (int, bridge.Op) {
	ops = ops[:span]
	if len(ops) < 2 {
		return 0, nil
	}
	var x, residual bridge.Tensor
	switch an := ops[1].(type) {
	case *bridge.AddRMSNormOp:
		x, residual = an.X, an.Residual
	case *bridge.AddLayerNormOp:
		x, residual = an.X, an.Residual
	default:
		return 0, nil
	}
	if residual == x {
		return 0, nil
	}
	switch mm := ops[0].(type) {
	case *bridge.QMatMulOp:
		if x != mm.Out || !b.qgemvResidual(mm, residual) {
			return 0, nil
		}
	case *bridge.MatMulOp:
		if x != mm.Out {
			return 0, nil
		}
		g, ok := b.gemvOf(mm.Out, mm.X, mm.W, mm.Bias, false)
		r := b.asTensor(residual)
		// Not the GEMV's own input: other blocks may still read it while
		// one adds into it (qgemvResidual keeps the same rule).
		if !ok || g.m != 1 || r == nil || r.dt != bridge.F32 || r.n != g.segs[0].n || r.ptr == g.x || !b.onGemv(g.m) {
			return 0, nil
		}
		g.residual = r.ptr
		b.launchGemv(&g)
	default:
		return 0, nil
	}
	if an, ok := ops[1].(*bridge.AddLayerNormOp); ok {
		b.standInLN = bridge.LayerNormOp{At: an.At, Out: an.Out, X: an.Residual, W: an.W, B: an.B, Eps: an.Eps}
		return 1, &b.standInLN
	}
	an := ops[1].(*bridge.AddRMSNormOp)
	b.standIn = bridge.RMSNormOp{At: an.At, Out: an.Out, X: an.Residual, W: an.W, Eps: an.Eps}
	return 1, &b.standIn
}

// tryGemvGroup: matmuls of the same input in one launch (at least two, or
// one whose SiLU·up follows); on cuBLAS, matmuls of the same input share
// the rounding of their activations to half.
func (b *Backend) tryGemvGroup(ops []bridge.Op, span int) (int, bridge.Op) {
	ops = ops[:span]
	mm, ok := ops[0].(*bridge.MatMulOp)
	if !ok {
		return 0, nil
	}
	g, ok := b.gemvOf(mm.Out, mm.X, mm.W, mm.Bias, false)
	if !ok {
		return 0, nil
	}
	n := b.growGemv(&g, ops)
	if !b.onGemv(g.m) && g.silu {
		n, g.silu = n-1, false // the SiLU·up stays its own op
	}
	if n < 2 {
		return 0, nil
	}
	if !b.onGemv(g.m) {
		b.gemms(g.x, g.m, g.k, false, g.segs[:g.nsegs])
		return n, nil
	}
	b.launchGemv(&g)
	return n, nil
}

// growGemv adds to g (made from ops[0]) the matmuls of the same input that
// follow, and a SiLUMul of the first two outputs; it returns the ops taken.
func (b *Backend) growGemv(g *gemv, ops []bridge.Op) int {
	n := 1
	for ; n < len(ops) && g.nsegs < 3; n++ {
		mm, ok := ops[n].(*bridge.MatMulOp)
		if !ok || mm.X != ops[0].(*bridge.MatMulOp).X {
			break
		}
		h, ok := b.gemvOf(mm.Out, mm.X, mm.W, mm.Bias, false)
		if !ok || h.m != g.m || h.k != g.k || h.dt != g.dt || h.segs[0].out == g.x || h.segs[0].out == h.x {
			break
		}
		dup := false
		for _, s := range g.segs[:g.nsegs] {
			dup = dup || s.out == h.segs[0].out
		}
		if dup {
			break
		}
		g.segs[g.nsegs] = h.segs[0]
		g.nsegs++
	}
	if g.nsegs == 2 && n < len(ops) {
		if sm, ok := ops[n].(*bridge.SiLUMulOp); ok {
			gate, up, out := b.asTensor(sm.Gate), b.asTensor(sm.Up), b.asTensor(sm.Out)
			s0, s1 := g.segs[0], g.segs[1]
			if gate != nil && up != nil && out != nil && gate.ptr == s0.out && up.ptr == s1.out && out.ptr == s0.out &&
				s0.n == s1.n && out.n == g.m*s0.n && up.n == out.n {
				g.silu = true
				n++
			}
		}
	}
	return n
}

// tryFlashAttention: the attention of a prefill step that flash.cu takes
// (ops_linux.go: flashAttention); it is how such steps run in any case.
func (b *Backend) tryFlashAttention(ops []bridge.Op, span int) (int, bridge.Op) {
	a, ok := ops[0].(*bridge.AttentionOp)
	if !ok || !b.flashAttention(a) {
		return 0, nil
	}
	return 1, nil
}

// tryNormQMoE: an RMSNorm (residual already added) whose output a
// single-token packed MoE reads: the router kernel computes the norm, and
// the AddRMSNorm after the MoE is taken too when its down projections can
// add into the residual.
func (b *Backend) tryNormQMoE(ops []bridge.Op, span int) (int, bridge.Op) {
	ops = ops[:span]
	if len(ops) < 2 {
		return 0, nil
	}
	nm, ok := ops[0].(*bridge.RMSNormOp)
	mo, ok2 := ops[1].(*bridge.QMoEOp)
	if !ok || !ok2 || mo.X != nm.Out || nm.X == nm.Out {
		return 0, nil
	}
	o, xs, ws := b.asTensor(nm.Out), b.asTensor(nm.X), b.asTensor(nm.W)
	if o == nil || xs == nil || ws == nil || o.dt != bridge.F32 || xs.dt != bridge.F32 || ws.dt != bridge.F32 ||
		ws.n != mo.W.Hidden || xs.n != mo.W.Hidden || o.n != xs.n || !b.qmoeRouterFolds(mo.W, mo.Params, 1) {
		return 0, nil
	}
	fold := qmoeFold{normX: xs.ptr, normW: ws.ptr, eps: nm.Eps}
	n, stand := 2, bridge.Op(nil)
	if len(ops) > 2 {
		if r, s := b.qmoeResidualOf(mo, ops[2], ops[3:]); r != 0 {
			fold.residual, stand = r, s
		}
	}
	b.qmoe(mo.Out, mo.X, mo.W, mo.Params, fold)
	return n, stand
}

// tryQMoEResidual: a packed MoE whose output the AddRMSNorm after it adds
// into the residual.
func (b *Backend) tryQMoEResidual(ops []bridge.Op, span int) (int, bridge.Op) {
	ops = ops[:span]
	if len(ops) < 2 {
		return 0, nil
	}
	mo, ok := ops[0].(*bridge.QMoEOp)
	if !ok {
		return 0, nil
	}
	r, stand := b.qmoeResidualOf(mo, ops[1], ops[2:])
	if r == 0 {
		return 0, nil
	}
	b.qmoe(mo.Out, mo.X, mo.W, mo.Params, qmoeFold{residual: r})
	return 1, stand
}

// qmoeResidualOf: when next is an AddRMSNorm adding mo's output into a
// residual that qamoe_down_sum can add into (and nothing after reads the
// output it then leaves unwritten), the residual's pointer and the plain
// RMSNorm that stands in for next.
func (b *Backend) qmoeResidualOf(mo *bridge.QMoEOp, next bridge.Op, after []bridge.Op) (uint64, bridge.Op) {
	an, ok := next.(*bridge.AddRMSNormOp)
	if !ok || an.X != mo.Out || an.Residual == an.X || an.Residual == mo.X || !b.qmoeDownFolds(mo.W, mo.Params) ||
		bridge.ReadLater(after, mo.Out) {
		return 0, nil
	}
	r, out := b.asTensor(an.Residual), b.asTensor(mo.Out)
	if r == nil || out == nil || r.dt != bridge.F32 || r.n != out.n {
		return 0, nil
	}
	b.standIn = bridge.RMSNormOp{At: an.At, Out: an.Out, X: an.Residual, W: an.W, Eps: an.Eps}
	return r.ptr, &b.standIn
}

// tryQGemvArgmax: a packed matmul whose output the ArgmaxOp after it reads
// (the LM head when no norm is folded into it).
func (b *Backend) tryQGemvArgmax(ops []bridge.Op, span int) (int, bridge.Op) {
	ops = ops[:span]
	if len(ops) < 2 {
		return 0, nil
	}
	mm, ok := ops[0].(*bridge.QMatMulOp)
	if !ok {
		return 0, nil
	}
	g, ok := b.qgemvOf(mm.Out, mm.X, mm.W, mm.Bias, false)
	if !ok || b.takeArgmax(&g, mm, ops[1:]) == 0 {
		return 0, nil
	}
	b.launchQGemv(&g)
	return 2, nil
}
