// Package engine runs a model on a backend: it loads the weights, owns the
// paged KV cache and the scheduler, and executes one step at a time: build
// the attention metadata, encode every layer's ops, synchronise once, sample.
package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/model"
)

// layer holds one decoder layer's device tensors.
type layer struct {
	inNorm, postNorm bridge.Tensor
	wq, wk, wv, wo   bridge.Tensor
	bq, bk, bv       bridge.Tensor // nil without qkv bias
	bo               bridge.Tensor // the output projection's: attention_bias, GPT-2's c_proj
	qNorm, kNorm     bridge.Tensor // nil without QK-norm
	gate, up, down   bridge.Tensor // dense MLP
	bGate            bridge.Tensor // its gate projection's bias (mlp_bias; bUp and bDown the others')
	moe              *bridge.MoEWeights
	// GPT-2 (gpt2.go): LayerNorm biases and the MLP's biases; its MLP is
	// up, then down.
	inNormB, postNormB bridge.Tensor
	bUp, bDown         bridge.Tensor
}

type weights struct {
	embed, norm, lmHead bridge.Tensor
	layers              []layer
	pos, normB          bridge.Tensor // GPT-2: position table, final LayerNorm bias
	// made is every tensor the loaders had the backend make, as it was
	// made: what free hands back, so that no list of the fields above
	// stands beside them for a field added later to be missing from.
	made []bridge.Tensor
}

// keep records t, made for w by the backend, and returns it.
func (w *weights) keep(t bridge.Tensor) bridge.Tensor {
	if t != nil {
		w.made = append(w.made, t)
	}
	return t
}

// uploadWeights hands every tensor of cfg to the backend, until ctx ends
// (stopped). On an error, the weights are those made before it.
func uploadWeights(ctx context.Context, be bridge.Backend, cfg *model.Config, src model.Source) (*weights, error) {
	// A copied weight's file pages are given back, so the weights are
	// resident once (docs/quantization.md, "Memory"); a backend reused for
	// another source forgets the last one's.
	if cd, ok := be.(bridge.CopyDropper); ok {
		var drop func([]byte)
		if pd, ok := src.(model.PageDropper); ok {
			drop = pd.Drop
		}
		cd.DropCopied(drop)
	}
	if cfg.GPT2() {
		return uploadGPT2(ctx, be, cfg, src)
	}
	specs := map[string]model.TensorSpec{}
	for _, s := range cfg.Tensors() {
		specs[s.Name] = s
	}
	get := func(name string) (bridge.Tensor, error) {
		s, ok := specs[name]
		if !ok {
			return nil, fmt.Errorf("internal: no tensor spec %q", name)
		}
		if p, packed, err := runPacked(cfg, src, s); err != nil {
			return nil, err
		} else if packed {
			return packedWeight(be, src, name, s, p)
		}
		dt, data, err := src.Tensor(s)
		if err != nil {
			return nil, err
		}
		t, err := weightOf(be, src, dt, s.Shape, data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return t, nil
	}
	var firstErr error
	w := &weights{}
	mustBy := func(get func(string) (bridge.Tensor, error)) func(string) bridge.Tensor {
		return func(name string) bridge.Tensor {
			if firstErr != nil {
				return nil
			}
			if firstErr = stopped(ctx, cfg); firstErr != nil {
				return nil
			}
			t, err := get(name)
			if err != nil {
				firstErr = err
				return nil
			}
			return w.keep(t)
		}
	}
	must := mustBy(get)
	mustFloat := mustBy(func(name string) (bridge.Tensor, error) {
		s, ok := specs[name]
		if !ok {
			return nil, fmt.Errorf("internal: no tensor spec %q", name)
		}
		b, err := model.F32(src, s)
		if err != nil {
			return nil, err
		}
		t, err := be.Weight(bridge.F32, s.Shape, b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err) // as get names its tensors
		}
		return t, nil
	})
	w.embed, w.norm = must("model.embed_tokens.weight"), must("model.norm.weight")
	if cfg.TieEmbed {
		w.lmHead = w.embed
	} else {
		w.lmHead = must("lm_head.weight")
	}
	for l := 0; l < cfg.Layers; l++ {
		p := model.LayerPrefix(l)
		ly := layer{
			inNorm: must(p + "input_layernorm.weight"), postNorm: must(p + "post_attention_layernorm.weight"),
			wq: must(p + "self_attn.q_proj.weight"), wk: must(p + "self_attn.k_proj.weight"),
			wv: must(p + "self_attn.v_proj.weight"), wo: must(p + "self_attn.o_proj.weight"),
		}
		if cfg.QKVBias {
			ly.bq, ly.bk, ly.bv = must(p+"self_attn.q_proj.bias"), must(p+"self_attn.k_proj.bias"), must(p+"self_attn.v_proj.bias")
		}
		if cfg.OBias {
			ly.bo = must(p + "self_attn.o_proj.bias")
		}
		if cfg.QKNorm {
			ly.qNorm, ly.kNorm = must(p+"self_attn.q_norm.weight"), must(p+"self_attn.k_norm.weight")
		}
		if cfg.IsMoELayer(l) {
			m := &bridge.MoEWeights{TopK: cfg.TopK, NormTopK: cfg.NormTopK, Hidden: cfg.Hidden, Inter: cfg.MoEInter}
			// A layer whose experts a file packs in part runs them in f32,
			// the packed ones (and a packed router beside float experts)
			// dequantized once as they load (model.Config.ExpertsInF32).
			load, router := must, must
			if cfg.ExpertsInF32(l) {
				load = mustFloat
			}
			if cfg.RouterInF32(l) {
				router = mustFloat
			}
			m.Router = router(p + "mlp.gate.weight")
			for e := 0; e < cfg.NumExperts; e++ {
				ep := fmt.Sprintf("%smlp.experts.%d.", p, e)
				m.Gate = append(m.Gate, load(ep+"gate_proj.weight"))
				m.Up = append(m.Up, load(ep+"up_proj.weight"))
				m.Down = append(m.Down, load(ep+"down_proj.weight"))
			}
			if firstErr == nil {
				firstErr = mixedExperts(p, m)
			}
			ly.moe = m
		} else {
			ly.gate, ly.up, ly.down = must(p+"mlp.gate_proj.weight"), must(p+"mlp.up_proj.weight"), must(p+"mlp.down_proj.weight")
			if cfg.MLPBias {
				ly.bGate, ly.bUp, ly.bDown = must(p+"mlp.gate_proj.bias"), must(p+"mlp.up_proj.bias"), must(p+"mlp.down_proj.bias")
			}
		}
		w.layers = append(w.layers, ly)
	}
	return w, firstErr
}

