package engine

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/model"
)

// Scaled RoPE, as checkpoints spell it: Llama 3's and YaRN's
// rope_parameters in HF folders, and GGUF files (f32 weights) with llama3's
// rope_freqs tensor, with linear scaling and with YaRN, as
// convert_hf_to_gguf writes them. Each runs with transformers' own
// frequencies (to a few f32 ulps) and attention factor and matches its
// logits within 1e-4 and its greedy tokens.
func TestScaledRoPEMatchesTransformers(t *testing.T) {
	for _, fx := range []struct{ name, path, ref, scaling string }{
		{"hf-llama3", "../testdata/hf/llama3", "../testdata/hf/llama3/reference.json", "llama3"},
		{"gguf-llama3", "../testdata/gguf/llama-rope-llama3.gguf", "../testdata/gguf/llama-rope-llama3.json", ""},
		{"gguf-linear", "../testdata/gguf/llama-rope-linear.gguf", "../testdata/gguf/llama-rope-linear.json", "linear"},
		{"hf-yarn", "../testdata/hf/qwen3_yarn", "../testdata/hf/qwen3_yarn/reference.json", "yarn"},
		{"gguf-yarn", "../testdata/gguf/llama-rope-yarn.gguf", "../testdata/gguf/llama-rope-yarn.json", "yarn"},
	} {
		t.Run(fx.name, func(t *testing.T) {
			var ref struct {
				reference
				InvFreq          []float64 `json:"inv_freq"`
				AttentionScaling float64   `json:"attention_scaling"`
			}
			readJSON(t, fx.ref, &ref)
			cfg, src, err := model.Open(model.Spec{Model: fx.path})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if got := ""; cfg.RopeScaling != nil {
				got = cfg.RopeScaling.Type
				if got != fx.scaling {
					t.Errorf("rope scaling %q, want %q", got, fx.scaling)
				}
			} else if fx.scaling != "" {
				t.Errorf("no rope scaling, want %q", fx.scaling)
			}
			inv := cfg.Rotary().InvFreq(cfg.HeadDim)
			if len(inv) != len(ref.InvFreq) || len(inv) == 0 {
				t.Fatalf("%d frequencies, transformers %d", len(inv), len(ref.InvFreq))
			}
			var worst float64
			for i, f := range inv {
				worst = math.Max(worst, math.Abs(float64(f)-ref.InvFreq[i])/ref.InvFreq[i])
			}
			t.Logf("frequencies: largest relative difference from transformers' %.2g", worst)
			if worst > 5e-7 {
				t.Errorf("frequencies differ from transformers' by up to %.3g (relative)", worst)
			}
			if ref.AttentionScaling == 0 {
				ref.AttentionScaling = 1 // files made before it was recorded: no scaling of theirs has one
			}
			if got := math.Sqrt(cfg.RopeScaling.LogitScale()); math.Abs(got-ref.AttentionScaling) > 1e-12 {
				t.Errorf("attention factor %.15g, transformers %.15g", got, ref.AttentionScaling)
			}
			if base := (&model.Config{RopeTheta: cfg.RopeTheta, HeadDim: cfg.HeadDim}).Rotary().InvFreq(cfg.HeadDim); slicesClose(base, inv) {
				t.Fatalf("the fixture's frequencies are RoPE's unscaled ones: it tests nothing")
			}
			e, err := New(cpu.New(cpu.Options{}), cfg, src, Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkAgainstReference(t, e, &ref.reference, 1e-4)
		})
	}
}

func slicesClose(a, b []float32) bool {
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-6*math.Abs(float64(b[i])) {
			return false
		}
	}
	return len(a) == len(b)
}

// windowless hides its backend's sliding window (bridge.WindowRunner), as
// a backend whose attention does not slide.
type windowless struct{ bridge.Backend }

// A model with a sliding window runs past it on a backend that slides
// (transformers' logits within the window, where every layer attends to
// every position), and only within it on one that does not; the
// positions bound every backend. Each refusal comes before the request
// runs, saying why.
func TestSlidingWindowBoundsRequests(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(fixtureDir, "mistral", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "config.json" {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			m["sliding_window"] = 24
			m["max_position_embeddings"] = 40
			b, _ = json.Marshal(m)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ref := loadReference(t, "mistral")
	within := *ref
	within.Prompts = nil
	for _, p := range ref.Prompts {
		if len(p.Tokens)+len(p.Greedy) <= 24 {
			within.Prompts = append(within.Prompts, p)
		}
	}
	if len(within.Prompts) == 0 || len(within.Prompts) == len(ref.Prompts) {
		t.Fatalf("%d of %d prompts within the window: the case tests nothing", len(within.Prompts), len(ref.Prompts))
	}
	long := ref.Prompts[len(ref.Prompts)-1]
	if n := len(long.Tokens) + len(long.Greedy); n <= 24 || n > 40 {
		t.Fatalf("the longest prompt runs to %d tokens: not past the window within the positions", n)
	}
	for _, tc := range []struct {
		name string
		be   bridge.Backend
		want string // the refusal past the window; "": it runs
	}{
		{"slides", cpu.New(cpu.Options{}), ""},
		{"does not slide", windowless{cpu.New(cpu.Options{})}, "exceed the model's 24-token sliding window, which the cpu backend does not run past"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := openDir(t, dir, tc.be, Options{})
			checkAgainstReference(t, e, &within, 1e-4)
			_, err := e.Generate([]Request{{ID: 9, Prompt: long.Tokens, MaxNewTokens: len(long.Greedy)}})
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("a request of %d tokens in a window of 24: %v, want %q", len(long.Tokens)+len(long.Greedy), err, tc.want)
			}
			err = e.Add(Request{ID: 10, Prompt: long.Tokens, MaxNewTokens: 41 - len(long.Tokens)})
			if err == nil || !strings.Contains(err.Error(), "exceed the model's 40 positions") {
				t.Errorf("a request of 41 tokens in 40 positions: %v", err)
			}
		})
	}
}
