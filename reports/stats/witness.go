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
}

// WitnessByOp groups a case's op timings that carry witness bytes by
// component and op, the largest footprint first; nil when none carries any.
func WitnessByOp(ts []results.OpTiming) []OpWitness {
	type key struct{ comp, op string }
	sums := map[key]*OpWitness{}
	var order []key
	layers := map[key]map[int]bool{}
	reps := map[int]bool{}
	for _, t := range ts {
		if t.Bytes <= 0 && t.Footprint <= 0 {
			continue
		}
		k := key{t.Component, t.Op}
		w := sums[k]
		if w == nil {
			w = &OpWitness{Component: t.Component, Op: t.Op}
			sums[k], layers[k] = w, map[int]bool{}
			order = append(order, k)
		}
		w.Bytes += float64(t.Bytes)
		w.Footprint += float64(t.Footprint)
		layers[k][t.Layer] = true
		reps[t.Rep] = true
	}
	if len(order) == 0 {
		return nil
	}
	out := make([]OpWitness, 0, len(order))
	for _, k := range order {
		w := *sums[k]
		w.Layers = len(layers[k])
		w.Bytes /= float64(len(reps))
		w.Footprint /= float64(len(reps))
		out = append(out, w)
	}
	slices.SortStableFunc(out, func(a, b OpWitness) int { return cmp.Compare(b.Footprint, a.Footprint) })
	return out
}
