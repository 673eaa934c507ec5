package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/internal/gguftest"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/runner/gguf"
	"github.com/mtlbench/mtlbench/runner/safetensors"
)

const fixtures = "../testdata/hf"

// The hub's config spelling (rope_theta, num_experts) and the one
// transformers 5 writes (rope_parameters, num_local_experts) give the same
// config.
func TestBothConfigSpellings(t *testing.T) {
	v5, err := os.ReadFile(filepath.Join(fixtures, "qwen3_moe", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(v5, &m)
	rp := m["rope_parameters"].(map[string]any)
	m["rope_theta"] = rp["rope_theta"]
	delete(m, "rope_parameters")
	m["num_experts"] = m["num_local_experts"]
	delete(m, "num_local_experts")
	hub, _ := json.Marshal(m)
	a, err := ParseHFConfig("v5", v5)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseHFConfig("hub", hub)
	if err != nil {
		t.Fatal(err)
	}
	a.Name, b.Name = "", ""
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("configs differ:\nv5:  %s\nhub: %s", ja, jb)
	}
	if a.NumExperts != 8 || a.RopeTheta != 1e6 || !a.QKNorm || a.IsMoELayer(2) || !a.IsMoELayer(1) {
		t.Fatalf("unexpected config %+v", a)
	}
}

// attention_bias gives Llama, Qwen3 and Qwen3-MoE biases on q, k, v and o,
// as transformers' attention reads it; Qwen2's q, k and v always have
// theirs and its o none, and Mistral and Mixtral take none either way.
func TestAttentionBias(t *testing.T) {
	for _, c := range []struct {
		arch   string
		bias   string // attention_bias, "" for none
		qkv, o bool
	}{
		{"LlamaForCausalLM", "", false, false},
		{"LlamaForCausalLM", "true", true, true},
		{"LlamaForCausalLM", "false", false, false},
		{"Qwen3ForCausalLM", "true", true, true},
		{"Qwen3MoeForCausalLM", "true", true, true},
		{"Qwen2ForCausalLM", "", true, false},
		{"Qwen2ForCausalLM", "true", true, false},
		{"Qwen2ForCausalLM", "false", true, false},
		{"MistralForCausalLM", "true", false, false},
		{"MixtralForCausalLM", "true", false, false},
	} {
		extra := ""
		if c.bias != "" {
			extra = `, "attention_bias": ` + c.bias
		}
		js := `{"architectures": ["` + c.arch + `"], "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 1,
			"num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 64, "num_experts": 4, "num_local_experts": 4,
			"num_experts_per_tok": 2, "moe_intermediate_size": 16` + extra + `}`
		cfg, err := ParseHFConfig("config.json", []byte(js))
		if err != nil {
			t.Fatalf("%s: %v", c.arch, err)
		}
		if cfg.QKVBias != c.qkv || cfg.OBias != c.o {
			t.Errorf("%s, attention_bias %q: q/k/v bias %v, o bias %v; want %v, %v", c.arch, c.bias, cfg.QKVBias, cfg.OBias, c.qkv, c.o)
		}
	}
}

// mlp_bias gives a Llama biases on its gate, up and down projections and,
// as transformers builds their MLPs, no other architecture; the tensors
// listed and the parameter count follow.
func TestMLPBias(t *testing.T) {
	for _, c := range []struct {
		arch, bias string // mlp_bias, "" for none
		want       bool
	}{
		{"LlamaForCausalLM", "", false},
		{"LlamaForCausalLM", "true", true},
		{"LlamaForCausalLM", "false", false},
		{"MistralForCausalLM", "true", false},
		{"Qwen2ForCausalLM", "true", false},
		{"Qwen3ForCausalLM", "true", false},
	} {
		extra := ""
		if c.bias != "" {
			extra = `, "mlp_bias": ` + c.bias
		}
		js := `{"architectures": ["` + c.arch + `"], "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2,
			"num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 8, "intermediate_size": 48` + extra + `}`
		cfg, err := ParseHFConfig("config.json", []byte(js))
		if err != nil {
			t.Fatalf("%s: %v", c.arch, err)
		}
		if cfg.MLPBias != c.want {
			t.Errorf("%s, mlp_bias %q: %v, want %v", c.arch, c.bias, cfg.MLPBias, c.want)
		}
		var biases int
		var elems int64
		for _, ts := range cfg.Tensors() {
			if strings.HasPrefix(ts.Name, "model.layers.1.mlp.") && strings.HasSuffix(ts.Name, ".bias") {
				biases++
			}
			elems += ts.Elems()
		}
		if want := map[bool]int{true: 3}[c.want]; biases != want {
			t.Errorf("%s, mlp_bias %q: %d MLP biases in layer 1, want %d", c.arch, c.bias, biases, want)
		}
		if elems != cfg.Params() {
			t.Errorf("%s, mlp_bias %q: tensors hold %d values, Params says %d", c.arch, c.bias, elems, cfg.Params())
		}
	}
}

// A config.json without architectures is read by its model_type, as
// transformers' AutoModelForCausalLM picks the class.
func TestModelTypeAlone(t *testing.T) {
	for _, arch := range []string{"llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral", "gpt2"} {
		raw, err := os.ReadFile(filepath.Join(fixtures, arch, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "architectures")
		alone, _ := json.Marshal(m)
		want, err := ParseHFConfig("config.json", raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseHFConfig("config.json", alone)
		if err != nil {
			t.Fatalf("%s without architectures: %v", arch, err)
		}
		jw, _ := json.Marshal(want)
		jg, _ := json.Marshal(got)
		if string(jw) != string(jg) {
			t.Errorf("%s without architectures:\n%s\nwith them:\n%s", arch, jg, jw)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`{`, "config.json: not valid JSON: the text ends inside a value: cut short"},
		// transformers reads the file as UTF-8 text, in which Python's json
		// refuses a byte order mark; trailing text it refuses as extra data.
		{"\ufeff{\"architectures\": [\"LlamaForCausalLM\"]}", "config.json: not valid JSON: the text starts with a byte order mark (EF BB BF)"},
		{`{"architectures": ["LlamaForCausalLM"]} {}`, "config.json: not valid JSON at line 1, column 41: invalid character '{' after top-level value"},
		// A wrong JSON type is named by its key, value and the type wanted.
		{`{"hidden_size": "96"}`, `config.json: hidden_size is a JSON string ("96"), want a whole number`},
		// ... and placed, as a syntax error is.
		{"{\n  \"vocab_size\": 10,\n  \"hidden_size\": 96.0\n}", `config.json: hidden_size is a JSON number 96.0, want a whole number (at line 3, column 18)`},
		{`{"hidden_size": 96.5}`, `config.json: hidden_size is a JSON number 96.5, want a whole number`},
		{`{"rms_norm_eps": 1e999}`, `config.json: rms_norm_eps is 1e999, beyond a 64-bit float's range`},
		{"{\"rope_parameters\": {\"rope_type\": \"default\",\n  \"rope_theta\": NaN}}", `config.json: rope_parameters.rope_theta is NaN (at line 2, column 17): a float that is not finite`},
		{`{"architectures": ["LlamaForCausalLM"], "rms_norm_eps": Infinity}`, `config.json: rms_norm_eps is Infinity (at line 1, column 57): a float that is not finite`},
		{`{"tie_word_embeddings": "false"}`, `config.json: tie_word_embeddings is a JSON string ("false"), want true or false`},
		{`{"architectures": "Qwen3ForCausalLM"}`, `config.json: architectures is a JSON string ("Qwen3ForCausalLM"), want a list`},
		{`[]`, `config.json: the file is a JSON array, want an object`},
		// Not UTF-8: transformers' json refuses it; encoding/json would read
		// U+FFFD.
		{"{\"architectures\": [\"Llama\xffForCausalLM\"]}", `config.json: not UTF-8 text at line 1, column 26: byte 0xff begins no UTF-8 character`},
		// A value of the wrong type is quoted as the file spells it.
		{`{"architectures": ["LlamaForCausalLM"], "rope_parameters": {"rope_theta": "1e6"}}`, `config.json: rope_parameters.rope_theta "1e6" is not a number`},
		{`{"architectures": ["LlamaForCausalLM"], "rope_parameters": {"rope_theta": null}}`, `config.json: rope_parameters.rope_theta null is not a number`},
		{`{"architectures": ["LlamaForCausalLM"], "rope_scaling": {"rope_type": ["yarn"]}}`, `config.json: rope_scaling: rope_type ["yarn"] is not a string`},
		{`{"architectures": ["LlamaForCausalLM"], "rope_scaling": {"factor": "4"}}`, `config.json: rope_scaling: factor "4" with no rope_type`},
		// A count past its limit is said once.
		{`{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1000000000, "num_attention_heads": 2, "intermediate_size": 8}`, `num_hidden_layers=1000000000 is beyond what mtlbench runs (at most 4096)`},
		{`{"hidden_size": 8}`, `no "architectures" field, and model_type "" is none of gpt2, llama,`},
		{`{"model_type": "bert"}`, `model_type "bert" is none of`},
		{`{"architectures": ["BertModel"]}`, `unknown architecture "BertModel"`},
		{`{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 3, "num_key_value_heads": 2, "intermediate_size": 8}`, "not a multiple"},
		{`{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "rope_scaling": {"rope_type": "dynamic", "factor": 4}}`, "rope_scaling: rope type \"dynamic\" is not supported"},
		// A count present but invalid is refused; one left out is the class's.
		{`{"architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "num_experts": null}`,
			"num_experts is null (at line 1, column 169): want a count (leave it out for Qwen3MoeForCausalLM's default, 128)"},
		{`{"architectures": ["MixtralForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "num_experts_per_tok": null}`,
			"num_experts_per_tok is null"},
		// A value the class cannot build or run a model from as None (an
		// epsilon added to a tensor, an activation looked up by name, a
		// modulus) is refused given as null, not read as left out.
		{`{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "rms_norm_eps": null}`,
			"rms_norm_eps is null (at line 1, column 167): want a number (leave it out for LlamaForCausalLM's default, 1e-06)"},
		{`{"architectures": ["Qwen2ForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 8, "hidden_act": null}`,
			"hidden_act is null (at line 1, column 191): want an activation's name (leave it out for Qwen2ForCausalLM's default, silu)"},
		{`{"architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "num_experts": 4, "num_experts_per_tok": 1, "moe_intermediate_size": 4, "decoder_sparse_step": null}`,
			"decoder_sparse_step is null (at line 1, column 249): want a count (leave it out for Qwen3MoeForCausalLM's default, 1)"},
		{`{"architectures": ["GPT2LMHeadModel"], "vocab_size": 10, "n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 16, "layer_norm_epsilon": null}`,
			"layer_norm_epsilon is null (at line 1, column 139): want a number (leave it out for GPT2LMHeadModel's default, 1e-05)"},
		{`{"architectures": ["GPT2LMHeadModel"], "vocab_size": 10, "n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 16, "activation_function": null}`,
			"activation_function is null (at line 1, column 140): want an activation's name (leave it out for GPT2LMHeadModel's default, gelu_new)"},
		{`{"architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 8, "num_experts": 4}`,
			"num_experts_per_tok=8 must be in 1..num_experts=4 (left out of the file, taken as Qwen3MoeForCausalLM's default: num_experts_per_tok=8, moe_intermediate_size=768)"},
		{`{"architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "num_experts": 4, "num_experts_per_tok": 0, "moe_intermediate_size": 4}`,
			"num_experts_per_tok=0 must be in 1..num_experts=4"},
		{`{"architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "num_experts": 4, "num_experts_per_tok": 1, "moe_intermediate_size": -4}`,
			"moe_intermediate_size must be positive, got -4"},
		{`{"architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "num_experts": -3, "num_experts_per_tok": 1, "moe_intermediate_size": 4}`, "num_experts must be positive, got -3"},
		{`{"architectures": ["MixtralForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "num_local_experts": -2, "num_experts_per_tok": 1}`, "num_local_experts must be positive, got -2"},
		{`{"architectures": ["MixtralForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "num_experts": 0}`, "num_experts is 0: every MixtralForCausalLM layer is a mixture of experts"},
		{`{"architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "num_experts": 4, "num_experts_per_tok": 1, "moe_intermediate_size": 4, "decoder_sparse_step": 0}`, "decoder_sparse_step is missing or 0"},
		{`{"architectures": ["MistralForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "sliding_window": -4}`, "sliding_window=-4 must not be negative"},
		// A head_dim given is the heads' width: 0 is no head, not left out.
		{`{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "head_dim": 0}`, "head_dim=0 must be positive (leave it out for LlamaForCausalLM's default)"},
		{`{"architectures": ["Qwen3ForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 8, "head_dim": -2}`, "head_dim=-2 must be positive"},
		// A class default the file leaves out is said with the error it makes.
		{`{"architectures": ["Qwen2ForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8}`,
			"num_attention_heads=2 is not a multiple of num_key_value_heads=32 (left out of the file, taken as Qwen2ForCausalLM's default: num_key_value_heads=32)"},
	} {
		_, err := ParseHFConfig("config.json", []byte(c.json))
		if err == nil || strings.Count(err.Error(), c.want) != 1 || !strings.HasPrefix(err.Error(), "config.json") {
			t.Errorf("%s: err = %v, want %q once", c.json, err, c.want)
		}
	}
}

// copyFixture copies a fixture folder so a test can damage it.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dst := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		data, err := os.ReadFile(filepath.Join(fixtures, name, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dst, f), data, 0o644)
	}
	return dst
}

// loadAll reads every tensor the config needs, as the engine would.
func loadAll(dir string) error {
	cfg, src, err := Open(Spec{Model: dir})
	if err != nil {
		return err
	}
	defer src.Close()
	for _, s := range cfg.Tensors() {
		if _, _, err := src.Tensor(s); err != nil {
			return err
		}
	}
	return nil
}

func TestCorruptCheckpoints(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string
	}{
		{"truncated", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.safetensors")
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()/2)
		}, "model.safetensors"},
		{"header-lies", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.safetensors")
			data, _ := os.ReadFile(p)
			data[0] = 0xff // header length far beyond the file
			data[1] = 0xff
			data[2] = 0xff
			os.WriteFile(p, data, 0o644)
		}, "model.safetensors"},
		{"missing-file", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "model.safetensors"))
		}, "safetensors"},
		{"wrong-shape", func(t *testing.T, dir string) {
			// A config that claims a wider MLP than the tensors hold.
			p := filepath.Join(dir, "config.json")
			data, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.Replace(string(data), `"intermediate_size": 256`, `"intermediate_size": 300`, 1)), 0o644)
		}, "has shape [256 128], the config implies [300 128]"},
		{"missing-tensor", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.safetensors")
			f, _ := safetensors.Open(p)
			var keep []safetensors.WriteTensor
			for _, ti := range f.Tensors() {
				if ti.Name == "model.layers.1.self_attn.k_proj.weight" {
					continue
				}
				b, _ := f.Bytes(ti.Name)
				keep = append(keep, safetensors.WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: append([]byte(nil), b...)})
			}
			f.Close()
			if err := safetensors.Write(p, keep, nil); err != nil {
				t.Fatal(err)
			}
		}, `tensor "model.layers.1.self_attn.k_proj.weight" is missing`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyFixture(t, "llama")
			c.damage(t, dir)
			err := loadAll(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// Loading as bf16 converts; keeping the dtype aliases the mapping.
func TestCheckpointDTypes(t *testing.T) {
	bf := bridge.BF16
	cfg, src, err := Open(Spec{Model: filepath.Join(fixtures, "qwen2"), DType: &bf})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if !cfg.TieEmbed || !cfg.QKVBias {
		t.Fatalf("qwen2 fixture: tie=%v bias=%v", cfg.TieEmbed, cfg.QKVBias)
	}
	for _, s := range cfg.Tensors() {
		dt, data, err := src.Tensor(s)
		if err != nil {
			t.Fatal(err)
		}
		want := bridge.F32
		if s.Matrix {
			want = bridge.BF16
		}
		if dt != want || int64(len(data)) != s.Elems()*int64(dt.Size()) {
			t.Fatalf("%s: %v with %d bytes", s.Name, dt, len(data))
		}
	}
}

func TestSyntheticIsDeterministic(t *testing.T) {
	spec := TensorSpec{Name: "w", Shape: []int{3, 1 << 20}, Matrix: true, FanIn: 1 << 20}
	_, a, _ := NewSynthetic(7, bridge.BF16).Tensor(spec)
	_, b, _ := NewSynthetic(7, bridge.BF16).Tensor(spec)
	_, c, _ := NewSynthetic(8, bridge.BF16).Tensor(spec)
	if string(a) != string(b) || string(a) == string(c) {
		t.Fatal("synthetic weights are not a function of the seed")
	}
}

func TestPresetsValidate(t *testing.T) {
	for _, n := range PresetNames() {
		c, err := Preset(n)
		if err != nil || c.Validate() != nil {
			t.Errorf("%s: %v %v", n, err, c.Validate())
		}
	}
	c, _ := Preset("qwen3-30b-a3b")
	if p := c.Params(); p < 30e9 || p > 31e9 {
		t.Errorf("qwen3-30b-a3b has %d parameters, want about 30.5B", p)
	}
	if _, err := c.WithLayers(49); err == nil {
		t.Error("WithLayers beyond the model succeeded")
	}
	m, _ := Preset("mixtral-8x7b")
	if p := m.Params(); p < 46.5e9 || p > 46.9e9 {
		t.Errorf("mixtral-8x7b has %d parameters, want about 46.7B", p)
	}
}

// hidden_act is read as transformers' ACT2FN looks it up: "swish" is
// SiLU's other name there; a name it has not, the empty one or another
// case included, builds no model and is refused.
func TestHiddenActNames(t *testing.T) {
	for _, c := range []struct{ act, want string }{
		{"", ""}, // left out: the classes' silu
		{`, "hidden_act": "silu"`, ""},
		{`, "hidden_act": "swish"`, ""},
		{`, "hidden_act": "gelu"`, `config.json: hidden_act "gelu" is not supported (silu or swish`},
		{`, "hidden_act": ""`, `config.json: hidden_act "" is not supported`},
		{`, "hidden_act": "SiLU"`, `config.json: hidden_act "SiLU" is not supported`},
	} {
		for _, arch := range []string{"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"} {
			_, err := ParseHFConfig("config.json", []byte(`{"architectures": ["`+arch+`"], "vocab_size": 10, "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 8`+c.act+`}`))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%s%s: %v", arch, c.act, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%s%s: error %v, want %q", arch, c.act, err, c.want)
			}
		}
	}
}

