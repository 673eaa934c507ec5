package main

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/runner/model"
)

func TestPresetFor(t *testing.T) {
	for _, c := range []struct{ documented, preset string }{
		// Every model name the shipped history uses.
		{"Qwen3-30B-A3B", "qwen3-30b-a3b"},
		{"TinyLlama-1.1B", "tinyllama-1.1b"},
		{"TinyLlama", "tinyllama-1.1b"},
		{"Devstral-Small-22B", "devstral-small-22b"},
		{"Qwen2-0.5B", "qwen2-0.5b"},
		{"GPT-2", "gpt2"},
		{"unknown", ""},
		// Other spellings.
		{"qwen3_30b_a3b", "qwen3-30b-a3b"},
		{" Devstral Small 22B ", "devstral-small-22b"},
		{"Qwen3", ""}, // the start of two presets names neither
		{"", ""},
	} {
		got, ok := presetFor(c.documented)
		if got != c.preset || ok != (c.preset != "") {
			t.Errorf("presetFor(%q) = %q, %v; want %q", c.documented, got, ok, c.preset)
		}
	}
}

func TestDocumentedModelBytes(t *testing.T) {
	cfg, _ := model.Preset("qwen3-30b-a3b")
	f16 := cfg.ActiveBytesPerToken(bridge.F16)
	for _, c := range []struct {
		model, dtype string
		want         int64
	}{
		{"Qwen3-30B-A3B", "float16", f16},
		{"Qwen3-30B-A3B", "bf16", f16},
		{"Qwen3-30B-A3B", "float32", cfg.ActiveBytesPerToken(bridge.F32)},
		{"Qwen3-30B-A3B", "", 0},
		{"Qwen3-30B-A3B", "int4", 0},
		{"GPT-2", "", 0}, // the history states no dtype for it
		{"Unknown-7B", "float16", 0},
	} {
		got, ok := documentedModelBytes(c.model, c.dtype)
		if got != c.want || ok != (c.want > 0) {
			t.Errorf("documentedModelBytes(%q, %q) = %d, %v; want %d", c.model, c.dtype, got, ok, c.want)
		}
	}
	// About 3.3B active parameters in f16: the figure the roofline line
	// on the history chart stands on.
	if f16 < 6e9 || f16 > 7e9 {
		t.Errorf("Qwen3-30B-A3B f16 reads %d bytes per decode step, want about 6.6e9", f16)
	}
}

// history show prints each figure's fraction of its machine's roofline:
// the batch-1 figures of the M3 Ultra get one, aggregate figures at batch
// > 1 and figures of an unknown machine ("M-series Mac") none.
func TestHistoryShowRooflineGolden(t *testing.T) {
	for _, c := range []struct{ name, model string }{
		{"history-show-devstral", "Devstral-Small-22B"},
		{"history-show-qwen3-v1.5", "Qwen3-30B-A3B"},
	} {
		t.Setenv("MTLBENCH_HISTORY", t.TempDir()) // the built-in history only
		args := []string{"history", "show", "--model", c.model, "--format", "md"}
		if c.model == "Qwen3-30B-A3B" {
			args = append(args, "--metric", "tok_s", "--series", "Metal V1.5")
		}
		out, _, err := mtl(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, c.name, out)
	}
}
