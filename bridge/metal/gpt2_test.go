package metal_test

import (
	"github.com/mtlbench/mtlbench/kernels"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// GPT-2's decode steps, float and packed (MLX and llama.cpp's GGUF), give
// the unfused steps' tokens and logits with each GPT-2 pattern of Metal's
// fusion table (with those whose work it needs alongside) and with them
// all, in fewer dispatches; with them all a GPT-2 block is five dispatches
// (q/k/v with ln_1, attention, c_proj with the residual add, c_fc with ln_2
// and GELU, mlp_c_proj with the next add), not ten.
func TestGPT2FusionsMatchUnfused(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	mb := newEmu(t, metal.Tuning{})
	sets := [][]string{
		nil,
		{"gemv_shared_input"},
		{"gemv_gelu"},
		{"layernorm_gemv", "gemv_gelu"}, // c_fc alone: q, k and v need gemv_shared_input to share ln_1
		{"layernorm_gemv", "gemv_shared_input"},
		{"gemv_residual", "layernorm_gemv", "gemv_shared_input"},
	}
	for _, c := range []struct {
		name string
		spec model.Spec
	}{
		{"gpt2", model.Spec{Model: filepath.Join(fixtureDir, "gpt2")}},
		{"gpt2-q4", model.Spec{Model: filepath.Join("../../runner/testdata", "mlx", "gpt2-q4")}},
		{"gpt2-q4_k_m.gguf", model.Spec{Model: filepath.Join("../../runner/testdata", "gguf", "llamacpp-gpt2-q4_k_m.gguf")}},
	} {
		vocab, offToks, offLogits, off := unfusedRun(t, mb, c.spec)
		for _, set := range sets {
			only := "all"
			if set != nil {
				only = strings.Join(set, "+")
			}
			t.Run(c.name+"/"+only, func(t *testing.T) {
				on := checkFused(t, mb, c.spec, vocab, set, offToks, offLogits, off)
				if set != nil {
					return
				}
				one := c.spec
				one.Layers = 1
				_, _, on1 := decodeRun(t, mb, one, engine.Options{}, vocab, 2)
				_, _, off1 := decodeRun(t, mb, one, engine.Options{NoFusion: true}, vocab, 2)
				t.Logf("a block: %d dispatches fused, %d unfused", on-on1, off-off1)
				if on-on1 > 5 {
					t.Errorf("a GPT-2 block takes %d dispatches fused (%d unfused), want at most 5", on-on1, off-off1)
				}
			})
		}
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
			d := kernels.MaxAbsDiff(got[0].Logits, want[0].Logits)
			t.Logf("%s, fusion %v: logits max abs diff %.2g vs cpu", q, fusion, d)
			// The logits of this synthetic model reach a few hundred.
			if d > 1e-3 || !slices.Equal(got[0].Tokens, want[0].Tokens) {
				t.Errorf("%s, fusion %v: tokens %v (cpu %v), logits %.3g off the CPU's", q, fusion, got[0].Tokens, want[0].Tokens, d)
			}
		}
	}
}