// A field a config leaves out takes its config class's default in
// transformers: Mixtral's rope_theta and rms_norm_eps, Mistral's sliding
// window (an explicit null is none), each class's num_key_value_heads and
// Qwen3's head_dim (an explicit null, where the class takes one: the
// attention heads, and for Llama's and Mistral's classes the hidden size
// over them; TestConfigNulls).
func TestArchitectureDefaults(t *testing.T) {
	const sizes = `"vocab_size": 10, "hidden_size": 64, "num_hidden_layers": 1, "intermediate_size": 8`
	const moe = `, "num_local_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8`
	for _, c := range []struct {
		arch, extra string
		theta       float64
		eps         float32
		window      int
		kv, hd      int
	}{
		{"LlamaForCausalLM", `, "num_attention_heads": 2`, 10000, 1e-6, 0, 2, 32},
		{"MixtralForCausalLM", `, "num_attention_heads": 8` + moe, 1e6, 1e-5, 0, 8, 8},
		{"MixtralForCausalLM", `, "num_attention_heads": 2, "num_key_value_heads": 2, "rope_theta": 500.0, "rms_norm_eps": 1e-6` + moe, 500, 1e-6, 0, 2, 32},
		{"MistralForCausalLM", `, "num_attention_heads": 16`, 10000, 1e-6, 4096, 8, 4},
		{"MistralForCausalLM", `, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": null, "sliding_window": null`, 10000, 1e-6, 0, 2, 32},
		{"MistralForCausalLM", `, "num_attention_heads": 2, "num_key_value_heads": 1, "sliding_window": 128`, 10000, 1e-6, 128, 1, 32},
		{"Qwen2ForCausalLM", `, "num_attention_heads": 32`, 10000, 1e-6, 0, 32, 2},
		{"Qwen2ForCausalLM", `, "num_attention_heads": 4, "num_key_value_heads": null`, 10000, 1e-6, 0, 4, 16},
		{"Qwen3ForCausalLM", `, "num_attention_heads": 32`, 10000, 1e-6, 0, 32, 128},
		{"LlamaForCausalLM", `, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": null`, 10000, 1e-6, 0, 2, 16},
		{"Qwen3MoeForCausalLM", `, "num_attention_heads": 8` + moe, 10000, 1e-6, 0, 4, 8},
	} {
		cfg, err := ParseHFConfig("config.json", []byte(`{"architectures": ["`+c.arch+`"], `+sizes+c.extra+`}`))
		if err != nil {
			t.Errorf("%s%s: %v", c.arch, c.extra, err)
			continue
		}
		if cfg.RopeTheta != c.theta || cfg.Eps != c.eps || cfg.Window != c.window || cfg.KVHeads != c.kv || cfg.HeadDim != c.hd {
			t.Errorf("%s%s: theta %g eps %g window %d kv heads %d head_dim %d, want %g %g %d %d %d",
				c.arch, c.extra, cfg.RopeTheta, cfg.Eps, cfg.Window, cfg.KVHeads, cfg.HeadDim, c.theta, c.eps, c.window, c.kv, c.hd)
		}
	}
}

