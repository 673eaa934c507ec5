package quanttest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels"
)

// LongContextRoPE runs be's RoPE at the positions a scaled RoPE lets a
// request reach (docs/architecture.md, "Rotary embeddings"): Qwen3's yarn
// of factor 4 over 32768 positions, which runs 131072, at positions about
// the original context, its max_position_embeddings of 40960 and the last
// one, with and without QK-norm, against kernels.RoPE with the yarn
// frequencies; the attention factor the engine folds into the attention's
// scale is checked against transformers' 0.1·ln(factor) + 1. Each value
// is held to tol (absolute: the inputs are of unit size).
func LongContextRoPE(t *testing.T, be bridge.Backend, tol float64) {
	t.Helper()
	const theta, heads, kvHeads, headDim = 1e6, 4, 2, 128
	sc := kernels.RoPEScaling{Type: "yarn", Factor: 4, OriginalMax: 32768, BetaFast: 32, BetaSlow: 1, Attention: 1 + 0.1*math.Log(4)}
	if err := sc.Check(); err != nil {
		t.Fatal(err)
	}
	if got, want := sc.LogitScale(), math.Pow(0.1*math.Log(4)+1, 2); got != want {
		t.Errorf("yarn's logit scale %g, want %g", got, want)
	}
	rot := kernels.Rotary{Theta: theta, Freqs: sc.Scaled(headDim, theta)}.Keyed(headDim)
	pos := []int32{0, 1, 32767, 32768, 40959, 40960, 65537, 98303, 131070, 131071}
	r := rand.New(rand.NewPCG(9, 9))
	for _, qkNorm := range []bool{false, true} {
		t.Run(fmt.Sprintf("qk_norm=%v", qkNorm), func(t *testing.T) {
			q, k := randn(r, len(pos)*heads*headDim), randn(r, len(pos)*kvHeads*headDim)
			qw, kw := randn(r, headDim), randn(r, headDim)
			want := [2][]float32{append([]float32(nil), q...), append([]float32(nil), k...)}
			if qkNorm {
				kernels.RMSNorm(want[0], want[0], qw, headDim, 1e-6)
				kernels.RMSNorm(want[1], want[1], kw, headDim, 1e-6)
			}
			kernels.RoPE(want[0], pos, heads, headDim, rot)
			kernels.RoPE(want[1], pos, kvHeads, headDim, rot)
			got, err := runRoPE(be, q, k, qw, kw, qkNorm, pos, heads, kvHeads, headDim, rot)
			if err != nil {
				t.Fatal(err)
			}
			for i, name := range []string{"q", "k"} {
				if d := kernels.MaxAbsDiff(got[i], want[i]); d > tol || math.IsNaN(d) {
					t.Errorf("%s at positions %v: max abs error %.3g, want at most %.3g", name, pos, d, tol)
				}
			}
		})
	}
}

// runRoPE uploads q and k (and the QK-norm weights), rotates them on be at
// pos and reads them back.
func runRoPE(be bridge.Backend, q, k, qw, kw []float32, qkNorm bool, pos []int32, heads, kvHeads, headDim int, rot kernels.Rotary) ([2][]float32, error) {
	var out [2][]float32
	var ts []bridge.Tensor
	defer func() {
		for _, t := range ts {
			be.Free(t)
		}
	}()
	load := func(v []float32, shape ...int) (bridge.Tensor, error) {
		t, err := be.Weight(bridge.F32, shape, F32Bytes(slices.Clone(v)))
		if err == nil {
			ts = append(ts, t)
		}
		return t, err
	}
	qt, err := load(q, len(pos), heads*headDim)
	if err != nil {
		return out, err
	}
	kt, err := load(k, len(pos), kvHeads*headDim)
	if err != nil {
		return out, err
	}
	var qn, kn bridge.Tensor
	if qkNorm {
		if qn, err = load(qw, headDim); err != nil {
			return out, err
		}
		if kn, err = load(kw, headDim); err != nil {
			return out, err
		}
	}
	// A decode step: each position the one new token of its own sequence.
	meta := &bridge.StepMeta{NumTokens: len(pos), NumSeqs: len(pos), Positions: pos,
		SlotMapping: make([]int32, len(pos)), QueryStartLoc: make([]int32, len(pos)+1), SeqLens: make([]int32, len(pos))}
	for i, p := range pos {
		meta.SlotMapping[i], meta.QueryStartLoc[i+1], meta.SeqLens[i] = int32(i), int32(i+1), p+1
	}
	if err := be.BeginStep(meta, make([]int32, len(pos)), false); err != nil {
		return out, err
	}
	be.RoPE(qt, kt, qn, kn, heads, kvHeads, headDim, rot, 1e-6)
	if _, err := be.EndStep(); err != nil {
		return out, err
	}
	out = [2][]float32{make([]float32, len(q)), make([]float32, len(k))}
	if err := be.Read(qt, out[0]); err != nil {
		return out, err
	}
	return out, be.Read(kt, out[1])
}

