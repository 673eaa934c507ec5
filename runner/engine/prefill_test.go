package engine_test

import (
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/engine/enginetest"
	"github.com/mtlbench/mtlbench/runner/model"
)

// On the CPU (the reference backend) a prompt's logits from one prefill
// step equal those of the same prompt fed a token a step, for prompts that
// cross the GPU kernels' tiles (64 rows) and the cache's blocks (16 slots):
// the backends' prefill-against-decode checks (bridge/cuda prefill_test.go)
// compare against this.
func TestPrefillEqualsTokenByTokenOnCPU(t *testing.T) {
	cfg, src, err := model.Open(model.Spec{Model: "qwen3-moe-mini", Layers: 1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	run := enginetest.PrefillAndStep(t, cpu.New(cpu.Options{}), cfg, src, engine.Options{KVTokens: 2048})
	for _, n := range enginetest.PromptLengths {
		whole, single := run(t, n)
		var d float64
		for i := range whole {
			d = math.Max(d, math.Abs(float64(whole[i])-float64(single[i])))
		}
		t.Logf("%d-token prompt: max abs difference %.2g", n, d)
		if d > 1e-4 {
			t.Errorf("%d-token prompt: one step and a token a step differ by %.3g", n, d)
		}
	}
}
