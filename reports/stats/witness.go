package stats

import (
	"cmp"
	"slices"

	"github.com/mtlbench/mtlbench/results"
)

// OpWitness is one op's share of a decode step's device bytes as the Metal
// emulator's cost witness counted them in profile mode: summed over the
// layers the op runs in, averaged over the repetitions.
type OpWitness struct {
	Component, Op string
	Layers        int     // the layers (or places outside them) it ran in
	Bytes         float64 // every access
	Footprint     float64 // each dispatch's distinct bytes
	// CriticalLoads are the loads of each of its dispatches' busiest
	// simdgroup, summed over the layers.
	CriticalLoads float64
}

// WitnessByOp groups a case's op timings that carry witness bytes by
// component and op, the largest footprint first; nil when none carries any.
func WitnessByOp(ts []results.OpTiming) []OpWitness {
	groups, reps := byOp(ts, func(t results.OpTiming) bool { return t.Bytes > 0 || t.Footprint > 0 })
	if len(groups) == 0 {
		return nil
	}
	out := make([]OpWitness, 0, len(groups))
	for _, g := range groups {
		w := OpWitness{Component: g.component, Op: g.op, Layers: g.layers}
		for _, t := range g.timings {
			w.Bytes += float64(t.Bytes)
			w.Footprint += float64(t.Footprint)
			w.CriticalLoads += float64(t.CriticalLoads)
		}
		w.Bytes /= float64(reps)
		w.Footprint /= float64(reps)
		w.CriticalLoads /= float64(reps)
		out = append(out, w)
	}
	slices.SortStableFunc(out, func(a, b OpWitness) int { return cmp.Compare(b.Footprint, a.Footprint) })
	return out
}

// opGroup is one op's timings: every layer and repetition of it.
type opGroup struct {
	component, op string
	timings       []results.OpTiming
	layers        int // the distinct layers (or places outside them) among them
}

// byOp groups the timings keep accepts by component and op, in the order
// first seen, and counts the repetitions they come from.
func byOp(ts []results.OpTiming, keep func(results.OpTiming) bool) (groups []opGroup, reps int) {
	type key struct{ comp, op string }
	at := map[key]int{}
	layers := []map[int]bool{}
	repSet := map[int]bool{}
	for _, t := range ts {
		if !keep(t) {
			continue
		}
		k := key{t.Component, t.Op}
		i, ok := at[k]
		if !ok {
			i = len(groups)
			at[k] = i
			groups = append(groups, opGroup{component: t.Component, op: t.Op})
			layers = append(layers, map[int]bool{})
		}
		groups[i].timings = append(groups[i].timings, t)
		layers[i][t.Layer] = true
		repSet[t.Rep] = true
	}
	for i := range groups {
		groups[i].layers = len(layers[i])
	}
	return groups, len(repSet)
}
