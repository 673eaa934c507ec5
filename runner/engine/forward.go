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
}

const maxWorkspaces = 8

func (e *Engine) workspace(tokens, rows int) (*workspace, error) {
	key := [2]int{tokens, rows}
	if ws := e.ws[key]; ws != nil {
		return ws, nil
	}
	if len(e.ws) >= maxWorkspaces {
		for k, w := range e.ws {
			e.freeWorkspace(w)
			delete(e.ws, k)
		}
	}
	c, be, dt := e.cfg, e.be, e.be.ActDType()
	var err error
	alloc := func(dtype bridge.DType, shape ...int) bridge.Tensor {
		if err != nil {
			return nil
		}
		var t bridge.Tensor
		t, err = be.Alloc(dtype, shape...)
		return t
	}
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	ws := &workspace{
		resid: alloc(dt, tokens, c.Hidden), h: alloc(dt, tokens, c.Hidden),
		q: alloc(dt, tokens, q), k: alloc(dt, tokens, kv), v: alloc(dt, tokens, kv),
		attn: alloc(dt, tokens, q), o: alloc(dt, tokens, c.Hidden), mlp: alloc(dt, tokens, c.Hidden),
	}
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
		return nil, err
	}
	e.ws[key] = ws
	return ws, nil
}

func (e *Engine) freeWorkspace(w *workspace) {
	for _, t := range []bridge.Tensor{w.resid, w.h, w.q, w.k, w.v, w.attn, w.o, w.mlp, w.gate, w.up, w.hl, w.logits, w.argmax} {
		if t != nil {
			e.be.Free(t)
		}
	}
}

// forward encodes the whole model for the step: embeddings, every layer,
// final norm, and the LM head for the rows that sample.
func (e *Engine) forward(ws *workspace) {
	c, be, w := e.cfg, e.be, e.w
	scale := float32(1 / math.Sqrt(float64(c.HeadDim)))
	be.Mark(-1, bridge.CompOther, "embedding")
	be.Embedding(ws.resid, w.embed)
	for l := range w.layers {
		ly := &w.layers[l]
		be.Mark(l, bridge.CompNorm, "input_norm")
		if l == 0 {
			be.RMSNorm(ws.h, ws.resid, ly.inNorm, c.Eps)
		} else {
			be.AddRMSNorm(ws.h, ws.resid, ws.mlp, ly.inNorm, c.Eps)
		}
		be.Mark(l, bridge.CompAttention, "qkv_proj")
		be.MatMul(ws.q, ws.h, ly.wq, ly.bq)
		be.MatMul(ws.k, ws.h, ly.wk, ly.bk)
		be.MatMul(ws.v, ws.h, ly.wv, ly.bv)
		be.Mark(l, bridge.CompAttention, "rope")
		be.RoPE(ws.q, ws.k, ly.qNorm, ly.kNorm, c.Heads, c.KVHeads, c.HeadDim, c.RopeTheta, c.Eps)
		be.Mark(l, bridge.CompAttention, "paged_attention")
		be.Attention(ws.attn, ws.q, ws.k, ws.v, e.cache[l], c.Heads, c.KVHeads, c.HeadDim, scale)
		be.Mark(l, bridge.CompAttention, "o_proj")
		be.MatMul(ws.o, ws.attn, ly.wo, nil)
		be.Mark(l, bridge.CompNorm, "post_attention_norm")
		be.AddRMSNorm(ws.h, ws.resid, ws.o, ly.postNorm, c.Eps)
		if ly.moe != nil {
			be.Mark(l, bridge.CompMoE, "moe")
			be.MoE(ws.mlp, ws.h, ly.moe, e.opts.MoE)
		} else {
			be.Mark(l, bridge.CompMLP, "gate_up_proj")
			be.MatMul(ws.gate, ws.h, ly.gate, nil)
			be.MatMul(ws.up, ws.h, ly.up, nil)
			be.Mark(l, bridge.CompMLP, "silu_mul")
			be.SiLUMul(ws.gate, ws.gate, ws.up)
			be.Mark(l, bridge.CompMLP, "down_proj")
			be.MatMul(ws.mlp, ws.gate, ly.down, nil)
		}
	}
	if ws.hl == nil {
		return
	}
	be.Mark(-1, bridge.CompNorm, "final_norm")
	be.AddRMSNorm(ws.h, ws.resid, ws.mlp, w.norm, c.Eps)
	be.Mark(-1, bridge.CompOther, "lm_head")
	hl := ws.h
	if !e.allRowsSample() {
		be.GatherRows(ws.hl, ws.h)
		hl = ws.hl
	}
	be.MatMul(ws.logits, hl, w.lmHead, nil)
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
