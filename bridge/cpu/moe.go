package cpu

import (
	"sync"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu/vec"
	"github.com/mtlbench/mtlbench/kernels"
)

// pairGroup is a run of (token, expert) pairs that share one expert and are
// computed by one GEMM of m = len(pairs).
type pairGroup struct {
	expert int32
	pairs  []int32 // indices into the flattened [token][top_k] routing
}

// MoE routes each token to its top-k experts, runs the experts as the
// strategy says, and sums their outputs weighted by the routing weights.
// All strategies compute the same pairs; they differ in how many times an
// expert's weights are streamed from memory, which is what they trade off.
func (b *Backend) MoE(out, x bridge.Tensor, w *bridge.MoEWeights, p bridge.MoEParams) {
	H, I, K := w.Hidden, w.Inter, w.TopK
	E := len(w.Gate)
	xs := f32s(x)
	T := len(xs) / H
	logits := b.buf("moe.logits", T*E)
	b.MatMul(&tensor{dt: bridge.F32, shape: []int{T, E}, n: T * E, f32: logits}, x, w.Router, nil)
	ids, weights, groups := b.routeGroups(logits, w, p)

	// y holds every pair's expert output; the weighted sum per token happens
	// after, in top-k order, so the result does not depend on the strategy's
	// scheduling.
	y := b.buf("moe.y", len(ids)*H)
	b.pool.forEach(len(groups), func(gi int) {
		g := groups[gi]
		m := len(g.pairs)
		sc := moeScratchPool.Get().(*moeScratch)
		defer moeScratchPool.Put(sc)
		xg, gate, up, yg := sc.grow(m*H, m*I)
		for r, pi := range g.pairs {
			copy(xg[r*H:(r+1)*H], xs[int(pi)/K*H:(int(pi)/K+1)*H])
		}
		gemmRows(gate, I, xg, w.Gate[g.expert].(*tensor), m, 0, I, H)
		gemmRows(up, I, xg, w.Up[g.expert].(*tensor), m, 0, I, H)
		vec.SiLUMul(gate, gate, up)
		gemmRows(yg, H, gate, w.Down[g.expert].(*tensor), m, 0, H, I)
		for r, pi := range g.pairs {
			copy(y[int(pi)*H:(int(pi)+1)*H], yg[r*H:(r+1)*H])
		}
	})
	combineTopK(f32s(out), y, weights, T, K, H)
}

// routeGroups routes a MoE step's router logits to each token's top-k
// experts, counts the experts touched and schedules the (token, expert)
// pairs by the strategy, the one way for float and packed experts.
func (b *Backend) routeGroups(logits []float32, w *bridge.MoEWeights, p bridge.MoEParams) (ids []int32, weights []float32, groups []pairGroup) {
	ids, weights = kernels.Route(logits, len(w.Gate), w.TopK, w.NormTopK)
	b.stats.ExpertsTouched = append(b.stats.ExpertsTouched, len(sortedUnique(ids)))
	return ids, weights, strategyGroups(ids, len(w.Gate), p)
}

// combineTopK writes each of T tokens' output o as its K experts' outputs y
// weighted by weights and summed in top-k order, so that the sum does not
// depend on the order in which the strategy ran the pairs.
func combineTopK(o, y, weights []float32, T, K, H int) {
	for t := 0; t < T; t++ {
		row := o[t*H : (t+1)*H]
		clear(row)
		for j := 0; j < K; j++ {
			wt := weights[t*K+j]
			yr := y[(t*K+j)*H : (t*K+j+1)*H]
			for i := range row {
				row[i] += wt * yr[i]
			}
		}
	}
}

// groupByExpert groups pairs [lo,hi) by expert, experts in ascending order.
// strategyGroups is the work of a MoE step as the strategy schedules it:
// one (token, expert) pair at a time (loop), the pairs grouped by expert in
// chunks of tokens (chunked), or all of them grouped by expert (grouped).
func strategyGroups(ids []int32, experts int, p bridge.MoEParams) []pairGroup {
	var groups []pairGroup
	switch p.Strategy {
	case bridge.MoELoop:
		for i, e := range ids {
			groups = append(groups, pairGroup{expert: e, pairs: []int32{int32(i)}})
		}
	case bridge.MoEChunked:
		chunk := max(p.ChunkSize, 1)
		for lo := 0; lo < len(ids); lo += chunk {
			groups = append(groups, groupByExpert(ids, lo, min(lo+chunk, len(ids)), experts)...)
		}
	default: // grouped
		groups = groupByExpert(ids, 0, len(ids), experts)
	}
	return groups
}

func groupByExpert(ids []int32, lo, hi, experts int) []pairGroup {
	byExpert := make([][]int32, experts)
	for i := lo; i < hi; i++ {
		byExpert[ids[i]] = append(byExpert[ids[i]], int32(i))
	}
	var g []pairGroup
	for e, pairs := range byExpert {
		if len(pairs) > 0 {
			g = append(g, pairGroup{expert: int32(e), pairs: pairs})
		}
	}
	return g
}

// moeScratch holds one worker's buffers for an expert group, reused across
// groups and steps so the hot path makes no garbage.
type moeScratch struct{ x, gate, up, y []float32 }

var moeScratchPool = sync.Pool{New: func() any { return new(moeScratch) }}

func (s *moeScratch) grow(hidden, inter int) (x, gate, up, y []float32) {
	fit := func(b []float32, n int) []float32 {
		if cap(b) < n {
			return make([]float32, n)
		}
		return b[:n]
	}
	s.x, s.gate, s.up, s.y = fit(s.x, hidden), fit(s.gate, inter), fit(s.up, inter), fit(s.y, hidden)
	return s.x, s.gate, s.up, s.y
}
