package engine

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/kernels"
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

// A request runs to the context a scaled RoPE states, not to
// max_position_embeddings (model.Config.Context): the qwen3_yarn fixture
// with max_position_embeddings cut to 24 runs transformers' prompts, whose
// positions reach 36, to its logits and greedy tokens, past the original 16
// positions as past the 24 (transformers bounds neither); a request past
// the 16 × 4 = 64 positions its yarn states is refused naming them.
func TestScaledRoPEContextBoundsRequests(t *testing.T) {
	const dir = "../testdata/hf/qwen3_yarn"
	var ref reference
	readJSON(t, dir+"/reference.json", &ref)
	var raw map[string]any
	readJSON(t, dir+"/config.json", &raw)
	raw["max_position_embeddings"] = 24
	tmp := t.TempDir()
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	weights, err := os.ReadFile(dir + "/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "model.safetensors"), weights, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, src, err := model.Open(model.Spec{Model: tmp})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	longest := 0
	for _, p := range ref.Prompts {
		longest = max(longest, len(p.Tokens)+len(p.Greedy))
	}
	if longest <= cfg.MaxPos {
		t.Fatalf("the longest reference request runs %d positions, within max_position_embeddings %d: it tests nothing", longest, cfg.MaxPos)
	}
	e, err := New(cpu.New(cpu.Options{}), cfg, src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkAgainstReference(t, e, &ref, 1e-4)
	want := "1 prompt + 64 new tokens exceed the model's 64 positions (yarn rope scaling: rope_parameters.original_max_position_embeddings 16 × factor 4)"
	if err := e.Add(Request{ID: 9, Prompt: []int32{1}, MaxNewTokens: 64}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a request of 65 tokens: %v, want %q", err, want)
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

// The fixtures that slide by a window of 8 (mistral_window on every layer,
// qwen2_window on layer 1 only), whose prompts and greedy tokens all run
// past it, match transformers (logits within 1e-4, the same greedy tokens)
// on the CPU backend, each request alone and all at once in blocks of 8
// with prefill chunks of 5 tokens (chunks that start past the window); the
// positions still bound a request. A backend that does not slide runs a
// request up to the window, where every position is attended to, and
// refuses a longer one before it runs, naming the window and the backend.
func TestSlidingWindowBoundsRequests(t *testing.T) {
	for _, arch := range []string{"mistral_window", "qwen2_window"} {
		t.Run(arch, func(t *testing.T) {
			ref := loadReference(t, arch)
			checkAgainstReference(t, openFixture(t, arch, cpu.New(cpu.Options{}), Options{}), ref, 1e-4)
			e := openFixture(t, arch, cpu.New(cpu.Options{}), Options{BlockSize: 8, TokenBudget: 5})
			var reqs []Request
			for i, p := range ref.Prompts {
				if len(p.Tokens)+len(p.Greedy) <= 8 {
					t.Fatalf("prompt %d runs to %d tokens, within the window of 8", i, len(p.Tokens)+len(p.Greedy))
				}
				reqs = append(reqs, Request{ID: i, Prompt: p.Tokens, MaxNewTokens: len(p.Greedy), WantLogits: true})
			}
			out, err := e.Generate(reqs)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range ref.Prompts {
				if d := kernels.MaxAbsDiff(out[i].Logits, p.LogitsLast); d > 1e-4 {
					t.Errorf("batched prompt %d: logits max abs error %.3g", i, d)
				}
				if !slices.Equal(out[i].Tokens, p.Greedy) {
					t.Errorf("batched prompt %d: greedy tokens %v, transformers %v", i, out[i].Tokens, p.Greedy)
				}
			}
			long := ref.Prompts[len(ref.Prompts)-1].Tokens
			if err := e.Add(Request{ID: 9, Prompt: long, MaxNewTokens: 257 - len(long)}); err == nil ||
				!strings.Contains(err.Error(), "exceed the model's 256 positions") {
				t.Errorf("a request of 257 tokens in 256 positions: %v", err)
			}

			w := openFixture(t, arch, windowless{cpu.New(cpu.Options{})}, Options{})
			p := ref.Prompts[1]
			if len(p.Tokens) != 7 {
				t.Fatalf("prompt 1 has %d tokens, want 7", len(p.Tokens))
			}
			got, err := w.Generate([]Request{{ID: 1, Prompt: p.Tokens, MaxNewTokens: 1, WantLogits: true}})
			if err != nil {
				t.Fatal(err)
			}
			if d := kernels.MaxAbsDiff(got[0].Logits, p.LogitsLast); d > 1e-4 || got[0].Tokens[0] != p.Greedy[0] {
				t.Errorf("within the window: logits max abs error %.3g, token %d (transformers %d)", d, got[0].Tokens[0], p.Greedy[0])
			}
			_, err = w.Generate([]Request{{ID: 2, Prompt: p.Tokens, MaxNewTokens: 2}})
			if want := "7 prompt + 2 new tokens exceed the model's 8-token sliding window, which the cpu backend does not run past"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("past the window on a backend that does not slide: %v, want %q", err, want)
			}
		})
	}
}

// A step's attention counts (the roofline's KV bytes and FLOPs) follow the
// window on the layers that slide: each query of a prefill chunk and of a
// decode step attends to at most the window's keys, and the cached keys
// before its chunk's first window are not read. The counts are taken here
// by walking the mask, for a prompt prefilled in chunks of 5 past the
// window of 8 and decoded past it.
func TestStepCountsWindow(t *testing.T) {
	ref := loadReference(t, "mistral_window")
	e := openFixture(t, "mistral_window", cpu.New(cpu.Options{}), Options{BlockSize: 8, TokenBudget: 5})
	w := e.Config().Window
	if w != 8 {
		t.Fatalf("window %d, want 8", w)
	}
	p := ref.Prompts[len(ref.Prompts)-1].Tokens
	if err := e.Add(Request{ID: 1, Prompt: p, MaxNewTokens: 4}); err != nil {
		t.Fatal(err)
	}
	done, steps := 0, 0
	for e.Pending() {
		res, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		n := res.Tokens
		if n == 0 {
			continue
		}
		var all, window int64
		read := map[int]bool{}
		for q := done; q < done+n; q++ {
			for j := 0; j <= q; j++ {
				all++
				if j > q-w {
					window++
					read[j] = true
				}
			}
		}
		want := StepResult{ContextTokens: done + n, WindowTokens: len(read), Attended: model.Attended{All: all, Window: window}}
		if res.ContextTokens != want.ContextTokens || res.WindowTokens != want.WindowTokens || res.Attended != want.Attended {
			t.Errorf("step of %d tokens from %d: context %d, window %d, attended %+v; want %d, %d, %+v",
				n, done, res.ContextTokens, res.WindowTokens, res.Attended, want.ContextTokens, want.WindowTokens, want.Attended)
		}
		done += n
		steps++
	}
	if done <= w+5 || steps < 4 {
		t.Fatalf("ran %d tokens in %d steps: not past the window", done, steps)
	}
}
