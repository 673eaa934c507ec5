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
		PagedAttention(paged, q, kc, vc, AttnBatch{QueryStartLoc: []int32{0, int32(c.tokens)}, SeqLens: []int32{int32(c.tokens)}, BlockTable: table, MaxBlocks: nb}, c.heads, l, scale, 0)
		want := make([]float32, len(q))
		CausalAttention(want, q, k, v, c.tokens, c.heads, c.kv, c.dim, scale, 0)
		for i := range want {
			if d := math.Abs(float64(paged[i] - want[i])); d > 1e-5 {
				t.Fatalf("%+v: element %d differs by %g", c, i, d)
			}
		}
		// Decode: the last token alone, with the rest already cached.
		last := make([]float32, c.heads*c.dim)
		PagedAttention(last, q[(c.tokens-1)*c.heads*c.dim:], kc, vc, AttnBatch{QueryStartLoc: []int32{0, 1}, SeqLens: []int32{int32(c.tokens)}, BlockTable: table, MaxBlocks: nb}, c.heads, l, scale, 0)
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

// maskedAttention is attention written from the mask itself, one query row
// at a time over contiguous k and v ([positions][kv_heads*head_dim]):
// position p sees key j where j <= p and, with a window, j > p-window.
func maskedAttention(q, k, v []float32, first, n, heads, kvHeads, d int, scale float32, window int) []float32 {
	out := make([]float32, n*heads*d)
	for t := 0; t < n; t++ {
		p := first + t
		for h := 0; h < heads; h++ {
			kh := h / (heads / kvHeads)
			var w []float64
			var js []int
			mx := math.Inf(-1)
			for j := 0; j <= p; j++ {
				if window > 0 && j <= p-window {
					continue
				}
				var dot float64
				for i := 0; i < d; i++ {
					dot += float64(q[(t*heads+h)*d+i]) * float64(k[(j*kvHeads+kh)*d+i])
				}
				w, js = append(w, dot*float64(scale)), append(js, j)
				mx = math.Max(mx, dot*float64(scale))
			}
			var sum float64
			for i := range w {
				w[i] = math.Exp(w[i] - mx)
				sum += w[i]
			}
			for i := 0; i < d; i++ {
				var acc float64
				for x, j := range js {
					acc += w[x] / sum * float64(v[(j*kvHeads+kh)*d+i])
				}
				out[(t*heads+h)*d+i] = float32(acc)
			}
		}
	}
	return out
}

// A sliding window keeps, for the query at position p, the keys at
// p-window < j <= p: paged attention over scattered blocks, for one or two
// sequences of decode and prefill chunks that start past 0, equals the mask
// written out, and so does the contiguous form for chunks from 0.
func TestPagedAttentionWindow(t *testing.T) {
	type seq struct{ cached, queries int }
	for _, c := range []struct {
		name               string
		seqs               []seq
		heads, kv, dim, bs int
		window             int
	}{
		{"prefill window shorter", []seq{{0, 20}}, 4, 4, 16, 4, 5},
		{"prefill window equal", []seq{{0, 12}}, 4, 2, 16, 4, 12},
		{"prefill window longer", []seq{{0, 9}}, 4, 2, 16, 4, 30},
		{"window of one", []seq{{0, 7}}, 2, 1, 8, 4, 1},
		{"window a block", []seq{{0, 24}}, 8, 2, 32, 8, 8},
		{"window across blocks", []seq{{0, 40}}, 8, 1, 32, 16, 19},
		{"decode past window", []seq{{30, 1}}, 4, 2, 16, 4, 6},
		{"decode at window", []seq{{5, 1}}, 4, 2, 16, 4, 6},
		{"decode before window", []seq{{2, 1}}, 4, 4, 16, 4, 6},
		{"chunk past window", []seq{{13, 9}}, 8, 2, 16, 8, 10},
		{"chunk inside window", []seq{{3, 4}}, 8, 2, 16, 8, 10},
		{"batch decode and chunk", []seq{{17, 1}, {21, 6}, {0, 3}}, 4, 2, 16, 4, 7},
		{"no window", []seq{{11, 5}}, 4, 2, 16, 4, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(len(c.name))))
			l := PagedLayout{BlockSize: c.bs, KVHeads: c.kv, HeadDim: c.dim}
			scale := float32(1 / math.Sqrt(float64(c.dim)))
			maxBlocks := 0
			for _, s := range c.seqs {
				maxBlocks = max(maxBlocks, (s.cached+s.queries+c.bs-1)/c.bs)
			}
			nb := len(c.seqs)*maxBlocks + 2
			perm := r.Perm(nb)
			kc := make([]float32, nb*c.kv*c.bs*c.dim)
			vc := make([]float32, len(kc))
			b := AttnBatch{QueryStartLoc: []int32{0}, MaxBlocks: maxBlocks, BlockTable: make([]int32, len(c.seqs)*maxBlocks)}
			var q []float32
			var want []float32
			for si, s := range c.seqs {
				n := s.cached + s.queries
				for i := 0; i < maxBlocks; i++ {
					b.BlockTable[si*maxBlocks+i] = int32(perm[si*maxBlocks+i])
				}
				k := randSlice(r, n*c.kv*c.dim)
				v := randSlice(r, n*c.kv*c.dim)
				slots := make([]int32, n)
				for p := range slots {
					slots[p] = b.BlockTable[si*maxBlocks+p/c.bs]*int32(c.bs) + int32(p%c.bs)
				}
				KVWrite(kc, vc, k, v, slots, l)
				sq := randSlice(r, s.queries*c.heads*c.dim)
				q = append(q, sq...)
				want = append(want, maskedAttention(sq, k, v, s.cached, s.queries, c.heads, c.kv, c.dim, scale, c.window)...)
				b.QueryStartLoc = append(b.QueryStartLoc, b.QueryStartLoc[si]+int32(s.queries))
				b.SeqLens = append(b.SeqLens, int32(n))
				if s.cached == 0 {
					got := make([]float32, len(sq))
					CausalAttention(got, sq, k, v, s.queries, c.heads, c.kv, c.dim, scale, c.window)
					if d := MaxAbsDiff(got, want[len(want)-len(sq):]); d > 1e-5 {
						t.Errorf("contiguous, sequence %d: max error %g", si, d)
					}
				}
			}
			got := make([]float32, len(q))
			PagedAttention(got, q, kc, vc, b, c.heads, l, scale, c.window)
			if d := MaxAbsDiff(got, want); d > 1e-5 {
				t.Errorf("paged: max error %g", d)
			}
		})
	}
}