// A config.json without max_position_embeddings (GPT-2's n_positions) takes
// its class's: LlamaConfig's 2048, MistralConfig's and MixtralConfig's
// 4096*32, the Qwen classes' 32768, GPT2Config's 1024. A 0 is no limit
// (RoPE models; a null is refused, as transformers refuses it:
// TestConfigNulls), and yarn's original context falls back on the default
// as on a value given. The context, which bounds the requests the engine
// takes, is the one a scaled RoPE states, as vLLM derives it: Qwen3's
// model card adds yarn of factor 4 over 32768 positions to a config of
// 40960 to run 131072, which the positions alone held to 40960; linear
// stretches the positions, llama3's already state its context.
func TestMaxPositionDefaults(t *testing.T) {
	const sizes = `"vocab_size": 10, "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 8, "num_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 8`
	const llama3 = `"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192`
	for _, c := range []struct {
		arch, extra string
		pos, ctx    int // max_position_embeddings, Context
		orig        int // yarn's original_max_position_embeddings (0: no scaling)
	}{
		{"LlamaForCausalLM", ``, 2048, 2048, 0},
		{"MistralForCausalLM", `, "sliding_window": null`, 131072, 131072, 0},
		{"MixtralForCausalLM", ``, 131072, 131072, 0},
		{"Qwen2ForCausalLM", ``, 32768, 32768, 0},
		{"Qwen3ForCausalLM", ``, 32768, 32768, 0},
		{"Qwen3MoeForCausalLM", ``, 32768, 32768, 0},
		{"GPT2LMHeadModel", ``, 1024, 1024, 0},
		{"GPT2LMHeadModel", `, "max_position_embeddings": 64`, 64, 64, 0},
		{"GPT2LMHeadModel", `, "n_positions": 32`, 32, 32, 0},
		{"LlamaForCausalLM", `, "max_position_embeddings": 100`, 100, 100, 0},
		{"LlamaForCausalLM", `, "max_position_embeddings": 0`, 0, 0, 0},
		{"Qwen3ForCausalLM", `, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}`, 32768, 131072, 32768},
		{"Qwen3ForCausalLM", `, "max_position_embeddings": 40960, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}`, 40960, 131072, 32768},
		{"Qwen3MoeForCausalLM", `, "max_position_embeddings": 40960, "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "rope_theta": 1e6}`, 40960, 131072, 32768},
		{"Qwen3ForCausalLM", `, "max_position_embeddings": 40960, "rope_scaling": {"type": "yarn", "factor": 2.5, "original_max_position_embeddings": 1000}`, 40960, 2500, 1000},
		{"LlamaForCausalLM", `, "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}`, 4096, 8192, 0},
		{"LlamaForCausalLM", `, "max_position_embeddings": 0, "rope_scaling": {"type": "linear", "factor": 2.0}`, 0, 0, 0},
		{"LlamaForCausalLM", `, "max_position_embeddings": 131072, "rope_scaling": {` + llama3 + `}`, 131072, 131072, 0},
		// DeepSeek-V3's spelling, no factor: the contexts' ratio scales the
		// frequencies, and vLLM stretches the original context by 1.
		{"Qwen3ForCausalLM", `, "max_position_embeddings": 163840, "rope_scaling": {"type": "yarn", "original_max_position_embeddings": 4096}`, 163840, 4096, 4096},
	} {
		raw := `{"architectures": ["` + c.arch + `"], ` + sizes + c.extra + `}`
		if c.arch == GPT2Architecture {
			raw = `{"architectures": ["` + c.arch + `"], "vocab_size": 10, "n_embd": 64, "n_layer": 1, "n_head": 2` + c.extra + `}`
		}
		cfg, err := ParseHFConfig("config.json", []byte(raw))
		if err != nil {
			t.Errorf("%s%s: %v", c.arch, c.extra, err)
			continue
		}
		if n, what := cfg.Context(); cfg.MaxPos != c.pos || n != c.ctx {
			t.Errorf("%s%s: max positions %d, context %d (%s); want %d, %d", c.arch, c.extra, cfg.MaxPos, n, what, c.pos, c.ctx)
		}
		if sc := cfg.RopeScaling; sc != nil && sc.Type == "yarn" && sc.OriginalMax != c.orig {
			t.Errorf("%s%s: yarn's original context %d, want %d", c.arch, c.extra, sc.OriginalMax, c.orig)
		}
	}
}

// A scaled context past what mtlbench runs (MaxPositions, which keeps every
// position an int32) is refused as the config is read, naming the factor as
// the file spells it and the context it states; the same product below the
// limit is read.
func TestScaledContextLimit(t *testing.T) {
	const sizes = `"vocab_size": 10, "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 8`
	for _, c := range []struct{ extra, want string }{
		{`"rope_scaling": {"rope_type": "yarn", "factor": 1024, "original_max_position_embeddings": 32768}`,
			"rope_scaling.factor=1024 states a context of 33554432 positions (yarn rope scaling: rope_scaling.original_max_position_embeddings 32768 × factor 1024), beyond what mtlbench runs (at most 16777216)"},
		{`"max_position_embeddings": 65536, "rope_parameters": {"rope_type": "yarn", "factor": 16777216, "rope_theta": 1e6}`,
			"rope_parameters.factor=1.6777216e+07 states a context of 1099511627776 positions (yarn rope scaling: max_position_embeddings 65536 × factor 1.6777216e+07)"},
		{`"max_position_embeddings": 16777216, "rope_scaling": {"type": "linear", "factor": 1.5}`,
			"rope_scaling.factor=1.5 states a context of 25165824 positions (linear rope scaling: max_position_embeddings 16777216 × factor 1.5)"},
		{`"rope_scaling": {"rope_type": "yarn", "factor": 512, "original_max_position_embeddings": 32768}`, ""},
	} {
		cfg, err := ParseHFConfig("config.json", []byte(`{"architectures": ["Qwen3ForCausalLM"], `+sizes+`, `+c.extra+`}`))
		if err == nil {
			err = cfg.Validate()
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.extra, err)
		case c.want == "":
			if n, _ := cfg.Context(); n != MaxPositions {
				t.Errorf("%s: context %d, want %d", c.extra, n, MaxPositions)
			}
		case err == nil || !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %v, want %q", c.extra, err, c.want)
		}
	}
}

