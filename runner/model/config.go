// Package model describes decoder-only transformer architectures: their
// configuration (from an HF config.json or a built-in preset), the tensors a
// checkpoint must hold, and what the model costs in memory.
package model

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/internal/clip"
	"github.com/mtlbench/mtlbench/internal/jsonerr"
	"github.com/mtlbench/mtlbench/kernels"
)

// Config is the normalised shape of a model, whatever spelling it came from.
type Config struct {
	Name         string // preset name or checkpoint folder
	Architecture string // HF architectures[0], e.g. "Qwen3MoeForCausalLM"
	Vocab        int
	Hidden       int
	Layers       int // layers to run (a depth override may cut this)
	ModelLayers  int // layers of the whole model
	Heads        int
	KVHeads      int
	HeadDim      int
	Inter        int // dense MLP width
	MaxPos       int // positions a sequence may reach (0: no limit; the engine refuses longer requests)
	// Window is a sliding attention window (0: none) over which the layers
	// Sliding marks attend: the query at position p to the keys at
	// p-Window < j <= p, as transformers' sliding mask; the others attend
	// to every earlier position (LayerWindow).
	Window int
	// Sliding marks the layers that slide, one entry a model layer (nil
	// without a window).
	Sliding   []bool
	RopeTheta float64
	// RopeScaling rescales the rotary frequencies (rope_scaling: linear,
	// llama3, yarn, which also scales the attention logits) and
	// RopeFreqFactors divides each of them (a GGUF file's rope_freqs); nil:
	// plain RoPE. Rotary gives the frequencies.
	RopeScaling     *kernels.RoPEScaling
	RopeFreqFactors []float32
	Eps             float32
	TieEmbed        bool
	// tieUnset: config.json left tie_word_embeddings out, so a checkpoint
	// with no lm_head.weight ties (OpenDir), as mlx-lm's defaults do.
	tieUnset bool
	// ropeRatio: yarn's factor is the ratio of max_position_embeddings to
	// its original context, the file giving none, so it states no longer
	// context than the original (scaledContext).
	ropeRatio bool
	QKVBias   bool
	// OBias: the attention's output projection has a bias too, as
	// attention_bias gives Llama, Qwen3 and Qwen3-MoE (not Qwen2's q/k/v).
	OBias bool
	// MLPBias: the dense MLP's gate, up and down projections have biases
	// (Llama's mlp_bias).
	MLPBias bool
	QKNorm  bool // Qwen3: RMSNorm over each q and k head before RoPE

	// Mixture of experts (Qwen3-MoE); NumExperts == 0 means dense.
	NumExperts    int
	TopK          int
	MoEInter      int
	NormTopK      bool
	SparseStep    int
	MLPOnlyLayers []int

	// Quant, when set, says which matrices are stored packed (quant.go).
	Quant *QuantScheme

	// EOS are the tokens that end a generation: generation_config.json's
	// eos_token_id, else config.json's (one id or a list) or its class's
	// default, or a GGUF file's tokenizer.ggml.eos_token_id or its
	// vocabulary type's default (ggufEOG); nil when there is none (the
	// presets).
	EOS []int32
	// keys spells config.json's fields as the file the config came from
	// names them, for Validate's errors: a GGUF file's metadata keys (nil:
	// config.json's own).
	keys map[string]string
	// derived are the fields the file left out, computed from the fields
	// listed (GPT-2's n_inner is 4 × n_embd): where one of those is wrong,
	// Validate names it alone, not what follows from it.
	derived map[string][]string
	// Notes are what reading the model's files passed over, one line each
	// (an unreadable generation_config.json), which the commands that load
	// it print as warnings (WarnUnread) and `mtlbench models` as notes.
	Notes []string
}

// IsMoELayer reports whether layer l uses the sparse expert block, following
// Qwen3-MoE's decoder_sparse_step and mlp_only_layers.
func (c *Config) IsMoELayer(l int) bool {
	if c.NumExperts == 0 || slices.Contains(c.MLPOnlyLayers, l) {
		return false
	}
	step := max(c.SparseStep, 1)
	return (l+1)%step == 0
}

// Truncated reports whether fewer layers run than the model has.
func (c *Config) Truncated() bool { return c.Layers < c.ModelLayers }

// archSpec holds what an architecture implies beyond its config fields.
type archSpec struct {
	qkvBias, qkNorm, moe bool
	// attnBias: attention_bias puts a bias on q, k, v and o, as
	// transformers' Llama and Qwen3 attention read it; Mistral, Mixtral and
	// Qwen2 fix their biases whatever it says.
	attnBias bool
	// mlpBias: mlp_bias puts a bias on the dense MLP's gate, up and down
	// projections (LlamaConfig's key).
	mlpBias bool
	gpt2    bool // GPT-2's config keys and layout (gpt2.go)
	// sparse is Mixtral's MoE: every layer's MLP a block_sparse_moe, the
	// experts' intermediate size intermediate_size, the top-k renormalised
	sparse bool
	// slides: attention slides whenever sliding_window is set
	slides bool
	// ministral: a file that holds layer_types is read as MinistralConfig,
	// as AutoConfig reads a mistral one (models/auto/configuration_auto.py):
	// its layers slide as layer_types says (null: every one, where
	// sliding_window is set), and MinistralModel builds the sliding-window
	// mask on every forward, which fails for a null sliding_window.
	ministral bool
	// headsDivide: hidden_size must be a multiple of num_attention_heads,
	// head_dim given or not (LlamaConfig.validate_architecture).
	headsDivide bool
	// modelType is config.json's model_type, by which transformers picks
	// the class when architectures is missing.
	modelType string
	// theta and eps are the config class's rope_theta and rms_norm_eps
	// where the file leaves them out (0: 10000 and 1e-6, as most classes).
	theta float64
	eps   float32
	// window is the config class's sliding_window where the file leaves
	// the key out (an explicit null is none): MistralConfig's 4096, and
	// the Qwen classes', which use only with use_sliding_window.
	window int
	// windowLayers is the Qwen classes' max_window_layers where the file
	// leaves it out: with use_sliding_window, the layers from it on slide
	// (unless layer_types says which).
	windowLayers int
	// windowAll: with use_sliding_window every layer slides, whatever
	// max_window_layers and layer_types say: Qwen3MoeConfig reads neither,
	// and Qwen3MoeModel masks every layer by sliding_window
	// (models/qwen3_moe/configuration_qwen3_moe.py, modeling_qwen3_moe.py).
	windowAll bool
	// kvHeads and headDim are the config class's num_key_value_heads and
	// head_dim where the file leaves the key out (0, or an explicit null:
	// num_attention_heads and hidden_size/num_attention_heads, but for
	// a headDimRead class's head_dim and a kvNoNone class's heads, refused).
	kvHeads, headDim int
	// eos is the config class's eos_token_id where the file leaves the key
	// out (an explicit null is none): Llama's, Mistral's and Mixtral's 2,
	// GPT-2's 50256. generate stops there when no generation_config.json
	// says otherwise.
	eos []int32
	// experts, topK and moeInter are the config class's num_experts (or
	// num_local_experts), num_experts_per_tok and moe_intermediate_size
	// where the file leaves the key out: Qwen3MoeConfig's 128, 8 and 768,
	// MixtralConfig's 8 and 2 (its experts are intermediate_size wide).
	experts, topK, moeInter int
	// kvNoNone: the config class types num_key_value_heads without None
	// (Mistral's, Mixtral's and Qwen3-MoE's int field), which transformers
	// 5 refuses a None for as the config is made, whatever the class would
	// fill in after.
	kvNoNone bool
	// headDimRead: the attention reads head_dim as getattr(config,
	// "head_dim", hidden_size // num_attention_heads), which takes a None
	// as given (the Qwen classes), not as left out.
	headDimRead bool
	// maxPos is the config class's max_position_embeddings (GPT-2's
	// n_positions) where the file leaves the key out; an explicit null is
	// no limit. The engine refuses a request past it (Context).
	maxPos int
	// sizes are the class's sizes where the file leaves the key out.
	sizes classSizes
}

