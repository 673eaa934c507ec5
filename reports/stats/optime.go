package stats

import (
	"cmp"
	"slices"

	"github.com/mtlbench/mtlbench/results"
)

// OpTime is one op's share of a decode step's time as profile timing gave
// it: summed over the layers the op runs in, averaged over the repetitions.
type OpTime struct {
	Component, Op string
	Layers        int     // the layers (or places outside them) it ran in
	Seconds       float64 // a decode step's time in the op
}

// TimeByOp groups a case's op timings by component and op, the most time
// first; nil when none has any.
func TimeByOp(ts []results.OpTiming) []OpTime {
	groups, reps := byOp(ts, func(t results.OpTiming) bool { return t.Seconds > 0 })
	if len(groups) == 0 {
		return nil
	}
	out := make([]OpTime, 0, len(groups))
	for _, g := range groups {
		o := OpTime{Component: g.component, Op: g.op, Layers: g.layers}
		for _, t := range g.timings {
			o.Seconds += t.Seconds
		}
		o.Seconds /= float64(reps)
		out = append(out, o)
	}
	slices.SortStableFunc(out, func(a, b OpTime) int { return cmp.Compare(b.Seconds, a.Seconds) })
	return out
}
