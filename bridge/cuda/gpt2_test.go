//go:build linux

package cuda_test

import (
	"encoding/json"
	"github.com/mtlbench/mtlbench/kernels"
	"os"
	"path/filepath"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	. "github.com/mtlbench/mtlbench/bridge/cuda"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// GPT-2 with every prompt in one engine (continuous batching: prefills
// split by a token budget, decodes beside them, KV blocks of 8), fused and
// unfused: last-prompt logits within 1e-4 of transformers' and its greedy
// tokens. A single-sequence decode step fused takes at least three kernels
// fewer a layer (LayerNorms into the GEMVs after them, the residual adds
// into the GEMVs before them, GELU into c_fc).
func TestGPT2Batched(t *testing.T) {
	b := gpu(t)
	plain, err := New(Options{NoFuse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	dir := filepath.Join(fixtureDir, "gpt2")
	data, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	launches := map[string]int{}
	layers := 0
	for _, c := range []struct {
		name string
		be   bridge.Backend
	}{{"fused", b}, {"unfused", plain}} {
		t.Run(c.name, func(t *testing.T) {
			cfg, src, err := model.Open(model.Spec{Model: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			e, err := engine.New(c.be, cfg, src, engine.Options{BlockSize: 8, TokenBudget: 9, KVTokens: 256})
			if err != nil {
				t.Fatal(err)
			}
			var reqs []engine.Request
			for i, p := range ref.Prompts {
				reqs = append(reqs, engine.Request{ID: i, Prompt: p.Tokens, MaxNewTokens: len(p.Greedy), WantLogits: true})
			}
			out, err := e.Generate(reqs)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range ref.Prompts {
				d := kernels.MaxAbsDiff(out[i].Logits, p.LogitsLast)
				t.Logf("prompt %d (%d tokens): logits max abs error %.2g vs transformers", i, len(p.Tokens), d)
				if d > 1e-4 {
					t.Errorf("prompt %d: logits max abs error %.3g > 1e-4", i, d)
				}
				if !equalTokens(out[i].Tokens, p.Greedy) {
					t.Errorf("prompt %d: greedy tokens %v, transformers %v", i, out[i].Tokens, p.Greedy)
				}
			}
			p := ref.Prompts[1]
			one, err := e.Generate([]engine.Request{{ID: 9, Prompt: p.Tokens, MaxNewTokens: 4}})
			if err != nil {
				t.Fatal(err)
			}
			if !equalTokens(one[0].Tokens, p.Greedy[:4]) {
				t.Errorf("alone: greedy tokens %v, transformers %v", one[0].Tokens, p.Greedy[:4])
			}
			launches[c.name] = c.be.(*Backend).LastStepLaunches()
			layers = cfg.Layers
		})
	}
	t.Logf("a decode step: %d kernels fused, %d unfused", launches["fused"], launches["unfused"])
	if launches["fused"] > launches["unfused"]-3*layers {
		t.Errorf("%d kernels a decode step fused against %d unfused: want at least %d fewer", launches["fused"], launches["unfused"], 3*layers)
	}
}

// Packed GPT-2 (a synthetic preset in MLX and GGUF packings, the packed
// wte as embedding and tied LM head) gives the CPU's logits and tokens,
// fused (q, k and v with their biases in one launch) and unfused.
func TestPackedGPT2MatchesCPU(t *testing.T) {
	b := gpu(t)
	plain, err := New(Options{NoFuse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	prompt := []int32{464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13}
	req := []engine.Request{{ID: 1, Prompt: prompt, MaxNewTokens: 3, WantLogits: true}}
	for _, q := range []string{"q4", "q8_0", "q4_k_m"} {
		spec := model.Spec{Model: "gpt2", Layers: 2, Seed: 5, Quant: q}
		var want []engine.Output
		for _, be := range []bridge.Backend{cpu.New(cpu.Options{}), b, plain} {
			cfg, src, err := model.Open(spec)
			if err != nil {
				t.Fatal(err)
			}
			e, err := engine.New(be, cfg, src, engine.Options{KVTokens: 64, KVDType: "f32"})
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Generate(req)
			src.Close()
			if err != nil {
				t.Fatalf("%s on %s: %v", q, be.Info().Backend, err)
			}
			if want == nil {
				want = got
				continue
			}
			d := kernels.MaxAbsDiff(got[0].Logits, want[0].Logits)
			t.Logf("%s: logits max abs diff %.2g vs cpu", q, d)
			// The logits of this synthetic model reach a few hundred.
			if d > 1e-3 || !equalTokens(got[0].Tokens, want[0].Tokens) {
				t.Errorf("%s: tokens %v (cpu %v), logits %.3g off the CPU's", q, got[0].Tokens, want[0].Tokens, d)
			}
		}
	}
}
