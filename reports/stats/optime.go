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
	type key struct{ comp, op string }
	sums := map[key]*OpTime{}
	var order []key
	layers := map[key]map[int]bool{}
	reps := map[int]bool{}
	for _, t := range ts {
		if t.Seconds <= 0 {
			continue
		}
		k := key{t.Component, t.Op}
		o := sums[k]
		if o == nil {
			o = &OpTime{Component: t.Component, Op: t.Op}
			sums[k], layers[k] = o, map[int]bool{}
			order = append(order, k)
		}
		o.Seconds += t.Seconds
		layers[k][t.Layer] = true
		reps[t.Rep] = true
	}
	if len(order) == 0 {
		return nil
	}
	out := make([]OpTime, 0, len(order))
	for _, k := range order {
		o := *sums[k]
		o.Layers = len(layers[k])
		o.Seconds /= float64(len(reps))
		out = append(out, o)
	}
	slices.SortStableFunc(out, func(a, b OpTime) int { return cmp.Compare(b.Seconds, a.Seconds) })
	return out
}
