package model

import (
	"fmt"
	"strings"
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

// config.json's quantization is read as mlx-lm's load_model applies it:
// the top level's group_size and bits are read as quantization["group_size"]
// and quantization["bits"], so a file without one is refused, and a
// module's object is to_quantized's keyword arguments, so a key that is
// none of them (a misspelt "Bits", "group") is refused too, as Python
// refuses an unexpected keyword.
func TestMLXQuantKeysAsTheLoaderReads(t *testing.T) {
	const k = "model.layers.0.mlp.gate_proj"
	for _, c := range []struct{ q, want string }{
		{`{"group_size": 64, "bits": 4}`, ""},
		{`{"group_size": 64, "bits": 4, "mode": "affine"}`, ""},
		{`{"bits": 4}`, `config.json: quantization has no "group_size", which mlx-lm reads as quantization["group_size"]`},
		{`{"group_size": 32, "mode": "mxfp4"}`, `config.json: quantization has no "bits", which mlx-lm reads as quantization["bits"]`},
		{`{"group_size": 64, "bits": 4, "` + k + `": {"bits": 8}}`, ""},
		{`{"group_size": 64, "bits": 4, "` + k + `": {"group_size": 64, "bits": 8, "quantize_input": false}}`, ""},
		{`{"group_size": 64, "bits": 4, "` + k + `": {"Bits": 8}}`,
			`config.json: quantization["` + k + `"] has "Bits", which is none of to_quantized's arguments (group_size, bits, mode, quantize_input): mlx-lm refuses it`},
		{`{"group_size": 64, "bits": 4, "` + k + `": {"bits": 8, "group": 32}}`,
			`config.json: quantization["` + k + `"] has "group", which is none of to_quantized's arguments`},
		{`{"group_size": 64, "bits": 4, "` + k + `": {"bits": 8, "quantize_input": true}}`,
			`config.json: quantization["` + k + `"].quantize_input is true: mlx then quantizes the module's activations (QQLinear), which mtlbench does not`},
	} {
		_, err := parseMLXQuant("config.json", []byte(`{"quantization": `+c.q+`}`))
		if c.want == "" {
			// mlx-lm writes its settings under both keys; read alone, a
			// quantization_config is read by its quant_method.
			if _, err := parseMLXQuant("config.json", []byte(`{"quantization_config": `+c.q+`}`)); err == nil ||
				err.Error() != "config.json: quantization_config has no quant_method, which mlx-lm and transformers read there; mlx-lm writes its own settings as quantization too" {
				t.Errorf("quantization_config %s alone: %v", c.q, err)
			}
			if _, err := parseMLXQuant("config.json", []byte(`{"quantization": `+c.q+`, "quantization_config": `+c.q+`}`)); err != nil {
				t.Errorf("%s under both keys: %v", c.q, err)
			}
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.q, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s:\n got %v\nwant %s", c.q, err, c.want)
		}
	}
}

// Python's json reads NaN, Infinity and -Infinity as floats: transformers
// keeps one in a key no class reads, and so the file is read; one in a key
// the model reads is refused by its key (TestConfigErrors).
func TestConfigNonFiniteUnread(t *testing.T) {
	const head = `{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8`
	for _, tail := range []string{
		`, "initializer_range": NaN}`,
		`, "attention_dropout": -Infinity, "pretraining_tp": [Infinity]}`,
		`, "Rms_Norm_Eps": NaN}`,
		`, "rms_norm_eps": NaN, "rms_norm_eps": 1e-6}`,
	} {
		data := []byte(head + tail)
		if _, err := ParseHFConfig("config.json", data); err != nil {
			t.Errorf("%s: %v", tail, err)
		}
		if _, err := parseMLXQuant("config.json", data); err != nil {
			t.Errorf("%s: quantization: %v", tail, err)
		}
	}
}
