package metal_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/runner/selftest"
)

// TestQuantSelftest: the packed-weight ops (qmatmul, qmoe, qembedding) of
// every format against kernels/quant's reference on the emulator.
func TestQuantSelftest(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	for _, f := range []string{"qmatmul", "qmoe", "qembedding"} {
		rs, err := selftest.RunWith(be, selftest.Options{Filter: f}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			t.Fatalf("no %s checks", f)
		}
		for _, r := range rs {
			if !r.Passed() || r.Skipped {
				t.Errorf("%s %s: %v (skipped %v)", r.Case, r.Shape, r.Err, r.Skipped)
			} else {
				t.Logf("%s: max abs error %.2g", r.Case, r.MaxErr)
			}
		}
	}
}

// quantFixtures are runner/testdata's packed checkpoints (MLX and GGUF)
// with transformers' logits on their dequantized weights
// (tools/fixtures/make_quant_fixtures.py).
var quantFixtures = [][2]string{
	{"mlx/llama-q4", "mlx/llama-q4/reference.json"},
	{"mlx/llama-q8", "mlx/llama-q8/reference.json"},
	{"mlx/qwen3-q4", "mlx/qwen3-q4/reference.json"},
	{"mlx/qwen3_moe-q4", "mlx/qwen3_moe-q4/reference.json"},
	{"mlx/qwen3_moe-q8", "mlx/qwen3_moe-q8/reference.json"},
	{"gguf/llama-q8_0.gguf", "gguf/llama-q8_0.json"},
	{"gguf/llama-q4_0.gguf", "gguf/llama-q4_0.json"},
	{"gguf/llama-q4_k_m.gguf", "gguf/llama-q4_k_m.json"},
	{"gguf/qwen3_moe-q8_0.gguf", "gguf/qwen3_moe-q8_0.json"},
	{"gguf/qwen3_moe-q4_k_m.gguf", "gguf/qwen3_moe-q4_k_m.json"},
}

// TestQuantMatchesTransformers: packed checkpoints on the emulator, last
// logits within 1e-3 of transformers on the dequantized weights and equal
// greedy tokens (the longest prompt of each fixture).
func TestQuantMatchesTransformers(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	for _, fx := range quantFixtures {
		t.Run(fx[0], func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("../../runner/testdata", fx[1]))
			if err != nil {
				t.Fatal(err)
			}
			var ref struct {
				Prompts []struct {
					Tokens     []int32   `json:"tokens"`
					LogitsLast []float32 `json:"logits_last"`
					Greedy     []int32   `json:"greedy"`
				} `json:"prompts"`
			}
			if err := json.Unmarshal(raw, &ref); err != nil {
				t.Fatal(err)
			}
			cfg, src, err := model.Open(model.Spec{Model: filepath.Join("../../runner/testdata", fx[0])})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			e, err := engine.New(be, cfg, src, engine.Options{KVTokens: 256, KVDType: "f32"})
			if err != nil {
				t.Fatal(err)
			}
			p := ref.Prompts[len(ref.Prompts)-1]
			out, err := e.Generate([]engine.Request{{ID: 1, Prompt: p.Tokens, MaxNewTokens: len(p.Greedy), WantLogits: true}})
			if err != nil {
				t.Fatal(err)
			}
			var d float64
			for i, v := range p.LogitsLast {
				d = math.Max(d, math.Abs(float64(out[0].Logits[i]-v)))
			}
			t.Logf("logits max abs error %.2g", d)
			if d > 1e-3 {
				t.Errorf("logits max abs error %.3g > 1e-3", d)
			}
			if !slices.Equal(out[0].Tokens, p.Greedy) {
				t.Errorf("greedy tokens %v, transformers %v", out[0].Tokens, p.Greedy)
			}
		})
	}
}