// RoPE scaling as checkpoints spell it: rope_theta with rope_scaling
// (Llama-3.2's config.json on the hub, "type" in older ones) and
// transformers 5's rope_parameters; the types that change more than the
// frequencies are refused by name, as is a bad field.
func TestRopeScaling(t *testing.T) {
	const head = `{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, `
	llama3 := kernels.RoPEScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMax: 8192}
	for _, c := range []struct {
		name, json string
		theta      float64
		want       *kernels.RoPEScaling
		err        string
		note       string
	}{
		// transformers 5 takes rope_scaling whole in place of rope_parameters.
		{"v5 save with the card's yarn", `"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}`, 10000,
			&kernels.RoPEScaling{Type: "yarn", Factor: 4, OriginalMax: 32768, BetaFast: 32, BetaSlow: 1, Attention: 0.1*math.Log(4) + 1}, "",
			"config.json: rope_scaling is read in place of rope_parameters, which is passed over, its rope_theta 1e+06 too: RoPE runs at 10000 (as transformers 5 reads both)"},
		{"both, theta in rope_scaling", `"rope_theta": 1e4, "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0}, "rope_scaling": {"type": "linear", "factor": 2.0, "rope_theta": 1e6}}`, 1e6,
			&kernels.RoPEScaling{Type: "linear", Factor: 2}, "", "config.json: rope_scaling is read in place of rope_parameters, which is passed over (as transformers 5 reads both)"},
		{"empty rope_scaling", `"rope_scaling": {}, "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6}}`, 1e6, &kernels.RoPEScaling{Type: "linear", Factor: 2}, "", ""},
		{"both, bad theta named where read", `"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}, "rope_scaling": {"type": "linear", "factor": 2.0, "rope_theta": "x"}}`, 0, nil, `rope_scaling.rope_theta "x" is not a number`, ""},
		{"hub llama3", `"rope_theta": 500000.0, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}}`, 500000, &llama3, "", ""},
		{"v5 llama3", `"rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192}}`, 500000, &llama3, "", ""},
		{"older linear", `"rope_theta": 10000.0, "rope_scaling": {"type": "linear", "factor": 4.0}}`, 10000, &kernels.RoPEScaling{Type: "linear", Factor: 4}, "", ""},
		{"v5 default", `"rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}}`, 1e6, nil, "", ""},
		{"null scaling", `"rope_theta": 10000.0, "rope_scaling": null}`, 10000, nil, "", ""},
		{"qwen3 yarn", `"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0, "original_max_position_embeddings": 32768}}`, 1e6,
			&kernels.RoPEScaling{Type: "yarn", Factor: 4, OriginalMax: 32768, BetaFast: 32, BetaSlow: 1, Attention: 0.1*math.Log(4) + 1}, "", ""},
		// DeepSeek-R1-0528-Qwen3-8B's: attn_factor is not a key transformers reads.
		{"yarn with attn_factor", `"rope_theta": 1e6, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "attn_factor": 0.8782488562869419}}`, 1e6,
			&kernels.RoPEScaling{Type: "yarn", Factor: 4, OriginalMax: 32768, BetaFast: 32, BetaSlow: 1, Attention: 0.1*math.Log(4) + 1}, "", ""},
		{"yarn mscale, no factor", `"max_position_embeddings": 163840, "rope_scaling": {"type": "yarn", "factor": null, "original_max_position_embeddings": 4096, "mscale": 0.707, "mscale_all_dim": 0.707, "beta_fast": 32, "beta_slow": 1, "truncate": false}}`, 10000,
			&kernels.RoPEScaling{Type: "yarn", Factor: 40, OriginalMax: 4096, BetaFast: 32, BetaSlow: 1, NoTruncate: true, Attention: 1}, "", ""},
		{"yarn attention_factor", `"rope_scaling": {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 4096, "attention_factor": 1.5, "beta_fast": 16}}`, 10000,
			&kernels.RoPEScaling{Type: "yarn", Factor: 2, OriginalMax: 4096, BetaFast: 16, BetaSlow: 1, Attention: 1.5}, "", ""},
		{"yarn truncate a string", `"rope_scaling": {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 4096, "truncate": "no"}}`, 0, nil, "yarn: truncate \"no\" is not a boolean", ""},
		{"yarn negative beta", `"rope_scaling": {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 4096, "beta_slow": -1}}`, 0, nil, "beta_slow -1 must be", ""},
		{"dynamic", `"rope_scaling": {"type": "dynamic", "factor": 2.0}}`, 0, nil, `rope_scaling: rope type "dynamic" is not supported`, ""},
		{"longrope", `"rope_scaling": {"type": "longrope", "long_factor": [1], "short_factor": [1]}}`, 0, nil, `rope type "longrope" is not supported`, ""},
		{"llama3 missing fields", `"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}`, 0, nil, "llama3: low_freq_factor, high_freq_factor, original_max_position_embeddings missing or not a number", ""},
		{"llama3 low above high", `"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0, "original_max_position_embeddings": 8192}}`, 0, nil, "must satisfy 0 < low < high", ""},
		{"llama3 fractional context", `"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192.5}}`, 0, nil, "is not a whole number", ""},
		{"linear below one", `"rope_scaling": {"rope_type": "linear", "factor": 0.5}}`, 0, nil, "factor 0.5 must be a number from 1 to", ""},
		{"linear factor a string", `"rope_scaling": {"rope_type": "linear", "factor": "4"}}`, 0, nil, "linear: factor missing or not a number", ""},
		{"theta a string", `"rope_parameters": {"rope_type": "default", "rope_theta": "1e6"}}`, 0, nil, "rope_parameters.rope_theta \"1e6\" is not a number", ""},
		{"partial rotary", `"partial_rotary_factor": 0.5}`, 0, nil, "partial_rotary_factor=0.5 is not supported", ""},
		// transformers 5 reads it from rope_parameters too.
		{"partial rotary in rope_parameters", `"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}}`, 0, nil, "rope_parameters.partial_rotary_factor=0.5 is not supported", ""},
		{"whole rotary in rope_parameters", `"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 1.0}}`, 1e4, nil, "", ""},
		{"per layer type", `"rope_parameters": {"full_attention": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0}}}`, 0, nil, `rope_parameters: "full_attention": rope parameters per layer type are not supported`, ""},
		{"factor with no type", `"rope_scaling": {"factor": 4.0}}`, 0, nil, "rope_scaling: factor 4 with no rope_type: give the scaling's type", ""},
		{"v5 factor with no type", `"rope_parameters": {"rope_theta": 1e6, "factor": 8.0}}`, 0, nil, "rope_parameters: factor 8 with no rope_type", ""},
		{"factor one with no type", `"rope_theta": 1e4, "rope_scaling": {"factor": 1.0}}`, 1e4, nil, "", ""},
		{"default with a factor", `"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "factor": 4.0}}`, 1e4, nil, "", ""},
		{"rope type a number", `"rope_scaling": {"rope_type": 3, "factor": 4.0}}`, 0, nil, "rope_scaling: rope_type 3 is not a string", ""},
		{"negative head_dim", `"head_dim": -32}`, 0, nil, "head_dim=-32 must be positive", ""},
		{"negative positions", `"max_position_embeddings": -1}`, 0, nil, "max_position_embeddings=-1 must not be negative", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseHFConfig("config.json", []byte(head+c.json))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.HasPrefix(err.Error(), "config.json: ") {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.RopeTheta != c.theta || fmt.Sprint(cfg.RopeScaling) != fmt.Sprint(c.want) {
				t.Fatalf("theta %g, scaling %+v; want %g, %+v", cfg.RopeTheta, cfg.RopeScaling, c.theta, c.want)
			}
			if note := strings.Join(cfg.Notes, "\n"); note != c.note {
				t.Errorf("notes %q, want %q", note, c.note)
			}
			r := cfg.Rotary()
			if (r.Freqs != nil) != (c.want != nil) {
				t.Fatalf("rotary table %v for scaling %+v", r.Freqs, c.want)
			}
		})
	}
}

