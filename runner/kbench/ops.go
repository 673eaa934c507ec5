package kbench

import (
	"fmt"
	"math"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// Model constants the ops take as arguments, Qwen3's.
const (
	eps       = 1e-6
	ropeTheta = 1e6
)

// Rows a reference check recomputes at most where every row would be slow
// (the reference is float64 loops); rows are independent, so a spread of
// them, first and last included, catches indexing and tail bugs.
const (
	checkMatMulRows = 16
	checkMoETokens  = 32
)

// tokenIDs gives the step n token ids; only Embedding reads them.
func (b *Bench) tokenIDs(n int) { b.ids = make([]int32, n) }

func (b *Bench) prepareNorm(p *params, add bool) error {
	T, W := p.int(ops.Tokens), p.int(ops.Width)
	if err := p.err(); err != nil {
		return err
	}
	b.desc = fmt.Sprintf("%s tokens=%d width=%d", b.op, T, W)
	b.tokenIDs(T)
	b.tolerance()
	b.cost(p, b.act)
	x, err := b.upload(b.act, []int{T, W}, 0, 1)
	if err != nil {
		return err
	}
	w, err := b.upload(bridge.F32, []int{W}, 1, 0.1) // norm weights sit near one
	if err != nil {
		return err
	}
	out, err := b.output(b.act, T, W)
	if err != nil {
		return err
	}
	if !add {
		b.call = func(int) { b.be.RMSNorm(out, x.t, w.t, eps) }
		b.check = func() (float64, float64, error) {
			in, res, err := b.around([]bridge.Tensor{x.t}, out)
			if err != nil {
				return 0, 0, err
			}
			xs, got := in[0], res[0]
			want := make([]float32, len(xs))
			kernels.RMSNorm(want, xs, w.values(), W, eps)
			return maxDiff(got, want), maxAbs(want), nil
		}
		return nil
	}
	// AddRMSNorm accumulates into the residual; alternating x and -x keeps
	// it from growing over millions of calls (which would overflow in f16).
	res, err := b.upload(b.act, []int{T, W}, 0, 1)
	if err != nil {
		return err
	}
	// -x from x's values, already rounded to the activation dtype (where
	// negation is exact), so each pair of calls returns the residual to
	// within rounding of where it was.
	xv := x.values()
	neg, err := b.uploadFrom(b.act, []int{T, W}, func(lo int64, dst []float32) {
		for i := range dst {
			dst[i] = -xv[lo+int64(i)]
		}
	})
	if err != nil {
		return err
	}
	xin := func(i int) *host {
		if i%2 == 0 {
			return x
		}
		return neg
	}
	b.call = func(i int) { b.be.AddRMSNorm(out, res.t, xin(i).t, w.t, eps) }
	b.check = func() (float64, float64, error) {
		in := xin(0) // the input of call 0, which a check runs
		before, after, err := b.around([]bridge.Tensor{res.t, in.t}, out, res.t)
		if err != nil {
			return 0, 0, err
		}
		rs, xs, got, gotRes := before[0], before[1], after[0], after[1]
		want := make([]float32, len(xs))
		kernels.AddRMSNorm(want, rs, xs, w.values(), W, eps)
		return max(maxDiff(got, want), maxDiff(gotRes, rs)), max(maxAbs(want), maxAbs(rs)), nil
	}
	return nil
}

func (b *Bench) prepareRoPE(p *params) error {
	T := p.int(ops.Tokens)
	H, KVH, D := p.heads()
	pos0 := p.int(ops.Context) // decode-like positions: angles far from zero
	if err := p.err(); err != nil {
		return err
	}
	b.desc = fmt.Sprintf("rope tokens=%d heads=%d/%d head_size=%d qk_norm", T, H, KVH, D)
	b.tokenIDs(T)
	b.meta = plainMeta(T)
	for i := range b.meta.Positions {
		b.meta.Positions[i] = int32(pos0 + i)
	}
	b.tolerance()
	b.cost(p, b.act)
	q, err := b.upload(b.act, []int{T, H * D}, 0, 1)
	if err != nil {
		return err
	}
	k, err := b.upload(b.act, []int{T, KVH * D}, 0, 1)
	if err != nil {
		return err
	}
	qn, err := b.upload(bridge.F32, []int{D}, 1, 0.1)
	if err != nil {
		return err
	}
	kn, err := b.upload(bridge.F32, []int{D}, 1, 0.1)
	if err != nil {
		return err
	}
	// RoPE works in place; QK-norm renormalises each head first, so
	// repeated calls keep q and k bounded.
	b.call = func(int) { b.be.RoPE(q.t, k.t, qn.t, kn.t, H, KVH, D, kernels.Rotary{Theta: ropeTheta}, eps) }
	b.check = func() (float64, float64, error) {
		before, after, err := b.around([]bridge.Tensor{q.t, k.t}, q.t, k.t)
		if err != nil {
			return 0, 0, err
		}
		qs, ks, gq, gk := before[0], before[1], after[0], after[1]
		kernels.RMSNorm(qs, qs, qn.values(), D, eps)
		kernels.RMSNorm(ks, ks, kn.values(), D, eps)
		kernels.RoPE(qs, b.meta.Positions, H, D, kernels.Rotary{Theta: ropeTheta})
		kernels.RoPE(ks, b.meta.Positions, KVH, D, kernels.Rotary{Theta: ropeTheta})
		return max(maxDiff(gq, qs), maxDiff(gk, ks)), max(maxAbs(qs), maxAbs(ks)), nil
	}
	return nil
}

func (b *Bench) prepareSiLUMul(p *params) error {
	T, I := p.int(ops.Tokens), p.int(ops.Intermediate)
	if err := p.err(); err != nil {
		return err
	}
	b.desc = fmt.Sprintf("silu_mul tokens=%d intermediate=%d", T, I)
	b.tokenIDs(T)
	b.tolerance()
	b.cost(p, b.act)
	g, err := b.upload(b.act, []int{T, I}, 0, 1)
	if err != nil {
		return err
	}
	u, err := b.upload(b.act, []int{T, I}, 0, 1)
	if err != nil {
		return err
	}
	out, err := b.output(b.act, T, I)
	if err != nil {
		return err
	}
	b.call = func(int) { b.be.SiLUMul(out, g.t, u.t) }
	b.check = func() (float64, float64, error) {
		in, res, err := b.around([]bridge.Tensor{g.t, u.t}, out)
		if err != nil {
			return 0, 0, err
		}
		gs, us, got := in[0], in[1], res[0]
		want := make([]float32, len(gs))
		kernels.SiLUMul(want, gs, us)
		return maxDiff(got, want), maxAbs(want), nil
	}
	return nil
}

func (b *Bench) prepareMatMul(p *params) error {
	M, N, K := p.int(ops.M), p.int(ops.N), p.int(ops.K)
	dt := p.dtype()
	if err := p.err(); err != nil {
		return err
	}
	b.desc = fmt.Sprintf("matmul m=%d n=%d k=%d dtype=%v", M, N, K, dt)
	b.tokenIDs(M)
	b.tolerance(dt)
	b.cost(p, dt)
	x, err := b.upload(b.act, []int{M, K}, 0, 1)
	if err != nil {
		return err
	}
	// 1/sqrt(k) keeps outputs near unit scale, as trained weights do, so
	// half-precision outputs neither overflow nor lose the tolerance.
	w, err := b.upload(dt, []int{N, K}, 0, float32(1/math.Sqrt(float64(K))))
	if err != nil {
		return err
	}
	out, err := b.output(b.act, M, N)
	if err != nil {
		return err
	}
	ws := b.copies(w, b.rotation(int64(N)*int64(K)*int64(dt.Size())))
	b.call = func(i int) { b.be.MatMul(out, x.t, ws[i%len(ws)].t, nil) }
	b.check = func() (float64, float64, error) {
		in, res, err := b.around([]bridge.Tensor{x.t}, out)
		if err != nil {
			return 0, 0, err
		}
		xs, got := in[0], res[0]
		rows := spread(M, checkMatMulRows)
		want := make([]float32, len(rows)*N)
		kernels.MatMul(want, gatherRows(xs, rows, K), w.values(), nil, len(rows), N, K)
		return maxDiff(gatherRows(got, rows, N), want), maxAbs(want), nil
	}
	return nil
}

func (b *Bench) prepareMoE(p *params) error {
	T, E, K := p.int(ops.Tokens), p.int(ops.Experts), p.int(ops.TopK)
	H, I := p.int(ops.Hidden), p.int(ops.Intermediate)
	dt := p.dtype()
	strategy := p.moeStrategy()
	chunk := p.int(ops.MoEChunk)
	if K > E {
		p.fail(ops.TopK, fmt.Sprint(K), "must be at most experts=%d", E)
	}
	if err := p.err(); err != nil {
		return err
	}
	b.desc = fmt.Sprintf("moe tokens=%d experts=%d top_k=%d hidden=%d intermediate=%d dtype=%v strategy=%s", T, E, K, H, I, dt, strategy)
	if strategy == bridge.MoEChunked {
		b.desc += fmt.Sprintf(" chunk=%d", chunk)
	}
	b.tokenIDs(T)
	b.tolerance(dt)
	x, err := b.upload(b.act, []int{T, H}, 0, 1)
	if err != nil {
		return err
	}
	hs, is := float32(1/math.Sqrt(float64(H))), float32(1/math.Sqrt(float64(I)))
	router, err := b.upload(dt, []int{E, H}, 0, hs)
	if err != nil {
		return err
	}
	mw := &bridge.MoEWeights{Router: router.t, TopK: K, NormTopK: true, Hidden: H, Inter: I}
	var gate, up, down []*host
	for range E {
		g, err := b.upload(dt, []int{I, H}, 0, hs)
		if err != nil {
			return err
		}
		u, err := b.upload(dt, []int{I, H}, 0, hs)
		if err != nil {
			return err
		}
		d, err := b.upload(dt, []int{H, I}, 0, is)
		if err != nil {
			return err
		}
		gate, up, down = append(gate, g), append(up, u), append(down, d)
		mw.Gate, mw.Up, mw.Down = append(mw.Gate, g.t), append(mw.Up, u.t), append(mw.Down, d.t)
	}
	out, err := b.output(b.act, T, H)
	if err != nil {
		return err
	}
	mp := bridge.MoEParams{Strategy: strategy, ChunkSize: chunk}

	// The experts the tokens route to decide the weight bytes a call must
	// read; route on the host, with the reference, from the same values.
	xs := x.values()
	rv := router.values()
	logits := make([]float32, T*E)
	kernels.MatMul(logits, xs, rv, nil, T, E, H)
	ids, _ := kernels.Route(logits, E, K, true)
	touched := map[int32]bool{}
	for _, id := range ids {
		touched[id] = true
	}
	p.shape[ops.Routed] = len(touched)
	b.cost(p, dt)

	// Other tokens route to other experts: cycling through inputs keeps a
	// GPU's L2 from serving the routed experts' weights call after call.
	inputs := []*host{x}
	for range b.rotation(b.bytes) - 1 {
		xi, err := b.upload(b.act, []int{T, H}, 0, 1)
		if err != nil {
			break
		}
		inputs = append(inputs, xi)
	}
	b.call = func(i int) { b.be.MoE(out, inputs[i%len(inputs)].t, mw, mp) }
	b.check = func() (float64, float64, error) {
		in, res, err := b.around([]bridge.Tensor{x.t}, out)
		if err != nil {
			return 0, 0, err
		}
		xs, got := in[0], res[0]
		rows := spread(T, checkMoETokens)
		xsub := gatherRows(xs, rows, H)
		rv := router.values()
		// Widen only the experts the checked tokens use: all of them in f32
		// would be gigabytes for a real model's shapes.
		lg := make([]float32, len(rows)*E)
		kernels.MatMul(lg, xsub, rv, nil, len(rows), E, H)
		sel, _ := kernels.Route(lg, E, K, true)
		experts := make([]kernels.Expert, E)
		for _, e := range sel {
			if experts[e].Gate == nil {
				experts[e] = kernels.Expert{Gate: gate[e].values(), Up: up[e].values(), Down: down[e].values()}
			}
		}
		want := make([]float32, len(rows)*H)
		kernels.MoE(want, xsub, rv, experts, K, true, H, I)
		return maxDiff(gatherRows(got, rows, H), want), maxAbs(want), nil
	}
	return nil
}

func (b *Bench) prepareArgmax(p *params) error {
	T, V := p.int(ops.Tokens), p.int(ops.Width)
	if err := p.err(); err != nil {
		return err
	}
	b.desc = fmt.Sprintf("argmax tokens=%d vocab=%d", T, V)
	b.tokenIDs(T)
	b.tolerance()
	b.tol = 0                                              // picking a smaller logit is wrong at any precision
	b.cost(p, bridge.F32)                                  // the engine's logits are f32
	logits, err := b.upload(bridge.F32, []int{T, V}, 0, 1) // the engine's logits are f32
	if err != nil {
		return err
	}
	out, err := b.output(bridge.I32, T)
	if err != nil {
		return err
	}
	b.call = func(int) { b.be.Argmax(out, logits.t) }
	b.check = func() (float64, float64, error) {
		in, _, err := b.around([]bridge.Tensor{logits.t})
		if err != nil {
			return 0, 0, err
		}
		ls := in[0]
		got := make([]int32, T)
		if err := b.be.ReadI32(out, got); err != nil {
			return 0, 0, err
		}
		// The error is how far below the row's maximum the chosen logit is:
		// zero also when a backend picks another index holding the maximum.
		var worst float64
		for r := range T {
			row := ls[r*V : (r+1)*V]
			g := int(got[r])
			if g < 0 || g >= V {
				return math.Inf(1), 0, fmt.Errorf("row %d: argmax %d outside 0..%d", r, g, V-1)
			}
			worst = max(worst, float64(row[kernels.Argmax(row)]-row[g]))
		}
		return worst, 0, nil
	}
	return nil
}

func (b *Bench) prepareEmbedding(p *params) error {
	T, W, V := p.int(ops.Tokens), p.int(ops.Width), p.int(ops.N)
	dt := p.dtype()
	if err := p.err(); err != nil {
		return err
	}
	b.desc = fmt.Sprintf("embedding tokens=%d vocab=%d hidden=%d dtype=%v", T, V, W, dt)
	b.ids = make([]int32, T)
	for i := range b.ids {
		b.ids[i] = int32(b.rng.IntN(V))
	}
	b.tolerance(dt)
	b.cost(p, dt)
	table, err := b.upload(dt, []int{V, W}, 0, 1)
	if err != nil {
		return err
	}
	out, err := b.output(b.act, T, W)
	if err != nil {
		return err
	}
	b.call = func(int) { b.be.Embedding(out, table.t) }
	b.check = func() (float64, float64, error) {
		_, res, err := b.around(nil, out)
		if err != nil {
			return 0, 0, err
		}
		got := res[0]
		want := table.rows(b.ids, W)
		return maxDiff(got, want), maxAbs(want), nil
	}
	return nil
}
