package model

import (
	"fmt"
	"strings"

	"github.com/mtlbench/mtlbench/internal/clip"
)

// GPT-2 (GPT2LMHeadModel): learned absolute positions, LayerNorm with bias,
// a plain MLP with GELU (tanh approximation), biases on every projection,
// Conv1D weights stored [in, out], q, k and v in one c_attn, and the LM
// head tied to the token embedding.

// GPT2Architecture is GPT-2's HF architecture name.
const GPT2Architecture = "GPT2LMHeadModel"

// GPT2 reports whether the model is GPT-2 shaped.
func (c *Config) GPT2() bool { return c.Architecture == GPT2Architecture }

// LearnedPositions reports whether positions come from a learned table of
// MaxPos rows (GPT-2) rather than RoPE: a sequence may not outgrow it.
func (c *Config) LearnedPositions() bool { return c.GPT2() }

// gpt2Keys are GPT-2's config.json spellings.
type gpt2Keys struct {
	NEmbd              int      `json:"n_embd"`
	NLayer             int      `json:"n_layer"`
	NHead              int      `json:"n_head"`
	NPositions         int      `json:"n_positions"`
	NInner             *int     `json:"n_inner"`
	LayerNormEpsilon   *float64 `json:"layer_norm_epsilon"`
	ActivationFunction *string  `json:"activation_function"`
	ScaleAttnByLayer   bool     `json:"scale_attn_by_inverse_layer_idx"`
	ScaleAttnWeights   *bool    `json:"scale_attn_weights"`
	AddCrossAttention  bool     `json:"add_cross_attention"`
}

// gpt2Activations are the activation_function values that mean GELU with
// the tanh approximation in transformers (ACT2FN).
var gpt2Activations = []string{"gelu_new", "gelu_pytorch_tanh", "gelu_fast"}

