package main

import (
	"strings"

	"github.com/mtlbench/mtlbench/runner/model"
)

// presetFor maps a model as the documented history names it
// ("Qwen3-30B-A3B", "TinyLlama", "GPT-2") to a preset: case and separators
// are ignored (a whole name also matches without them: "GPT-2" is gpt2),
// and a name that is the start of exactly one preset ("TinyLlama" of
// "tinyllama-1.1b") names that preset.
func presetFor(documented string) (string, bool) {
	norm := func(s string) string {
		return strings.NewReplacer(" ", "-", "_", "-").Replace(strings.ToLower(strings.TrimSpace(s)))
	}
	bare := func(s string) string { return strings.ReplaceAll(norm(s), "-", "") }
	want := norm(documented)
	if want == "" {
		return "", false
	}
	var prefixed []string
	for _, name := range model.PresetNames() {
		if norm(name) == want || bare(name) == bare(documented) {
			return name, true
		}
		if strings.HasPrefix(norm(name), want+"-") {
			prefixed = append(prefixed, name)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0], true
	}
	return "", false
}

// documentedModelBytes is the roofline.ModelBytes of the charts and
// tables: the bytes a batch-1 decode step of the documented model's preset
// reads with matrices in dtype. Figures whose document states no dtype get
// none: f16 and f32 rooflines differ twofold.
func documentedModelBytes(documented, dtype string) (int64, bool) {
	name, ok := presetFor(documented)
	if !ok || dtype == "" {
		return 0, false
	}
	f, err := model.ParseFormat(dtype)
	if err != nil {
		return 0, false
	}
	cfg, err := model.PresetFormat(name, f)
	if err != nil {
		return 0, false
	}
	return cfg.ActiveBytesPerToken(f.DType), true
}
