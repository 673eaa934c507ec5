package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

// Paged attention over a cache whose blocks are scattered in random order
// equals textbook causal attention over the contiguous K and V.
func TestPagedEqualsContiguous(t *testing.T) {
	for _, c := range []struct{ tokens, heads, kv, dim, bs int }{
		{1, 4, 4, 32, 16}, {17, 8, 2, 64, 8}, {33, 8, 1, 32, 32}, {16, 4, 4, 128, 16},
	} {
		r := rand.New(rand.NewPCG(1, uint64(c.tokens)))
		l := PagedLayout{BlockSize: c.bs, KVHeads: c.kv, HeadDim: c.dim}
		nb := (c.tokens+c.bs-1)/c.bs + 3
		perm := r.Perm(nb)
		table := make([]int32, nb)
		for i := range table {
			table[i] = int32(perm[i])
		}
		q := randSlice(r, c.tokens*c.heads*c.dim)
		k := randSlice(r, c.tokens*c.kv*c.dim)
		v := randSlice(r, c.tokens*c.kv*c.dim)
		kc := make([]float32, nb*c.kv*c.bs*c.dim)
		vc := make([]float32, len(kc))
		slots := make([]int32, c.tokens)
		for p := range slots {
			slots[p] = table[p/c.bs]*int32(c.bs) + int32(p%c.bs)
		}
		KVWrite(kc, vc, k, v, slots, l)
		scale := float32(1 / math.Sqrt(float64(c.dim)))
		paged := make([]float32, len(q))
		PagedAttention(paged, q, kc, vc, AttnBatch{QueryStartLoc: []int32{0, int32(c.tokens)}, SeqLens: []int32{int32(c.tokens)}, BlockTable: table, MaxBlocks: nb}, c.heads, l, scale)
		want := make([]float32, len(q))
		CausalAttention(want, q, k, v, c.tokens, c.heads, c.kv, c.dim, scale)
		for i := range want {
			if d := math.Abs(float64(paged[i] - want[i])); d > 1e-5 {
				t.Fatalf("%+v: element %d differs by %g", c, i, d)
			}
		}
		// Decode: the last token alone, with the rest already cached.
		last := make([]float32, c.heads*c.dim)
		PagedAttention(last, q[(c.tokens-1)*c.heads*c.dim:], kc, vc, AttnBatch{QueryStartLoc: []int32{0, 1}, SeqLens: []int32{int32(c.tokens)}, BlockTable: table, MaxBlocks: nb}, c.heads, l, scale)
		for i := range last {
			if d := math.Abs(float64(last[i] - want[(c.tokens-1)*c.heads*c.dim+i])); d > 1e-5 {
				t.Fatalf("%+v decode: element %d differs by %g", c, i, d)
			}
		}
	}
}

func TestRouteRenormalises(t *testing.T) {
	logits := []float32{0, 1, 2, 3, 3, 2, 1, 0}
	ids, w := Route(logits, 4, 2, true)
	if ids[0] != 3 || ids[1] != 2 || ids[2] != 0 || ids[3] != 1 {
		t.Fatalf("ids = %v", ids)
	}
	if s := w[0] + w[1]; math.Abs(float64(s-1)) > 1e-6 {
		t.Fatalf("renormalised weights sum to %g", s)
	}
	_, raw := Route(logits, 4, 2, false)
	if raw[0]+raw[1] >= 1 {
		t.Fatalf("unnormalised top-2 of 4 sum to %g, want < 1", raw[0]+raw[1])
	}
}
