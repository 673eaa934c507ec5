package engine

import (
	"math"

	"github.com/mtlbench/mtlbench/bridge"
)

// workspace holds a step's activations for one (tokens, logit rows) shape;
// decode steps repeat shapes, so they reuse it.
type workspace struct {
	resid, h, q, k, v, attn, o, mlp bridge.Tensor
	gate, up                        bridge.Tensor // nil for a pure-MoE model
	hl, logits, argmax              bridge.Tensor
	// made is every tensor allocated for it, as made: what freeWorkspace
	// hands back, a workspace cut short by a refused allocation included,
	// with no list of the fields above to keep beside them.
	made []bridge.Tensor
	// bytes is what it holds (workspaceBytes).
	bytes int64
	// ops are the step's op lists, by stepOps' variant (gather, argmax), and
	// moe their MoE ops, whose params a step sets.
	ops  [4][]bridge.Op
	moe  [4][]*bridge.MoEOp
	qmoe [4][]*bridge.QMoEOp
}

const maxWorkspaces = 8

// workspace returns the workspace of a (tokens, rows) step, made on first
// use. Past maxWorkspaces the others are freed, all but busy: the one of a
// step still in flight, which the device is using and whose argmax the new
// step may read its tokens from.
func (e *Engine) workspace(tokens, rows int, busy *workspace) (*workspace, error) {
	key := [2]int{tokens, rows}
	if ws := e.ws[key]; ws != nil {
		return ws, nil
	}
	c, be, dt := e.cfg, e.be, e.be.ActDType()
	// Prefill steps of a few thousand tokens, each its own shape, would
	// otherwise be kept side by side, several times what the fit check
	// counts: past wsCap the idle ones go.
	need, held := workspaceBytes(c, dt, tokens, rows), int64(0)
	for _, w := range e.ws {
		if w != busy {
			held += w.bytes
		}
	}
	if len(e.ws) >= maxWorkspaces || held+need > e.wsCap {
		for k, w := range e.ws {
			if w != busy {
				e.freeWorkspace(w)
				delete(e.ws, k)
			}
		}
	}
	var err error
	ws := &workspace{bytes: need}
	alloc := func(dtype bridge.DType, shape ...int) bridge.Tensor {
		if err != nil {
			return nil
		}
		t, aerr := be.Alloc(dtype, shape...)
		if aerr != nil {
			err = aerr
			return nil
		}
		ws.made = append(ws.made, t)
		return t
	}
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	ws.resid, ws.h = alloc(dt, tokens, c.Hidden), alloc(dt, tokens, c.Hidden)
	ws.q, ws.k, ws.v = alloc(dt, tokens, q), alloc(dt, tokens, kv), alloc(dt, tokens, kv)
	ws.attn, ws.o, ws.mlp = alloc(dt, tokens, q), alloc(dt, tokens, c.Hidden), alloc(dt, tokens, c.Hidden)
	for l := 0; l < c.Layers; l++ {
		if !c.IsMoELayer(l) {
			ws.gate, ws.up = alloc(dt, tokens, c.Inter), alloc(dt, tokens, c.Inter)
			break
		}
	}
	if rows > 0 {
		ws.hl = alloc(dt, rows, c.Hidden)
		ws.logits = alloc(bridge.F32, rows, c.Vocab)
		ws.argmax = alloc(bridge.I32, rows)
	}
	if err != nil {
		e.freeWorkspace(ws) // what was made before the refusal
		return nil, err
	}
	e.ws[key] = ws
	return ws, nil
}

// freeWorkspace hands back every tensor allocated for w (workspace.made).
func (e *Engine) freeWorkspace(w *workspace) {
	for _, t := range w.made {
		e.be.Free(t)
	}
	w.made = nil
}

// stepOps returns the step's op list for ws: embeddings, every layer, the
// final norm and the LM head for the rows that sample, then the argmax when
// the step samples on the device. The lists depend only on the workspace and
// the model, so each is built once and reused by every step of its shape.
func (e *Engine) stepOps(ws *workspace, gather, argmax bool) []bridge.Op {
	v := 0
	if gather {
		v |= 1
	}
	if argmax {
		v |= 2
	}
	if ws.ops[v] == nil {
		ws.ops[v] = e.buildOps(ws, gather, argmax)
		for _, op := range ws.ops[v] {
			switch m := op.(type) {
			case *bridge.MoEOp:
				ws.moe[v] = append(ws.moe[v], m)
			case *bridge.QMoEOp:
				ws.qmoe[v] = append(ws.qmoe[v], m)
			}
		}
	}
	for _, m := range ws.moe[v] {
		m.Params = e.opts.MoE // tuned per step (tuned.go)
		m.Params.Unfused = e.opts.NoFusion
	}
	for _, m := range ws.qmoe[v] {
		m.Params = e.opts.MoE
		m.Params.Unfused = e.opts.NoFusion
	}
	return ws.ops[v]
}