// stopped is the error of a build whose context ended, nil while it runs:
// both loaders check it before each tensor, so a signal stops a model's
// build (its weights generated or read, converted and uploaded, minutes
// for a large one) at the next tensor, not at its end (docs/data.md). The
// error is ctx's (context.Canceled) and says its cause (the signal).
func stopped(ctx context.Context, cfg *model.Config) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != err {
		return fmt.Errorf("%s: loading its weights stopped: %w (%w)", cfg.Name, cause, err)
	}
	return fmt.Errorf("%s: loading its weights stopped: %w", cfg.Name, err)
}

// free hands every tensor the loader made for w back to the backend, as
// often as it was handed out: a backend that keeps weights by their bytes
// hands one out again for the same bytes and counts a holder for each
// (bridge.Holders), so an engine still running it keeps it. The weights
// freed are a failed or stopped build's, which no engine runs.
func (w *weights) free(be bridge.Backend) {
	for _, t := range w.made {
		be.Free(t)
	}
	w.made = nil
}

// weightOf hands a tensor's bytes to the backend, aliasing them where the
// backend can and the source mapped them.
func weightOf(be bridge.Backend, src model.Source, dt bridge.DType, shape []int, data []byte) (bridge.Tensor, error) {
	if mw, ok := be.(bridge.MappedWeighter); ok && isMapped(src, data) {
		return mw.WeightMapped(dt, shape, data)
	}
	return be.Weight(dt, shape, data)
}

// runPacked is s's tensor of src as cfg runs it, when src keeps it packed:
// in the format cfg (RunConfig) gives it, written so where src transcodes it
// and widened where cfg runs it wider than it is stored, through the
// source's memo where it keeps one (model.Cached). packed false: floats.
func runPacked(cfg *model.Config, src model.Source, s model.TensorSpec) (p model.Packed, packed bool, err error) {
	ps, ok := src.(model.PackedSource)
	if !ok {
		return model.Packed{}, false, nil
	}
	if run, ok := cfg.Quant.For(s.Name); ok {
		return model.PackedAs(src, s, run)
	}
	return ps.Packed(s)
}

