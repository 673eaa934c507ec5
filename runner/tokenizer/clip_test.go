package tokenizer

import (
	"encoding/json"
	"github.com/mtlbench/mtlbench/internal/clip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A string the file holds that an error echoes (a type, a token, a merge,
// a pre-tokenizer's name) is quoted cut to its first characters, its
// length said: a value of megabytes is not copied into the message.
func TestLongValuesClipped(t *testing.T) {
	const n = 1 << 20
	long := strings.Repeat("x", n)
	clipped := `"` + strings.Repeat("x", clip.Most-3) + `..." (1048576 characters)`
	hf := func(edit func(m map[string]any)) func(t *testing.T) (*Tokenizer, error) {
		return func(t *testing.T) (*Tokenizer, error) {
			m := map[string]any{"model": map[string]any{"type": "BPE", "vocab": map[string]int{"a": 0, "b": 1, "ab": 2}, "merges": []string{"a b"}}}
			edit(m)
			data, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(t.TempDir(), "tokenizer.json")
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			return Load(p)
		}
	}
	model := func(m map[string]any) map[string]any { return m["model"].(map[string]any) }
	gg := func(entries ...kv) func(t *testing.T) (*Tokenizer, error) {
		return func(t *testing.T) (*Tokenizer, error) { return Load(ggufFile(t, entries...)) }
	}
	for _, c := range []struct {
		name string
		load func(t *testing.T) (*Tokenizer, error)
		want string
	}{
		{"tokenizer.json model type", hf(func(m map[string]any) { model(m)["type"] = long }), "model type " + clipped + " is not supported"},
		{"tokenizer.json unk_token", hf(func(m map[string]any) { model(m)["unk_token"] = long }), "model.unk_token " + clipped + " is not in model.vocab"},
		{"tokenizer.json normalizer", hf(func(m map[string]any) { m["normalizer"] = map[string]any{"type": long} }), clipped + " is not supported"},
		{"tokenizer.json merge", hf(func(m map[string]any) { model(m)["merges"] = []string{long} }), "model.merges[0] " + clipped + ": want two pieces"},
		{"GGUF model", gg(kv{"tokenizer.ggml.model", long}), "tokenizer.ggml.model " + clipped + " is not supported"},
		{"GGUF pre", gg(kv{"tokenizer.ggml.model", "gpt2"}, kv{"tokenizer.ggml.pre", long}, kv{"tokenizer.ggml.tokens", byteLevelVocab()},
			kv{"tokenizer.ggml.merges", []string{}}), "tokenizer.ggml.pre " + clipped + " is not supported"},
		{"GGUF merge", gg(kv{"tokenizer.ggml.model", "gpt2"}, kv{"tokenizer.ggml.pre", "gpt-2"}, kv{"tokenizer.ggml.tokens", byteLevelVocab()},
			kv{"tokenizer.ggml.merges", []string{long}}), "tokenizer.ggml.merges[0] " + clipped + ": want two pieces"},
		{"GGUF token type", gg(kv{"tokenizer.ggml.model", "gpt2"}, kv{"tokenizer.ggml.pre", "gpt-2"}, kv{"tokenizer.ggml.tokens", byteLevelVocab(long)},
			kv{"tokenizer.ggml.token_type", append(make([]int32, 256), 9)}, kv{"tokenizer.ggml.merges", []string{}}), "(token " + clipped + ") is 9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.load(t)
			if err == nil || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 2000 {
				s := ""
				if err != nil {
					s = err.Error()
				}
				t.Errorf("error of %d bytes: %.300s, want one holding %s", len(s), s, c.want)
			}
		})
	}
}
