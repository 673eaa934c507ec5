package model

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A GGUF file holding tensors its metadata's model does not read is
// refused, naming them, as llama.cpp refuses it: here a block_count one
// short of the layers the file holds.
func TestGGUFUnusedTensors(t *testing.T) {
	data, err := os.ReadFile("../testdata/gguf/llama-q8_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("llama.block_count")
	i := bytes.Index(data, key)
	if i < 0 {
		t.Fatal("no llama.block_count")
	}
	v := i + len(key) + 4 // past the key and its value type (u32)
	n := binary.LittleEndian.Uint32(data[v:])
	if n < 2 {
		t.Fatalf("the fixture has %d layers", n)
	}
	binary.LittleEndian.PutUint32(data[v:], n-1)
	p := filepath.Join(t.TempDir(), "short.gguf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = Open(Spec{Model: p})
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "none of the llama model") ||
		!strings.Contains(err.Error(), "blk.1.") || !strings.Contains(err.Error(), "block_count") {
		t.Errorf("%v, want the layer's tensors named", err)
	}
}

// A checkpoint folder whose config says fewer layers than its weights hold
// is refused, for HF and mlx-lm's layouts (GPT-2's h.N too).
func TestCheckpointLayersPast(t *testing.T) {
	for _, fx := range []string{"../testdata/hf/llama", "../testdata/hf/gpt2", "../testdata/mlx/qwen3_moe-q4", "../testdata/mlx/gpt2-q4"} {
		dir := copyFolder(t, fx, func(name string, data []byte) []byte {
			if name == "config.json" {
				for _, k := range []string{`"num_hidden_layers": 2`, `"n_layer": 2`} {
					data = bytes.Replace(data, []byte(k), []byte(k[:len(k)-1]+"1"), 1)
				}
			}
			return data
		})
		_, _, err := Open(Spec{Model: dir})
		if err == nil || !strings.Contains(err.Error(), "the weights hold 2 layers, but config.json says 1") {
			t.Errorf("%s with one layer in its config: %v", fx, err)
		}
	}
}

// copyFolder copies the checkpoint folder src into a temporary folder,
// each file's bytes through edit, and returns the copy.
func copyFolder(t *testing.T, src string, edit func(name string, data []byte) []byte) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), edit(e.Name(), data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A checkpoint holding q/k/v biases whose config does not ask for them is
// refused: here Qwen2's weights under a Llama config.
func TestCheckpointBiasesUnasked(t *testing.T) {
	dir := copyFolder(t, "../testdata/hf/qwen2", func(name string, data []byte) []byte {
		if name == "config.json" {
			data = bytes.ReplaceAll(data, []byte("Qwen2ForCausalLM"), []byte("LlamaForCausalLM"))
			data = bytes.ReplaceAll(data, []byte(`"qwen2"`), []byte(`"llama"`))
		}
		return data
	})
	_, _, err := Open(Spec{Model: dir})
	if err == nil || !strings.Contains(err.Error(), "self_attn.q_proj.bias, but config.json has no attention_bias: true") {
		t.Errorf("%v, want the bias named", err)
	}
}
