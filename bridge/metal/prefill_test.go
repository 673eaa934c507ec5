package metal_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/engine/enginetest"
	"github.com/mtlbench/mtlbench/runner/model"
)

// A prompt's logits from one prefill step (the tiled simdgroup_matrix
// GEMMs, flash attention over the paged cache, the experts grouped by
// expert) equal those of the same prompt fed a token a step (the GEMVs,
// decode attention, one (token, expert) pair a threadgroup column), for
// prompts that cross the tiles (32 and 64 rows), the cache blocks (16
// slots) and the prefill attention's query blocks, with float and packed
// weights, on the emulator: within f32 rounding, as on the CPU
// (runner/engine TestPrefillEqualsTokenByTokenOnCPU).
func TestPrefillMatchesTokenByToken(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 1000-token prompt a token at a time under emulation")
	}
	be := newEmu(t, metal.Tuning{})
	for _, q := range []string{"", "q4"} {
		cfg, src, err := model.Open(model.Spec{Model: "qwen3-moe-mini", Layers: 1, Seed: 3, Quant: q})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		run := enginetest.PrefillAndStep(t, be, cfg, src, engine.Options{KVTokens: 2048})
		name := "f32"
		if q != "" {
			name = q
		}
		for _, n := range enginetest.PromptLengths {
			t.Run(fmt.Sprintf("%s/%d", name, n), func(t *testing.T) {
				whole, single := run(t, n)
				d := kernels.MaxAbsDiff(whole, single)
				m := 0.0
				for _, v := range single {
					m = max(m, math.Abs(float64(v)))
				}
				// f32 rounding of sums taken in other orders, on logits of
				// a few units: 1e-4 of the largest (at least 1e-4).
				t.Logf("%d-token prompt: max abs difference %.2g, max |logit| %.3g", n, d, m)
				if tol := 1e-4 * max(1, m); d > tol {
					t.Errorf("%d-token prompt: one step and a token a step differ by %.3g (bound %.2g)", n, d, tol)
				}
			})
		}
	}
}
