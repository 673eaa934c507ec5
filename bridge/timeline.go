package bridge

import (
	"cmp"
	"slices"
	"time"
)

// TimelineLaunch is one kernel launch of an in-place timeline: the kernels
// run as they do in a step (graphs, overlapped launches), and each notes on
// the device's clock when its blocks reached the wait on the launch before
// it and when that wait let them go (CUDA: docs/cuda.md, "The in-place
// timeline"). Times are from the first launch's release.
type TimelineLaunch struct {
	// Seq is the launch's place among those issued since the timeline
	// started: a launch that left no times leaves a gap.
	Seq    int
	Kernel string
	// Layer, Component and Op are the op the launch belongs to (the last
	// Mark before it; a fused launch belongs to the first op it covers).
	Layer     int
	Component string
	Op        string
	Blocks    int
	// Reached is when the first block reached the wait; Released when the
	// wait let the first block go (the launch before it had finished),
	// LastReleased the last block (later when blocks waited for room).
	Reached, Released, LastReleased time.Duration
}

// Timeliner is a backend that can record an in-place timeline: TimelineOn
// says whether it does (CUDA: kernels compiled for it), TimelineStart
// empties it, Timeline waits for the device and returns the launches since.
type Timeliner interface {
	TimelineOn() bool
	TimelineStart() error
	Timeline() ([]TimelineLaunch, error)
}

// InPlaceCost is what one kernel of one op costs in place, over the launches
// of a timeline: Cost is the time from its release to the next launch's
// release (the next kernel waits on this one's end, so the costs of
// consecutive launches add up to their span), Early how long its first
// block was resident before it was let go, and Spread how much later its
// last block was let go than its first. All are means over Launches.
type InPlaceCost struct {
	Component, Op, Kernel string
	Launches              int
	Cost, Early, Spread   time.Duration
	// Share is the kernel's part of the timeline's span.
	Share float64
}

// InPlaceCosts sums a timeline by (component, op, kernel), the largest
// total first. A launch whose successor left no times is left out, as is
// the last.
func InPlaceCosts(ls []TimelineLaunch) []InPlaceCost {
	type key struct{ c, o, k string }
	type sum struct {
		n                   int
		cost, early, spread time.Duration
	}
	sums := map[key]*sum{}
	var order []key
	var span time.Duration
	for i := 0; i+1 < len(ls); i++ {
		l := ls[i]
		if ls[i+1].Seq != l.Seq+1 {
			continue
		}
		k := key{l.Component, l.Op, l.Kernel}
		s := sums[k]
		if s == nil {
			s = &sum{}
			sums[k] = s
			order = append(order, k)
		}
		c := ls[i+1].Released - l.Released
		s.n++
		s.cost += c
		s.early += l.Released - l.Reached
		s.spread += l.LastReleased - l.Released
		span += c
	}
	out := make([]InPlaceCost, 0, len(order))
	for _, k := range order {
		s := sums[k]
		n := time.Duration(s.n)
		c := InPlaceCost{Component: k.c, Op: k.o, Kernel: k.k, Launches: s.n,
			Cost: s.cost / n, Early: s.early / n, Spread: s.spread / n}
		if span > 0 {
			c.Share = float64(s.cost) / float64(span)
		}
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b InPlaceCost) int {
		return cmp.Compare(b.Cost*time.Duration(b.Launches), a.Cost*time.Duration(a.Launches))
	})
	return out
}
