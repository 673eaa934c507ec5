package model

import (
	"encoding/json"
	"strings"
	"testing"
)

// A folder whose config unties the LM head but holds no lm_head.weight is
// refused, naming the tensor: transformers would give that head random
// weights. Tied, the same weights load.
func TestUntiedHeadMissing(t *testing.T) {
	for _, tie := range []bool{true, false} {
		dir := copyFolder(t, "../testdata/hf/qwen2", func(name string, data []byte) []byte { // tied: no lm_head.weight
			if name != "config.json" {
				return data
			}
			var cfg map[string]any
			if err := json.Unmarshal(data, &cfg); err != nil {
				t.Fatal(err)
			}
			cfg["tie_word_embeddings"] = tie
			out, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return out
		})
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
