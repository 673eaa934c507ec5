package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A folder whose config unties the LM head but holds no lm_head.weight is
// refused, naming the tensor: transformers would give that head random
// weights. Tied, the same weights load.
func TestUntiedHeadMissing(t *testing.T) {
	src := "../testdata/hf/qwen2" // tied: no lm_head.weight
	for _, tie := range []bool{true, false} {
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
			if e.Name() == "config.json" {
				var cfg map[string]any
				if err := json.Unmarshal(data, &cfg); err != nil {
					t.Fatal(err)
				}
				cfg["tie_word_embeddings"] = tie
				if data, err = json.Marshal(cfg); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cfg, src, err := Open(Spec{Model: dir})
		if tie {
			if err != nil || !cfg.TieEmbed {
				t.Errorf("tied: %v", err)
			} else {
				src.Close()
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "lm_head.weight is missing") || !strings.Contains(err.Error(), dir) {
			t.Errorf("untied without a head: %v", err)
		}
	}
}
