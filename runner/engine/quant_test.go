package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/model"
)

// Quantized checkpoints in the layouts mlx-lm and llama.cpp write, with the
// logits transformers computed on their dequantized weights
// (tools/fixtures/make_quant_fixtures.py).
var quantFixtures = []struct{ path, ref string }{
	{"../testdata/mlx/llama-q4", "../testdata/mlx/llama-q4/reference.json"},
	{"../testdata/mlx/llama-q8", "../testdata/mlx/llama-q8/reference.json"},
	{"../testdata/mlx/qwen3-q4", "../testdata/mlx/qwen3-q4/reference.json"},
	{"../testdata/mlx/qwen3-q8", "../testdata/mlx/qwen3-q8/reference.json"},
	{"../testdata/mlx/qwen3_moe-q4", "../testdata/mlx/qwen3_moe-q4/reference.json"},
	{"../testdata/mlx/qwen3_moe-q8", "../testdata/mlx/qwen3_moe-q8/reference.json"},
	{"../testdata/gguf/llama-q8_0.gguf", "../testdata/gguf/llama-q8_0.json"},
	{"../testdata/gguf/llama-q4_0.gguf", "../testdata/gguf/llama-q4_0.json"},
	{"../testdata/gguf/llama-q4_k_m.gguf", "../testdata/gguf/llama-q4_k_m.json"},
	{"../testdata/gguf/qwen3_moe-q8_0.gguf", "../testdata/gguf/qwen3_moe-q8_0.json"},
	{"../testdata/gguf/qwen3_moe-q4_0.gguf", "../testdata/gguf/qwen3_moe-q4_0.json"},
	{"../testdata/gguf/qwen3_moe-q4_k_m.gguf", "../testdata/gguf/qwen3_moe-q4_k_m.json"},
	// Types read by transcoding (kernels/quant/ggml.go).
	{"../testdata/gguf/llama-q4_1.gguf", "../testdata/gguf/llama-q4_1.json"},
	{"../testdata/gguf/llama-q5_0.gguf", "../testdata/gguf/llama-q5_0.json"},
	{"../testdata/gguf/llama-q5_1.gguf", "../testdata/gguf/llama-q5_1.json"},
	{"../testdata/gguf/qwen3_moe-q5_k_m.gguf", "../testdata/gguf/qwen3_moe-q5_k_m.json"},
}

// CheckQuantFixtures runs every quantized fixture on be: last-position
// logits within tol of transformers on the dequantized weights, and equal
// greedy tokens.
func checkQuantFixtures(t *testing.T, newBackend func() bridge.Backend, tol float64) {
	for _, fx := range quantFixtures {
		t.Run(strings.TrimSuffix(filepath.Base(fx.path), ".gguf"), func(t *testing.T) {
			raw, err := os.ReadFile(fx.ref)
			if err != nil {
				t.Fatal(err)
			}
			var ref reference
			if err := json.Unmarshal(raw, &ref); err != nil {
				t.Fatal(err)
			}
			cfg, src, err := model.Open(model.Spec{Model: fx.path})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if cfg.Quant == nil {
				t.Fatalf("%s opened without packed weights", fx.path)
			}
			if cfg.Architecture != ref.Architecture {
				t.Fatalf("architecture %q, fixture says %q", cfg.Architecture, ref.Architecture)
			}
			e, err := New(newBackend(), cfg, src, Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkAgainstReference(t, e, &ref, tol)
		})
	}
}

// TestQuantMatchesTransformers: MLX 4- and 8-bit (llama, qwen3,
// qwen3_moe), GGUF Q8_0, Q4_0, Q4_K_M (llama, qwen3moe) and the transcoded
// Q4_1, Q5_0, Q5_1 (llama) and Q5_K_M (qwen3moe) on the CPU, logits within
// 1e-3.
func TestQuantMatchesTransformers(t *testing.T) {
	checkQuantFixtures(t, func() bridge.Backend { return cpu.New(cpu.Options{}) }, 1e-3)
}