var archs = map[string]archSpec{
	"LlamaForCausalLM":    {attnBias: true, mlpBias: true, headsDivide: true, modelType: "llama", eos: []int32{2}, maxPos: 2048, sizes: classSizes{32000, 4096, 11008, 32, 32}},
	"MistralForCausalLM":  {slides: true, ministral: true, modelType: "mistral", window: 4096, kvHeads: 8, kvNoNone: true, eos: []int32{2}, maxPos: 4096 * 32, sizes: classSizes{32000, 4096, 14336, 32, 32}},
	"MixtralForCausalLM":  {moe: true, sparse: true, slides: true, modelType: "mixtral", theta: 1e6, eps: 1e-5, kvHeads: 8, kvNoNone: true, eos: []int32{2}, experts: 8, topK: 2, maxPos: 4096 * 32, sizes: classSizes{32000, 4096, 14336, 32, 32}},
	"Qwen2ForCausalLM":    {qkvBias: true, headDimRead: true, modelType: "qwen2", kvHeads: 32, window: 4096, windowLayers: 28, maxPos: 32768, sizes: classSizes{151936, 4096, 22016, 32, 32}},
	"Qwen3ForCausalLM":    {qkNorm: true, headDimRead: true, attnBias: true, modelType: "qwen3", kvHeads: 32, headDim: 128, window: 4096, windowLayers: 28, maxPos: 32768, sizes: classSizes{151936, 4096, 22016, 32, 32}},
	"Qwen3MoeForCausalLM": {qkNorm: true, headDimRead: true, kvNoNone: true, moe: true, attnBias: true, modelType: "qwen3_moe", kvHeads: 4, window: 4096, windowAll: true, experts: 128, topK: 8, moeInter: 768, maxPos: 32768, sizes: classSizes{151936, 2048, 6144, 24, 32}},
	// GPT2Config's n_inner is None: 4 × n_embd.
	GPT2Architecture: {gpt2: true, modelType: "gpt2", eos: []int32{50256}, maxPos: 1024, sizes: classSizes{50257, 768, 0, 12, 12}},
}

// classSizes are a config class's vocab_size, hidden_size,
// intermediate_size, num_hidden_layers and num_attention_heads (GPT-2's
// n_embd, n_layer and n_head), which transformers builds the model at where
// config.json leaves the key out (configuration_<model>.py of each class).
type classSizes struct{ vocab, hidden, inter, layers, heads int }

// Architectures lists the supported HF architecture names.
func Architectures() []string {
	var a []string
	for k := range archs {
		a = append(a, k)
	}
	slices.Sort(a)
	return a
}

// modelTypes lists the model_type of each supported architecture.
func modelTypes() []string {
	var t []string
	for _, s := range archs {
		t = append(t, s.modelType)
	}
	slices.Sort(t)
	return t
}

// hfConfig is the union of both config.json spellings: the hub's
// (rope_theta, num_experts) and the one transformers 5 writes
// (rope_parameters.rope_theta, num_local_experts).
type hfConfig struct {
	Architectures     []string `json:"architectures"`
	ModelType         string   `json:"model_type"`
	VocabSize         int      `json:"vocab_size"`
	HiddenSize        int      `json:"hidden_size"`
	NumHiddenLayers   int      `json:"num_hidden_layers"`
	NumAttentionHeads int      `json:"num_attention_heads"`
	NumKeyValueHeads  *int     `json:"num_key_value_heads"`
	HeadDim           *int     `json:"head_dim"`
	IntermediateSize  int      `json:"intermediate_size"`
	MaxPositionEmbeds int      `json:"max_position_embeddings"`
	RMSNormEps        *float64 `json:"rms_norm_eps"`
	RopeTheta         *float64 `json:"rope_theta"`
	// rope_parameters (transformers 5) holds rope_theta and the scaling's
	// fields, rope_scaling (earlier) the scaling's alone.
	RopeParameters      map[string]any `json:"rope_parameters"`
	RopeScaling         map[string]any `json:"rope_scaling"`
	PartialRotaryFactor *float64       `json:"partial_rotary_factor"`
	TieWordEmbeddings   *bool          `json:"tie_word_embeddings"`
	AttentionBias       *bool          `json:"attention_bias"`
	HiddenAct           string         `json:"hidden_act"`
	SlidingWindow       *int           `json:"sliding_window"`
	UseSlidingWindow    *bool          `json:"use_sliding_window"`
	MaxWindowLayers     *int           `json:"max_window_layers"`
	LayerTypes          []string       `json:"layer_types"`

	NumExperts        *int  `json:"num_experts"`
	NumLocalExperts   *int  `json:"num_local_experts"`
	NumExpertsPerTok  *int  `json:"num_experts_per_tok"`
	MoEIntermediate   *int  `json:"moe_intermediate_size"`
	NormTopKProb      *bool `json:"norm_topk_prob"`
	DecoderSparseStep *int  `json:"decoder_sparse_step"`
	MLPOnlyLayers     []int `json:"mlp_only_layers"`
	MLPBias           bool  `json:"mlp_bias"`

	EOSTokenID json.RawMessage `json:"eos_token_id"`

	gpt2Keys
}

// ParseEOS reads an eos_token_id as config.json and generation_config.json
// write it: one id, a list of ids, or null (none).
func ParseEOS(raw json.RawMessage) ([]int32, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int64
	if err := json.Unmarshal(raw, &one); err == nil {
		raw = json.RawMessage("[" + string(raw) + "]")
	}
	var ids []int64
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, fmt.Errorf("%s: want a token id or a list of them", raw)
	}
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		// A negative id, or one past the vocabulary, is kept: generate
		// stops at no sampled token then, as transformers' does (it warns
		// of a negative one: negativeEOS). The engine only compares
		// sampled tokens with them (docs/architecture.md).
		if id < math.MinInt32 || id > math.MaxInt32 {
			return nil, fmt.Errorf("%d is not a token id", id)
		}
		out = append(out, int32(id))
	}
	return out, nil
}

// negativeEOS notes the negative ids among eos, read from file: no
// sampled token is one, so generation does not stop there (as transformers'
// generate warns).
func negativeEOS(file string, eos []int32) []string {
	var notes []string
	for _, id := range eos {
		if id < 0 {
			notes = append(notes, fmt.Sprintf("%s: eos_token_id %d is no token id: generation does not stop at it", file, id))
		}
	}
	return notes
}

