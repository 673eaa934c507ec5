package model

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A head size the file leaves out is the hidden size over the heads, as
// transformers and llama.cpp take it; an error of that size names the keys
// it is taken from, not a head_dim or key_length the file does not hold.
func TestDerivedHeadSizeNamed(t *testing.T) {
	hf := func(heads int) func(t *testing.T) string {
		return func(t *testing.T) string {
			return withConfig(t, "../testdata/hf/llama", func(cfg map[string]any) {
				delete(cfg, "head_dim")
				cfg["num_attention_heads"], cfg["num_key_value_heads"] = heads, heads
			})
		}
	}
	gg := func(heads uint32) func(t *testing.T) string {
		return func(t *testing.T) string {
			b, err := os.ReadFile("../testdata/gguf/llamacpp-llama-q4_k_m.gguf")
			if err != nil {
				t.Fatal(err)
			}
			// A key renamed within its length is one no loader reads.
			for _, k := range []string{"llama.attention.key_length", "llama.attention.value_length", "llama.rope.dimension_count"} {
				b[after(t, b, k)-1] = 'X'
			}
			for _, k := range []string{"llama.attention.head_count", "llama.attention.head_count_kv"} {
				i := after(t, b, string(binary.LittleEndian.AppendUint64(nil, uint64(len(k))))+k)
				binary.LittleEndian.PutUint32(b[i+4:], heads)
			}
			p := filepath.Join(t.TempDir(), "m.gguf")
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	for _, c := range []struct {
		name string
		make func(t *testing.T) string
		want string
	}{
		{"config.json, odd", hf(5), "the head size 25 (hidden_size=128 / num_attention_heads=5, with no head_dim) must be even for RoPE"},
		{"config.json, none", hf(256), "the head size 0 (hidden_size=128 / num_attention_heads=256, with no head_dim) must be positive"},
		{"GGUF, odd", gg(3), "the head size 85 (llama.embedding_length=256 / llama.attention.head_count=3, with no llama.attention.key_length) must be even for RoPE"},
		{"GGUF, none", gg(512), "the head size 0 (llama.embedding_length=256 / llama.attention.head_count=512, with no llama.attention.key_length) must be positive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.make(t)
			openRefused(t, p, c.want)
			_, _, err := Open(Spec{Model: p})
			if s := err.Error(); strings.Contains(s, "head_dim=") || strings.Contains(s, "head_dim is") || strings.Contains(s, "key_length=") || strings.Contains(s, "key_length is") {
				t.Errorf("%v names the head size by a key the file does not hold", err)
			}
		})
	}
}