// packedWeight hands a packed matrix to a backend that runs packed weights.
func packedWeight(be bridge.Backend, src model.Source, name string, s model.TensorSpec, p model.Packed) (bridge.Tensor, error) {
	qb, ok := be.(bridge.QuantBackend)
	if !ok {
		return nil, fmt.Errorf("%s: the %s backend does not run packed weights (%v)", name, be.Info().Backend, p.Spec)
	}
	if qs, ok := be.(bridge.QuantSupport); ok {
		if err := qs.SupportsQuant(p.Spec); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	var t bridge.Tensor
	var err error
	if mw, ok := be.(bridge.QuantMappedWeighter); ok && isMapped(src, p.Data) &&
		(p.Scales == nil || isMapped(src, p.Scales) && isMapped(src, p.Biases)) {
		t, err = mw.QuantWeightMapped(p.Spec, s.Shape, p.Data, p.Scales, p.Biases)
	} else {
		t, err = qb.QuantWeight(p.Spec, s.Shape, p.Data, p.Scales, p.Biases)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

// ShapeOf is what of cfg a backend's kernels must take (bridge.ShapeChecker).
func ShapeOf(cfg *model.Config) bridge.ModelShape {
	s := bridge.ModelShape{Heads: cfg.Heads, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim}
	for l := 0; l < cfg.Layers; l++ {
		if cfg.IsMoELayer(l) {
			s.Experts, s.TopK = cfg.NumExperts, cfg.TopK
			break
		}
	}
	return s
}

// RunConfig is cfg as be runs it (model.Config.RunOn): a packed format be
// lacks, or runs faster wider, is counted and loaded at the wider format
// that holds its values exactly. cfg itself is left as it is.
func RunConfig(be bridge.Backend, cfg *model.Config) *model.Config {
	qs, ok := be.(bridge.QuantSupport)
	if !ok {
		return cfg
	}
	return cfg.RunOn(qs)
}

// mixedExperts refuses a layer whose experts still came out packed in
// part (the loader runs such a layer in f32: model.Config.ExpertsInF32,
// which reads expert 0's formats): the expert kernels take a layer's
// experts all packed or all in floats. It names one tensor of each kind.
func mixedExperts(prefix string, m *bridge.MoEWeights) error {
	var flt, pck string
	var spec quant.Spec
	var dt bridge.DType
	for e := range m.Gate {
		for i, t := range []bridge.Tensor{m.Gate[e], m.Up[e], m.Down[e]} {
			name := fmt.Sprintf("%smlp.experts.%d.%s.weight", prefix, e, [...]string{"gate_proj", "up_proj", "down_proj"}[i])
			if q, ok := bridge.QuantOf(t); ok && pck == "" {
				pck, spec = name, q
			} else if !ok && t != nil && flt == "" {
				flt, dt = name, t.DType()
			}
		}
	}
	if flt == "" || pck == "" {
		return nil
	}
	return fmt.Errorf("%s is %v while %s is packed (%v): the engine runs a layer's experts all packed or all in floats", flt, dt, pck, spec)
}

// packed reports whether t is a packed weight.
func packed(t bridge.Tensor) bool {
	_, ok := bridge.QuantOf(t)
	return ok
}

// GiB formats bytes for people.
func GiB(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", (b+1023)/1024)
}

// FitError says a model does not fit, with the figures to act on.
type FitError struct {
	Model            string
	Weights, KV, Has int64
	// Step is the largest step's activations (StepBytes); 0 where not
	// counted.
	Step      int64
	Where     string
	MaxLayers int // layers that would fit, 0 if none
}

func (e *FitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model %s needs %s (weights %s + KV cache %s", e.Model, GiB(e.Weights+e.KV+e.Step), GiB(e.Weights), GiB(e.KV))
	if e.Step > 0 {
		fmt.Fprintf(&b, " + a step's activations %s", GiB(e.Step))
	}
	fmt.Fprintf(&b, ") but %s has %s available", e.Where, GiB(e.Has))
	if e.MaxLayers > 0 {
		// Each command's own spelling: bench and generate take flags,
		// run a --set, a suite file its keys.
		fmt.Fprintf(&b, "; its first %d layers would fit: run those with --layers %d (bench, generate) or --set layers=%d (run), "+
			"or take what fits with --fit truncate-layers (bench) or fit: truncate-layers (a suite)", e.MaxLayers, e.MaxLayers, e.MaxLayers)
	}
	return b.String()
}

// CheckFitPreset checks a bf16 preset with a 4096-token cache against
// available bytes; it returns the preset's config when it fits.
func CheckFitPreset(name string, available int64) (*model.Config, error) {
	cfg, err := model.Preset(name)
	if err != nil {
		return nil, err
	}
	return cfg, CheckFit(cfg, bridge.BF16, bridge.F32, 4096, 0, available, "this machine")
}

// isMapped reports whether data lives in mmap'd memory of src.
func isMapped(src model.Source, data []byte) bool {
	m, ok := src.(model.MappedSource)
	return ok && m.Mapped(data)
}