// ParseHFConfig reads an HF config.json. name labels errors (usually the
// file path).
func ParseHFConfig(name string, data []byte) (*Config, error) {
	if err := jsonerr.UTF8(data); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// Read as transformers reads it, with Python's json (jsonerr.Python):
	// the last of a key given twice, keys as spelled, a NaN no field reads
	// passed over.
	var h hfConfig
	read := jsonerr.Python(data, &h)
	read = passOver(read, classOf(read))
	if err := json.Unmarshal(read, &h); err != nil {
		return nil, fmt.Errorf("%s: %w", name, jsonerr.ExplainFile(err, data))
	}
	// transformers' AutoModelForCausalLM picks the class by model_type
	// (AutoConfig's CONFIG_MAPPING, then MODEL_FOR_CAUSAL_LM_MAPPING, in
	// models/auto/) and reads no architectures, so a model_type of a class
	// mtlbench runs decides; architectures is read where it names none (a
	// file without one, as some copies of GPT-2's have it).
	arch := ""
	for a, spec := range archs {
		if h.ModelType != "" && spec.modelType == h.ModelType {
			arch = a
		}
	}
	if arch == "" && len(h.Architectures) > 0 {
		arch = h.Architectures[0]
	}
	if arch == "" {
		return nil, fmt.Errorf("%s: no \"architectures\" field, and model_type %s is none of %s: cannot tell which model this is",
			name, clip.Quote(h.ModelType), strings.Join(modelTypes(), ", "))
	}
	spec, ok := archs[arch]
	if !ok {
		return nil, fmt.Errorf("%s: unknown architecture %s, and model_type %s is none of %s (supported: %s)", name, clip.Quote(arch), clip.Quote(h.ModelType),
			strings.Join(modelTypes(), ", "), strings.Join(Architectures(), ", "))
	}
	eos, err := ParseEOS(h.EOSTokenID)
	if err != nil {
		return nil, fmt.Errorf("%s: eos_token_id: %w", name, err)
	}
	// A key left out takes the config class's default; an explicit null
	// is none (sliding_window, eos_token_id) or derived
	// (num_key_value_heads, head_dim), as the classes read None.
	var keys map[string]json.RawMessage
	json.Unmarshal(read, &keys)
	absent := func(key string) bool { _, given := keys[key]; return !given }
	if absent("eos_token_id") {
		eos = slices.Clone(spec.eos)
	}
	if absent("max_position_embeddings") && (!spec.gpt2 || absent("n_positions")) {
		h.MaxPositionEmbeds = spec.maxPos
		if spec.gpt2 {
			h.NPositions = spec.maxPos
		}
	}
	var filled []string // said with a Validate error, which would name values the file lacks
	// A size left out is the class's: transformers builds the model at it
	// (and the checkpoint's tensors must have its shape). GPT-2's keys are
	// either spelling (GPT2Config's attribute_map).
	for _, d := range []struct {
		key, gpt2Key string
		v            *int
		def          int
	}{
		{"vocab_size", "", &h.VocabSize, spec.sizes.vocab},
		{"hidden_size", "n_embd", &h.HiddenSize, spec.sizes.hidden},
		{"intermediate_size", "", &h.IntermediateSize, spec.sizes.inter},
		{"num_hidden_layers", "n_layer", &h.NumHiddenLayers, spec.sizes.layers},
		{"num_attention_heads", "n_head", &h.NumAttentionHeads, spec.sizes.heads},
	} {
		if d.def > 0 && absent(d.key) && (!spec.gpt2 || absent(d.gpt2Key)) {
			*d.v = d.def
			key := d.key
			if spec.gpt2 {
				key = d.gpt2Key
			}
			filled = append(filled, fmt.Sprintf("%s=%d", key, d.def))
		}
	}
	for _, n := range nullRefused {
		if v, ok := keys[n.key]; ok && string(bytes.TrimSpace(v)) == "null" && n.reads(spec) {
			return nil, nullError(name, data, arch, n.key, n.want, n.def(spec))
		}
	}
	for _, f := range floatFields {
		if v, ok := keys[f.key]; ok && f.reads(spec) && isJSONInt(v) {
			return nil, wholeForFloat(name, data, f.key, v)
		}
	}
	if spec.gpt2 {
		c, err := parseGPT2(name, arch, &h)
		if c != nil {
			c.EOS = eos
		}
		if err != nil && len(filled) > 0 {
			err = fmt.Errorf("%w (left out of the file, taken as %s's default: %s)", err, arch, strings.Join(filled, ", "))
		}
		return c, err
	}
	c := &Config{
		Name: name, Architecture: arch, Vocab: h.VocabSize, Hidden: h.HiddenSize,
		Layers: h.NumHiddenLayers, ModelLayers: h.NumHiddenLayers, Heads: h.NumAttentionHeads,
		Inter: h.IntermediateSize, MaxPos: h.MaxPositionEmbeds, Eps: 1e-6, RopeTheta: 10000,
		QKVBias: spec.qkvBias, QKNorm: spec.qkNorm, EOS: eos,
	}
	if spec.theta > 0 {
		c.RopeTheta = spec.theta
	}
	if spec.eps > 0 {
		c.Eps = spec.eps
	}
	if spec.window > 0 && h.SlidingWindow == nil && absent("sliding_window") {
		w := spec.window
		h.SlidingWindow = &w
	}
	if spec.kvHeads > 0 && absent("num_key_value_heads") {
		kv := spec.kvHeads
		h.NumKeyValueHeads = &kv
		filled = append(filled, fmt.Sprintf("num_key_value_heads=%d", kv))
	}
	if spec.headDim > 0 && absent("head_dim") {
		hd := spec.headDim
		h.HeadDim = &hd
		filled = append(filled, fmt.Sprintf("head_dim=%d", hd))
	}
	c.KVHeads = c.Heads
	if h.NumKeyValueHeads != nil {
		c.KVHeads = *h.NumKeyValueHeads
	} else {
		c.derive("num_key_value_heads", "num_attention_heads")
	}
	if c.Heads > 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	if h.HeadDim == nil {
		c.derive("head_dim", "hidden_size", "num_attention_heads")
	}
	// The classes size q, k and v by a head_dim that is not None, so a 0
	// is no head mtlbench runs, not the hidden size over the heads.
	if h.HeadDim != nil && *h.HeadDim <= 0 {
		return nil, fmt.Errorf("%s: head_dim=%d must be positive (leave it out for %s's default)", name, *h.HeadDim, arch)
	}
	if h.HeadDim != nil {
		c.HeadDim = *h.HeadDim
	}
	if h.RMSNormEps != nil {
		if c.Eps, err = epsF32(*h.RMSNormEps, "rms_norm_eps"); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if h.RopeTheta != nil {
		c.RopeTheta = *h.RopeTheta
	}
	// transformers 5 takes a non-empty rope_scaling in place of
	// rope_parameters, which it then ignores, theta included
	// (convert_rope_params_to_dict: `rope_scaling or rope_parameters`, then
	// the chosen object's rope_theta, the top level's, the class's).
	scaling, field := h.RopeParameters, "rope_parameters"
	if len(h.RopeScaling) > 0 {
		scaling, field = h.RopeScaling, "rope_scaling"
	}
	if err := ropeKeysKnown(scaling); err != nil {
		return nil, fmt.Errorf("%s: %s: %v", name, field, err)
	}
	if err := ropeTypeGiven(scaling); err != nil {
		return nil, fmt.Errorf("%s: %s: %v", name, field, err)
	}
	if v, ok := scaling["partial_rotary_factor"]; ok && v != nil {
		if f, isNum := v.(float64); !isNum || f != 1 {
			return nil, fmt.Errorf("%s: %s.partial_rotary_factor=%s is not supported (RoPE over whole heads only)", name, field, jsonText(v))
		}
	}
	if v, ok := scaling["rope_theta"]; ok {
		f, isNum := v.(float64)
		if !isNum {
			return nil, fmt.Errorf("%s: %s.rope_theta %s is not a number", name, field, jsonText(v))
		}
		c.RopeTheta = f
		c.setKey("rope_theta", field+".rope_theta")
	}
	sc, err := parseRopeScaling(scaling, h.MaxPositionEmbeds)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %v", name, field, err)
	}
	c.RopeScaling = sc
	if sc != nil {
		f, given := scaling["factor"]
		c.ropeRatio = sc.Type == "yarn" && (!given || f == nil || f == 0.0)
		// Validate's errors name the scaled context's fields as the file
		// spells them; yarn's original context falls back on the positions.
		c.setKey("rope_scaling.factor", field+".factor")
		if v, ok := scaling["original_max_position_embeddings"]; ok && v != nil {
			c.setKey("original_max_position_embeddings", field+".original_max_position_embeddings")
		} else {
			c.setKey("original_max_position_embeddings", "max_position_embeddings")
		}
	}
	if field == "rope_scaling" && len(h.RopeParameters) > 0 {
		c.Notes = append(c.Notes, passedOverRope(name, h.RopeParameters, c.RopeTheta))
	}
	if f := h.PartialRotaryFactor; f != nil && *f != 1 {
		return nil, fmt.Errorf("%s: partial_rotary_factor=%g is not supported (RoPE over whole heads only)", name, *f)
	}
	// As transformers looks it up (ACT2FN, activations.py): "swish" is
	// SiLU's other name there, and a name it has not, "" too, no model.
	if !absent("hidden_act") && !slices.Contains(siluActivations, h.HiddenAct) {
		return nil, fmt.Errorf("%s: hidden_act %s is not supported (%s: SiLU, the only activation these models run)", name, clip.Quote(h.HiddenAct), strings.Join(siluActivations, " or "))
	}
	// transformers reads mlp_bias in LlamaConfig alone; other classes keep
	// the key and build their MLPs without biases, as here.
	c.MLPBias = h.MLPBias && spec.mlpBias
	// A sliding window is attention over the last sliding_window tokens,
	// on the layers that slide (Window, Sliding). Mistral and Mixtral slide
	// every layer whenever sliding_window is set (slides), a Mistral file
	// read as Ministral the layers its layer_types names. The Qwen classes
	// drop it unless use_sliding_window; Qwen2 and Qwen3 then slide only the
	// layers layer_types names, or else those from max_window_layers on (a
	// model none of whose layers slides has no window), Qwen3-MoE every
	// layer (windowAll).
	if h.SlidingWindow != nil && *h.SlidingWindow < 0 {
		return nil, fmt.Errorf("%s: sliding_window=%d must not be negative (null or 0: none)", name, *h.SlidingWindow)
	}
	// Every class but GPT-2's refuses a layer_types not of one attention
	// type a layer (transformers' layer_type_validation), whether or not it
	// slides by it: read as given, a short or misspelt list would drop the
	// window the file asks for.
	if !spec.gpt2 && h.LayerTypes != nil {
		if len(h.LayerTypes) != h.NumHiddenLayers {
			return nil, fmt.Errorf("%s: layer_types has %d entries for num_hidden_layers=%d: it must give one a layer", name, len(h.LayerTypes), h.NumHiddenLayers)
		}
		for i, t := range h.LayerTypes {
			if t != "full_attention" && t != "sliding_attention" {
				return nil, fmt.Errorf("%s: layer_types[%d] is %s, where %s's layers are full_attention or sliding_attention", name, i, jsonText(t), arch)
			}
		}
	}
	if spec.ministral && !absent("layer_types") && h.SlidingWindow == nil {
		return nil, fmt.Errorf("%s: layer_types with a null sliding_window: transformers reads a %s config that holds layer_types as Ministral, which builds the sliding-window mask whatever the layers (leave layer_types out, or give sliding_window)", name, arch)
	}
	if h.SlidingWindow != nil && *h.SlidingWindow > 0 {
		use := h.UseSlidingWindow != nil && *h.UseSlidingWindow
		from := spec.windowLayers
		if h.MaxWindowLayers != nil {
			from = *h.MaxWindowLayers
		}
		typed := func(i int) bool { return i < len(h.LayerTypes) && h.LayerTypes[i] == "sliding_attention" }
		// Validate refuses more than MaxLayers layers; none is sized from
		// the count before it.
		slides := make([]bool, min(max(h.NumHiddenLayers, 0), MaxLayers+1))
		for i := range slides {
			switch {
			case spec.ministral && h.LayerTypes != nil:
				slides[i] = typed(i)
			case spec.slides, use && spec.windowAll:
				slides[i] = true
			case use && h.LayerTypes != nil:
				slides[i] = typed(i)
			case use:
				slides[i] = i >= from
			}
		}
		if slices.Contains(slides, true) {
			c.Window, c.Sliding = *h.SlidingWindow, slides
		}
	}
	if h.AttentionBias != nil && *h.AttentionBias && spec.attnBias {
		c.QKVBias, c.OBias = true, true
	}
	// transformers' config classes of these architectures default to an LM
	// head of its own (tie_word_embeddings=False), so a checkpoint's
	// lm_head.weight is read where the field is missing.
	c.TieEmbed, c.tieUnset = false, h.TieWordEmbeddings == nil
	if h.TieWordEmbeddings != nil {
		c.TieEmbed = *h.TieWordEmbeddings
	}
	if spec.moe {
		// A count left out is the class's (attribute_map reads either
		// spelling of the experts' as one); an explicit null is no count
		// at all, which the classes cannot build a model from.
		count := func(v *int, key string, def int) (int, error) {
			switch {
			case v != nil:
				return *v, nil
			case !absent(key):
				return 0, nullError(name, data, arch, key, "a count", def)
			}
			filled = append(filled, fmt.Sprintf("%s=%d", key, def))
			return def, nil
		}
		expertsKey, experts := "num_experts", h.NumExperts
		switch {
		case h.NumExperts != nil:
		case h.NumLocalExperts != nil, absent("num_experts") && (spec.sparse || !absent("num_local_experts")):
			expertsKey, experts = "num_local_experts", h.NumLocalExperts
		}
		if c.NumExperts, err = count(experts, expertsKey, spec.experts); err != nil {
			return nil, err
		}
		// Validate's errors name the count as the file spells it.
		c.setKey("num_experts", expertsKey)
		if c.TopK, err = count(h.NumExpertsPerTok, "num_experts_per_tok", spec.topK); err != nil {
			return nil, err
		}
		if !spec.sparse {
			if c.MoEInter, err = count(h.MoEIntermediate, "moe_intermediate_size", spec.moeInter); err != nil {
				return nil, err
			}
		}
		c.NormTopK = h.NormTopKProb != nil && *h.NormTopKProb
		c.SparseStep = 1
		if h.DecoderSparseStep != nil {
			c.SparseStep = *h.DecoderSparseStep
		}
		c.MLPOnlyLayers = layerSet(h.MLPOnlyLayers, h.NumHiddenLayers)
		if spec.sparse && c.NumExperts == 0 {
			// Every Mixtral layer routes to its experts (Qwen3-MoE's would
			// be dense): transformers' top-k of none fails as it runs.
			return nil, fmt.Errorf("%s: %s is 0: every %s layer is a mixture of experts, so it must be positive", name, expertsKey, arch)
		}
		if spec.sparse {
			// transformers' MixtralSparseMoeBlock: softmax over the experts,
			// top-k, the k weights divided by their sum.
			c.MoEInter, c.NormTopK, c.SparseStep, c.MLPOnlyLayers = h.IntermediateSize, true, 1, nil
		}
	}
	err = c.Validate()
	if err == nil && spec.headsDivide && c.Hidden%c.Heads != 0 {
		err = fmt.Errorf("hidden_size=%d is not a multiple of num_attention_heads=%d, which %s's config requires whatever head_dim says", c.Hidden, c.Heads, arch)
	}
	if err != nil {
		if len(filled) > 0 {
			return nil, fmt.Errorf("%s: %w (left out of the file, taken as %s's default: %s)", name, err, arch, strings.Join(filled, ", "))
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// classKeys are the keys only some classes read, and which: transformers
// keeps such a key of another class as it is, unchecked, so its type is
// not checked here either (Qwen3-MoE's max_window_layers, Mistral's
// attention_bias). Keys not listed are read by every class.
var classKeys = map[string]func(archSpec) bool{
	"sliding_window":      func(s archSpec) bool { return s.slides || s.window > 0 },
	"use_sliding_window":  func(s archSpec) bool { return s.windowLayers > 0 || s.windowAll },
	"max_window_layers":   func(s archSpec) bool { return s.windowLayers > 0 },
	"attention_bias":      func(s archSpec) bool { return s.attnBias },
	"mlp_bias":            func(s archSpec) bool { return s.mlpBias },
	"num_experts":         func(s archSpec) bool { return s.moe },
	"num_local_experts":   func(s archSpec) bool { return s.moe },
	"num_experts_per_tok": func(s archSpec) bool { return s.moe },
	// Mixtral's experts are intermediate_size wide, and all its layers
	// sparse, its top k always renormalised.
	"moe_intermediate_size": qwenMoE,
	"norm_topk_prob":        qwenMoE,
	"decoder_sparse_step":   qwenMoE,
	"mlp_only_layers":       qwenMoE,
	// GPT-2's own spellings (gpt2Keys).
	"n_embd":                          gpt2Arch,
	"n_layer":                         gpt2Arch,
	"n_head":                          gpt2Arch,
	"n_positions":                     gpt2Arch,
	"n_inner":                         gpt2Arch,
	"layer_norm_epsilon":              gpt2Arch,
	"activation_function":             gpt2Arch,
	"scale_attn_by_inverse_layer_idx": gpt2Arch,
	"scale_attn_weights":              gpt2Arch,
	"add_cross_attention":             gpt2Arch,
}

func qwenMoE(s archSpec) bool { return s.moe && !s.sparse }

// classOf is the class data's model_type or architectures name, as
// ParseHFConfig picks it, or nil where they name none (or are of the wrong
// type: the decoder then says so).
func classOf(data []byte) *archSpec {
	var id struct {
		Architectures []string `json:"architectures"`
		ModelType     string   `json:"model_type"`
	}
	if json.Unmarshal(data, &id) != nil {
		return nil
	}
	for _, spec := range archs {
		if id.ModelType != "" && spec.modelType == id.ModelType {
			return &spec
		}
	}
	if len(id.Architectures) > 0 {
		if spec, ok := archs[id.Architectures[0]]; ok {
			return &spec
		}
	}
	return nil
}

// passOver is data (one JSON object) with the top-level keys of classKeys
// that spec does not read made spaces, so that they name no field and
// their values are not decoded; offsets stay data's.
func passOver(data []byte, spec *archSpec) []byte {
	if spec == nil {
		return data
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return data
	}
	out := data
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return data
		}
		k, _ := t.(string)
		end := int(dec.InputOffset())
		if reads, ok := classKeys[k]; ok && !reads(*spec) {
			start := end - len(k) - 1
			if start > 0 && string(data[start-1:end]) == `"`+k+`"` {
				if &out[0] == &data[0] {
					out = bytes.Clone(data)
				}
				copy(out[start:end-1], bytes.Repeat([]byte(" "), len(k)))
			}
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return data
		}
	}
	return out
}

// nullRefused are the keys whose null transformers reads as None and builds
// or runs no model from: a size it makes a layer of, a count it loops or
// divides by, an epsilon it adds, an activation it looks up by name; and
// the flags and counts whose field the class types without None, which
// transformers 5 refuses a None for as the config is made (@strict,
// huggingface_hub's type check of each field). The null of any other key
// is read as its class reads None: the default, or none
// (docs/architecture.md, "Where input is checked").
var nullRefused = []struct {
	key, want string
	reads     func(archSpec) bool // the classes that read the key
	def       func(archSpec) any  // the class's value where the key is left out
}{
	{"vocab_size", "a whole number", allArchs, func(s archSpec) any { return s.sizes.vocab }},
	// GPT2Config's attribute_map reads hidden_size, num_hidden_layers,
	// num_attention_heads and max_position_embeddings as its n_ keys.
	{"hidden_size", "a whole number", allArchs, func(s archSpec) any { return s.sizes.hidden }},
	{"n_embd", "a whole number", gpt2Arch, func(s archSpec) any { return s.sizes.hidden }},
	{"num_hidden_layers", "a whole number", allArchs, func(s archSpec) any { return s.sizes.layers }},
	{"n_layer", "a whole number", gpt2Arch, func(s archSpec) any { return s.sizes.layers }},
	{"num_attention_heads", "a whole number", allArchs, func(s archSpec) any { return s.sizes.heads }},
	{"n_head", "a whole number", gpt2Arch, func(s archSpec) any { return s.sizes.heads }},
	// Qwen3-MoE sizes only its dense layers by it, but types it an int as
	// the others do; GPT-2 reads n_inner.
	{"intermediate_size", "a whole number", notGPT2, func(s archSpec) any { return s.sizes.inter }},
	// GPT-2's position embedding is a table of n_positions rows; every
	// class types max_position_embeddings an int, refusing a None.
	{"max_position_embeddings", "a whole number", allArchs, func(s archSpec) any { return s.maxPos }},
	{"n_positions", "a whole number", gpt2Arch, func(s archSpec) any { return s.maxPos }},
	// The RoPE base: a None reaches the frequencies' power.
	{"rope_theta", "a number", notGPT2, func(s archSpec) any { return cmp.Or(s.theta, 10000) }},
	{"num_key_value_heads", "a whole number", func(s archSpec) bool { return s.kvNoNone }, func(s archSpec) any { return s.kvHeads }},
	{"head_dim", "a whole number", func(s archSpec) bool { return s.headDimRead }, func(s archSpec) any {
		if s.headDim > 0 {
			return s.headDim
		}
		return "hidden_size / num_attention_heads"
	}},
	{"rms_norm_eps", "a number", notGPT2, func(s archSpec) any { return cmp.Or(s.eps, 1e-6) }},
	{"hidden_act", "an activation's name", notGPT2, func(archSpec) any { return "silu" }},
	// The Qwen MoE classes divide by it; Mixtral's reads no such key.
	{"decoder_sparse_step", "a count", func(s archSpec) bool { return s.moe && !s.sparse }, func(archSpec) any { return 1 }},
	{"layer_norm_epsilon", "a number", gpt2Arch, func(archSpec) any { return float32(1e-5) }},
	{"activation_function", "an activation's name", gpt2Arch, func(archSpec) any { return "gelu_new" }},
	// Flags and counts typed without None (the classes' bool and int
	// fields): Llama's, Qwen3's and Qwen3-MoE's attention_bias, Llama's
	// mlp_bias, Qwen3-MoE's norm_topk_prob, the Qwen classes'
	// use_sliding_window, Qwen2's and Qwen3's max_window_layers and every
	// class's tie_word_embeddings.
	{"attention_bias", "a boolean, true or false", func(s archSpec) bool { return s.attnBias }, func(archSpec) any { return false }},
	{"mlp_bias", "a boolean, true or false", func(s archSpec) bool { return s.mlpBias }, func(archSpec) any { return false }},
	{"norm_topk_prob", "a boolean, true or false", func(s archSpec) bool { return s.moe && !s.sparse }, func(archSpec) any { return false }},
	{"use_sliding_window", "a boolean, true or false", func(s archSpec) bool { return s.windowLayers > 0 || s.windowAll }, func(archSpec) any { return false }},
	{"max_window_layers", "a whole number", func(s archSpec) bool { return s.windowLayers > 0 }, func(s archSpec) any { return s.windowLayers }},
	{"tie_word_embeddings", "a boolean, true or false", allArchs, func(s archSpec) any { return s.gpt2 }},
}

// floatFields are the keys transformers 5's @strict config classes type
// float, whose check refuses a JSON whole number (1, not 1.0: Python's
// json reads it as an int). Other numbers mtlbench reads (rope_theta) are
// no such field and take either.
var floatFields = []struct {
	key   string
	reads func(archSpec) bool
}{
	{"rms_norm_eps", notGPT2},
	{"layer_norm_epsilon", gpt2Arch},
}

// isJSONInt reports whether v is a JSON number Python's json reads as an
// int: no fraction and no exponent.
func isJSONInt(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9') && !bytes.ContainsAny(v, ".eE")
}

// wholeForFloat refuses a whole number v given for the float field key.
func wholeForFloat(name string, data []byte, key string, v json.RawMessage) error {
	at := jsonerr.KeyAt(data, key)
	if at != "" {
		at = " (" + at + ")"
	}
	v = bytes.TrimSpace(v)
	return fmt.Errorf("%s: %s is a JSON whole number (%s)%s: want a number with a fraction or exponent (%s.0), as transformers' float field takes", name, key, v, at, v)
}

// siluActivations are the hidden_act values transformers' ACT2FN maps to
// SiLU: "silu" and its older name "swish".
var siluActivations = []string{"silu", "swish"}

func allArchs(archSpec) bool   { return true }
func gpt2Arch(s archSpec) bool { return s.gpt2 }
func notGPT2(s archSpec) bool  { return !s.gpt2 }

// nullError refuses key's null in the file name (data its text), naming
// where it is, what the key takes and the class's default.
func nullError(name string, data []byte, arch, key, want string, def any) error {
	at := jsonerr.KeyAt(data, key)
	if at != "" {
		at = " (" + at + ")"
	}
	return fmt.Errorf("%s: %s is null%s: want %s (leave it out for %s's default, %v)", name, key, at, want, arch, def)
}

// key is a config.json field as the file the config came from names it
// (keys), so that an error points at what to fix there.
func (c *Config) key(field string) string {
	if k, ok := c.keys[field]; ok {
		return k
	}
	return field
}

// setKey records that the file spells field as key (keys).
func (c *Config) setKey(field, key string) {
	if c.keys == nil {
		c.keys = map[string]string{}
	}
	c.keys[field] = key
}

// derive records that field was computed from the fields from (derived).
func (c *Config) derive(field string, from ...string) {
	if c.derived == nil {
		c.derived = map[string][]string{}
	}
	c.derived[field] = from
}

// Validate checks that the shape is one the engine can run.
func (c *Config) Validate() error {
	var errs []string
	bad := map[string]bool{}
	pos := func(v int, field string) {
		if bad[field] {
			return // named already
		}
		for _, f := range c.derived[field] {
			if bad[f] {
				return // the field it follows from is named already
			}
		}
		switch {
		case v == 0:
			errs = append(errs, fmt.Sprintf("%s is missing or 0: it must be positive", c.key(field)))
		case v < 0:
			errs = append(errs, fmt.Sprintf("%s must be positive, got %d", c.key(field), v))
		default:
			return
		}
		bad[field] = true
	}
	pos(c.Vocab, "vocab_size")
	pos(c.Hidden, "hidden_size")
	pos(c.Layers, "num_hidden_layers")
	pos(c.Heads, "num_attention_heads")
	pos(c.KVHeads, "num_key_value_heads")
	// A head size the file leaves out is the hidden size over the heads
	// (transformers' and llama.cpp's floor division): its errors name the
	// keys it is taken from, not one the file does not hold.
	headDim := func(v int) string { return fmt.Sprintf("%s=%d", c.key("head_dim"), v) }
	if from := c.derived["head_dim"]; len(from) == 2 && !bad[from[0]] && !bad[from[1]] {
		headDim = func(v int) string {
			return fmt.Sprintf("the head size %d (%s=%d / %s=%d, with no %s)", v, c.key(from[0]), c.Hidden, c.key(from[1]), c.Heads, c.key("head_dim"))
		}
		if c.HeadDim <= 0 {
			errs = append(errs, headDim(c.HeadDim)+" must be positive")
			bad["head_dim"] = true
		}
	}
	pos(c.HeadDim, "head_dim")
	if c.Heads > 0 && c.KVHeads > 0 && c.Heads%c.KVHeads != 0 {
		errs = append(errs, fmt.Sprintf("%s=%d is not a multiple of %s=%d", c.key("num_attention_heads"), c.Heads, c.key("num_key_value_heads"), c.KVHeads))
	}
	if c.HeadDim%2 != 0 && !c.LearnedPositions() {
		errs = append(errs, headDim(c.HeadDim)+" must be even for RoPE")
	}
	// GPT-2's fused c_attn is three hidden-wide blocks, split into the heads:
	// a GGUF file states heads and head size apart, so they must agree.
	if c.GPT2() && c.Heads > 0 && (c.Heads*c.HeadDim != c.Hidden || c.KVHeads != c.Heads) {
		errs = append(errs, fmt.Sprintf("%s=%d (key/value heads %d) of %s=%d do not make %s=%d, as GPT-2's attention needs",
			c.key("num_attention_heads"), c.Heads, c.KVHeads, c.key("head_dim"), c.HeadDim, c.key("hidden_size"), c.Hidden))
	}
	if c.LearnedPositions() {
		pos(c.MaxPos, "n_positions")
	}
	dense := false
	for l := 0; l < min(c.Layers, MaxLayers+1); l++ {
		dense = dense || !c.IsMoELayer(l)
	}
	if dense {
		pos(c.Inter, "intermediate_size")
	}
	// Any non-zero count makes layers MoE (IsMoELayer), so a negative one
	// is refused here rather than sized from.
	if c.NumExperts != 0 {
		// transformers divides by it: (layer + 1) % decoder_sparse_step.
		pos(c.SparseStep, "decoder_sparse_step")
		pos(c.NumExperts, "num_experts")
		pos(c.MoEInter, "moe_intermediate_size")
		if c.TopK <= 0 || c.TopK > c.NumExperts {
			errs = append(errs, fmt.Sprintf("%s=%d must be in 1..%s=%d", c.key("num_experts_per_tok"), c.TopK, c.key("num_experts"), c.NumExperts))
		}
	}
	// Limits far above any real model, so that an absurd config is
	// rejected here, by arithmetic, before anything is sized from it.
	most := func(v, limit int, field string) {
		if v > limit {
			errs = append(errs, fmt.Sprintf("%s=%d is beyond what mtlbench runs (at most %d)", field, v, limit))
		}
	}
	most(c.Vocab, MaxVocab, c.key("vocab_size"))
	most(c.Hidden, MaxHidden, c.key("hidden_size"))
	most(c.ModelLayers, MaxLayers, c.key("num_hidden_layers"))
	// A truncated model runs fewer layers than it has: one count to check.
	if c.Layers > c.ModelLayers {
		most(c.Layers, MaxLayers, "layers")
	}
	most(c.Heads, MaxHeads, c.key("num_attention_heads"))
	most(c.KVHeads, MaxHeads, c.key("num_key_value_heads"))
	most(c.HeadDim, MaxHeadDim, c.key("head_dim"))
	most(c.Inter, MaxIntermediate, c.key("intermediate_size"))
	most(c.MoEInter, MaxIntermediate, c.key("moe_intermediate_size"))
	most(c.NumExperts, MaxExperts, c.key("num_experts"))
	most(c.MaxPos, MaxPositions, c.key("max_position_embeddings"))
	if c.MaxPos < 0 {
		errs = append(errs, fmt.Sprintf("%s=%d must not be negative (0: no limit)", c.key("max_position_embeddings"), c.MaxPos))
	}
	// The scaled context bounds requests as max_position_embeddings does,
	// so it meets the same limit, which keeps every position an int32.
	if n, what := c.scaledContext(); c.RopeScaling != nil && c.RopeScaling.Check() == nil && n > MaxPositions {
		errs = append(errs, fmt.Sprintf("%s=%g states a context of %s, beyond what mtlbench runs (at most %d)", c.key("rope_scaling.factor"), c.RopeScaling.Factor, what, MaxPositions))
	}
	if len(errs) == 0 {
		if m, v := c.elems(); m+v > MaxParams {
			errs = append(errs, fmt.Sprintf("the config describes %.3g parameters, beyond what mtlbench runs (%.3g)", m+v, float64(MaxParams)))
		}
		// Weight sizes and loading list every tensor: bound the list.
		if n := float64(c.Layers) * float64(3*c.NumExperts+16); n > MaxTensors {
			errs = append(errs, fmt.Sprintf("%s=%d with %s=%d make %.3g tensors, beyond what mtlbench runs (%d)", c.key("num_hidden_layers"), c.Layers, c.key("num_experts"), c.NumExperts, n, MaxTensors))
		}
	}
	if !(c.Eps > 0) || math.IsInf(float64(c.Eps), 0) {
		field := c.key("rms_norm_eps")
		if c.GPT2() {
			field = c.key("layer_norm_epsilon")
		}
		errs = append(errs, fmt.Sprintf("%s=%g must be a finite number > 0", field, c.Eps))
	}
	if !c.LearnedPositions() && (!(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0)) {
		errs = append(errs, fmt.Sprintf("%s=%g must be a finite number > 0", c.key("rope_theta"), c.RopeTheta))
	}
	if c.RopeScaling != nil {
		if err := c.RopeScaling.Check(); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", c.key("rope_scaling"), err))
		}
	}
	if c.RopeFreqFactors != nil {
		if len(c.RopeFreqFactors) != c.HeadDim/2 {
			errs = append(errs, fmt.Sprintf("%d rope frequency factors for heads of %d (want %d)", len(c.RopeFreqFactors), c.HeadDim, c.HeadDim/2))
		}
		for i, f := range c.RopeFreqFactors {
			if !(f > 0) || math.IsInf(float64(f), 0) {
				errs = append(errs, fmt.Sprintf("rope frequency factor %d is %g: each must be a finite number > 0", i, f))
				break
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Limits of a config's sizes (Validate): far above any published model.
const (
	MaxVocab        = 1 << 24
	MaxHidden       = 1 << 17
	MaxLayers       = 1 << 12
	MaxHeads        = 1 << 12
	MaxHeadDim      = 1 << 12
	MaxIntermediate = 1 << 20
	MaxExperts      = 1 << 14
	MaxPositions    = 1 << 24
	MaxParams       = 1 << 42 // 4.4e12 parameters
	MaxTensors      = 1 << 22
)

// Rotary is the model's rotary embedding as every backend runs it: the
// frequencies of Theta, rescaled by RopeScaling and divided by
// RopeFreqFactors (docs/architecture.md, "Rotary embeddings").
func (c *Config) Rotary() kernels.Rotary {
	r := kernels.Rotary{Theta: c.RopeTheta}
	if c.RopeScaling == nil && c.RopeFreqFactors == nil {
		return r.Keyed(c.HeadDim)
	}
	f := r.InvFreq(c.HeadDim)
	if c.RopeScaling != nil {
		f = c.RopeScaling.Scaled(c.HeadDim, c.RopeTheta)
	}
	for i, d := range c.RopeFreqFactors {
		if i < len(f) {
			f[i] /= d
		}
	}
	r.Freqs = f
	return r.Keyed(c.HeadDim)
}

// passedOverRope is the note for a config.json whose rope_scaling took the
// place of its rope_parameters: a transformers 5 save with a model card's
// rope_scaling added loses its theta so, in transformers as here.
func passedOverRope(name string, params map[string]any, theta float64) string {
	what := ""
	if v, ok := params["rope_theta"].(float64); ok && v != theta {
		what = fmt.Sprintf(", its rope_theta %g too: RoPE runs at %g", v, theta)
	}
	return fmt.Sprintf("%s: rope_scaling is read in place of rope_parameters, which is passed over%s (as transformers 5 reads both)", name, what)
}

// ropeType is a rope_scaling or rope_parameters object's type ("type" in
// older configs); "" for none or "default".
func ropeType(m map[string]any) string {
	t, _ := m["rope_type"].(string)
	if t == "" {
		t, _ = m["type"].(string)
	}
	if t == "default" {
		return ""
	}
	return t
}

// ropeKeysKnown refuses transformers 5's per-layer-type form of rope
// parameters ({"full_attention": {...}, "sliding_attention": {...}}), which
// would otherwise leave every layer on the defaults without a word. Other
// keys no rope type reads are ignored, as transformers ignores them
// (DeepSeek-R1-0528-Qwen3-8B's attn_factor).
func ropeKeysKnown(m map[string]any) error {
	var nested []string
	for k, v := range m {
		if _, isObj := v.(map[string]any); isObj {
			nested = append(nested, clip.Quote(k))
		}
	}
	if len(nested) == 0 {
		return nil
	}
	slices.Sort(nested)
	return fmt.Errorf("%s: rope parameters per layer type are not supported (one object of rope_type, rope_theta, factor, ... for every layer)",
		strings.Join(nested, ", "))
}

// ropeTypeGiven refuses a scaling factor with no type to say what it
// scales: read as none it would leave every frequency unscaled without a
// word, and transformers versions disagree on it. A factor of 1 scales
// nothing either way.
func ropeTypeGiven(m map[string]any) error {
	if m == nil || m["rope_type"] != nil || m["type"] != nil {
		return nil
	}
	if f, ok := m["factor"]; ok && f != nil && f != 1.0 {
		return fmt.Errorf("factor %s with no rope_type: give the scaling's type (linear, llama3, yarn; default for none)", jsonText(f))
	}
	return nil
}

// parseRopeScaling reads a scaling of the types every backend runs: each
// is a table of frequencies (kernels.RoPEScaling), yarn's also a scale of
// the attention logits, as transformers' modeling_rope_utils reads them
// (maxPos is max_position_embeddings, which yarn falls back on). Others,
// whose frequencies change as a sequence grows (dynamic, longrope's two
// tables), are refused by name.
func parseRopeScaling(m map[string]any, maxPos int) (*kernels.RoPEScaling, error) {
	for _, k := range []string{"rope_type", "type"} {
		if v, ok := m[k]; ok && v != nil {
			if _, isStr := v.(string); !isStr {
				return nil, fmt.Errorf("%s %s is not a string (default, linear, llama3, yarn)", k, jsonText(v))
			}
		}
	}
	t := ropeType(m)
	if t == "" {
		return nil, nil
	}
	if t != "linear" && t != "llama3" && t != "yarn" {
		return nil, fmt.Errorf("rope type %s is not supported (default, linear, llama3, yarn)", clip.Quote(t))
	}
	var missing []string
	num := func(key string) float64 {
		v, ok := m[key].(float64)
		if !ok {
			missing = append(missing, key)
		}
		return v
	}
	// opt is an optional number: absent or null is def.
	opt := func(key string, def float64) float64 {
		if v, ok := m[key]; ok && v != nil {
			return num(key)
		}
		return def
	}
	whole := func(key string, v float64) (int, error) {
		if v != math.Trunc(v) || v > math.MaxInt32 || v < math.MinInt32 {
			return 0, fmt.Errorf("%s: %s %g is not a whole number", t, key, v)
		}
		return int(v), nil
	}
	s := &kernels.RoPEScaling{Type: t}
	switch t {
	case "linear":
		s.Factor = num("factor")
	case "llama3":
		s.Factor = num("factor")
		s.LowFreqFactor, s.HighFreqFactor = num("low_freq_factor"), num("high_freq_factor")
		orig, err := whole("original_max_position_embeddings", num("original_max_position_embeddings"))
		if err != nil {
			return nil, err
		}
		s.OriginalMax = orig
	case "yarn":
		orig, err := whole("original_max_position_embeddings", opt("original_max_position_embeddings", float64(maxPos)))
		if err != nil {
			return nil, err
		}
		s.OriginalMax = orig
		s.Factor = opt("factor", 0)
		if s.Factor == 0 && orig > 0 { // DeepSeek-V3's spelling: the contexts' ratio
			s.Factor = float64(maxPos) / float64(orig)
		}
		// "or" defaults, as transformers reads them: 0 is the default too.
		s.BetaFast, s.BetaSlow = opt("beta_fast", 0), opt("beta_slow", 0)
		if s.BetaFast == 0 {
			s.BetaFast = 32
		}
		if s.BetaSlow == 0 {
			s.BetaSlow = 1
		}
		if v, ok := m["truncate"]; ok && v != nil {
			b, isBool := v.(bool)
			if !isBool {
				return nil, fmt.Errorf("yarn: truncate %s is not a boolean", jsonText(v))
			}
			s.NoTruncate = !b
		}
		mscale := func(scale, m float64) float64 {
			if scale <= 1 {
				return 1
			}
			return 0.1*m*math.Log(scale) + 1
		}
		s.Attention = opt("attention_factor", 0)
		if _, given := m["attention_factor"]; !given || m["attention_factor"] == nil {
			ms, all := opt("mscale", 0), opt("mscale_all_dim", 0)
			if ms != 0 && all != 0 {
				s.Attention = mscale(s.Factor, ms) / mscale(s.Factor, all)
			} else {
				s.Attention = mscale(s.Factor, 1)
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: %s missing or not a number", t, strings.Join(missing, ", "))
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	return s, nil
}

// Context is the longest sequence the model runs and what sets it: its
// positions, or those its scaled RoPE states (a sliding window bounds what
// a layer reads, not the sequence); 0: no bound.
func (c *Config) Context() (int, string) {
	n, what := c.scaledContext()
	if n > math.MaxInt32 {
		return 0, what // Validate refuses it; no int32 position reaches it
	}
	return int(n), what
}

// scaledContext is the context a scaled RoPE states, by the one rule for
// HF configs and GGUF files alike (docs/architecture.md, "Rotary
// embeddings"), as vLLM's _get_and_verify_max_len derives a model's
// length: a linear scaling stretches max_position_embeddings by its
// factor, yarn its original context (which falls back on
// max_position_embeddings) by its factor; llama3's config already states
// the stretched context in max_position_embeddings. Computed in float64
// and truncated, as vLLM's int(), so that no factor overflows it.
func (c *Config) scaledContext() (float64, string) {
	s, n := c.RopeScaling, float64(c.MaxPos)
	if s == nil || s.Type == "llama3" || c.LearnedPositions() {
		return n, fmt.Sprintf("%d positions", c.MaxPos)
	}
	base, from := c.MaxPos, c.key("max_position_embeddings")
	if s.Type == "yarn" {
		base, from = s.OriginalMax, c.key("original_max_position_embeddings")
	}
	if base == 0 {
		return 0, "no limit" // no positions stated: none to stretch
	}
	if c.ropeRatio {
		// vLLM stretches by the factor written, 1 where none is.
		return float64(base), fmt.Sprintf("%d positions (yarn rope scaling: %s %d, no factor given)", base, from, base)
	}
	n = math.Trunc(float64(base) * s.Factor)
	return n, fmt.Sprintf("%.0f positions (%s rope scaling: %s %d × factor %g)", n, s.Type, from, base, s.Factor)
}

// LayerWindow is layer l's sliding window, 0 where it attends to every
// earlier position.
func (c *Config) LayerWindow(l int) int {
	if l < len(c.Sliding) && c.Sliding[l] {
		return c.Window
	}
	return 0
}

// epsF32 is a config's norm epsilon as the kernels add it, in float32. A
// positive value that float32 takes to 0 or infinity is refused as written,
// where Validate would only see what it became.
func epsF32(v float64, field string) (float32, error) {
	f := float32(v)
	if v > 0 && !math.IsInf(v, 0) && (f == 0 || math.IsInf(float64(f), 0)) {
		return 0, fmt.Errorf("%s=%g is outside float32's range, in which the norms add it (%g to %g)", field, v, math.SmallestNonzeroFloat32, math.MaxFloat32)
	}
	return f, nil
}

// jsonText is a value of a config's JSON object as the file spells it
// (null, "1e6"), for messages: Go's own printing would show a string
// without its quotes and null as <nil>.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return quote(b)
}

// layerSet is mlp_only_layers as transformers reads it (layer in the
// list): the distinct layers of n it names, in order. Entries past the
// layers and repeats mean nothing, and kept they would make every
// IsMoELayer a search of a list as long as the file allows.
func layerSet(list []int, n int) []int {
	if n <= 0 || n > MaxLayers {
		return nil // Validate refuses the count
	}
	in := make([]bool, n)
	for _, l := range list {
		if l >= 0 && l < n {
			in[l] = true
		}
	}
	var out []int
	for l, ok := range in {
		if ok {
			out = append(out, l)
		}
	}
	return out
}