// Llama 3's frequencies against the rule they come from: a period shorter
// than OriginalMax/HighFreqFactor keeps its frequency, one longer than
// OriginalMax/LowFreqFactor is divided by Factor, one between blends the
// two; linear divides them all.
func TestRopeScaledFrequencies(t *testing.T) {
	const dim, theta = 128, 500000.0
	base := (&Config{HeadDim: dim, RopeTheta: theta}).Rotary().InvFreq(dim)
	s := kernels.RoPEScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMax: 8192}
	got := (&Config{HeadDim: dim, RopeTheta: theta, RopeScaling: &s}).Rotary().InvFreq(dim)
	kept, divided, blended := 0, 0, 0
	for i, f := range got {
		wave := 2 * math.Pi / float64(base[i])
		switch {
		case wave < 8192/4.0:
			kept++
			if f != base[i] {
				t.Errorf("frequency %d (period %.0f): %g, want %g kept", i, wave, f, base[i])
			}
		case wave > 8192:
			divided++
			if math.Abs(float64(f)-float64(base[i])/32) > 1e-7*float64(base[i]) {
				t.Errorf("frequency %d (period %.0f): %g, want %g / 32", i, wave, f, base[i])
			}
		default:
			blended++
			if !(f > base[i]/32 && f < base[i]) {
				t.Errorf("frequency %d (period %.0f): %g, not between %g / 32 and it", i, wave, f, base[i])
			}
		}
	}
	if kept == 0 || divided == 0 || blended == 0 {
		t.Fatalf("kept %d, divided %d, blended %d: the case does not cover each", kept, divided, blended)
	}
	lin := kernels.RoPEScaling{Type: "linear", Factor: 4}
	for i, f := range (&Config{HeadDim: dim, RopeTheta: theta, RopeScaling: &lin}).Rotary().InvFreq(dim) {
		if f != base[i]/4 {
			t.Fatalf("linear frequency %d: %g, want %g", i, f, base[i]/4)
		}
	}
}

// A sliding window slides the layers transformers slides by it (Sliding,
// LayerWindow): Mistral's and Mixtral's every layer whenever it is set, a
// Mistral file with layer_types (Ministral) those it names; Qwen2's and
// Qwen3's, only with use_sliding_window, the layers layer_types names, else
// those from max_window_layers on (28 by default); Qwen3-MoE's with
// use_sliding_window, every layer. It bounds no sequence: Context is the
// positions.
func TestSlidingWindow(t *testing.T) {
	const dims = `"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 8, "max_position_embeddings": 32768`
	const moe = `, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8`
	for _, c := range []struct {
		arch, extra string
		window      int
		layers      string // S: the layer slides, F: full attention
	}{
		{"MistralForCausalLM", `"sliding_window": 4096`, 4096, "SS"},
		{"MistralForCausalLM", `"sliding_window": null`, 0, "FF"},
		{"MistralForCausalLM", `"sliding_window": 65536`, 65536, "SS"},
		{"MistralForCausalLM", `"sliding_window": 4096, "layer_types": ["sliding_attention", "full_attention"]`, 4096, "SF"},
		{"MistralForCausalLM", `"sliding_window": 4096, "layer_types": ["full_attention", "full_attention"]`, 0, "FF"},
		{"Qwen2ForCausalLM", `"sliding_window": 4096, "use_sliding_window": false`, 0, "FF"},
		{"Qwen2ForCausalLM", `"sliding_window": 4096, "use_sliding_window": true`, 0, "FF"},
		{"Qwen2ForCausalLM", `"sliding_window": 4096, "use_sliding_window": true, "max_window_layers": 1`, 4096, "FS"},
		{"Qwen2ForCausalLM", `"sliding_window": 4096, "use_sliding_window": true, "max_window_layers": 2`, 0, "FF"},
		{"Qwen2ForCausalLM", `"use_sliding_window": true, "max_window_layers": 0`, 4096, "SS"},
		{"Qwen2ForCausalLM", `"sliding_window": null, "use_sliding_window": true, "max_window_layers": 0`, 0, "FF"},
		{"Qwen2ForCausalLM", `"sliding_window": 8, "use_sliding_window": true, "max_window_layers": 1, "layer_types": ["sliding_attention", "full_attention"]`, 8, "SF"},
		{"Qwen3ForCausalLM", `"sliding_window": 4096, "layer_types": ["full_attention", "sliding_attention"]`, 0, "FF"},
		{"Qwen3ForCausalLM", `"sliding_window": 4096, "use_sliding_window": true, "layer_types": ["full_attention", "sliding_attention"]`, 4096, "FS"},
		{"Qwen3ForCausalLM", `"sliding_window": 4096, "use_sliding_window": true, "max_window_layers": 0, "layer_types": ["full_attention", "full_attention"]`, 0, "FF"},
		{"Qwen3MoeForCausalLM", `"sliding_window": 2048, "use_sliding_window": true, "max_window_layers": 1` + moe, 2048, "SS"},
		// Qwen3MoeConfig reads no max_window_layers or layer_types, and
		// Qwen3MoeModel slides every layer once sliding_window is kept.
		{"Qwen3MoeForCausalLM", `"sliding_window": 2048, "use_sliding_window": true` + moe, 2048, "SS"},
		{"Qwen3MoeForCausalLM", `"sliding_window": 2048, "use_sliding_window": true, "max_window_layers": 2` + moe, 2048, "SS"},
		{"Qwen3MoeForCausalLM", `"sliding_window": 2048, "use_sliding_window": true, "layer_types": ["full_attention", "full_attention"]` + moe, 2048, "SS"},
		{"Qwen3MoeForCausalLM", `"sliding_window": 2048, "use_sliding_window": false, "max_window_layers": 0` + moe, 0, "FF"},
		{"LlamaForCausalLM", `"sliding_window": 4096`, 0, "FF"},
		{"MixtralForCausalLM", `"sliding_window": 4096, "num_local_experts": 4, "num_experts_per_tok": 2`, 4096, "SS"},
		{"MixtralForCausalLM", `"sliding_window": null, "num_local_experts": 4, "num_experts_per_tok": 2`, 0, "FF"},
	} {
		t.Run(c.arch+" "+c.extra, func(t *testing.T) {
			cfg, err := ParseHFConfig("config.json", []byte(`{"architectures": ["`+c.arch+`"], `+dims+`, `+c.extra+`}`))
			if err != nil {
				t.Fatal(err)
			}
			layers := ""
			for l := range 2 {
				switch w := cfg.LayerWindow(l); w {
				case 0:
					layers += "F"
				case c.window:
					layers += "S"
				default:
					t.Errorf("layer %d: window %d, want %d", l, w, c.window)
				}
			}
			if cfg.Window != c.window || layers != c.layers {
				t.Errorf("window %d, layers %s; want %d, %s", cfg.Window, layers, c.window, c.layers)
			}
			if n, what := cfg.Context(); n != 32768 {
				t.Errorf("context %d (%s), want the 32768 positions", n, what)
			}
		})
	}
}

