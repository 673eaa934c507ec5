package kbench

import (
	"fmt"
	"math"
	"strconv"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// A reference check of attention recomputes at most this many sequences
// and, of a long prefill, the first and last few query tokens of each:
// enough to catch paging, GQA and causal-mask bugs without float64 loops
// over a whole long prompt.
const (
	checkSeqs      = 8
	checkEndTokens = 8
)

// prepareAttention builds seqs sequences, each with context tokens already
// in a paged cache of random K/V (blocks shuffled, as a long-running
// allocator leaves them) and tokens new ones (1 for decode), and the step
// metadata the engine would build for them.
func (b *Bench) prepareAttention(p *params, prefill bool) error {
	S := p.int(ops.Seqs)
	H, KVH, D := p.heads()
	BS := p.int(ops.BlockSize)
	// The model's dtype: the cache is kept in it where the backend keeps
	// a model's so by default, as the engine keeps it (bridge.AutoKVDType).
	kvdt := bridge.AutoKVDType(b.be, p.dtype())
	T, C := 1, 0
	if prefill {
		T, C = p.int(ops.Tokens), p.count(ops.Context)
	} else {
		C = p.int(ops.Context)
	}
	// A sliding window (0: none) starts each query's keys at p-window+1.
	W := p.count(ops.Window)
	if W > maxDim {
		p.fail(ops.Window, strconv.Itoa(W), "must be at most %d", maxDim)
		W = 0
	}
	p.shape[ops.Window] = W
	if err := p.err(); err != nil {
		return err
	}
	if W > 0 && W < C+T && !runsWindows(b.be) {
		return unsupported(fmt.Sprintf("%s=%d: the backend's attention does not slide past a window (bridge.WindowRunner)", ops.Window, W))
	}
	if prefill {
		b.desc = fmt.Sprintf("%s seqs=%d tokens=%d context=%d heads=%d/%d head_size=%d block=%d", b.op, S, T, C, H, KVH, D, BS)
	} else {
		b.desc = fmt.Sprintf("%s seqs=%d context=%d heads=%d/%d head_size=%d block=%d", b.op, S, C, H, KVH, D, BS)
	}
	// partitions tunes a split-context GPU kernel; the contract has no knob
	// for it, so it only labels the case (the runner hands it to a backend).
	if n := p.count(ops.Partitions); n > 0 {
		b.desc += fmt.Sprintf(" partitions=%d", n)
	}
	if W > 0 {
		b.desc += fmt.Sprintf(" window=%d", W)
	}
	if kvdt != b.act {
		b.desc += " kv=" + kvdt.String()
	}
	b.tolerance(kvdt)

	L := C + T
	nb := (L + BS - 1) / BS
	m := b.attentionMeta(S, T, C, BS)
	b.meta = m
	b.tokenIDs(S * T)

	p.shape[ops.Context] = C
	b.cost(p, kvdt)

	shape := []int{S * nb, KVH, BS, D}
	kc, err := b.upload(kvdt, shape, 0, 1)
	if err != nil {
		return err
	}
	vc, err := b.upload(kvdt, shape, 0, 1)
	if err != nil {
		return err
	}
	q, err := b.upload(b.act, []int{S * T, H * D}, 0, 1)
	if err != nil {
		return err
	}
	k, err := b.upload(b.act, []int{S * T, KVH * D}, 0, 1)
	if err != nil {
		return err
	}
	v, err := b.upload(b.act, []int{S * T, KVH * D}, 0, 1)
	if err != nil {
		return err
	}
	out, err := b.output(b.act, S*T, H*D)
	if err != nil {
		return err
	}
	// Copies of the cache (identical, and written alike) keep a GPU's L2
	// from holding the context between calls.
	cache := mulSat(2*elems(shape), int64(kvdt.Size()))
	n := b.rotate(cache, cache)
	kcs, err := b.copies(kc, n)
	if err != nil {
		return err
	}
	vcs, err := b.copies(vc, n)
	if err != nil {
		return err
	}
	n = min(len(kcs), len(vcs))
	// The check reads the caches, q, k and v before the call and the caches
	// and out after it; the reference's rows, and its scores and sums of
	// each row and head.
	rows := min(S, checkSeqs) * min(T, 2*checkEndTokens)
	b.needScratch(4*f32(S*nb, KVH, BS, D) + 2*f32(S*T, H*D) + 3*f32(S*T, KVH*D) + 3*f32(rows, H*D) + f32(rows*H, 2*(L+D)))
	scale := float32(1 / math.Sqrt(float64(D)))
	// Every call writes the same k/v into the same slots, so repeating it
	// leaves the cache as one call does.
	b.call = func(i int) {
		cache := bridge.KVCache{K: kcs[i%n].t, V: vcs[i%n].t, BlockSize: BS}
		b.be.Attention(out, q.t, k.t, v.t, cache, H, KVH, D, scale, W)
	}

	b.check = func() (float64, float64, error) {
		in, res, err := b.around([]bridge.Tensor{kc.t, vc.t, q.t, k.t, v.t}, out, kc.t, vc.t)
		if err != nil {
			return 0, 0, err
		}
		kcs, vcs, qs, ks, vs := in[0], in[1], in[2], in[3], in[4]
		got, gk, gv := res[0], res[1], res[2]
		l := kernels.PagedLayout{BlockSize: BS, KVHeads: KVH, HeadDim: D}
		// The cache stores the new keys in its dtype, and attention reads
		// them as stored.
		roundTo(kvdt, ks)
		roundTo(kvdt, vs)
		kernels.KVWrite(kcs, vcs, ks, vs, m.SlotMapping, l)
		cacheErr := max(maxDiff(gk, kcs), maxDiff(gv, vcs))

		// Causal attention of a sequence's first n query tokens does not
		// depend on the later ones, so a sub-batch whose SeqLen ends at
		// them checks the head of a long prefill exactly.
		batch := kernels.AttnBatch{QueryStartLoc: []int32{0}, MaxBlocks: nb}
		var rows []int
		add := func(s, first, n int) {
			for i := range n {
				rows = append(rows, s*T+first+i)
			}
			batch.QueryStartLoc = append(batch.QueryStartLoc, int32(len(rows)))
			batch.SeqLens = append(batch.SeqLens, int32(C+first+n))
			batch.BlockTable = append(batch.BlockTable, m.BlockTable[s*nb:(s+1)*nb]...)
		}
		for _, s := range spread(S, checkSeqs) {
			if T <= 2*checkEndTokens {
				add(s, 0, T)
			} else {
				add(s, 0, checkEndTokens)
				add(s, T-checkEndTokens, checkEndTokens)
			}
		}
		want := make([]float32, len(rows)*H*D)
		kernels.PagedAttention(want, gatherRows(qs, rows, H*D), kcs, vcs, batch, H, l, scale, W)
		return max(maxDiff(gatherRows(got, rows, H*D), want), cacheErr), maxAbs(want), nil
	}
	return nil
}

// runsWindows reports whether be's attention slides a window past its
// length (bridge.WindowRunner), as the engine asks before a long request.
func runsWindows(be bridge.Backend) bool {
	w, ok := be.(bridge.WindowRunner)
	return ok && w.RunsWindows()
}

// attentionMeta is the step of S sequences of T new tokens after C cached
// ones, their blocks of BS shuffled (as a long-running allocator leaves
// them). A plan counts its slices and the shuffle and gets an empty step.
func (b *Bench) attentionMeta(S, T, C, BS int) *bridge.StepMeta {
	L := C + T
	nb := (L + BS - 1) / BS
	b.reserve(mulSat(4, int64(S)*int64(nb)+2*int64(S)*int64(T)+2*int64(S)+1))
	b.needScratch(mulSat(8, int64(S)*int64(nb)))
	if b.plan {
		return &bridge.StepMeta{}
	}
	perm := b.rng.Perm(S * nb)
	m := &bridge.StepMeta{
		NumTokens: S * T, NumSeqs: S, MaxQueryLen: T, MaxSeqLen: L,
		MaxBlocks: nb, BlockSize: BS, QueryStartLoc: []int32{0},
	}
	if T == 1 {
		m.NumDecodeTokens = S
	}
	for s := range S {
		for j := range nb {
			m.BlockTable = append(m.BlockTable, int32(perm[s*nb+j]))
		}
		table := m.BlockTable[s*nb:]
		for pos := C; pos < L; pos++ {
			m.Positions = append(m.Positions, int32(pos))
			m.SlotMapping = append(m.SlotMapping, table[pos/BS]*int32(BS)+int32(pos%BS))
		}
		m.QueryStartLoc = append(m.QueryStartLoc, int32((s+1)*T))
		m.SeqLens = append(m.SeqLens, int32(L))
	}
	return m
}
