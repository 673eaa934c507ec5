package bridge

import (
	"testing"
	"time"
)

// In-place costs are release to next release: a kernel's blocks resident
// early (PDL) do not count, the costs add up to the span, a launch whose
// successor left no times is left out, and the largest total comes first.
func TestInPlaceCosts(t *testing.T) {
	us := func(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }
	l := func(seq int, op, kernel string, reached, released, last float64) TimelineLaunch {
		return TimelineLaunch{Seq: seq, Component: "attention", Op: op, Kernel: kernel,
			Reached: us(reached), Released: us(released), LastReleased: us(last)}
	}
	ls := []TimelineLaunch{
		l(0, "qkv", "gemv", 0, 0, 0.5),
		l(1, "attn", "decode", 1, 3, 3),    // resident 2 µs before its release
		l(2, "o", "gemv", 4, 4, 4.25),      // 4 to 10
		l(3, "qkv", "gemv", 9, 10, 10.5),   // left out: 4 left no times
		l(5, "attn", "decode", 12, 13, 13), // 13 to 16
		l(6, "o", "gemv", 14, 16, 16),
		l(7, "o", "gemv", 17, 18, 18), // the last: no successor
	}
	got := InPlaceCosts(ls)
	want := []InPlaceCost{
		{Op: "o", Kernel: "gemv", Launches: 2, Cost: us(4), Early: us(1), Spread: us(0.125)},
		{Op: "attn", Kernel: "decode", Launches: 2, Cost: us(2), Early: us(1.5)},
		{Op: "qkv", Kernel: "gemv", Launches: 1, Cost: us(3), Spread: us(0.5)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	var share float64
	for i, w := range want {
		g := got[i]
		share += g.Share
		if g.Op != w.Op || g.Kernel != w.Kernel || g.Launches != w.Launches || g.Cost != w.Cost || g.Early != w.Early || g.Spread != w.Spread {
			t.Errorf("row %d: got %+v, want %+v", i, g, w)
		}
	}
	if share < 0.999 || share > 1.001 {
		t.Errorf("shares add up to %v, want 1", share)
	}
}