// mlp_only_layers is read as transformers reads it, a layer's membership:
// entries past the layers and repeats are dropped as it is read, so a list
// as long as a config.json may be does not make every layer's question a
// search of it.
func TestMLPOnlyLayersSet(t *testing.T) {
	list := strings.Repeat("9999, 2, -1, ", 1<<18) + "0"
	cfg, err := ParseHFConfig("config.json", []byte(`{"architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 10, "hidden_size": 8,
		"num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 24, "num_experts": 4,
		"num_experts_per_tok": 2, "moe_intermediate_size": 8, "mlp_only_layers": [`+list+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.MLPOnlyLayers, []int{0, 2}) {
		t.Errorf("mlp_only_layers read as %d layers, want [0 2]", len(cfg.MLPOnlyLayers))
	}
	for l, moe := range []bool{false, true, false, true} {
		if cfg.IsMoELayer(l) != moe {
			t.Errorf("layer %d: MoE %v, want %v", l, !moe, moe)
		}
	}
}

// Mixtral's config.json: every layer an MoE block of num_local_experts
// experts intermediate_size wide, the top-k weights renormalised (as
// transformers' MixtralSparseMoeBlock does), whatever Qwen3-MoE's keys say;
// and its checkpoint's block_sparse_moe tensors load under the names
// Tensors gives.
func TestMixtralConfig(t *testing.T) {
	const base = `"architectures": ["MixtralForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 3,
		"num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 24, "max_position_embeddings": 64`
	cfg, err := ParseHFConfig("config.json", []byte(`{`+base+`, "num_local_experts": 4, "num_experts_per_tok": 2,
		"moe_intermediate_size": 5, "norm_topk_prob": false, "decoder_sparse_step": 2, "mlp_only_layers": [0]}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NumExperts != 4 || cfg.TopK != 2 || cfg.MoEInter != 24 || !cfg.NormTopK {
		t.Errorf("experts %d, top-k %d, expert width %d, renormalised %v; want 4, 2, 24, true", cfg.NumExperts, cfg.TopK, cfg.MoEInter, cfg.NormTopK)
	}
	for l := range 3 {
		if !cfg.IsMoELayer(l) {
			t.Errorf("layer %d is not an MoE layer", l)
		}
	}
	c, ck, err := OpenDir(filepath.Join(fixtures, "mixtral"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for _, name := range []string{"model.layers.1.mlp.gate.weight", "model.layers.1.mlp.experts.7.gate_proj.weight",
		"model.layers.1.mlp.experts.7.up_proj.weight", "model.layers.1.mlp.experts.7.down_proj.weight"} {
		if !ck.Has(name) {
			t.Errorf("%s: not found", name)
		}
	}
	for _, spec := range c.Tensors() {
		if _, _, err := ck.Tensor(spec); err != nil {
			t.Fatal(err)
		}
	}
}

// The MoE counts a config.json leaves out are its class's, as transformers
// reads them: Qwen3MoeConfig's num_experts 128, num_experts_per_tok 8,
// moe_intermediate_size 768, decoder_sparse_step 1, norm_topk_prob false and
// no mlp_only_layers; MixtralConfig's num_local_experts 8 and
// num_experts_per_tok 2. Either spelling of the experts' count is read.
func TestMoEDefaults(t *testing.T) {
	const sizes = `"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 24`
	for _, c := range []struct {
		arch, extra                string
		experts, topK, inter, step int
		norm                       bool
	}{
		{"Qwen3MoeForCausalLM", ``, 128, 8, 768, 1, false},
		{"Qwen3MoeForCausalLM", `, "num_experts": 16`, 16, 8, 768, 1, false},
		{"Qwen3MoeForCausalLM", `, "num_local_experts": 16, "num_experts_per_tok": 2, "moe_intermediate_size": 8, "norm_topk_prob": true, "decoder_sparse_step": 2`, 16, 2, 8, 2, true},
		{"MixtralForCausalLM", ``, 8, 2, 24, 1, true},
		{"MixtralForCausalLM", `, "num_local_experts": 4`, 4, 2, 24, 1, true},
		{"MixtralForCausalLM", `, "num_experts": 4, "num_experts_per_tok": 1`, 4, 1, 24, 1, true},
	} {
		cfg, err := ParseHFConfig("config.json", []byte(`{"architectures": ["`+c.arch+`"], `+sizes+c.extra+`}`))
		if err != nil {
			t.Errorf("%s%s: %v", c.arch, c.extra, err)
			continue
		}
		if cfg.NumExperts != c.experts || cfg.TopK != c.topK || cfg.MoEInter != c.inter || cfg.SparseStep != c.step ||
			cfg.NormTopK != c.norm || len(cfg.MLPOnlyLayers) != 0 {
			t.Errorf("%s%s: experts %d top-k %d width %d step %d renormalised %v mlp-only %v, want %d %d %d %d %v []",
				c.arch, c.extra, cfg.NumExperts, cfg.TopK, cfg.MoEInter, cfg.SparseStep, cfg.NormTopK, cfg.MLPOnlyLayers,
				c.experts, c.topK, c.inter, c.step, c.norm)
		}
	}
}

// A negative layer count is refused, naming the model, before anything is
// read: it once ran the whole model silently.
func TestOpenRefusesNegativeLayers(t *testing.T) {
	for _, m := range []string{"qwen3-moe-mini", "../testdata/gguf/llama-q8_0.gguf"} {
		_, src, err := Open(Spec{Model: m, Layers: -1})
		if err == nil {
			src.Close()
			t.Fatalf("%s with -1 layers opened", m)
		}
		if !strings.Contains(err.Error(), m) || !strings.Contains(err.Error(), "-1 layers") {
			t.Errorf("%s: error %q does not name the model and the count", m, err)
		}
	}
}

// A checkpoint opened for synthetic weights reads only its configuration
// (a folder's config.json, a GGUF file's metadata) and draws weights as a
// preset's, packed ones included; its own weights are never read.
func TestSyntheticFromCheckpoint(t *testing.T) {
	for _, path := range []string{filepath.Join(fixtures, "qwen3_moe"), "../testdata/mlx/llama-q4", "../testdata/gguf/llamacpp-qwen3-q8_0.gguf"} {
		own, osrc, err := Open(Spec{Model: path})
		if err != nil {
			t.Fatal(err)
		}
		osrc.Close()
		bf := bridge.BF16
		cfg, src, err := Open(Spec{Model: path, Synthetic: true, DType: &bf, Quant: "q4", Seed: 7})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		syn, ok := src.(*Synthetic)
		if !ok {
			t.Fatalf("%s: source %T, want synthetic", path, src)
		}
		if cfg.Architecture != own.Architecture || cfg.Hidden != own.Hidden || cfg.Layers != own.Layers || cfg.Vocab != own.Vocab ||
			cfg.NumExperts != own.NumExperts || cfg.Quant == nil || cfg.Quant.Name != "q4" {
			t.Errorf("%s: synthetic config %+v, checkpoint's %+v", path, cfg, own)
		}
		if !strings.Contains(syn.Describe(), "synthetic (seed 7, q4") {
			t.Errorf("%s: %s", path, syn.Describe())
		}
		src.Close()
	}
	// A file of no model is refused as before.
	if _, _, err := Open(Spec{Model: t.TempDir(), Synthetic: true}); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("a folder without config.json: %v", err)
	}
}

// A wrong JSON type in the quantization block is named by its path in
// config.json and the value found, never by Go's types.
func TestMLXQuantTypeErrors(t *testing.T) {
	for _, c := range []struct{ q, want string }{
		{`{"bits": "4", "group_size": 64}`, `config.json: quantization.bits is a JSON string ("4"), want a whole number`},
		{`{"bits": 4, "group_size": 64, "mode": 3}`, `config.json: quantization.mode is a JSON number, want a string`},
		{`{"bits": 4, "group_size": 64, "model.layers.0.mlp": "yes"}`, `config.json: quantization["model.layers.0.mlp"] is "yes", want an object or a boolean`},
		{`{"bits": 4, "group_size": 64, "model.layers.0.mlp": {"bits": "8"}}`, `config.json: quantization["model.layers.0.mlp"].bits is a JSON string ("8"), want a whole number`},
	} {
		_, err := parseMLXQuant("config.json", []byte(`{"quantization": `+c.q+`}`))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.q, err, c.want)
		}
	}
}

// A module's quantization entry that is an empty object leaves the module
// a float one, as mlx's nn.quantize takes it (a falsy predicate result),
// the same as false; an object of settings, or true, quantizes it.
func TestMLXQuantEmptyEntry(t *testing.T) {
	const k = "model.layers.0.mlp.gate"
	for _, c := range []struct {
		entry string
		float bool
	}{
		{`false`, true},
		{`{}`, true},
		{`{ }`, true},
		{`true`, false},
		{`{"bits": 8}`, false},
	} {
		q, err := parseMLXQuant("config.json", []byte(`{"quantization": {"bits": 4, "group_size": 64, "`+k+`": `+c.entry+`}}`))
		if err != nil {
			t.Fatalf("%s: %v", c.entry, err)
		}
		if e, listed := q.Modules[k]; !listed || (e == nil) != c.float {
			t.Errorf("%s: read as %+v (listed %v), want float %v", c.entry, e, listed, c.float)
		}
	}
	// The fixture's router is packed at 8 bits: an empty entry makes it a
	// float module, whose packed tensors are refused as mlx-lm refuses them.
	dir := withConfig(t, "../testdata/mlx/qwen3_moe-q4", func(cfg map[string]any) {
		for _, key := range []string{"quantization", "quantization_config"} {
			cfg[key].(map[string]any)[k] = map[string]any{}
		}
	})
	want := `config.json's quantization["` + k + `"] makes it a float module (false or {}), but the checkpoint holds its packed "` + k + `.scales"`
	if err := openAll(dir); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("open: %v, want %s", err, want)
	}
}

// A checkpoint holding far more tensors than its config's model could read
// is refused by the bound the config gives, before its header is read
// whole; the fixture itself is within it.
func TestOpenDirTensorBound(t *testing.T) {
	fixture, _ := filepath.Abs(filepath.Join("..", "testdata", "hf", "qwen3"))
	cfg, err := LoadDir(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		extra int
		fail  bool
	}{
		{"the fixture", 0, false},
		{"past the bound", cfg.tensorBound() + 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			os.Symlink(filepath.Join(fixture, "config.json"), filepath.Join(dir, "config.json"))
			if c.extra == 0 {
				os.Symlink(filepath.Join(fixture, "model.safetensors"), filepath.Join(dir, "model.safetensors"))
			} else {
				ts := make([]safetensors.WriteTensor, c.extra)
				for i := range ts {
					ts[i] = safetensors.WriteTensor{Name: fmt.Sprintf("t%d", i), DType: "F32", Shape: []int{0}}
				}
				if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
					t.Fatal(err)
				}
			}
			_, ck, err := OpenDir(dir, nil)
			if ck != nil {
				ck.Close()
			}
			if got := errors.Is(err, safetensors.ErrTooManyTensors); got != c.fail {
				t.Errorf("error %v, want the tensor bound: %v", err, c.fail)
			}
		})
	}
}

