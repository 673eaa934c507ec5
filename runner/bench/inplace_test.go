package bench

import (
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
)

// Per-op times from a timeline: only decode steps held whole (with the
// next step's first launch, which ends their last) are summed, a prefill
// step and a step with a gap are left out, and a layer's op keeps apart
// from the same op of another layer.
func TestInPlaceTimings(t *testing.T) {
	var ls []bridge.TimelineLaunch
	rel := time.Duration(0)
	add := func(seq, layer int, op string, cost time.Duration) {
		ls = append(ls, bridge.TimelineLaunch{Seq: seq, Layer: layer, Component: "c", Op: op, Released: rel})
		rel += cost
	}
	// step 0: prefill, launches 0-2; step 1: decode 3-5; step 2: decode
	// 6-8, launch 7 left no times; step 3: decode 9-11; step 4: decode
	// 12-14, the last, with no successor.
	costs := []time.Duration{9, 9, 9, 1, 2, 3, 9, 9, 9, 4, 5, 6, 9, 9, 9}
	ops := []string{"embed", "attn", "mlp"}
	for seq, c := range costs {
		if seq == 7 {
			rel += c
			continue
		}
		add(seq, seq%3-1, ops[seq%3], c)
	}
	spans := []stepSpan{{0, 3, false}, {3, 6, true}, {6, 9, true}, {9, 12, true}, {12, 15, true}}
	ts, steps := inPlaceTimings(ls, spans)
	if steps != 2 {
		t.Fatalf("%d steps summed, want 2 (steps 1 and 3)", steps)
	}
	want := []bridge.OpTiming{{Layer: -1, Component: "c", Op: "embed", Duration: 5},
		{Layer: 0, Component: "c", Op: "attn", Duration: 7}, {Layer: 1, Component: "c", Op: "mlp", Duration: 9}}
	if len(ts) != len(want) {
		t.Fatalf("got %+v", ts)
	}
	for i := range want {
		if ts[i] != want[i] {
			t.Errorf("op %d: got %+v, want %+v", i, ts[i], want[i])
		}
	}
}
