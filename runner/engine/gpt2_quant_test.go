package engine

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/model"
)

// dequantized hands out a packed source's matrices as the f32 values they
// dequantize to, and everything else as the source has it: the same model
// for the float path.
type dequantized struct{ model.Source }

func (d dequantized) DType() bridge.DType { return bridge.F32 }

func (d dequantized) Tensor(s model.TensorSpec) (bridge.DType, []byte, error) {
	p, ok, err := d.Source.(model.PackedSource).Packed(s)
	if err != nil || !ok {
		return d.Source.Tensor(s)
	}
	m := &quant.Matrix{Spec: p.Spec, Rows: s.Shape[0], K: s.Shape[1], Data: p.Data, Scales: p.Scales, Biases: p.Biases}
	w := m.Dequantize()
	b := make([]byte, 4*len(w))
	for i, v := range w {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return bridge.F32, b, nil
}

// Packed GPT-2 presets (c_attn's packed rows cut into q, k and v, packed
// c_proj, c_fc and mlp c_proj with their biases, the packed wte as
// embedding and tied LM head, the learned positions in floats) give the
// logits and tokens of the float path on the values they dequantize to.
func TestPackedGPT2MatchesDequantized(t *testing.T) {
	be := cpu.New(cpu.Options{})
	for _, q := range model.QuantFormats {
		t.Run(q, func(t *testing.T) {
			cfg, src, err := model.Open(model.Spec{Model: "gpt2", Layers: 2, Seed: 5, Quant: q})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if cfg.Quant == nil {
				t.Fatal("no packing scheme")
			}
			fcfg := *cfg
			fcfg.Quant = nil
			prompt := []int32{464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13}
			req := []Request{{ID: 1, Prompt: prompt, MaxNewTokens: 4, WantLogits: true}}
			run := func(c *model.Config, s model.Source) Output {
				e, err := New(be, c, s, Options{KVTokens: 64})
				if err != nil {
					t.Fatal(err)
				}
				out, err := e.Generate(req)
				if err != nil {
					t.Fatal(err)
				}
				return out[0]
			}
			got, want := run(cfg, src), run(&fcfg, dequantized{src})
			var d, scale float64
			for i := range want.Logits {
				d = math.Max(d, math.Abs(float64(got.Logits[i]-want.Logits[i])))
				scale = math.Max(scale, math.Abs(float64(want.Logits[i])))
			}
			t.Logf("%s: logits max abs difference %.2g (largest logit %.3g), tokens %v", q, d, scale, got.Tokens)
			if d > 1e-4*max(scale, 1) || !slices.Equal(got.Tokens, want.Tokens) {
				t.Errorf("%s: logits %.3g off the float path's (largest %.3g), tokens %v, want %v", q, d, scale, got.Tokens, want.Tokens)
			}
		})
	}
}