// The tokens a generation ends at: config.json's eos_token_id (one id or a
// list), generation_config.json's over it, a GGUF file's eos and eot ids.
func TestEOS(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want []int32
		err  string
	}{
		{``, nil, ""},
		{`null`, nil, ""},
		{`2`, []int32{2}, ""},
		{`[151645, 151643]`, []int32{151645, 151643}, ""},
		// transformers' generate takes a negative id (and warns), or one
		// past the vocabulary, and stops at no sampled token.
		{`-1`, []int32{-1}, ""},
		{`[2, 4294967296]`, nil, "4294967296 is not a token id"},
		{`"2"`, nil, "want a token id or a list of them"},
		{`1.5`, nil, "want a token id or a list of them"},
	} {
		got, err := ParseEOS(json.RawMessage(c.raw))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.raw, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v %v, want %v", c.raw, got, err, c.want)
		}
	}
	// A config.json that leaves the key out takes its class's default, as
	// transformers' generate stops there; an explicit null is none.
	for _, c := range []struct {
		arch, eos string
		want      []int32
	}{
		{"LlamaForCausalLM", "", []int32{2}},
		{"MistralForCausalLM", "", []int32{2}},
		{"MixtralForCausalLM", "", []int32{2}},
		{"GPT2LMHeadModel", "", []int32{50256}},
		{"Qwen2ForCausalLM", "", nil},
		{"Qwen3MoeForCausalLM", "", nil},
		{"LlamaForCausalLM", `, "eos_token_id": null`, nil},
		{"LlamaForCausalLM", `, "eos_token_id": [7, 8]`, []int32{7, 8}},
		{"LlamaForCausalLM", `, "eos_token_id": 99`, []int32{99}},
		{"LlamaForCausalLM", `, "eos_token_id": [-1, 2]`, []int32{-1, 2}},
	} {
		cfg, err := ParseHFConfig("config.json", []byte(`{"architectures": ["`+c.arch+`"], "vocab_size": 10, "hidden_size": 8,
			"num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 8,
			"num_experts": 2, "num_local_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 8, "n_positions": 16`+c.eos+`}`))
		if err != nil {
			t.Errorf("%s%s: %v", c.arch, c.eos, err)
		} else if !slices.Equal(cfg.EOS, c.want) {
			t.Errorf("%s%s: eos %v, want %v", c.arch, c.eos, cfg.EOS, c.want)
		}
	}
	dir := t.TempDir()
	data, err := os.ReadFile("../testdata/hf/llama/config.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644)
	cfg, _, _, err := loadDir(dir)
	if err != nil || !slices.Equal(cfg.EOS, []int32{2}) {
		t.Fatalf("config.json's eos: %v %v", cfg.EOS, err)
	}
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id": [2, 7], "do_sample": true}`), 0o644)
	if cfg, _, _, err = loadDir(dir); err != nil || !slices.Equal(cfg.EOS, []int32{2, 7}) {
		t.Fatalf("generation_config.json's eos: %v %v", cfg.EOS, err)
	}
	// A negative id is noted, naming the file it came from.
	for _, c := range []struct{ config, generation, note string }{
		{`"eos_token_id": -1`, "", "config.json: eos_token_id -1 is no token id: generation does not stop at it"},
		{`"eos_token_id": 2`, `{"eos_token_id": [2, -5]}`, "generation_config.json: eos_token_id -5 is no token id"},
		{`"eos_token_id": -1`, `{"eos_token_id": 2}`, ""},
	} {
		d := t.TempDir()
		os.WriteFile(filepath.Join(d, "config.json"), []byte(`{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8,
			"num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, `+c.config+`}`), 0o644)
		if c.generation != "" {
			os.WriteFile(filepath.Join(d, "generation_config.json"), []byte(c.generation), 0o644)
		}
		cfg, _, _, err := loadDir(d)
		if err != nil {
			t.Fatalf("%s %s: %v", c.config, c.generation, err)
		}
		if got := strings.Join(cfg.Notes, "\n"); (c.note == "") != (got == "") || !strings.Contains(got, c.note) {
			t.Errorf("%s %s: notes %q, want %q", c.config, c.generation, got, c.note)
		}
	}
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id": "x"}`), 0o644)
	if _, _, _, err = loadDir(dir); err == nil || !strings.Contains(err.Error(), "generation_config.json: eos_token_id") {
		t.Fatalf("a bad generation_config.json: %v", err)
	}
}

// A GGUF file's end-of-generation set is llama.cpp's: the ids its metadata
// names (end of sequence, turn and message, and the fill-in-the-middle
// tokens; an end of sequence left out is the vocabulary type's default),
// then the tokens whose text ends a turn, such as a Qwen file's
// <|endoftext|> beside its eos <|im_end|>.
func TestGGUFEndOfGeneration(t *testing.T) {
	vocab := []string{"<unk>", "a", "<|endoftext|>", "b", "<|im_end|>", "<|fim_pad|>", "<end_of_turn>", "<|im_end|>x"}
	spm := []string{"<unk>", "<s>", "</s>x", "a"}
	bpe := []string{"!", "\"", "#", "$", "%", "&", "'", "(", ")", "*", "+", ","}
	for _, c := range []struct {
		name string
		kv   []gguftest.KV
		want []int32
		err  string
	}{
		{"no keys, no vocabulary", nil, nil, ""},
		{"eos only", []gguftest.KV{{Key: "tokenizer.ggml.eos_token_id", Value: uint32(4)}}, []int32{4}, ""},
		// <|fim_pad|> with no fim_pad key: llama.cpp finds it by text.
		{"eos and the texts", []gguftest.KV{{Key: "tokenizer.ggml.eos_token_id", Value: uint32(4)}, {Key: "tokenizer.ggml.tokens", Value: vocab}}, []int32{4, 5, 2, 6}, ""},
		{"of two pads, the later", []gguftest.KV{{Key: "tokenizer.ggml.tokens", Value: []string{"<|fim_pad|>", "a", "[PAD]", "<|file_sep|>"}}}, []int32{2, 3}, ""},
		{"every key", []gguftest.KV{{Key: "tokenizer.ggml.eos_token_id", Value: uint32(1)}, {Key: "tokenizer.ggml.eot_token_id", Value: int32(3)},
			{Key: "tokenizer.ggml.eom_token_id", Value: uint32(7)}, {Key: "tokenizer.ggml.fim_pad_token_id", Value: uint32(5)},
			{Key: "tokenizer.ggml.fim_rep_token_id", Value: uint32(5)}, {Key: "tokenizer.ggml.tokens", Value: vocab}}, []int32{1, 3, 7, 5, 2, 4, 6}, ""},
		// Newer ends llama.cpp finds by text (Gemma 4's <eos> and <turn|>,
		// Kimi-K2's [EOS]).
		{"later texts", []gguftest.KV{{Key: "tokenizer.ggml.tokens", Value: []string{"<eos>", "a", "[EOS]", "<turn|>"}}}, []int32{0, 2, 3}, ""},
		// gpt-oss: <|end|> ends a message, not the generation, beside
		// <|return|> and <|call|>; alone it ends one.
		{"gpt-oss's <|end|>", []gguftest.KV{{Key: "tokenizer.ggml.tokens", Value: []string{"<|end|>", "<|return|>", "<|call|>"}}}, []int32{1, 2}, ""},
		{"<|end|> alone", []gguftest.KV{{Key: "tokenizer.ggml.tokens", Value: []string{"<|end|>", "<|call|>"}}}, []int32{0, 1}, ""},
		{"Gemma 4's </s>", []gguftest.KV{{Key: "tokenizer.ggml.tokens", Value: []string{"</s>", "<|tool_response>"}}}, []int32{1}, ""},
		// No eos key: llama.cpp's default for the vocabulary's type, where
		// the vocabulary holds it.
		{"llama vocabulary, no eos", []gguftest.KV{{Key: "tokenizer.ggml.model", Value: "llama"}, {Key: "tokenizer.ggml.tokens", Value: spm}}, []int32{2}, ""},
		{"gpt2 vocabulary, no eos", []gguftest.KV{{Key: "tokenizer.ggml.model", Value: "gpt2"}, {Key: "tokenizer.ggml.tokens", Value: bpe}}, []int32{11}, ""},
		{"gpt2 vocabulary too small", []gguftest.KV{{Key: "tokenizer.ggml.model", Value: "gpt2"}, {Key: "tokenizer.ggml.tokens", Value: spm}}, nil, ""},
		{"bert vocabulary", []gguftest.KV{{Key: "tokenizer.ggml.model", Value: "bert"}, {Key: "tokenizer.ggml.tokens", Value: bpe}}, nil, ""},
		{"no vocabulary type", []gguftest.KV{{Key: "tokenizer.ggml.tokens", Value: bpe}}, nil, ""},
		{"eos named", []gguftest.KV{{Key: "tokenizer.ggml.model", Value: "llama"}, {Key: "tokenizer.ggml.eos_token_id", Value: uint32(3)}, {Key: "tokenizer.ggml.tokens", Value: spm}}, []int32{3}, ""},
		// An id past the vocabulary: the default, as llama.cpp takes it.
		{"eos past the vocabulary", []gguftest.KV{{Key: "tokenizer.ggml.model", Value: "llama"}, {Key: "tokenizer.ggml.eos_token_id", Value: uint32(99)}, {Key: "tokenizer.ggml.tokens", Value: spm}}, []int32{2}, ""},
		{"eot past the vocabulary", []gguftest.KV{{Key: "tokenizer.ggml.model", Value: "gpt2"}, {Key: "tokenizer.ggml.eot_token_id", Value: uint32(99)}, {Key: "tokenizer.ggml.eos_token_id", Value: uint32(1)}, {Key: "tokenizer.ggml.tokens", Value: bpe}}, []int32{1}, ""},
		{"a negative id", []gguftest.KV{{Key: "tokenizer.ggml.eom_token_id", Value: int32(-1)}}, nil, "tokenizer.ggml.eom_token_id is not a token id"},
		{"a string id", []gguftest.KV{{Key: "tokenizer.ggml.eot_token_id", Value: "2"}}, nil, "tokenizer.ggml.eot_token_id is not a token id"},
	} {
		b, err := gguftest.Bytes(append([]gguftest.KV{{Key: "general.architecture", Value: "qwen3"}}, c.kv...)...)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got, errs := ggufEOG(f, nil)
		f.Close()
		if c.err != "" {
			if len(errs) != 1 || errs[0] != c.err {
				t.Errorf("%s: errors %q, want %q", c.name, errs, c.err)
			}
			continue
		}
		if len(errs) != 0 || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v %q, want %v", c.name, got, errs, c.want)
		}
	}
}

