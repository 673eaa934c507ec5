package engine

import (
	"encoding/json"
	"github.com/mtlbench/mtlbench/kernels"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/model"
)

// fixtureDir holds tiny random checkpoints saved by transformers with the
// logits it computed (tools/fixtures/make_fixtures.py).
const fixtureDir = "../testdata/hf"

// gpt2_untied is a GPT-2 with an LM head of its own, saved by transformers
// in f16: model 82 of tools/fixtures/sweep_llamacpp.py make --seed=6
// --hf=0.3.
var fixtureArchs = []string{"llama", "llama_bias", "llama_mlp_bias", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral", "gpt2", "gpt2_untied", "llama3", "qwen3_yarn", "mistral_window", "qwen2_window"}

type reference struct {
	Architecture string `json:"architecture"`
	Prompts      []struct {
		Tokens     []int32   `json:"tokens"`
		LogitsLast []float32 `json:"logits_last"`
		Greedy     []int32   `json:"greedy"`
		MinMargin  float64   `json:"min_margin"`
	} `json:"prompts"`
}

func loadReference(t testing.TB, arch string) *reference {
	t.Helper()
	var r reference
	readJSON(t, filepath.Join(fixtureDir, arch, "reference.json"), &r)
	return &r
}

// readJSON decodes the JSON file at path into v.
func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

func openFixture(t testing.TB, arch string, be bridge.Backend, opts Options) *Engine {
	t.Helper()
	return openDir(t, filepath.Join(fixtureDir, arch), be, opts)
}

// openDir is an engine on be over the HF checkpoint folder dir.
func openDir(t testing.TB, dir string, be bridge.Backend, opts Options) *Engine {
	t.Helper()
	cfg, err := model.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := model.OpenCheckpoint(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	if !src.Has("lm_head.weight") {
		cfg.TieEmbed = true
	}
	e, err := New(be, cfg, src, opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// checkAgainstReference generates each of ref's prompts alone on e and
// holds its last-position logits to transformers' within tol and its
// greedy tokens to transformers'.
func checkAgainstReference(t *testing.T, e *Engine, ref *reference, tol float64) {
	t.Helper()
	for i, p := range ref.Prompts {
		out, err := e.Generate([]Request{{ID: i, Prompt: p.Tokens, MaxNewTokens: len(p.Greedy), WantLogits: true}})
		if err != nil {
			t.Fatal(err)
		}
		d := kernels.MaxAbsDiff(out[0].Logits, p.LogitsLast)
		t.Logf("prompt %d (%d tokens): logits max abs error %.2g", i, len(p.Tokens), d)
		if d > tol {
			t.Errorf("prompt %d: logits max abs error %.3g > %g", i, d, tol)
		}
		if !slices.Equal(out[0].Tokens, p.Greedy) {
			t.Errorf("prompt %d: greedy tokens %v, transformers %v", i, out[0].Tokens, p.Greedy)
		}
	}
}

// TestMatchesTransformers checks last-position logits (f32, max abs error
// 1e-4) and 16 greedy tokens against transformers for each architecture.
func TestMatchesTransformers(t *testing.T) {
	const tol = 1e-4
	for _, arch := range fixtureArchs {
		t.Run(arch, func(t *testing.T) {
			ref := loadReference(t, arch)
			e := openFixture(t, arch, cpu.New(cpu.Options{}), Options{})
			if e.Config().Architecture != ref.Architecture {
				t.Fatalf("architecture %q, fixture says %q", e.Config().Architecture, ref.Architecture)
			}
			checkAgainstReference(t, e, ref, tol)
		})
	}
}

// GPT-2 batched: every prompt in one engine at once, with small KV blocks
// and a token budget that splits the prefills into chunks (continuous
// batching of prefill and decode), against transformers; and a request
// beyond the learned position table is refused before it runs.
func TestGPT2BatchedPaged(t *testing.T) {
	ref := loadReference(t, "gpt2")
	e := openFixture(t, "gpt2", cpu.New(cpu.Options{}), Options{BlockSize: 8, TokenBudget: 9, KVTokens: 256})
	var reqs []Request
	for i, p := range ref.Prompts {
		reqs = append(reqs, Request{ID: i, Prompt: p.Tokens, MaxNewTokens: len(p.Greedy), WantLogits: true})
	}
	out, err := e.Generate(reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range ref.Prompts {
		d := kernels.MaxAbsDiff(out[i].Logits, p.LogitsLast)
		t.Logf("prompt %d: logits max abs error %.2g", i, d)
		if d > 1e-4 {
			t.Errorf("prompt %d: logits max abs error %.3g > 1e-4", i, d)
		}
		for j := range p.Greedy {
			if out[i].Tokens[j] != p.Greedy[j] {
				t.Errorf("prompt %d: greedy tokens %v, transformers %v", i, out[i].Tokens, p.Greedy)
				break
			}
		}
	}
	long := make([]int32, 250)
	err = e.Add(Request{ID: 99, Prompt: long, MaxNewTokens: 10})
	if err == nil || !strings.Contains(err.Error(), "exceed the model's 256 positions") {
		t.Fatalf("a request beyond n_positions: err = %v", err)
	}
}
