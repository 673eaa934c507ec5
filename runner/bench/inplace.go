package bench

import "github.com/mtlbench/mtlbench/bridge"

// stepSpan is one step's launches in an in-place timeline, [from, to) in
// the order issued, and whether the step was pure decode.
type stepSpan struct {
	from, to int
	decode   bool
}

// inPlaceTimings sums what each op's launches cost in place over the decode
// steps the timeline holds whole: every launch and the one after it, whose
// release marks this one's end (bridge.InPlaceCosts). The last launch of a
// step ends as the next step's first is let go, so the last step of the
// timeline is left out. steps is how many steps were summed.
func inPlaceTimings(ls []bridge.TimelineLaunch, spans []stepSpan) (ts []bridge.OpTiming, steps int) {
	bySeq := map[int]*bridge.TimelineLaunch{}
	for i := range ls {
		bySeq[ls[i].Seq] = &ls[i]
	}
	type key struct {
		layer     int
		component string
		op        string
	}
	at := map[key]int{}
	for _, s := range spans {
		if !s.decode || s.to <= s.from {
			continue
		}
		whole := true
		for q := s.from; q <= s.to && whole; q++ {
			whole = bySeq[q] != nil
		}
		if !whole {
			continue
		}
		steps++
		for q := s.from; q < s.to; q++ {
			l := bySeq[q]
			k := key{l.Layer, l.Component, l.Op}
			i, ok := at[k]
			if !ok {
				i = len(ts)
				at[k] = i
				ts = append(ts, bridge.OpTiming{Layer: l.Layer, Component: l.Component, Op: l.Op})
			}
			ts[i].Duration += bySeq[q+1].Released - l.Released
		}
	}
	return ts, steps
}
