package kernels

import "math"

// PagedLayout describes a paged KV cache: blocks of BlockSize token slots,
// stored as [num_blocks][num_kv_heads][block_size][head_dim], the layout the
// Metal and CUDA kernels use.
type PagedLayout struct {
	BlockSize, KVHeads, HeadDim int
}

// Index is the element offset of (slot, kv head, 0).
func (l PagedLayout) Index(slot int32, h int) int {
	b, off := int(slot)/l.BlockSize, int(slot)%l.BlockSize
	return ((b*l.KVHeads+h)*l.BlockSize + off) * l.HeadDim
}

// KVWrite stores the k and v rows of each token ([tokens][kv_heads*head_dim])
// into the cache slots given by slots. A negative slot means "no cache write"
// (padding), as in vLLM's slot mapping.
func KVWrite(kc, vc, k, v []float32, slots []int32, l PagedLayout) {
	w := l.KVHeads * l.HeadDim
	for t, s := range slots {
		if s < 0 {
			continue
		}
		for h := 0; h < l.KVHeads; h++ {
			o := l.Index(s, h)
			copy(kc[o:o+l.HeadDim], k[t*w+h*l.HeadDim:t*w+(h+1)*l.HeadDim])
			copy(vc[o:o+l.HeadDim], v[t*w+h*l.HeadDim:t*w+(h+1)*l.HeadDim])
		}
	}
}

// AttendedKeys is attention's work over n query tokens at positions
// ctx..ctx+n-1 of one sequence: the sum of the keys each attends to, p+1
// (causal), or min(p+1, window) where window > 0 (PagedAttention's sliding
// mask). The cost models count attention's FLOPs by it (kernels/ops,
// model.Config.StepFLOPs), so a layer that slides is not charged the whole
// context.
func AttendedKeys(ctx, n, window int) int64 {
	c, m := int64(max(ctx, 0)), int64(max(n, 0))
	if window <= 0 {
		return m*c + m*(m+1)/2
	}
	w := int64(window)
	// The queries at p < window see p+1 keys, the rest window each.
	k := max(0, min(c+m, w)-c)
	return k*c + k*(k+1)/2 + (m-k)*w
}

// KeysRead is how many positions the n query tokens at ctx..ctx+n-1 read
// between them: every one up to the last, or, where window > 0, those from
// the first query's window on (the cached keys before it are not read).
// The cost models count the K and V attention reads by it.
func KeysRead(ctx, n, window int) int64 {
	if n <= 0 {
		return 0
	}
	l := int64(max(ctx, 0)) + int64(n)
	if window <= 0 {
		return l
	}
	return min(l, int64(window)+int64(n)-1)
}

// QueryKeys is the most keys one query token of a sequence of seqLen
// positions reads: every position, or at most the window where window > 0.
// Split-K attention numbers a token's partitions from its first key, so a
// launch needs only enough of them for these.
func QueryKeys(seqLen, window int) int {
	n := max(seqLen, 0)
	if window > 0 {
		return min(n, window)
	}
	return n
}

// AttnBatch is the per-step attention metadata for a batch of sequences.
// QueryStartLoc[s]..QueryStartLoc[s+1] are the query tokens of sequence s;
// SeqLens[s] is its FULL length after this step (cached plus new tokens), so
// query token i of a sequence with q new tokens sits at position
// SeqLens[s]-q+i and attends to positions 0..that position (or the last
// window of them: PagedAttention's window).
type AttnBatch struct {
	QueryStartLoc []int32
	SeqLens       []int32
	BlockTable    []int32 // [num_seqs][MaxBlocks]
	MaxBlocks     int
}

// PagedAttention computes causal attention for every query token of q
// ([tokens][heads*head_dim]) against the paged cache, which must already hold
// the keys and values of the new tokens. GQA maps query head h to kv head
// h/(heads/kv_heads). A window > 0 slides it: the query at position p
// attends to the keys at p-window < j <= p (transformers' sliding mask,
// kv_idx > q_idx - sliding_window); 0 attends to every earlier position.
func PagedAttention(out, q, kc, vc []float32, b AttnBatch, heads int, l PagedLayout, scale float32, window int) {
	d := l.HeadDim
	group := heads / l.KVHeads
	for s := 0; s+1 < len(b.QueryStartLoc); s++ {
		q0, q1 := int(b.QueryStartLoc[s]), int(b.QueryStartLoc[s+1])
		seqLen := int(b.SeqLens[s])
		table := b.BlockTable[s*b.MaxBlocks : (s+1)*b.MaxBlocks]
		for t := q0; t < q1; t++ {
			pos := seqLen - (q1 - q0) + (t - q0)
			lo := WindowStart(pos, window)
			for h := 0; h < heads; h++ {
				qv := q[(t*heads+h)*d : (t*heads+h+1)*d]
				scores := make([]float64, pos+1)
				mx := math.Inf(-1)
				for j := lo; j <= pos; j++ {
					slot := table[j/l.BlockSize]*int32(l.BlockSize) + int32(j%l.BlockSize)
					o := l.Index(slot, h/group)
					var dot float64
					for i := 0; i < d; i++ {
						dot += float64(qv[i]) * float64(kc[o+i])
					}
					scores[j] = dot * float64(scale)
					mx = math.Max(mx, scores[j])
				}
				var sum float64
				for j := lo; j <= pos; j++ {
					scores[j] = math.Exp(scores[j] - mx)
					sum += scores[j]
				}
				acc := make([]float64, d)
				for j := lo; j <= pos; j++ {
					slot := table[j/l.BlockSize]*int32(l.BlockSize) + int32(j%l.BlockSize)
					o := l.Index(slot, h/group)
					p := scores[j] / sum
					for i := 0; i < d; i++ {
						acc[i] += p * float64(vc[o+i])
					}
				}
				for i := 0; i < d; i++ {
					out[(t*heads+h)*d+i] = float32(acc[i])
				}
			}
		}
	}
}

// CausalAttention is attention over contiguous k and v ([tokens][kv_heads*
// head_dim]) for one sequence whose tokens start at position 0: the plain
// textbook form that paged attention must equal, over the last window
// positions where window > 0 (as PagedAttention).
func CausalAttention(out, q, k, v []float32, tokens, heads, kvHeads, headDim int, scale float32, window int) {
	d := headDim
	group := heads / kvHeads
	for t := 0; t < tokens; t++ {
		for h := 0; h < heads; h++ {
			qv := q[(t*heads+h)*d : (t*heads+h+1)*d]
			kh := h / group
			lo := WindowStart(t, window)
			scores := make([]float64, t+1)
			mx := math.Inf(-1)
			for j := lo; j <= t; j++ {
				var dot float64
				for i := 0; i < d; i++ {
					dot += float64(qv[i]) * float64(k[(j*kvHeads+kh)*d+i])
				}
				scores[j] = dot * float64(scale)
				mx = math.Max(mx, scores[j])
			}
			var sum float64
			for j := lo; j <= t; j++ {
				scores[j] = math.Exp(scores[j] - mx)
				sum += scores[j]
			}
			for i := 0; i < d; i++ {
				var acc float64
				for j := lo; j <= t; j++ {
					acc += scores[j] / sum * float64(v[(j*kvHeads+kh)*d+i])
				}
				out[(t*heads+h)*d+i] = float32(acc)
			}
		}
	}
}

// WindowStart is the first position a query at pos attends to under a
// sliding window (0: none, every position from 0).
func WindowStart(pos, window int) int {
	if window > 0 && pos-window+1 > 0 {
		return pos - window + 1
	}
	return 0
}
