package metal_test

import (
	"path/filepath"
	"slices"
	"testing"

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
