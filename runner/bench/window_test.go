package bench

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// A decode step's ideal bytes read each layer that slides over its window
// alone: the step's positions past the window add K and V only on the
// layers that attend to every one (none, half of them, all).
func TestStepBytesWindow(t *testing.T) {
	base, err := model.Preset("qwen3-moe-mini")
	if err != nil {
		t.Fatal(err)
	}
	row := int64(2*base.KVHeads*base.HeadDim) * 2 // a position's K and V on one layer, bf16
	for _, c := range []struct {
		name string
		full int // layers that attend to every position
	}{{"no window", base.Layers}, {"half slide", base.Layers / 2}, {"every layer slides", 0}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := *base
			if c.full < cfg.Layers {
				cfg.Window = 64
				cfg.Sliding = make([]bool, cfg.ModelLayers)
				for l := c.full; l < cfg.Layers; l++ {
					cfg.Sliding[l] = true
				}
			}
			m := &ModelCase{bytes: newStepCost(&cfg, bridge.BF16, bridge.BF16)}
			// Two sequences of 1000 and 30 positions: a sliding layer reads
			// 64 and 30 of them.
			res := &engine.StepResult{ContextTokens: 1030, WindowTokens: 94}
			within := &engine.StepResult{ContextTokens: 94, WindowTokens: 94}
			if got, want := m.stepBytes(res)-m.stepBytes(within), int64(c.full)*(1030-94)*row; got != want {
				t.Errorf("the positions past the window add %d B, want %d", got, want)
			}
		})
	}
}
