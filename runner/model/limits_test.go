package model

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Absurd sizes and broken constants are rejected from the config's
// arithmetic, at once, before anything is sized from them.
func TestConfigLimits(t *testing.T) {
	base := `{"architectures":["Qwen3MoeForCausalLM"],"vocab_size":1000,"hidden_size":64,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"intermediate_size":128,"max_position_embeddings":512,
		"num_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":32%s}`
	for _, tc := range []struct{ extra, want string }{
		{``, ""},
		{`,"num_hidden_layers":1000000000`, "num_hidden_layers=1000000000 is beyond"},
		{`,"num_experts":1000000000`, "num_experts=1000000000 is beyond"},
		{`,"vocab_size":2000000000`, "vocab_size"},
		{`,"hidden_size":65536,"intermediate_size":1048576,"num_hidden_layers":4096,"num_attention_heads":4096,"head_dim":1024,"num_experts":16384,"moe_intermediate_size":65536`, "parameters, beyond"},
		{`,"rope_theta":-1`, "rope_theta=-1 must be"},
		{`,"rms_norm_eps":-1.0`, "rms_norm_eps=-1 must be"},
		{`,"rms_norm_eps":0.0`, "rms_norm_eps=0 must be"},
		{`,"rms_norm_eps":1e-300`, "rms_norm_eps=1e-300 is outside float32's range"},
		{`,"rms_norm_eps":1e39`, "rms_norm_eps=1e+39 is outside float32's range"},
		{`,"rms_norm_eps":1e-45`, ""},
	} {
		start := time.Now()
		_, err := ParseHFConfig("config.json", []byte(strings.Replace(base, "%s", tc.extra, 1)))
		if time.Since(start) > time.Second {
			t.Errorf("%s: took %v", tc.extra, time.Since(start))
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("valid config: %v", err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.extra, err, tc.want)
		}
	}
}

// A GPT-2 epsilon float32 cannot hold is named as written.
func TestGPT2EpsilonRange(t *testing.T) {
	base := `{"architectures":["GPT2LMHeadModel"],"vocab_size":100,"n_embd":32,"n_layer":2,"n_head":4,"n_positions":64%s}`
	for _, tc := range []struct{ extra, want string }{
		{`,"layer_norm_epsilon":1e-5`, ""},
		{`,"layer_norm_epsilon":1e-300`, "layer_norm_epsilon=1e-300 is outside float32's range"},
		{`,"layer_norm_epsilon":0.0`, "layer_norm_epsilon=0 must be"},
	} {
		_, err := ParseHFConfig("config.json", []byte(strings.Replace(base, "%s", tc.extra, 1)))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.extra, err, tc.want)
		}
	}
}

// A config's layer_types must give one known attention type a layer, as
// transformers 5's config classes require of every class but GPT-2's: a
// short or misspelt list is refused, naming it, rather than read as no
// window.
func TestLayerTypes(t *testing.T) {
	base := `{"architectures":["%s"],"vocab_size":100,"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
		"num_key_value_heads":2,"head_dim":16,"intermediate_size":128,"use_sliding_window":true,"sliding_window":8,"layer_types":%s}`
	for _, tc := range []struct {
		arch, types string
		window      int
		want        string
	}{
		{"Qwen3ForCausalLM", `["full_attention","sliding_attention"]`, 8, ""},
		{"Qwen2ForCausalLM", `["full_attention","full_attention"]`, 0, ""},
		{"Qwen3ForCausalLM", `null`, 0, ""}, // max_window_layers' 28: no layer slides
		{"Qwen3ForCausalLM", `["sliding_attention"]`, 0, "layer_types has 1 entries for num_hidden_layers=2"},
		{"Qwen2ForCausalLM", `["full_attention","sliding_attention","sliding_attention"]`, 0, "layer_types has 3 entries for num_hidden_layers=2"},
		{"Qwen3ForCausalLM", `["full_attention","sliding"]`, 0, `layer_types[1] is "sliding", where Qwen3ForCausalLM's layers are full_attention or sliding_attention`},
		// Qwen3MoeConfig slides every layer whatever layer_types says,
		// but transformers 5 checks the list for every class.
		{"Qwen3MoeForCausalLM", `["full_attention","full_attention"]`, 8, ""},
		{"Qwen3MoeForCausalLM", `["zz"]`, 0, "layer_types has 1 entries for num_hidden_layers=2"},
		{"Qwen3MoeForCausalLM", `["zz","zz"]`, 0, `layer_types[0] is "zz"`},
		{"LlamaForCausalLM", `["full_attention","full_attention","full_attention"]`, 0, "layer_types has 3 entries for num_hidden_layers=2"},
		{"MistralForCausalLM", `["bogus","full_attention"]`, 0, `layer_types[0] is "bogus", where MistralForCausalLM's layers are`},
		{"MixtralForCausalLM", `["full_attention"]`, 0, "layer_types has 1 entries for num_hidden_layers=2"},
	} {
		data := fmt.Sprintf(base, tc.arch, tc.types)
		c, err := ParseHFConfig("config.json", []byte(data))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s: %v", tc.arch, tc.types, err)
		case tc.want == "" && c.Window != tc.window:
			t.Errorf("%s %s: window %d, want %d", tc.arch, tc.types, c.Window, tc.window)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "config.json: ")):
			t.Errorf("%s %s: %v, want %q", tc.arch, tc.types, err, tc.want)
		}
	}
}

