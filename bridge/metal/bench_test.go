package metal_test

import (
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/runner/model"
)

// BenchmarkEncodeDecodeStep measures the host cost of encoding one decode
// step of Qwen3-30B-A3B (48 layers, 128 experts, bf16, batch 1 at a
// context of 1024) against a device that runs nothing: BeginStep (the
// metadata upload), the engine's op sequence, argmax, and EndStep's
// commit and wait. "recorder" also logs every call, as the device-agnostic
// test does. The step commits in pieces as it is encoded
// (bridge.StreamPieces): cmdbufs/step counts them.
//
//	go test -run '^$' -bench EncodeDecodeStep ./bridge/metal/
func BenchmarkEncodeDecodeStep(b *testing.B) {
	for _, c := range []struct {
		name string
		dev  func() (mtl.Device, func())
	}{
		{"null", func() (mtl.Device, func()) { return metal.NullDevice{}, func() {} }},
		{"recorder", func() (mtl.Device, func()) {
			r := metal.NewRecorder(metal.NullDevice{})
			return r, r.Reset
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			dev, reset := c.dev()
			benchEncode(b, dev, reset, "qwen3-30b-a3b", 1, 1024)
		})
	}
}

func benchEncode(b *testing.B, dev mtl.Device, reset func(), preset string, batch, context int) {
	cfg, err := model.Preset(preset)
	if err != nil {
		b.Fatal(err)
	}
	be, err := metal.New(dev, metal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	m := newModel(b, be, cfg, batch, context)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		reset()
		if err := be.BeginStep(m.meta, m.tokens, false); err != nil {
			b.Fatal(err)
		}
		m.forward()
		if _, err := be.EndStep(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	st := be.LastStep()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "us/step")
	b.ReportMetric(float64(st.Dispatches), "dispatches/step")
	b.ReportMetric(float64(st.Barriers), "barriers/step")
	b.ReportMetric(float64(st.CommandBuffers), "cmdbufs/step")
}

// benchModel is a model's tensors allocated on a backend (zero weights: a
// null device never touches them) and one decode step's metadata.
type benchModel struct {
	be                                  *metal.Backend
	cfg                                 *model.Config
	meta                                *bridge.StepMeta
	tokens                              []int32
	embed, norm, lmHead                 bridge.Tensor
	layers                              []benchLayer
	resid, h, q, k, v, attn, o, mlp, hl bridge.Tensor
	logits, argmax                      bridge.Tensor
}

type benchLayer struct {
	inNorm, postNorm, wq, wk, wv, wo, qNorm, kNorm bridge.Tensor
	cache                                          bridge.KVCache
	moe                                            *bridge.MoEWeights
}

func newModel(b *testing.B, be *metal.Backend, c *model.Config, batch, context int) *benchModel {
	const bs = 16
	dt := bridge.BF16
	alloc := func(dt bridge.DType, shape ...int) bridge.Tensor {
		t, err := be.Alloc(dt, shape...)
		if err != nil {
			b.Fatal(err)
		}
		return t
	}
	m := &benchModel{be: be, cfg: c}
	m.embed, m.norm, m.lmHead = alloc(dt, c.Vocab, c.Hidden), alloc(bridge.F32, c.Hidden), alloc(dt, c.Vocab, c.Hidden)
	blocks := batch * ((context + bs) / bs)
	for range c.Layers {
		ly := benchLayer{
			inNorm: alloc(bridge.F32, c.Hidden), postNorm: alloc(bridge.F32, c.Hidden),
			wq: alloc(dt, c.Heads*c.HeadDim, c.Hidden), wk: alloc(dt, c.KVHeads*c.HeadDim, c.Hidden),
			wv: alloc(dt, c.KVHeads*c.HeadDim, c.Hidden), wo: alloc(dt, c.Hidden, c.Heads*c.HeadDim),
			qNorm: alloc(bridge.F32, c.HeadDim), kNorm: alloc(bridge.F32, c.HeadDim),
			cache: bridge.KVCache{K: alloc(bridge.F32, blocks, c.KVHeads, bs, c.HeadDim), V: alloc(bridge.F32, blocks, c.KVHeads, bs, c.HeadDim), BlockSize: bs},
		}
		gate, up, down, err := be.NewExperts(dt, c.NumExperts, c.Hidden, c.MoEInter)
		if err != nil {
			b.Fatal(err)
		}
		ly.moe = &bridge.MoEWeights{Router: alloc(dt, c.NumExperts, c.Hidden), Gate: gate, Up: up, Down: down,
			TopK: c.TopK, NormTopK: c.NormTopK, Hidden: c.Hidden, Inter: c.MoEInter}
		m.layers = append(m.layers, ly)
	}
	T := batch
	m.resid, m.h, m.o, m.mlp = alloc(bridge.F32, T, c.Hidden), alloc(bridge.F32, T, c.Hidden), alloc(bridge.F32, T, c.Hidden), alloc(bridge.F32, T, c.Hidden)
	m.q, m.attn = alloc(bridge.F32, T, c.Heads*c.HeadDim), alloc(bridge.F32, T, c.Heads*c.HeadDim)
	m.k, m.v = alloc(bridge.F32, T, c.KVHeads*c.HeadDim), alloc(bridge.F32, T, c.KVHeads*c.HeadDim)
	m.hl, m.logits, m.argmax = alloc(bridge.F32, T, c.Hidden), alloc(bridge.F32, T, c.Vocab), alloc(bridge.I32, T)
	nb := (context + bs) / bs
	meta := &bridge.StepMeta{NumTokens: T, NumSeqs: T, MaxQueryLen: 1, MaxSeqLen: context + 1, NumDecodeTokens: T,
		MaxBlocks: nb, BlockSize: bs, QueryStartLoc: []int32{0}}
	for s := range T {
		for j := range nb {
			meta.BlockTable = append(meta.BlockTable, int32(s*nb+j))
		}
		meta.Positions = append(meta.Positions, int32(context))
		meta.SlotMapping = append(meta.SlotMapping, int32(s*nb*bs+context))
		meta.QueryStartLoc = append(meta.QueryStartLoc, int32(s+1))
		meta.SeqLens = append(meta.SeqLens, int32(context+1))
		meta.LogitRows = append(meta.LogitRows, int32(s))
		m.tokens = append(m.tokens, int32(s))
	}
	m.meta = meta
	return m
}

// forward encodes what runner/engine's forward does for a sparse model,
// then greedy sampling.
func (m *benchModel) forward() {
	c, be := m.cfg, m.be
	scale := float32(1 / math.Sqrt(float64(c.HeadDim)) * c.RopeScaling.LogitScale())
	rot := c.Rotary()
	moe := bridge.MoEParams{Strategy: bridge.MoEGrouped, ChunkSize: 64}
	be.Mark(-1, bridge.CompOther, "embedding")
	be.Embedding(m.resid, m.embed)
	for l := range m.layers {
		ly := &m.layers[l]
		be.Mark(l, bridge.CompNorm, "input_norm")
		if l == 0 {
			be.RMSNorm(m.h, m.resid, ly.inNorm, c.Eps)
		} else {
			be.AddRMSNorm(m.h, m.resid, m.mlp, ly.inNorm, c.Eps)
		}
		be.Mark(l, bridge.CompAttention, "qkv_proj")
		be.MatMul(m.q, m.h, ly.wq, nil)
		be.MatMul(m.k, m.h, ly.wk, nil)
		be.MatMul(m.v, m.h, ly.wv, nil)
		be.Mark(l, bridge.CompAttention, "rope")
		be.RoPE(m.q, m.k, ly.qNorm, ly.kNorm, c.Heads, c.KVHeads, c.HeadDim, rot, c.Eps)
		be.Mark(l, bridge.CompAttention, "paged_attention")
		be.Attention(m.attn, m.q, m.k, m.v, ly.cache, c.Heads, c.KVHeads, c.HeadDim, scale, 0)
		be.Mark(l, bridge.CompAttention, "o_proj")
		be.MatMul(m.o, m.attn, ly.wo, nil)
		be.Mark(l, bridge.CompNorm, "post_attention_norm")
		be.AddRMSNorm(m.h, m.resid, m.o, ly.postNorm, c.Eps)
		be.Mark(l, bridge.CompMoE, "moe")
		be.MoE(m.mlp, m.h, ly.moe, moe)
	}
	be.Mark(-1, bridge.CompNorm, "final_norm")
	be.AddRMSNorm(m.h, m.resid, m.mlp, m.norm, c.Eps)
	be.Mark(-1, bridge.CompOther, "lm_head")
	be.GatherRows(m.hl, m.h)
	be.MatMul(m.logits, m.hl, m.lmHead, nil)
	be.Mark(-1, bridge.CompOther, "argmax")
	be.Argmax(m.argmax, m.logits)
}
