package model

import (
	"fmt"
	"testing"

	"github.com/mtlbench/mtlbench/kernels"
)

// config.json is read as transformers reads it, through Python's json: a
// key given twice keeps its last value whole, an object never merged with
// the one before it (which encoding/json alone does).
func TestConfigKeyGivenTwice(t *testing.T) {
	const head = `{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, `
	const llama3 = `{"rope_type": "llama3", "factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192}`
	for _, c := range []struct {
		name, json string
		hidden     int
		scaling    *kernels.RoPEScaling
		quant      string // the MLX quantization read, as %+v
		err        string
	}{
		{name: "scalar", json: `"hidden_size": 32, "hidden_size": 64}`, hidden: 64},
		{name: "object", json: `"hidden_size": 64, "rope_scaling": ` + llama3 + `, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}`,
			hidden: 64, scaling: &kernels.RoPEScaling{Type: "linear", Factor: 4}},
		// The second llama3 scaling lacks what the first gives: merged, it
		// would read as whole.
		{name: "object part", json: `"hidden_size": 64, "rope_scaling": ` + llama3 + `, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}`,
			err: "config.json: rope_scaling: llama3: low_freq_factor, high_freq_factor, original_max_position_embeddings missing or not a number"},
		{name: "object then null", json: `"hidden_size": 64, "rope_scaling": ` + llama3 + `, "rope_scaling": null}`, hidden: 64},
		{name: "quantization", json: `"hidden_size": 64, "quantization": {"group_size": 64, "bits": 4, "model.layers.0.mlp.gate_proj": false}, "quantization": {"group_size": 32, "bits": 8}}`,
			hidden: 64, quant: "&{mlxModule:{GroupSize:32 Bits:8 Mode:affine} Modules:map[]}"},
		{name: "quantization bits", json: `"hidden_size": 64, "quantization": {"group_size": 64, "bits": 4, "bits": 8}}`,
			hidden: 64, quant: "&{mlxModule:{GroupSize:64 Bits:8 Mode:affine} Modules:map[]}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := []byte(head + c.json)
			cfg, err := ParseHFConfig("config.json", data)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("%v, want %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Hidden != c.hidden || fmt.Sprint(cfg.RopeScaling) != fmt.Sprint(c.scaling) {
				t.Errorf("hidden %d, scaling %+v; want %d, %+v", cfg.Hidden, cfg.RopeScaling, c.hidden, c.scaling)
			}
			q, err := parseMLXQuant("config.json", data)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if q != nil {
				got = fmt.Sprintf("%+v", q)
			}
			if got != c.quant {
				t.Errorf("quantization %s, want %s", got, c.quant)
			}
		})
	}
}

// A key spelled otherwise than a field (other case) is no field, as
// transformers reads config.json (an attribute of its own, which the model
// never reads) and mlx-lm its quantization (a dict's get): encoding/json
// alone would take it for the field.
func TestConfigKeysAsSpelled(t *testing.T) {
	const head = `{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8`
	for _, c := range []struct {
		name, json, want string
	}{
		{"another case alone", `, "RMS_Norm_Eps": 0.01, "Tie_Word_Embeddings": true}`, "eps 1e-06 tied false"},
		{"another case after", `, "rms_norm_eps": 1e-5, "RMS_NORM_EPS": 0.01}`, "eps 1e-05 tied false"},
		{"another case before", `, "Tie_Word_Embeddings": false, "tie_word_embeddings": true}`, "eps 1e-06 tied true"},
		{"quantization", `, "Quantization": {"group_size": 32, "bits": 8}}`, "eps 1e-06 tied false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := []byte(head + c.json)
			cfg, err := ParseHFConfig("config.json", data)
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprintf("eps %g tied %v", cfg.Eps, cfg.TieEmbed)
			q, err := parseMLXQuant("config.json", data)
			if err != nil {
				t.Fatal(err)
			}
			if q != nil {
				got += fmt.Sprintf(" quant %+v", q.Modules)
			}
			if got != c.want {
				t.Errorf("read %s, want %s", got, c.want)
			}
		})
	}
}
