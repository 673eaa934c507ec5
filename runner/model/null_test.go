package model

import (
	"strings"
	"testing"
)

// nullBase is a config.json per architecture that parses, one key a line,
// into which a test puts a null.
var nullBase = map[string]string{
	"LlamaForCausalLM":    `"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 8`,
	"MistralForCausalLM":  `"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 8`,
	"MixtralForCausalLM":  `"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 8, "num_local_experts": 2, "num_experts_per_tok": 1`,
	"Qwen2ForCausalLM":    `"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 8`,
	"Qwen3ForCausalLM":    `"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 4, "intermediate_size": 8`,
	"Qwen3MoeForCausalLM": `"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 8, "num_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 4`,
	GPT2Architecture:      `"vocab_size": 10, "n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 16`,
}

// withNull is arch's base config with key null on line 3 (the key given
// twice, the last read, as Python's json reads it).
func withNull(arch, key string) string {
	return "{\"architectures\": [\"" + arch + "\"],\n" + strings.ReplaceAll(nullBase[arch], ", ", ",\n") + ",\n\"" + key + "\": null}"
}

// TestConfigNulls: a null is refused, naming the key, its line and what it
// takes, where transformers builds no model from None; otherwise it is read
// as the class reads None.
func TestConfigNulls(t *testing.T) {
	refused := map[string][]string{
		"LlamaForCausalLM":   {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "rope_theta", "rms_norm_eps", "hidden_act", "attention_bias", "mlp_bias", "max_position_embeddings", "tie_word_embeddings"},
		"MistralForCausalLM": {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "rope_theta", "rms_norm_eps", "hidden_act", "num_key_value_heads"},
		"MixtralForCausalLM": {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "rope_theta", "rms_norm_eps", "hidden_act", "num_key_value_heads"},
		"Qwen2ForCausalLM":   {"head_dim", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "rope_theta", "rms_norm_eps", "hidden_act", "use_sliding_window", "max_window_layers"},
		"Qwen3ForCausalLM": {"head_dim", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "rope_theta", "rms_norm_eps", "hidden_act",
			"attention_bias", "use_sliding_window", "max_window_layers"},
		"Qwen3MoeForCausalLM": {"num_key_value_heads", "head_dim", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "rope_theta", "rms_norm_eps", "hidden_act", "decoder_sparse_step", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
			"intermediate_size", "attention_bias", "norm_topk_prob", "use_sliding_window"},
		GPT2Architecture: {"vocab_size", "hidden_size", "n_embd", "num_hidden_layers", "n_layer", "num_attention_heads", "n_head",
			"max_position_embeddings", "n_positions", "layer_norm_epsilon", "activation_function", "tie_word_embeddings"},
	}
	for arch, keys := range refused {
		for _, key := range keys {
			_, err := ParseHFConfig("config.json", []byte(withNull(arch, key)))
			want := "config.json: " + key + " is null (at line "
			if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "want a") || !strings.Contains(err.Error(), arch+"'s default") {
				t.Errorf("%s %s null: err = %v, want %q...", arch, key, err, want)
			}
		}
	}
	// The null of a key read as its class reads None.
	accepted := []struct {
		arch, key string
		check     func(*Config) bool
	}{
		{"LlamaForCausalLM", "num_key_value_heads", func(c *Config) bool { return c.KVHeads == c.Heads }},
		{"Qwen3ForCausalLM", "num_key_value_heads", func(c *Config) bool { return c.KVHeads == c.Heads }},
		// Llama's and Mistral's classes derive a None head_dim.
		{"LlamaForCausalLM", "head_dim", func(c *Config) bool { return c.HeadDim == 4 }},
		{"MistralForCausalLM", "head_dim", func(c *Config) bool { return c.HeadDim == 4 }},
		{"MistralForCausalLM", "sliding_window", func(c *Config) bool { return c.Window == 0 }},
		// Keys of classes that have no such field, read as any other key.
		{"MistralForCausalLM", "attention_bias", func(c *Config) bool { return !c.QKVBias && !c.OBias }},
		{"Qwen2ForCausalLM", "attention_bias", func(c *Config) bool { return c.QKVBias && !c.OBias }},
		{"MistralForCausalLM", "use_sliding_window", func(c *Config) bool { return c.Window == 4096 }},
		{"Qwen3MoeForCausalLM", "max_window_layers", func(c *Config) bool { return c.Window == 0 }},
		{"MixtralForCausalLM", "rope_scaling", func(c *Config) bool { return c.RopeScaling == nil }},
		{GPT2Architecture, "n_inner", func(c *Config) bool { return c.Inter == 32 }},
	}
	for _, a := range accepted {
		c, err := ParseHFConfig("config.json", []byte(withNull(a.arch, a.key)))
		if err != nil || !a.check(c) {
			t.Errorf("%s %s null: config %+v, err %v", a.arch, a.key, c, err)
		}
	}
}
