package engine

import (
	"context"
	"fmt"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/runner/model"
)

// uploadGPT2 hands GPT-2's tensors to the backend. c_attn's weight and
// bias are cut into q, k and v (rows of the [3·hidden, hidden] matrix the
// source hands out, packed or not), so attention sees the same three
// projections as in every other model.
func uploadGPT2(ctx context.Context, be bridge.Backend, cfg *model.Config, src model.Source) (*weights, error) {
	specs := map[string]model.TensorSpec{}
	for _, s := range cfg.Tensors() {
		specs[s.Name] = s
	}
	var firstErr error
	w := &weights{}
	// parts cuts the tensor's first dimension into that many equal pieces.
	parts := func(name string, n int) []bridge.Tensor {
		out := make([]bridge.Tensor, n)
		if firstErr != nil {
			return out
		}
		if firstErr = stopped(ctx, cfg); firstErr != nil {
			return out
		}
		s, ok := specs[name]
		if !ok {
			firstErr = fmt.Errorf("internal: no tensor spec %q", name)
			return out
		}
		if p, isPacked, err := runPacked(cfg, src, s); err != nil {
			firstErr = err
			return out
		} else if isPacked {
			for i, part := range p.Rows(s.Shape, n) {
				ps := model.TensorSpec{Name: s.Name, Shape: []int{s.Shape[0] / n, s.Shape[1]}, Matrix: true}
				t, err := packedWeight(be, src, name, ps, part)
				if err != nil {
					firstErr = err
					return out
				}
				out[i] = w.keep(t)
			}
			return out
		}
		dt, data, err := src.Tensor(s)
		if err != nil {
			firstErr = err
			return out
		}
		shape := append([]int{s.Shape[0] / n}, s.Shape[1:]...)
		step := len(data) / n
		for i := range out {
			t, err := weightOf(be, src, dt, shape, data[i*step:(i+1)*step])
			if err != nil {
				firstErr = fmt.Errorf("%s: %w", name, err)
				return out
			}
			out[i] = w.keep(t)
		}
		return out
	}
	one := func(name string) bridge.Tensor { return parts(name, 1)[0] }
	w.embed, w.pos = one(model.GPT2Embed), one(model.GPT2Positions)
	w.norm, w.normB = one(model.GPT2FinalNorm+"weight"), one(model.GPT2FinalNorm+"bias")
	w.lmHead = w.embed
	if !cfg.TieEmbed {
		w.lmHead = one("lm_head.weight")
	}
	for l := 0; l < cfg.Layers; l++ {
		p := model.GPT2LayerPrefix(l)
		qkv, bqkv := parts(p+"attn.c_attn.weight", 3), parts(p+"attn.c_attn.bias", 3)
		w.layers = append(w.layers, layer{
			inNorm: one(p + "ln_1.weight"), inNormB: one(p + "ln_1.bias"),
			wq: qkv[0], wk: qkv[1], wv: qkv[2], bq: bqkv[0], bk: bqkv[1], bv: bqkv[2],
			wo: one(p + "attn.c_proj.weight"), bo: one(p + "attn.c_proj.bias"),
			postNorm: one(p + "ln_2.weight"), postNormB: one(p + "ln_2.bias"),
			up: one(p + "mlp.c_fc.weight"), bUp: one(p + "mlp.c_fc.bias"),
			down: one(p + "mlp.c_proj.weight"), bDown: one(p + "mlp.c_proj.bias"),
		})
	}
	return w, firstErr
}