// LongContextRoPEAttention runs be's RoPE followed by its attention, fused
// as a decode step runs them (docs/architecture.md, "Rotary embeddings":
// a backend may rotate q and the new key inside its decode attention), at
// the positions a scaled RoPE reaches with Qwen3's yarn frequencies and
// its attention factor folded into the scale, as the engine does. Each
// position is a sequence of its own whose query attends over a sliding
// window of the keys before it, so the cache holds a few blocks however
// high the position; the block table maps the blocks no query reads to
// one no reference reads either. The rotated keys the step writes into
// the cache and the attention's output are held to tol against
// kernels.RoPE, kernels.KVWrite and kernels.PagedAttention; where be's
// fusion table has rope_attention, the fused step must take fewer
// dispatches than the unfused one, so the fold is what was checked.
func LongContextRoPEAttention(t *testing.T, be bridge.Backend, tol float64) {
	t.Helper()
	const theta, heads, kvHeads, headDim, bs, window = 1e6, 4, 2, 128, 16, 5
	sc := kernels.RoPEScaling{Type: "yarn", Factor: 4, OriginalMax: 32768, BetaFast: 32, BetaSlow: 1, Attention: 1 + 0.1*math.Log(4)}
	if err := sc.Check(); err != nil {
		t.Fatal(err)
	}
	rot := kernels.Rotary{Theta: theta, Freqs: sc.Scaled(headDim, theta)}.Keyed(headDim)
	scale := float32(1 / math.Sqrt(headDim) * sc.LogitScale())
	pos := []int32{0, 1, 32767, 32768, 40960, 65537, 131071}
	fused := false
	if f, ok := be.(bridge.Fuser); ok {
		fused = slices.ContainsFunc(f.Fusions(), func(p bridge.Pattern) bool { return p.Name == "rope_attention" })
	}
	r := rand.New(rand.NewPCG(13, 17))
	for _, qkNorm := range []bool{false, true} {
		t.Run(fmt.Sprintf("qk_norm=%v", qkNorm), func(t *testing.T) {
			c := ropeAttnCase{pos: pos, heads: heads, kvHeads: kvHeads, headDim: headDim, bs: bs, window: window, rot: rot, scale: scale}
			c.build(r, qkNorm)
			want, wantK, wantV := c.reference()
			dispatches := [2]int{}
			for i, fuse := range []bool{false, true} {
				got, gotK, gotV, n, err := c.run(be, fuse)
				if err != nil {
					t.Fatal(err)
				}
				dispatches[i] = n
				for _, o := range []struct {
					name      string
					got, want []float32
				}{{"attention output", got, want}, {"key cache", gotK, wantK}, {"value cache", gotV, wantV}} {
					d := kernels.MaxAbsDiff(o.got, o.want)
					t.Logf("fuse=%v: %s: max abs error %.3g", fuse, o.name, d)
					if d > tol || math.IsNaN(d) {
						t.Errorf("fuse=%v: %s at positions %v: max abs error %.3g, want at most %.3g", fuse, o.name, pos, d, tol)
					}
				}
			}
			t.Logf("dispatches: unfused %d, fused %d", dispatches[0], dispatches[1])
			if fused && dispatches[1] >= dispatches[0] {
				t.Errorf("rope_attention: the fused step took %d dispatches, the unfused %d: RoPE was not folded into the attention", dispatches[1], dispatches[0])
			}
		})
	}
}

// ropeAttnCase is one decode step of LongContextRoPEAttention: a sequence
// a position, its window's earlier keys already in the cache.
type ropeAttnCase struct {
	pos                                 []int32
	heads, kvHeads, headDim, bs, window int
	rot                                 kernels.Rotary
	scale                               float32
	q, k, v, qw, kw, kc, vc             []float32
	qkNorm                              bool
	meta                                *bridge.StepMeta
}

// build makes the step's inputs, the cache and its block table: the
// blocks of each sequence's window get a physical block of their own,
// every other entry block 0, which no query reads.
func (c *ropeAttnCase) build(r *rand.Rand, qkNorm bool) {
	n, maxPos := len(c.pos), slices.Max(c.pos)
	c.qkNorm = qkNorm
	maxBlocks := int(maxPos)/c.bs + 1
	m := &bridge.StepMeta{NumTokens: n, NumSeqs: n, MaxQueryLen: 1, MaxSeqLen: int(maxPos) + 1, NumDecodeTokens: n,
		Positions: c.pos, QueryStartLoc: make([]int32, n+1), MaxBlocks: maxBlocks, BlockSize: c.bs,
		BlockTable: make([]int32, n*maxBlocks)}
	blocks := int32(1)
	for s, p := range c.pos {
		first := kernels.WindowStart(int(p), c.window)
		for b := first / c.bs; b <= int(p)/c.bs; b++ {
			m.BlockTable[s*maxBlocks+b] = blocks
			blocks++
		}
		m.SlotMapping = append(m.SlotMapping, m.BlockTable[s*maxBlocks+int(p)/c.bs]*int32(c.bs)+p%int32(c.bs))
		m.QueryStartLoc[s+1] = int32(s + 1)
		m.SeqLens = append(m.SeqLens, p+1)
	}
	c.meta = m
	c.q, c.k, c.v = randn(r, n*c.heads*c.headDim), randn(r, n*c.kvHeads*c.headDim), randn(r, n*c.kvHeads*c.headDim)
	c.qw, c.kw = randn(r, c.headDim), randn(r, c.headDim)
	c.kc, c.vc = randn(r, int(blocks)*c.kvHeads*c.bs*c.headDim), randn(r, int(blocks)*c.kvHeads*c.bs*c.headDim)
}

