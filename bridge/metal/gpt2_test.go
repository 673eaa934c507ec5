package metal_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// GPT-2's decode steps fused (q, k and v with their biases in one
// dispatch) and unfused give the same tokens and logits, the fused with
// fewer dispatches.
func TestGPT2FusedMatchesUnfused(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	mb := newEmu(t, metal.Tuning{})
	spec := model.Spec{Model: filepath.Join(fixtureDir, "gpt2")}
	offToks, offLogits, off := decodeRun(t, mb, spec, engine.Options{NoFusion: true}, 512, 2)
	toks, logits, on := decodeRun(t, mb, spec, engine.Options{}, 512, 2)
	t.Logf("%d dispatches a decode step fused, %d unfused; logits differ by %.2g", on, off, maxAbsDiff(logits, offLogits))
	for i := range toks {
		if !slices.Equal(toks[i], offToks[i]) {
			t.Errorf("request %d: tokens %v fused, %v unfused", i, toks[i], offToks[i])
		}
	}
	if d := maxAbsDiff(logits, offLogits); d > 1e-4 {
		t.Errorf("last-prompt logits differ by %.3g", d)
	}
	if on >= off {
		t.Errorf("%d dispatches fused, not fewer than %d unfused", on, off)
	}
}

// Packed GPT-2 (a synthetic preset in MLX and GGUF packings: q, k and v
// packed with their biases in one dispatch when fused, the packed wte as
// embedding and tied LM head) gives the CPU's logits and tokens on the
// emulator, fused and unfused.
func TestPackedGPT2MatchesCPU(t *testing.T) {
	mb := newEmu(t, metal.Tuning{})
	prompt := []int32{464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13}
	req := []engine.Request{{ID: 1, Prompt: prompt, MaxNewTokens: 3, WantLogits: true}}
	for _, q := range []string{"q4", "q8_0", "q4_k_m"} {
		spec := model.Spec{Model: "gpt2", Layers: 2, Seed: 5, Quant: q}
		opts := engine.Options{KVTokens: 64, KVDType: "f32"}
		want, err := openEngine(t, cpu.New(cpu.Options{}), spec, opts).Generate(req)
		if err != nil {
			t.Fatal(err)
		}
		for _, fusion := range []bool{true, false} {
			opts.NoFusion = !fusion
			got, err := openEngine(t, mb, spec, opts).Generate(req)
			if err != nil {
				t.Fatalf("%s, fusion %v: %v", q, fusion, err)
			}
			d := maxAbsDiff(got[0].Logits, want[0].Logits)
			t.Logf("%s, fusion %v: logits max abs diff %.2g vs cpu", q, fusion, d)
			// The logits of this synthetic model reach a few hundred.
			if d > 1e-3 || !slices.Equal(got[0].Tokens, want[0].Tokens) {
				t.Errorf("%s, fusion %v: tokens %v (cpu %v), logits %.3g off the CPU's", q, fusion, got[0].Tokens, want[0].Tokens, d)
			}
		}
	}
}
