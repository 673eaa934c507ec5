package ops

import (
	"maps"
	"slices"
	"strconv"
	"testing"
)

// closure is every config local search can reach from the default: the
// neighbours of the default's raw point, theirs, and so on, each config
// walked on from the raw point of the move that first reached it (as the
// tuner does).
func closure(k *Space, s Shape, lim Limits) map[string]bool {
	seen := map[string]bool{k.DefaultConfig(s, lim).Key(): true}
	todo := []Config{k.Default(s, lim)}
	for len(todo) > 0 {
		raw := todo[0]
		todo = todo[1:]
		for _, m := range k.Neighbours(raw, s, lim) {
			if !seen[m.Config.Key()] {
				seen[m.Config.Key()] = true
				todo = append(todo, m.Raw)
			}
		}
	}
	return seen
}

// closureShapes are shapes of a space to check: its defaults, and each
// log-matched dimension (token counts, contexts) swept alone.
func closureShapes(k *Space) []Shape {
	base := Shape{}
	for _, d := range k.Dims {
		if !d.Device {
			base[d.Name] = d.Default
		}
	}
	shapes := []Shape{base}
	for _, d := range k.Dims {
		if d.Match != Log || d.Device {
			continue
		}
		for _, v := range []int{1, 3, 16, 4096} {
			if v != d.Default {
				s := base.Clone()
				s[d.Name] = v
				shapes = append(shapes, s)
			}
		}
	}
	if _, ok := k.Dim(TopK); ok {
		// 2 and 16 tokens routed to 4 experts: 8 and 64 pairs, at or
		// under the default chunk of 64 (which then folds to grouped).
		for _, tokens := range []int{2, 16} {
			shapes = append(shapes, Shape{Tokens: tokens, Experts: 32, TopK: 4, Hidden: 512, Intermediate: 256})
		}
	}
	return shapes
}

// Local search must be able to reach every candidate of every space from
// the default: a step its canonical form folds onto a config already in
// hand (a chunk holding every pair is grouped) or that a constraint prunes
// must not wall off the rest of the space. Every space is connected so.
func TestLocalSearchReachesEveryCandidate(t *testing.T) {
	// The first limits at every shape; the others (fewer threads, which
	// prune more) at the defaults.
	limits := map[Backend][]Limits{
		CPU:   {{MaxThreads: 8}, {MaxThreads: 1}, {MaxThreads: 2}},
		CUDA:  {{MaxThreads: 1024, ThreadgroupMemory: 48 << 10, SIMDWidth: 32}},
		Metal: {{MaxThreads: 1024, ThreadgroupMemory: 32 << 10, SIMDWidth: 32}, {MaxThreads: 256, ThreadgroupMemory: 32 << 10, SIMDWidth: 32}},
	}
	n := 0
	for _, o := range All() {
		for _, b := range slices.Sorted(maps.Keys(o.Tuning)) {
			k := o.Tuning[b]
			for i, lim := range limits[b] {
				shapes := closureShapes(k)
				if i > 0 {
					shapes = shapes[:1]
				}
				for _, s0 := range shapes {
					s, err := k.Normalize(s0, lim)
					if err != nil {
						t.Fatalf("%s/%s %v: %v", o.ID, b, s0, err)
					}
					cands, _ := k.Candidates(s, lim)
					reached := closure(k, s, lim)
					var missed []string
					for _, c := range cands {
						if !reached[c.Key()] {
							missed = append(missed, k.String(c))
						}
					}
					n++
					if len(missed) > 0 {
						t.Errorf("%s/%s %s (%d threads): local search reaches %d of %d candidates, not %v",
							o.ID, b, s.Key(), lim.MaxThreads, len(cands)-len(missed), len(cands), firstOf(missed, 8))
					}
				}
			}
		}
	}
	if n < 17 {
		t.Fatalf("%d spaces and shapes checked", n)
	}
}

func firstOf(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clip(s[:n]), "... "+strconv.Itoa(len(s)-n)+" more")
}

// TestNormalizeReadsAliases checks that a shape may name a dimension by its
// op's other name, as a suite's kernel case may (tune --shape tokens=4 for
// matmul is m=4), and that both names at once, or a name the op has not,
// are refused naming them.
func TestNormalizeReadsAliases(t *testing.T) {
	lim := Limits{MaxThreads: 1024, ThreadgroupMemory: 32 << 10, SIMDWidth: 32}
	for _, tc := range []struct {
		op    ID
		shape Shape
		want  string // the shape's key, or the error
	}{
		{MatMul, Shape{Tokens: 4, N: 64, Hidden: 32}, "k=32,m=4,n=64"},
		{MatMul, Shape{M: 4, N: 64, K: 32}, "k=32,m=4,n=64"},
		{MatMul, Shape{Tokens: 4}, "k=2048,m=4,n=2048"},
		{RMSNorm, Shape{Tokens: 2, Hidden: 512}, "tokens=2,width=512"},
		{MoE, Shape{Tokens: 2, Hidden: 512}, "experts=128,hidden=512,intermediate=768,tokens=2,top_k=8"},
		{MatMul, Shape{Tokens: 4, M: 8}, "matmul: tokens=4 and m=8 are one dimension, tokens its other name: give one"},
		{MatMul, Shape{Tokens: 0}, "matmul: tokens=0 must be positive"},
		{MatMul, Shape{Width: 8}, `matmul: unknown shape dimension "width" (want m (or tokens), n, k (or hidden))`},
	} {
		o, _ := Lookup(tc.op)
		s, err := o.Tuning[Metal].Normalize(tc.shape, lim)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			delete(s, Threads)
			got = s.Key()
		}
		if got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.op, tc.shape.Key(), got, tc.want)
		}
	}
}
