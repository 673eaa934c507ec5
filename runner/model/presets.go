package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/kernels"
)

// Presets are the models mtlbench's users tune for, with their real shapes
// (and GPT-2, which the documented history measured), plus qwen3-moe-mini:
// the Qwen3-MoE structure small enough for a laptop CPU.
var presets = map[string]Config{
	"qwen3-30b-a3b": {Architecture: "Qwen3MoeForCausalLM", Vocab: 151936, Hidden: 2048, Layers: 48,
		Heads: 32, KVHeads: 4, HeadDim: 128, Inter: 6144, MaxPos: 40960, RopeTheta: 1e6, Eps: 1e-6,
		QKNorm: true, NumExperts: 128, TopK: 8, MoEInter: 768, NormTopK: true, SparseStep: 1},
	"qwen3-moe-mini": {Architecture: "Qwen3MoeForCausalLM", Vocab: 8192, Hidden: 512, Layers: 6,
		Heads: 8, KVHeads: 2, HeadDim: 64, Inter: 1536, MaxPos: 4096, RopeTheta: 1e6, Eps: 1e-6,
		QKNorm: true, NumExperts: 32, TopK: 4, MoEInter: 256, NormTopK: true, SparseStep: 1},
	"tinyllama-1.1b": {Architecture: "LlamaForCausalLM", Vocab: 32000, Hidden: 2048, Layers: 22,
		Heads: 32, KVHeads: 4, HeadDim: 64, Inter: 5632, MaxPos: 2048, RopeTheta: 10000, Eps: 1e-5},
	"qwen2-0.5b": {Architecture: "Qwen2ForCausalLM", Vocab: 151936, Hidden: 896, Layers: 24,
		Heads: 14, KVHeads: 2, HeadDim: 64, Inter: 4864, MaxPos: 32768, RopeTheta: 1e6, Eps: 1e-6,
		TieEmbed: true, QKVBias: true},
	// GPT-2 small (124M), as openai-community/gpt2's config.json.
	"gpt2": {Architecture: GPT2Architecture, Vocab: 50257, Hidden: 768, Layers: 12, Heads: 12, KVHeads: 12,
		HeadDim: 64, Inter: 3072, MaxPos: 1024, Eps: 1e-5, TieEmbed: true, QKVBias: true},
	// Llama-3.2-1B, as meta-llama's config.json: Llama 3's scaled RoPE, tied
	// embeddings.
	"llama-3.2-1b": {Architecture: "LlamaForCausalLM", Vocab: 128256, Hidden: 2048, Layers: 16,
		Heads: 32, KVHeads: 8, HeadDim: 64, Inter: 8192, MaxPos: 131072, RopeTheta: 500000, Eps: 1e-5,
		TieEmbed: true, RopeScaling: &kernels.RoPEScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMax: 8192}},
	// Mixtral-8x7B, as mistralai's config.json: every layer 8 experts of
	// 14336, top-2.
	"mixtral-8x7b": {Architecture: "MixtralForCausalLM", Vocab: 32000, Hidden: 4096, Layers: 32,
		Heads: 32, KVHeads: 8, HeadDim: 128, Inter: 14336, MaxPos: 32768, RopeTheta: 1e6, Eps: 1e-5,
		NumExperts: 8, TopK: 2, MoEInter: 14336, NormTopK: true, SparseStep: 1},
	"devstral-small-22b": {Architecture: "MistralForCausalLM", Vocab: 131072, Hidden: 5120, Layers: 40,
		Heads: 32, KVHeads: 8, HeadDim: 128, Inter: 32768, MaxPos: 131072, RopeTheta: 1e9, Eps: 1e-5},
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	var n []string
	for k := range presets {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// Preset returns a copy of a preset's config.
func Preset(name string) (*Config, error) {
	p, ok := presets[name]
	if !ok {
		return nil, fmt.Errorf("unknown model preset %q (presets: %s)", name, strings.Join(PresetNames(), ", "))
	}
	c := p
	c.Name = name
	c.ModelLayers = c.Layers
	c.MLPOnlyLayers = slices.Clone(p.MLPOnlyLayers)
	return &c, nil
}

// WithLayers returns the config cut to its first n layers; n larger than the
// model, or not positive, is a *LayersError.
func (c *Config) WithLayers(n int) (*Config, error) {
	if n <= 0 || n > c.ModelLayers {
		return nil, &LayersError{Model: c.Name, Layers: n, Max: c.ModelLayers}
	}
	d := *c
	d.Layers = n
	return &d, nil
}

// LayersError is a layer count the model does not have.
type LayersError struct {
	Model       string
	Layers, Max int
}

func (e *LayersError) Error() string {
	return fmt.Sprintf("%s: layers=%d out of range 1..%d", e.Model, e.Layers, e.Max)
}