// A generation_config.json that is no JSON (or not UTF-8) is passed over
// with a note naming it, config.json's eos_token_id kept: transformers'
// from_pretrained catches the OSError GenerationConfig.from_pretrained
// raises for it and builds the generation config from config.json. JSON of
// the wrong shape, and a NaN (which Python reads), are still refused.
func TestUnreadableGenerationConfig(t *testing.T) {
	data, err := os.ReadFile("../testdata/hf/llama/config.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, gen string
		eos       []int32
		note, err string
	}{
		{"valid", `{"eos_token_id": 7}`, []int32{7}, "", ""},
		// GenerationConfig reads the key as spelled; another is an
		// attribute of its own.
		{"key in another case", `{"EOS_Token_Id": 7}`, []int32{2}, "", ""},
		{"syntax", `{"eos_token_id": 7,}`, []int32{2}, "generation_config.json: not valid JSON at line 1, column 20", ""},
		{"truncated", `{"eos_token_id": [7`, []int32{2}, "generation_config.json: not valid JSON", ""},
		{"empty", ``, []int32{2}, "generation_config.json: not valid JSON", ""},
		{"bom", "\ufeff{\"eos_token_id\": 7}", []int32{2}, "generation_config.json: not valid JSON", ""},
		{"not utf-8", "{\"eos_token_id\": 7, \"x\": \"\xff\"}", []int32{2}, "generation_config.json: not UTF-8 text", ""},
		{"wrong eos type", `{"eos_token_id": "x"}`, nil, "", "generation_config.json: eos_token_id"},
		{"not an object", `[7]`, nil, "", "generation_config.json: the file is a JSON array"},
		// Python's json reads a NaN as a float: one in a key read for
		// sampling alone is no fault here, one in eos_token_id is.
		{"nan", `{"temperature": NaN, "eos_token_id": 7}`, []int32{7}, "", ""},
		{"nan eos", `{"eos_token_id": [7, NaN]}`, nil, "", "eos_token_id[1] is NaN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644)
			if err := os.Symlink(mustAbsPath(t, "../testdata/hf/llama/model.safetensors"), filepath.Join(dir, "model.safetensors")); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(c.gen), 0o644)
			cfg, src, err := Open(Spec{Model: dir})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if !slices.Equal(cfg.EOS, c.eos) {
				t.Errorf("eos %v, want %v", cfg.EOS, c.eos)
			}
			var lines []string
			WarnUnread(dir, src, func(l string) { lines = append(lines, l) })
			switch {
			case c.note == "" && len(lines) > 0:
				t.Errorf("warnings %q, want none", lines)
			case c.note != "" && (len(lines) != 1 || !strings.Contains(lines[0], filepath.Join(dir, c.note)) || !strings.Contains(lines[0], "config.json's eos_token_id")):
				t.Errorf("warnings %q, want one with %q", lines, c.note)
			}
		})
	}
}

func mustAbsPath(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A size config.json leaves out is its transformers class's default
// (configuration_<model>.py): vocab_size, hidden_size, intermediate_size,
// num_hidden_layers and num_attention_heads (GPT-2's n_embd, n_layer and
// n_head, either spelling); an explicit 0 is still refused.
func TestClassSizeDefaults(t *testing.T) {
	for _, c := range []struct {
		name, json                          string
		vocab, hidden, inter, layers, heads int
		err                                 string
	}{
		{"llama", `{"architectures": ["LlamaForCausalLM"]}`, 32000, 4096, 11008, 32, 32, ""},
		{"mistral", `{"architectures": ["MistralForCausalLM"]}`, 32000, 4096, 14336, 32, 32, ""},
		{"mixtral", `{"architectures": ["MixtralForCausalLM"]}`, 32000, 4096, 14336, 32, 32, ""},
		{"qwen2", `{"architectures": ["Qwen2ForCausalLM"]}`, 151936, 4096, 22016, 32, 32, ""},
		{"qwen3", `{"architectures": ["Qwen3ForCausalLM"]}`, 151936, 4096, 22016, 32, 32, ""},
		{"qwen3_moe", `{"architectures": ["Qwen3MoeForCausalLM"]}`, 151936, 2048, 6144, 24, 32, ""},
		{"gpt2", `{"architectures": ["GPT2LMHeadModel"]}`, 50257, 768, 3072, 12, 12, ""},
		{"given keys kept", `{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_attention_heads": 2}`, 10, 8, 11008, 32, 2, ""},
		{"gpt2 by its own keys", `{"architectures": ["GPT2LMHeadModel"], "n_embd": 8, "n_head": 2, "num_hidden_layers": 3}`, 50257, 8, 32, 3, 2, ""},
		{"an explicit 0", `{"architectures": ["LlamaForCausalLM"], "vocab_size": 0}`, 0, 0, 0, 0, 0, "vocab_size is missing or 0"},
		{"a default named in an error", `{"architectures": ["LlamaForCausalLM"], "hidden_size": 100}`, 0, 0, 0, 0, 0, "taken as LlamaForCausalLM's default: vocab_size=32000, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32"},
	} {
		cfg, err := ParseHFConfig("config.json", []byte(c.json))
		if settled(t, c.name, err, c.err) {
			continue
		}
		got := []int{cfg.Vocab, cfg.Hidden, cfg.Inter, cfg.Layers, cfg.Heads}
		if want := []int{c.vocab, c.hidden, c.inter, c.layers, c.heads}; !slices.Equal(got, want) {
			t.Errorf("%s: sizes %v, want %v", c.name, got, want)
		}
	}
}

// The class is model_type's where it names one mtlbench runs, as
// transformers' AutoConfig and AutoModelForCausalLM pick it
// (models/auto/configuration_auto.py: CONFIG_MAPPING[model_type]), whatever
// architectures says; architectures is read where model_type names none.
func TestModelTypeDecides(t *testing.T) {
	const sizes = `"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 8, "head_dim": 4`
	for _, c := range []struct {
		name, keys, arch, err string
	}{
		{"old casing", `"architectures": ["LLaMAForCausalLM"], "model_type": "llama"`, "LlamaForCausalLM", ""},
		{"another head", `"architectures": ["Qwen2ForSequenceClassification"], "model_type": "qwen2"`, "Qwen2ForCausalLM", ""},
		{"model_type over architectures", `"architectures": ["LlamaForCausalLM"], "model_type": "qwen3"`, "Qwen3ForCausalLM", ""},
		{"architectures where model_type names none", `"architectures": ["MistralForCausalLM"], "model_type": "custom"`, "MistralForCausalLM", ""},
		{"architectures alone", `"architectures": ["Qwen3ForCausalLM"]`, "Qwen3ForCausalLM", ""},
		{"neither", `"architectures": ["BertModel"], "model_type": "bert"`, "", `unknown architecture "BertModel", and model_type "bert" is none of gpt2, llama`},
	} {
		cfg, err := ParseHFConfig("config.json", []byte(`{`+c.keys+`, `+sizes+`}`))
		if !settled(t, c.name, err, c.err) && cfg.Architecture != c.arch {
			t.Errorf("%s: %s, want %s", c.name, cfg.Architecture, c.arch)
		}
	}
}

// settled holds err to want (a piece of its text; "" for none) and says
// whether the case ends there: an error was wanted, or one came unwanted.
func settled(t *testing.T, what string, err error, want string) bool {
	t.Helper()
	switch {
	case want != "":
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", what, err, want)
		}
		return true
	case err != nil:
		t.Errorf("%s: %v", what, err)
		return true
	}
	return false
}

// A layer that slides is charged its window's keys (attention's FLOPs and
// the KV it reads), a layer that does not every earlier key: no window,
// every layer sliding, and layer 0 full with layer 1 sliding (Qwen2's
// max_window_layers).
func TestStepCostWindow(t *testing.T) {
	const q, kvRow = 2 * 4, 2 * 1 * 4 * 4 // query width; a position's K and V on one layer, f32
	att := Attended{All: 90, Window: 32}
	for _, c := range []struct {
		name             string
		window           int
		sliding          []bool
		attended, keysRd int64 // over both layers
	}{
		{"no window", 0, nil, 2 * 90, 2 * 24},
		{"every layer slides", 8, []bool{true, true}, 2 * 32, 2 * 11},
		{"second layer slides", 8, []bool{false, true}, 90 + 32, 24 + 11},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := &Config{Layers: 2, ModelLayers: 2, Heads: 2, KVHeads: 1, HeadDim: 4, Hidden: 8, Inter: 16, Vocab: 10,
				Window: c.window, Sliding: c.sliding}
			if got, want := cfg.StepFLOPs(4, att, 1)-cfg.StepFLOPs(4, Attended{}, 1), float64(2*2*q*c.attended); got != want {
				t.Errorf("attention FLOPs %g, want %g", got, want)
			}
			if got, want := cfg.KVReadBytes(24, 11, bridge.F32), c.keysRd*kvRow; got != want {
				t.Errorf("KV read %d B, want %d", got, want)
			}
		})
	}
}
