package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/safetensors"
)

// A tied checkpoint may hold its one shared matrix under lm_head.weight
// and no embedding: safetensors' save_model keeps the first of a shared
// tensor's names in sorted order. transformers ties such a folder the
// other way round as it loads; so does Open, and the logits are the
// fixture's.
func TestTiedHeadStoredAsLMHead(t *testing.T) {
	for _, c := range []struct{ arch, embed string }{
		{"qwen2", "model.embed_tokens.weight"},
		{"llama3", "model.embed_tokens.weight"},
		{"gpt2", model.GPT2Embed},
	} {
		t.Run(c.arch, func(t *testing.T) {
			src := filepath.Join(fixtureDir, c.arch)
			dir := t.TempDir()
			raw, err := os.ReadFile(filepath.Join(src, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			var ts []safetensors.WriteTensor
			renamed := false
			for _, info := range f.Tensors() {
				b, _ := f.Bytes(info.Name)
				name := info.Name
				if name == c.embed {
					name, renamed = "lm_head.weight", true
				}
				ts = append(ts, safetensors.WriteTensor{Name: name, DType: info.DType, Shape: info.Shape, Data: append([]byte(nil), b...)})
			}
			f.Close()
			if !renamed {
				t.Fatalf("the fixture holds no %s", c.embed)
			}
			if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
				t.Fatal(err)
			}
			cfg, s, err := model.Open(model.Spec{Model: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !cfg.TieEmbed {
				t.Fatal("not tied")
			}
			if u := model.Unread(s); len(u) > 0 {
				t.Errorf("unread tensors %v", u)
			}
			e, err := New(cpu.New(cpu.Options{}), cfg, s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkAgainstReference(t, e, loadReference(t, c.arch), 1e-4)
		})
	}
}