// mm is out = x·wtᵀ (+ bias). A packed weight's matmul or embedding is its
// own op type, which the backends' fusion patterns for float weights never
// match.
func mm(a bridge.At, out, x, wt, bias bridge.Tensor) bridge.Op {
	if packed(wt) {
		return &bridge.QMatMulOp{At: a, Out: out, X: x, W: wt, Bias: bias}
	}
	return &bridge.MatMulOp{At: a, Out: out, X: x, W: wt, Bias: bias}
}

// embeddingOp is out = the table's rows of the step's tokens.
func embeddingOp(a bridge.At, out, table bridge.Tensor) bridge.Op {
	if packed(table) {
		return &bridge.QEmbeddingOp{At: a, Out: out, Table: table}
	}
	return &bridge.EmbeddingOp{At: a, Out: out, Table: table}
}

// buildOps reads like the model: what each layer computes, in order.
func (e *Engine) buildOps(ws *workspace, gather, argmax bool) []bridge.Op {
	if e.cfg.GPT2() {
		return e.buildGPT2Ops(ws, gather, argmax)
	}
	c, w := e.cfg, e.w
	scale := float32(1 / math.Sqrt(float64(c.HeadDim)) * c.RopeScaling.LogitScale())
	at := func(layer int, comp, name string) bridge.At {
		return bridge.At{Layer: layer, Component: comp, Name: name}
	}
	ops := []bridge.Op{embeddingOp(at(-1, bridge.CompOther, "embedding"), ws.resid, w.embed)}
	for l := range w.layers {
		ly := &w.layers[l]
		norm := at(l, bridge.CompNorm, "input_norm")
		if l == 0 {
			ops = append(ops, &bridge.RMSNormOp{At: norm, Out: ws.h, X: ws.resid, W: ly.inNorm, Eps: c.Eps})
		} else {
			ops = append(ops, &bridge.AddRMSNormOp{At: norm, Out: ws.h, Residual: ws.resid, X: ws.mlp, W: ly.inNorm, Eps: c.Eps})
		}
		qkv := at(l, bridge.CompAttention, "qkv_proj")
		ops = append(ops,
			mm(qkv, ws.q, ws.h, ly.wq, ly.bq),
			mm(qkv, ws.k, ws.h, ly.wk, ly.bk),
			mm(qkv, ws.v, ws.h, ly.wv, ly.bv),
			&bridge.RoPEOp{At: at(l, bridge.CompAttention, "rope"), Q: ws.q, K: ws.k, QNorm: ly.qNorm, KNorm: ly.kNorm,
				Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Rotary: e.rotary, Eps: c.Eps},
			&bridge.AttentionOp{At: at(l, bridge.CompAttention, "paged_attention"), Out: ws.attn, Q: ws.q, K: ws.k, V: ws.v,
				Cache: e.cache[l], Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Scale: scale, Window: c.LayerWindow(l), Operand: e.wdt},
			mm(at(l, bridge.CompAttention, "o_proj"), ws.o, ws.attn, ly.wo, ly.bo),
			&bridge.AddRMSNormOp{At: at(l, bridge.CompNorm, "post_attention_norm"), Out: ws.h, Residual: ws.resid, X: ws.o,
				W: ly.postNorm, Eps: c.Eps},
		)
		if ly.moe != nil && packed(ly.moe.Gate[0]) {
			ops = append(ops, &bridge.QMoEOp{At: at(l, bridge.CompMoE, "moe"), Out: ws.mlp, X: ws.h, W: ly.moe, Params: e.opts.MoE})
			continue
		}
		if ly.moe != nil {
			ops = append(ops, &bridge.MoEOp{At: at(l, bridge.CompMoE, "moe"), Out: ws.mlp, X: ws.h, W: ly.moe, Params: e.opts.MoE})
			continue
		}
		gu := at(l, bridge.CompMLP, "gate_up_proj")
		ops = append(ops,
			mm(gu, ws.gate, ws.h, ly.gate, ly.bGate),
			mm(gu, ws.up, ws.h, ly.up, ly.bUp),
			&bridge.SiLUMulOp{At: at(l, bridge.CompMLP, "silu_mul"), Out: ws.gate, Gate: ws.gate, Up: ws.up},
			mm(at(l, bridge.CompMLP, "down_proj"), ws.mlp, ws.gate, ly.down, ly.bDown),
		)
	}
	if ws.hl == nil {
		return ops
	}
	ops = append(ops, &bridge.AddRMSNormOp{At: at(-1, bridge.CompNorm, "final_norm"), Out: ws.h, Residual: ws.resid, X: ws.mlp,
		W: w.norm, Eps: c.Eps})
	return lmHeadOps(ops, ws, w.lmHead, gather, argmax)
}

