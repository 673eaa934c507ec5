package stats

import (
	"testing"

	"github.com/mtlbench/mtlbench/results"
)

// An op's time is summed over its layers and averaged over repetitions;
// ops with no time are left out, the most time comes first.
func TestTimeByOp(t *testing.T) {
	ts := []results.OpTiming{
		{Rep: 0, Layer: 0, Component: "attention", Op: "qkv_proj", Seconds: 1e-6},
		{Rep: 0, Layer: 1, Component: "attention", Op: "qkv_proj", Seconds: 3e-6},
		{Rep: 1, Layer: 0, Component: "attention", Op: "qkv_proj", Seconds: 2e-6},
		{Rep: 1, Layer: 1, Component: "attention", Op: "qkv_proj", Seconds: 2e-6},
		{Rep: 0, Layer: -1, Component: "other", Op: "lm_head", Seconds: 6e-6},
		{Rep: 1, Layer: -1, Component: "other", Op: "lm_head", Seconds: 8e-6},
		{Rep: 0, Layer: -1, Component: "other", Op: "argmax"},
	}
	got := TimeByOp(ts)
	want := []OpTime{{"other", "lm_head", 1, 7e-6}, {"attention", "qkv_proj", 2, 4e-6}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if g := got[i]; g.Component != want[i].Component || g.Op != want[i].Op || g.Layers != want[i].Layers ||
			g.Seconds < want[i].Seconds*0.999 || g.Seconds > want[i].Seconds*1.001 {
			t.Errorf("row %d: got %+v, want %+v", i, g, want[i])
		}
	}
	if TimeByOp(ts[6:]) != nil {
		t.Error("timings with no time give rows")
	}
}
