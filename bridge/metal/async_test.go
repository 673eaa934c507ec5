package metal_test

import (
	"fmt"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// chained counts the steps begun from token ids on the device.
type chained struct {
	*metal.Backend
	fromGPU int
}

func (c *chained) BeginStepFrom(meta *bridge.StepMeta, src bridge.Tensor) error {
	c.fromGPU++
	return c.Backend.BeginStepFrom(meta, src)
}

// Overlapped steps (the next decode step committed while the last runs, its
// tokens copied on the GPU from the last step's argmax) give the tokens of
// synchronous steps, for fused and unfused steps alike.
func TestOverlappedStepsMatchSynchronous(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	spec := model.Spec{Model: "qwen3-moe-mini", Seed: 5, Layers: 2}
	gen := func(be bridge.Backend, o engine.Options) [][]int32 {
		e := openEngine(t, be, spec, o)
		var reqs []engine.Request
		for i := range 3 {
			reqs = append(reqs, engine.Request{ID: i, Prompt: []int32{int32(7 + i), 100, int32(3 * i)}, MaxNewTokens: 8 + 2*i})
		}
		out, err := e.Generate(reqs)
		if err != nil {
			t.Fatal(err)
		}
		var toks [][]int32
		for _, o := range out {
			toks = append(toks, o.Tokens)
		}
		return toks
	}
	for _, noFusion := range []bool{false, true} {
		t.Run(fmt.Sprintf("fusion=%v", !noFusion), func(t *testing.T) {
			be := &chained{Backend: newEmu(t, metal.Tuning{})}
			sync := gen(be, engine.Options{Synchronous: true, NoFusion: noFusion})
			if be.fromGPU != 0 {
				t.Fatalf("synchronous steps began %d steps from device tokens", be.fromGPU)
			}
			over := gen(be, engine.Options{NoFusion: noFusion})
			if fmt.Sprint(over) != fmt.Sprint(sync) {
				t.Errorf("overlapped %v, synchronous %v", over, sync)
			}
			// 3 requests of 8, 10 and 12 tokens, 11 decode steps: each takes
			// its tokens from the GPU, the first from the prefill's argmax,
			// but the two after a request ends (the batch changes).
			if be.fromGPU != 9 {
				t.Errorf("%d steps took their tokens from the GPU's argmax, want 9", be.fromGPU)
			}
			t.Logf("%d of the decode steps began from the GPU's argmax", be.fromGPU)
		})
	}
}
