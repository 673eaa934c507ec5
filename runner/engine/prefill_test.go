package engine_test

import (
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/engine"
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
	be := cpu.New(cpu.Options{})
	engines := map[int]*engine.Engine{}
	for _, budget := range []int{0, 1} {
		e, err := engine.New(be, cfg, src, engine.Options{TokenBudget: budget, KVTokens: 2048})
		if err != nil {
			t.Fatal(err)
		}
		engines[budget] = e
	}
	for _, n := range []int{1, 15, 16, 17, 300, 1000} {
		prompt := make([]int32, n)
		for i := range prompt {
			prompt[i] = int32((i*7919 + 13) % cfg.Vocab)
		}
		var logits [2][]float32
		for i, budget := range []int{0, 1} {
			out, err := engines[budget].Generate([]engine.Request{{ID: n, Prompt: prompt, MaxNewTokens: 1, WantLogits: true}})
			if err != nil {
				t.Fatal(err)
			}
			logits[i] = out[0].Logits
		}
		var d float64
		for i := range logits[0] {
			d = math.Max(d, math.Abs(float64(logits[0][i])-float64(logits[1][i])))
		}
		t.Logf("%d-token prompt: max abs difference %.2g", n, d)
		if d > 1e-4 {
			t.Errorf("%d-token prompt: one step and a token a step differ by %.3g", n, d)
		}
	}
}
