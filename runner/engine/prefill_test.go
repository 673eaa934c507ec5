package engine_test

import (
	"math"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
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

// Cache options the kernels cannot run are refused as the engine is made,
// before a byte is allocated: a block size of a hundred million tokens once
// sized the cache past the fit check and ran out of memory.
func TestNewRefusesCacheOptions(t *testing.T) {
	cfg, src, err := model.Open(model.Spec{Model: "qwen3-moe-mini", Layers: 1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, c := range []struct {
		opts engine.Options
		want string
	}{
		{engine.Options{BlockSize: 7}, "block size 7 is not supported (block sizes: [8 16 32] tokens)"},
		{engine.Options{BlockSize: 100_000_000}, "block size 100000000 is not supported"},
		{engine.Options{BlockSize: -16}, "block size -16 is not supported"},
		{engine.Options{KVTokens: -1}, "KV cache of -1 tokens"},
		{engine.Options{MoE: bridge.MoEParams{ChunkSize: -5}}, "MoE chunk of -5 pairs"},
		{engine.Options{TokenBudget: -1}, "prefill budget of -1 tokens a step"},
		{engine.Options{MaxSeqs: -2}, "-2 sequences at once: want a positive count"},
	} {
		_, err := engine.New(cpu.New(cpu.Options{}), cfg, src, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error saying %q", c.opts, err, c.want)
		}
	}
}