// lmHeadOps appends what every architecture runs after its final norm
// (whose output is ws.h): the gather of the logit rows, the LM head and
// the argmax, by stepOps' variant.
func lmHeadOps(ops []bridge.Op, ws *workspace, lmHead bridge.Tensor, gather, argmax bool) []bridge.Op {
	head := bridge.At{Layer: -1, Component: bridge.CompOther, Name: "lm_head"}
	hl := ws.h
	if gather {
		ops = append(ops, &bridge.GatherRowsOp{At: head, Out: ws.hl, X: ws.h})
		hl = ws.hl
	}
	ops = append(ops, mm(head, ws.logits, hl, lmHead, nil))
	if argmax {
		ops = append(ops, &bridge.ArgmaxOp{At: bridge.At{Layer: -1, Component: bridge.CompOther, Name: "argmax"}, Out: ws.argmax, Logits: ws.logits})
	}
	return ops
}

// allRowsSample reports whether the step's logit rows are all its tokens,
// in order (a decode step): the LM head then reads the final norm's output
// as it is, with no gather in between, and a backend may fold the norm
// into the LM head.
func (e *Engine) allRowsSample() bool {
	rows := e.meta.LogitRows
	if len(rows) != e.meta.NumTokens {
		return false
	}
	for i, r := range rows {
		if int(r) != i {
			return false
		}
	}
	return true
}

// buildGPT2Ops is GPT-2's step: token and position embeddings; per block
// ln_1, q/k/v with biases, attention (no RoPE), the output projection,
// the residual add with ln_2, c_fc, GELU and c_proj; ln_f and the LM head
// tied to the token embedding.
func (e *Engine) buildGPT2Ops(ws *workspace, gather, argmax bool) []bridge.Op {
	c, w := e.cfg, e.w
	scale := float32(1 / math.Sqrt(float64(c.HeadDim)))
	at := func(layer int, comp, name string) bridge.At {
		return bridge.At{Layer: layer, Component: comp, Name: name}
	}
	emb := at(-1, bridge.CompOther, "embedding")
	ops := []bridge.Op{
		embeddingOp(emb, ws.resid, w.embed),
		&bridge.PositionEmbeddingOp{At: emb, X: ws.resid, Table: w.pos},
	}
	for l := range w.layers {
		ly := &w.layers[l]
		norm := at(l, bridge.CompNorm, "ln_1")
		if l == 0 {
			ops = append(ops, &bridge.LayerNormOp{At: norm, Out: ws.h, X: ws.resid, W: ly.inNorm, B: ly.inNormB, Eps: c.Eps})
		} else {
			ops = append(ops, &bridge.AddLayerNormOp{At: norm, Out: ws.h, Residual: ws.resid, X: ws.mlp, W: ly.inNorm, B: ly.inNormB, Eps: c.Eps})
		}
		qkv := at(l, bridge.CompAttention, "c_attn")
		ops = append(ops,
			mm(qkv, ws.q, ws.h, ly.wq, ly.bq),
			mm(qkv, ws.k, ws.h, ly.wk, ly.bk),
			mm(qkv, ws.v, ws.h, ly.wv, ly.bv),
			&bridge.AttentionOp{At: at(l, bridge.CompAttention, "paged_attention"), Out: ws.attn, Q: ws.q, K: ws.k, V: ws.v,
				Cache: e.cache[l], Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Scale: scale, Window: c.LayerWindow(l), Operand: e.wdt},
			mm(at(l, bridge.CompAttention, "c_proj"), ws.o, ws.attn, ly.wo, ly.bo),
			&bridge.AddLayerNormOp{At: at(l, bridge.CompNorm, "ln_2"), Out: ws.h, Residual: ws.resid, X: ws.o,
				W: ly.postNorm, B: ly.postNormB, Eps: c.Eps},
			mm(at(l, bridge.CompMLP, "c_fc"), ws.gate, ws.h, ly.up, ly.bUp),
			&bridge.GELUOp{At: at(l, bridge.CompMLP, "gelu"), Out: ws.gate, X: ws.gate},
			mm(at(l, bridge.CompMLP, "mlp_c_proj"), ws.mlp, ws.gate, ly.down, ly.bDown),
		)
	}
	if ws.hl == nil {
		return ops
	}
	ops = append(ops, &bridge.AddLayerNormOp{At: at(-1, bridge.CompNorm, "ln_f"), Out: ws.h, Residual: ws.resid, X: ws.mlp,
		W: w.norm, B: w.normB, Eps: c.Eps})
	return lmHeadOps(ops, ws, w.lmHead, gather, argmax)
}
