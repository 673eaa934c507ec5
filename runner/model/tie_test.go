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
		dir := withConfig(t, "../testdata/hf/qwen2", func(cfg map[string]any) { cfg["tie_word_embeddings"] = tie }) // tied: no lm_head.weight
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

// A config without tie_word_embeddings reads a checkpoint's own LM head, as
// transformers' config classes default to untied, and ties where the folder
// holds none (mlx-lm's Llama and Qwen2 default).
func TestTieUnset(t *testing.T) {
	for _, c := range []struct {
		dir  string
		tied bool
	}{{"../testdata/hf/llama", false}, {"../testdata/hf/qwen3_moe", false}, {"../testdata/hf/qwen2", true}} {
		dir := withConfig(t, c.dir, func(cfg map[string]any) { delete(cfg, "tie_word_embeddings") })
		cfg, src, err := Open(Spec{Model: dir})
		if err != nil {
			t.Errorf("%s: %v", c.dir, err)
			continue
		}
		src.Close()
		if cfg.TieEmbed != c.tied {
			t.Errorf("%s without tie_word_embeddings: tied %v, want %v", c.dir, cfg.TieEmbed, c.tied)
		}
	}
}

// An mlx-lm folder whose config.json lost its quantization is named as
// such, not as packed values missing their scales.
func TestPackedWithoutQuantization(t *testing.T) {
	dir := withConfig(t, "../testdata/mlx/llama-q4", func(cfg map[string]any) {
		delete(cfg, "quantization")
		delete(cfg, "quantization_config")
	})
	_, _, err := Open(Spec{Model: dir})
	if err == nil || !strings.Contains(err.Error(), `config.json has no "quantization"`) {
		t.Errorf("packed weights, no quantization: %v", err)
	}
}

// A module config.json's quantization leaves a float (false) whose packed
// tensors the checkpoint holds is refused, as mlx-lm's strict load refuses
// it, naming the module.
func TestPackedModuleSaidFloat(t *testing.T) {
	const module = "model.layers.0.self_attn.q_proj"
	dir := withConfig(t, "../testdata/mlx/llama-q4", func(cfg map[string]any) {
		cfg["quantization"].(map[string]any)[module] = false
		delete(cfg, "quantization_config")
	})
	_, _, err := Open(Spec{Model: dir})
	if err == nil || !strings.Contains(err.Error(), `quantization["`+module+`"] makes it a float module`) {
		t.Errorf("a packed module said float: %v", err)
	}
}

// withConfig copies the checkpoint folder src with its config.json's
// fields changed by edit.
func withConfig(t *testing.T, src string, edit func(cfg map[string]any)) string {
	t.Helper()
	return copyFolder(t, src, func(name string, data []byte) []byte {
		if name != "config.json" {
			return data
		}
		var cfg map[string]any
		if err := json.Unmarshal(data, &cfg); err != nil {
			t.Fatal(err)
		}
		edit(cfg)
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return out
	})
}