// LlamaConfig refuses a hidden_size num_attention_heads does not divide,
// even where head_dim sizes the heads (its validate_architecture); the
// other classes take it, sizing the heads by head_dim. transformers 5.17.0
// refuses these Llama configs ("The hidden size (34) is not a multiple of
// the number of attention heads (4)", head_dim 8 or none) and builds and
// runs the Mistral, Qwen2 and Qwen3 ones. (The oracle's
// hidden_indivisible_with_head_dim cases give 36 over 4 heads, which
// divide, so TestConfigAsTransformersReadsIt does not reach this.)
func TestHeadsDivideHidden(t *testing.T) {
	base := `{"architectures":["%s"],"vocab_size":100,"hidden_size":%d,"num_hidden_layers":1,"num_attention_heads":4,
		"num_key_value_heads":2,%s"intermediate_size":64,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":16}`
	for _, tc := range []struct {
		arch    string
		hidden  int
		headDim string
		want    string // the error; "" for none
	}{
		{"LlamaForCausalLM", 34, `"head_dim":8,`, "config.json: hidden_size=34 is not a multiple of num_attention_heads=4, which LlamaForCausalLM's config requires whatever head_dim says"},
		{"LlamaForCausalLM", 34, "", "hidden_size=34 is not a multiple of num_attention_heads=4"},
		{"LlamaForCausalLM", 36, `"head_dim":8,`, ""},
		{"LlamaForCausalLM", 32, "", ""},
		{"MistralForCausalLM", 34, `"head_dim":8,`, ""},
		{"Qwen2ForCausalLM", 34, `"head_dim":8,`, ""},
		{"Qwen3ForCausalLM", 34, `"head_dim":8,`, ""},
		{"Qwen3MoeForCausalLM", 34, `"head_dim":8,`, ""},
		{"MixtralForCausalLM", 34, `"head_dim":8,`, ""},
	} {
		_, err := ParseHFConfig("config.json", fmt.Appendf(nil, base, tc.arch, tc.hidden, tc.headDim))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s hidden %d %s: %v", tc.arch, tc.hidden, tc.headDim, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s hidden %d %s: %v, want %q", tc.arch, tc.hidden, tc.headDim, err, tc.want)
		}
	}
}

// A mistral config.json that holds layer_types is read as transformers'
// AutoConfig reads it, as Ministral: its layers slide as layer_types says
// (null: every one, where sliding_window is set), and a null
// sliding_window is refused, as MinistralModel builds the sliding-window
// mask on every forward and fails without one. Left out, layer_types is
// Mistral's: every layer slides by sliding_window, or none where it is null.
func TestMistralLayerTypesAsMinistral(t *testing.T) {
	for _, tc := range []struct {
		keys   string // sliding_window and layer_types as given
		window int
		want   string // the error; "" for none
	}{
		{`"sliding_window":8`, 8, ""},
		{`"sliding_window":null`, 0, ""},
		{`"layer_types":null`, 4096, ""},
		{`"sliding_window":8,"layer_types":null`, 8, ""},
		{`"sliding_window":8,"layer_types":["full_attention","sliding_attention"]`, 8, ""},
		{`"sliding_window":8,"layer_types":["full_attention","full_attention"]`, 0, ""},
		{`"sliding_window":null,"layer_types":null`, 0, "config.json: layer_types with a null sliding_window: transformers reads a MistralForCausalLM config that holds layer_types as Ministral"},
		{`"sliding_window":null,"layer_types":["full_attention","full_attention"]`, 0, "layer_types with a null sliding_window"},
	} {
		data := `{"model_type":"mistral","vocab_size":100,"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
			"num_key_value_heads":2,"head_dim":16,"intermediate_size":128,` + tc.keys + `}`
		c, err := ParseHFConfig("config.json", []byte(data))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.keys, err)
		case tc.want == "" && c.Window != tc.window:
			t.Errorf("%s: window %d, want %d", tc.keys, c.Window, tc.window)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.keys, err, tc.want)
		}
	}
}