// The keys a cost model charges attention for are those the sliding mask
// keeps: each query's own, and the positions any query of the chunk reads,
// counted here by walking the mask (p-window < j <= p); the most one query
// reads sizes the split-K partitions (QueryKeys).
func TestAttendedKeys(t *testing.T) {
	for _, c := range []struct {
		name             string
		ctx, n, window   int
		attended, keysRd int64
		most             int // keys the query that reads the most reads (QueryKeys)
	}{
		{"decode no window", 100, 1, 0, 101, 101, 101},
		{"decode window longer than context", 100, 1, 4096, 101, 101, 101},
		{"decode window equal to context", 99, 1, 100, 100, 100, 100},
		{"decode past window", 100, 1, 8, 8, 8, 8},
		{"prefill from 0 no window", 0, 5, 0, 15, 5, 5},
		{"prefill from 0 window shorter", 0, 5, 3, 1 + 2 + 3 + 3 + 3, 5, 3},
		{"chunk past window", 20, 4, 8, 32, 11, 8},
		{"chunk across window", 5, 6, 8, 6 + 7 + 8 + 8 + 8 + 8, 11, 8},
		{"chunk window longer", 5, 6, 64, 6 + 7 + 8 + 9 + 10 + 11, 11, 11},
		{"window of one", 9, 3, 1, 3, 3, 1},
		{"no queries", 9, 0, 4, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var attended int64
			read, most := map[int]bool{}, 0
			for p := c.ctx; p < c.ctx+c.n; p++ {
				mine := 0
				for j := 0; j <= p; j++ {
					if c.window <= 0 || j > p-c.window {
						attended++
						mine++
						read[j] = true
					}
				}
				most = max(most, mine)
			}
			if attended != c.attended || int64(len(read)) != c.keysRd || most != c.most {
				t.Fatalf("table: mask gives %d attended, %d read, at most %d a query; table says %d, %d, %d", attended, len(read), most,
					c.attended, c.keysRd, c.most)
			}
			// A step's sequences are as long as their last query's position.
			if got, seqLen := QueryKeys(c.ctx+c.n, c.window), c.ctx+c.n; c.n > 0 && got != c.most {
				t.Errorf("QueryKeys(%d, %d) = %d, want %d", seqLen, c.window, got, c.most)
			}
			if got := AttendedKeys(c.ctx, c.n, c.window); got != c.attended {
				t.Errorf("AttendedKeys(%d, %d, %d) = %d, want %d", c.ctx, c.n, c.window, got, c.attended)
			}
			if got := KeysRead(c.ctx, c.n, c.window); got != c.keysRd {
				t.Errorf("KeysRead(%d, %d, %d) = %d, want %d", c.ctx, c.n, c.window, got, c.keysRd)
			}
		})
	}
}
