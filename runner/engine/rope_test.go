package engine

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/model"
)

// Scaled RoPE, as checkpoints spell it: Llama 3's rope_parameters in an HF
// folder, and GGUF files (f32 weights) with llama3's rope_freqs tensor and
// with linear scaling, as convert_hf_to_gguf writes them. Each runs with
// transformers' own frequencies (to a few f32 ulps) and matches its logits
// within 1e-4 and its greedy tokens.
func TestScaledRoPEMatchesTransformers(t *testing.T) {
	for _, fx := range []struct{ name, path, ref, scaling string }{
		{"hf-llama3", "../testdata/hf/llama3", "../testdata/hf/llama3/reference.json", "llama3"},
		{"gguf-llama3", "../testdata/gguf/llama-rope-llama3.gguf", "../testdata/gguf/llama-rope-llama3.json", ""},
		{"gguf-linear", "../testdata/gguf/llama-rope-linear.gguf", "../testdata/gguf/llama-rope-linear.json", "linear"},
	} {
		t.Run(fx.name, func(t *testing.T) {
			raw, err := os.ReadFile(fx.ref)
			if err != nil {
				t.Fatal(err)
			}
			var ref struct {
				reference
				InvFreq          []float64 `json:"inv_freq"`
				AttentionScaling float64   `json:"attention_scaling"`
			}
			if err := json.Unmarshal(raw, &ref); err != nil {
				t.Fatal(err)
			}
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