func parseGPT2(name, arch string, h *hfConfig) (*Config, error) {
	g := h.gpt2Keys
	// Validate's errors name each size as the file spells it: GPT-2's own
	// key unless it gave only the common one.
	keys := map[string]string{"intermediate_size": "n_inner"}
	// GPT2Config's attribute_map reads the common spellings into the same
	// fields, so a file may give either.
	for _, a := range []struct {
		key, alias string
		v          *int
		alt        int
	}{
		{"n_embd", "hidden_size", &g.NEmbd, h.HiddenSize},
		{"n_layer", "num_hidden_layers", &g.NLayer, h.NumHiddenLayers},
		{"n_head", "num_attention_heads", &g.NHead, h.NumAttentionHeads},
		{"n_positions", "max_position_embeddings", &g.NPositions, h.MaxPositionEmbeds},
	} {
		keys[a.alias] = a.key
		switch {
		case a.alt == 0:
		case *a.v == 0:
			keys[a.alias] = a.alias
			*a.v = a.alt
		case *a.v != a.alt:
			return nil, fmt.Errorf("%s: %s=%d and %s=%d disagree (GPT-2 reads both as one setting)", name, a.key, *a.v, a.alias, a.alt)
		}
	}
	// Left out: transformers' GPT2Config default. An empty name is no
	// activation ACT2FN has, as any other it lacks.
	act := "gelu_new"
	if g.ActivationFunction != nil {
		act = *g.ActivationFunction
	}
	switch {
	case !contains(gpt2Activations, act):
		return nil, fmt.Errorf("%s: activation_function %s is not supported (GPT-2 runs %s: GELU with the tanh approximation)",
			name, clip.Quote(act), strings.Join(gpt2Activations, ", "))
	case g.ScaleAttnByLayer:
		return nil, fmt.Errorf("%s: scale_attn_by_inverse_layer_idx is not supported", name)
	case g.ScaleAttnWeights != nil && !*g.ScaleAttnWeights:
		return nil, fmt.Errorf("%s: scale_attn_weights=false is not supported", name)
	case g.AddCrossAttention:
		return nil, fmt.Errorf("%s: add_cross_attention is not supported (decoder-only models)", name)
	}
	c := &Config{
		Name: name, Architecture: arch, Vocab: h.VocabSize, Hidden: g.NEmbd,
		Layers: g.NLayer, ModelLayers: g.NLayer, Heads: g.NHead, KVHeads: g.NHead,
		Inter: 4 * g.NEmbd, MaxPos: g.NPositions, Eps: 1e-5, QKVBias: true,
		// transformers ties lm_head to wte unless the config says not to;
		// an untied one is saved as lm_head.weight.
		TieEmbed: h.TieWordEmbeddings == nil || *h.TieWordEmbeddings,
		keys:     keys,
	}
	if g.NHead > 0 {
		c.HeadDim = g.NEmbd / g.NHead
		if g.NEmbd%g.NHead != 0 {
			return nil, fmt.Errorf("%s: n_embd=%d is not a multiple of n_head=%d", name, g.NEmbd, g.NHead)
		}
	}
	// GPT2MLP is n_inner wide whenever it is not None: a 0 or negative
	// width is no MLP mtlbench runs, not 4 × n_embd.
	if g.NInner != nil {
		if *g.NInner <= 0 {
			return nil, fmt.Errorf("%s: n_inner=%d must be positive (leave it out, or null, for 4 × n_embd)", name, *g.NInner)
		}
		c.Inter = *g.NInner
	} else {
		c.derive("intermediate_size", "hidden_size")
	}
	// GPT-2 states neither: both follow from n_embd and n_head.
	c.derive("num_key_value_heads", "num_attention_heads")
	c.derive("head_dim", "hidden_size", "num_attention_heads")
	if g.LayerNormEpsilon != nil {
		var err error
		if c.Eps, err = epsF32(*g.LayerNormEpsilon, "layer_norm_epsilon"); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// GPT-2's tensor names as GPT2LMHeadModel saves them; the hub's original
// checkpoints drop the "transformer." prefix (Checkpoint.Tensor tries both).
const (
	GPT2Prefix    = "transformer."
	GPT2Embed     = GPT2Prefix + "wte.weight"
	GPT2Positions = GPT2Prefix + "wpe.weight"
	GPT2FinalNorm = GPT2Prefix + "ln_f."
)

// mlxGPT2Prefix is where mlx-lm's GPT-2 keeps what transformers keeps
// under GPT2Prefix.
const mlxGPT2Prefix = "model."

// GPT2LayerPrefix is the name prefix of GPT-2 block l.
func GPT2LayerPrefix(l int) string { return fmt.Sprintf("%sh.%d.", GPT2Prefix, l) }

// gpt2Tensors lists GPT-2's tensors. Conv1D weights are listed in the
// [out, in] layout sources hand out, marked Transposed: the checkpoint
// stores them [in, out]. c_attn holds q, k and v, in that order, as rows
// of its [3·hidden, hidden] transpose.
func (c *Config) gpt2Tensors() []TensorSpec {
	conv := func(name string, out, in int) TensorSpec {
		return TensorSpec{Name: name, Shape: []int{out, in}, Matrix: true, FanIn: in, Transposed: true}
	}
	vec := func(name string, n int) TensorSpec { return TensorSpec{Name: name, Shape: []int{n}} }
	h := c.Hidden
	t := []TensorSpec{
		{Name: GPT2Embed, Shape: []int{c.Vocab, h}, Matrix: true, FanIn: 1},
		{Name: GPT2Positions, Shape: []int{c.MaxPos, h}, Matrix: true, FanIn: 1},
	}
	for l := 0; l < c.Layers; l++ {
		p := GPT2LayerPrefix(l)
		t = append(t,
			vec(p+"ln_1.weight", h), vec(p+"ln_1.bias", h),
			conv(p+"attn.c_attn.weight", 3*h, h), vec(p+"attn.c_attn.bias", 3*h),
			conv(p+"attn.c_proj.weight", h, h), vec(p+"attn.c_proj.bias", h),
			vec(p+"ln_2.weight", h), vec(p+"ln_2.bias", h),
			conv(p+"mlp.c_fc.weight", c.Inter, h), vec(p+"mlp.c_fc.bias", c.Inter),
			conv(p+"mlp.c_proj.weight", h, c.Inter), vec(p+"mlp.c_proj.bias", h))
	}
	t = append(t, vec(GPT2FinalNorm+"weight", h), vec(GPT2FinalNorm+"bias", h))
	if !c.TieEmbed {
		// A GGUF file may hold the LM head apart (output.weight), as
		// llama.cpp then reads it; transformers' GPT-2 always ties it.
		t = append(t, TensorSpec{Name: "lm_head.weight", Shape: []int{c.Vocab, h}, Matrix: true, FanIn: h})
	}
	return t
}
