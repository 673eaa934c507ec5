package model

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/runner/safetensors"
)

// The tensors a checkpoint folder holds that its model does not read are
// named, found by the loader's own lookups: a Qwen3 folder labelled Llama
// leaves its QK-norms unread, packed or not; the buffers transformers drops
// (rotary inv_freq, GPT-2's causal mask) and a head the config ties are not
// named; and no fixture, HF or mlx-lm, has any.
func TestCheckpointUnread(t *testing.T) {
	asLlama := func(c map[string]any) {
		c["architectures"], c["model_type"] = []any{"LlamaForCausalLM"}, "llama"
	}
	vec := func(name string) safetensors.WriteTensor {
		return safetensors.WriteTensor{Name: name, DType: "F32", Shape: []int{4}, Data: make([]byte, 16)}
	}
	norms := []string{
		"model.layers.0.self_attn.k_norm.weight", "model.layers.0.self_attn.q_norm.weight",
		"model.layers.1.self_attn.k_norm.weight", "model.layers.1.self_attn.q_norm.weight",
	}
	cases := []struct {
		name, from string
		config     func(map[string]any)
		add        []safetensors.WriteTensor
		want       []string
	}{
		{name: "none unread", from: "../testdata/hf/llama"},
		{name: "qk-norm under llama", from: "../testdata/hf/qwen3", config: asLlama, want: norms},
		{name: "packed qk-norm under llama", from: "../testdata/mlx/qwen3-q4", config: asLlama, want: norms},
		{name: "layer-less tensor", from: "../testdata/hf/llama", add: []safetensors.WriteTensor{vec("model.extra.weight")},
			want: []string{"model.extra.weight"}},
		{name: "rotary buffers", from: "../testdata/hf/llama",
			add: []safetensors.WriteTensor{vec("model.layers.0.self_attn.rotary_emb.inv_freq"), vec("model.rotary_emb.inv_freq")}},
		{name: "gpt-2 mask buffers", from: "../testdata/hf/gpt2",
			add: []safetensors.WriteTensor{vec("transformer.h.0.attn.bias"), vec("transformer.h.1.attn.masked_bias")}},
		{name: "mlx gpt-2 mask buffer", from: "../testdata/mlx/gpt2-q4", add: []safetensors.WriteTensor{vec("model.h.0.attn.bias")}},
		{name: "tied head", from: "../testdata/hf/llama", config: func(c map[string]any) { c["tie_word_embeddings"] = true }},
		{name: "inv_freq is no buffer of gpt-2", from: "../testdata/hf/gpt2", add: []safetensors.WriteTensor{vec("transformer.rotary_emb.inv_freq")},
			want: []string{"transformer.rotary_emb.inv_freq"}},
	}
	for _, kind := range []string{"hf", "mlx"} {
		dirs, err := filepath.Glob(filepath.Join("../testdata", kind, "*", "config.json"))
		if err != nil || len(dirs) == 0 {
			t.Fatalf("no %s fixtures: %v", kind, err)
		}
		for _, d := range dirs {
			cases = append(cases, struct {
				name, from string
				config     func(map[string]any)
				add        []safetensors.WriteTensor
				want       []string
			}{name: "fixture " + kind + "/" + filepath.Base(filepath.Dir(d)), from: filepath.Dir(d)})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.from
			if c.config != nil || c.add != nil {
				dir = folderWith(t, c.from, c.config, c.add...)
			}
			_, src, err := Open(Spec{Model: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			got := Unread(src)
			if !slices.Equal(got, c.want) {
				t.Errorf("unread %q, want %q", got, c.want)
			}
			if got, cached := Unread(NewCached(src)), Unread(src); !slices.Equal(got, cached) {
				t.Errorf("through Cached: %q, want %q", got, cached)
			}
			note := UnreadNote(src)
			if (note == "") != (len(c.want) == 0) {
				t.Errorf("note %q for unread %q", note, c.want)
			}
			for _, n := range c.want {
				if !strings.Contains(note, n) {
					t.Errorf("note %q does not name %s", note, n)
				}
			}
		})
	}
}

// The note names four tensors and counts the rest; the model and the
// config it comes from are named.
func TestUnreadNote(t *testing.T) {
	var add []safetensors.WriteTensor
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		add = append(add, safetensors.WriteTensor{Name: "model.extra_" + n, DType: "F32", Shape: []int{1}, Data: make([]byte, 4)})
	}
	_, src, err := Open(Spec{Model: folderWith(t, "../testdata/hf/llama", nil, add...)})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	note := UnreadNote(NewCached(src))
	for _, want := range []string{"6 tensors are not read, none of the LlamaForCausalLM model config.json describes", "model.extra_d and 2 more", `"architectures"`} {
		if !strings.Contains(note, want) {
			t.Errorf("%q lacks %q", note, want)
		}
	}
	if strings.Contains(note, "model.extra_e") {
		t.Errorf("%q names a fifth tensor", note)
	}
}

// folderWith copies the checkpoint folder from (config.json and
// model.safetensors) with its config edited by config (nil: as it is) and
// tensors add written after its own.
func folderWith(t *testing.T, from string, config func(map[string]any), add ...safetensors.WriteTensor) string {
	t.Helper()
	return rewriteFolder(t, from, config, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor { return append(ts, add...) }, nil)
}