// reference is the attention output and the cache after the step, as
// kernels computes them.
func (c *ropeAttnCase) reference() (out, kc, vc []float32) {
	q, k := slices.Clone(c.q), slices.Clone(c.k)
	if c.qkNorm {
		kernels.RMSNorm(q, q, c.qw, c.headDim, 1e-6)
		kernels.RMSNorm(k, k, c.kw, c.headDim, 1e-6)
	}
	kernels.RoPE(q, c.pos, c.heads, c.headDim, c.rot)
	kernels.RoPE(k, c.pos, c.kvHeads, c.headDim, c.rot)
	l := kernels.PagedLayout{BlockSize: c.bs, KVHeads: c.kvHeads, HeadDim: c.headDim}
	kc, vc = slices.Clone(c.kc), slices.Clone(c.vc)
	kernels.KVWrite(kc, vc, k, c.v, c.meta.SlotMapping, l)
	out = make([]float32, len(q))
	kernels.PagedAttention(out, q, kc, vc, kernels.AttnBatch{QueryStartLoc: c.meta.QueryStartLoc, SeqLens: c.meta.SeqLens,
		BlockTable: c.meta.BlockTable, MaxBlocks: c.meta.MaxBlocks}, c.heads, l, c.scale, c.window)
	return out, kc, vc
}

// run runs the step's RoPE and attention on be, fused as its table has
// it or not, and returns the output, the cache and the step's dispatches.
func (c *ropeAttnCase) run(be bridge.Backend, fuse bool) (out, kc, vc []float32, dispatches int, err error) {
	var ts []bridge.Tensor
	defer func() {
		for _, t := range ts {
			be.Free(t)
		}
	}()
	load := func(v []float32, shape ...int) bridge.Tensor {
		t, e := be.Weight(bridge.F32, shape, F32Bytes(slices.Clone(v)))
		if e != nil && err == nil {
			err = e
		}
		if e == nil {
			ts = append(ts, t)
		}
		return t
	}
	n, hd := len(c.pos), c.headDim
	blocks := len(c.kc) / (c.kvHeads * c.bs * hd)
	qt, kt, vt := load(c.q, n, c.heads*hd), load(c.k, n, c.kvHeads*hd), load(c.v, n, c.kvHeads*hd)
	kct, vct := load(c.kc, blocks, c.kvHeads, c.bs, hd), load(c.vc, blocks, c.kvHeads, c.bs, hd)
	ot := load(make([]float32, len(c.q)), n, c.heads*hd)
	var qn, kn bridge.Tensor
	if c.qkNorm {
		qn, kn = load(c.qw, hd), load(c.kw, hd)
	}
	if err != nil {
		return nil, nil, nil, 0, err
	}
	ops := []bridge.Op{
		&bridge.RoPEOp{Q: qt, K: kt, QNorm: qn, KNorm: kn, Heads: c.heads, KVHeads: c.kvHeads, HeadDim: hd, Rotary: c.rot, Eps: 1e-6},
		&bridge.AttentionOp{Out: ot, Q: qt, K: kt, V: vt, Cache: bridge.KVCache{K: kct, V: vct, BlockSize: c.bs},
			Heads: c.heads, KVHeads: c.kvHeads, HeadDim: hd, Scale: c.scale, Window: c.window, Operand: bridge.F32},
	}
	if err := be.BeginStep(c.meta, make([]int32, n), false); err != nil {
		return nil, nil, nil, 0, err
	}
	var run bridge.Runner
	run.Run(be, ops, fuse, false)
	st, err := be.EndStep()
	if err != nil {
		return nil, nil, nil, 0, err
	}
	out, kc, vc = make([]float32, len(c.q)), make([]float32, len(c.kc)), make([]float32, len(c.vc))
	for _, r := range []struct {
		t bridge.Tensor
		v []float32
	}{{ot, out}, {kct, kc}, {vct, vc}} {
		if err := be.Read(r.t, r.v); err != nil {
			return nil, nil, nil, 0, err
		}
	}
	return out, kc, vc, st.Dispatches, nil
}
