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
		b.needScratch(3 * f32(T, W)) // x and out read back, the reference
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
	return b.addNorm(x, out, T, W,
		func(res, x bridge.Tensor) { b.be.AddRMSNorm(out, res, x, w.t, eps) },
		func(want, rs, xs []float32) { kernels.AddRMSNorm(want, rs, xs, w.values(), W, eps) })
}

// addNorm sets up the bench of an add-and-norm op (AddRMSNorm,
// AddLayerNorm): call(res, x) runs it, ref(want, res, x) is its reference.
// The op accumulates into the residual; alternating x and -x keeps it from
// growing over millions of calls (which would overflow in f16).
func (b *Bench) addNorm(x *host, out bridge.Tensor, T, W int, call func(res, x bridge.Tensor), ref func(want, res, x []float32)) error {
	res, err := b.upload(b.act, []int{T, W}, 0, 1)
	if err != nil {
		return err
	}
	// -x from x's values, already rounded to the activation dtype (where
	// negation is exact), so each pair of calls returns the residual to
	// within rounding of where it was.
	neg, err := b.uploadFrom(b.act, []int{T, W}, negated(x))
	if err != nil {
		return err
	}
	b.needScratch(5 * f32(T, W)) // res, x, out and res read back, the reference
	xin := func(i int) *host {
		if i%2 == 0 {
			return x
		}
		return neg
	}
	b.call = func(i int) { call(res.t, xin(i).t) }
	b.check = func() (float64, float64, error) {
		in := xin(0) // the input of call 0, which a check runs
		before, after, err := b.around([]bridge.Tensor{res.t, in.t}, out, res.t)
		if err != nil {
			return 0, 0, err
		}
		rs, xs, got, gotRes := before[0], before[1], after[0], after[1]
		want := make([]float32, len(xs))
		ref(want, rs, xs)
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
	b.meta = b.plainMeta(T)
	for i := range b.meta.Positions {
		b.meta.Positions[i] = int32(pos0 + i)
	}
	b.tolerance()
	b.cost(p, b.act)
	b.needScratch(2 * (f32(T, H*D) + f32(T, KVH*D))) // q and k read back before and after
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
	b.needScratch(4 * f32(T, I)) // g, u and out read back, the reference
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
	withBias := p.flag(ops.Bias)
	if err := p.err(); err != nil {
		return err
	}
	b.desc = fmt.Sprintf("matmul m=%d n=%d k=%d dtype=%v%s", M, N, K, dt, biasLabel(withBias))
	b.tokenIDs(M)
	b.tolerance(dt)
	b.cost(p, dt)
	x, err := b.upload(b.act, []int{M, K}, 0, 1)
	if err != nil {
		return err
	}
	// 1/sqrt(k) keeps outputs near unit scale, as trained weights do, so
	// half-precision outputs neither overflow nor lose the tolerance.
	w, err := b.weight(dt, []int{N, K}, 0, float32(1/math.Sqrt(float64(K))))
	if err != nil {
		return err
	}
	bias, err := b.bias(withBias, N)
	if err != nil {
		return err
	}
	out, err := b.output(b.act, M, N)
	if err != nil {
		return err
	}
	wb := mulSat(int64(N)*int64(K), int64(dt.Size()))
	ws, err := b.copies(w, b.rotate(wb, wb))
	if err != nil {
		return err
	}
	rows := min(M, checkMatMulRows)
	// x and out read back, the checked rows of both, the reference and
	// the block of weight rows it widens.
	b.needScratch(f32(M, K) + f32(M, N) + f32(rows, K) + 2*f32(rows, N) + f32(refRows(N, K), K+rows))
	b.call = func(i int) { b.be.MatMul(out, x.t, ws[i%len(ws)].t, bias.tensor()) }
	b.check = func() (float64, float64, error) {
		in, res, err := b.around([]bridge.Tensor{x.t}, out)
		if err != nil {
			return 0, 0, err
		}
		xs, got := in[0], res[0]
		rows := spread(M, checkMatMulRows)
		want := make([]float32, len(rows)*N)
		if err := b.matmulRef(want, gatherRows(xs, rows, K), w, bias.values(), len(rows), N, K); err != nil {
			return 0, 0, err
		}
		return maxDiff(gatherRows(got, rows, N), want), maxAbs(want), nil
	}
	return nil
}

// refBlock is the weight elements the matmul check widens to f32 at a time.
const refBlock = 1 << 16

// refRows is the weight rows (of k) the matmul check widens at a time.
func refRows(n, k int) int { return max(1, min(n, refBlock/k)) }

// bias is the f32 bias of n outputs a case with bias=1 adds, as the models'
// loaders keep it; nil (no bias) otherwise.
func (b *Bench) bias(on bool, n int) (*host, error) {
	if !on {
		return nil, nil
	}
	return b.upload(bridge.F32, []int{n}, 0, 1)
}

// biasLabel ends a case's description where it adds a bias.
func biasLabel(on bool) string {
	if on {
		return " bias"
	}
	return ""
}

// matmulRef is want = xs·wᵀ (+ bias, nil for none) for rows rows of xs, the
// weight widened a block of rows at a time: widening it whole doubled a bf16
// case's memory (16 GiB more for a 64k x 64k weight), at every check of
// every tune candidate.
func (b *Bench) matmulRef(want, xs []float32, w *host, bias []float32, rows, n, k int) error {
	blk := refRows(n, k)
	wf, part := make([]float32, blk*k), make([]float32, rows*blk)
	for lo := 0; lo < n; lo += blk {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		c := min(blk, n-lo)
		w.valuesAt(int64(lo)*int64(k), wf[:c*k])
		var bs []float32
		if bias != nil {
			bs = bias[lo : lo+c]
		}
		kernels.MatMul(part[:rows*c], xs, wf[:c*k], bs, rows, c, k)
		for r := range rows {
			copy(want[r*n+lo:r*n+lo+c], part[r*c:(r+1)*c])
		}
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
	if err := b.checkExperts(E, K); err != nil {
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
	router, err := b.upload(dt, []int{E, H}, 0, float32(1/math.Sqrt(float64(H))))
	if err != nil {
		return err
	}
	mw := &bridge.MoEWeights{Router: router.t, TopK: K, NormTopK: true, Hidden: H, Inter: I}
	gate, up, down, err := b.experts(dt, E, H, I)
	if err != nil {
		return err
	}
	for e := range gate {
		mw.Gate, mw.Up, mw.Down = append(mw.Gate, gate[e].t), append(mw.Up, up[e].t), append(mw.Down, down[e].t)
	}
	out, err := b.output(b.act, T, H)
	if err != nil {
		return err
	}
	mp := bridge.MoEParams{Strategy: strategy, ChunkSize: chunk}

	// The experts the tokens route to decide the weight bytes a call must
	// read; route on the host, with the reference, from the same values. A
	// plan takes the fewest (top_k), which asks for the most copies below.
	b.needScratch(routeScratch(T, E, K, H))
	p.shape[ops.Routed] = K
	if !b.plan {
		p.shape[ops.Routed] = routed(x.values(), router.values(), T, E, K, H)
	}
	b.cost(p, dt)

	// Other tokens route to other experts: cycling through inputs keeps a
	// GPU's L2 from serving the routed experts' weights call after call.
	inputs := []*host{x}
	for range b.rotate(b.bytes, mulSat(elems([]int{T, H}), int64(b.act.Size()))) - 1 {
		xi, err := b.upload(b.act, []int{T, H}, 0, 1)
		if err != nil {
			if b.ctx.Err() != nil {
				return err
			}
			break
		}
		inputs = append(inputs, xi)
	}
	rows := min(T, checkMoETokens)
	// x and out read back, the checked rows of both, the reference, the
	// router and top_k widened experts; each token's routing and SwiGLUs.
	b.needScratch(2*f32(T, H) + 3*f32(rows, H) + f32(E, H+1) + mulSat(int64(E), 72) +
		3*int64(K)*f32(I, H) + f32(rows, 3*E+3*H+2*K*I+10*K))
	b.call = func(i int) { b.be.MoE(out, inputs[i%len(inputs)].t, mw, mp) }
	b.check = func() (float64, float64, error) {
		in, res, err := b.around([]bridge.Tensor{x.t}, out)
		if err != nil {
			return 0, 0, err
		}
		xs, got := in[0], res[0]
		rows := spread(T, checkMoETokens)
		want, err := b.moeRef(gatherRows(xs, rows, H), router.values(), [3][]*host{gate, up, down}, K, H, I)
		if err != nil {
			return 0, 0, err
		}
		return maxDiff(gatherRows(got, rows, H), want), maxAbs(want), nil
	}
	return nil
}

// experts uploads E experts' gate and up ([I][H]) and down ([H][I])
// weights; a plan counts them in one go (E may be large). They lie in one
// off-heap region, every gate, then every up, then every down, as the
// loader stacks a checkpoint's experts (runner/model): a backend that
// aliases the region reads them in place, with no copy and no gather.
func (b *Bench) experts(dt bridge.DType, E, H, I int) (gate, up, down []*host, err error) {
	if b.plan {
		b.reserve(mulSat(int64(E), mulSat(3*int64(H)*int64(I), int64(dt.Size()))))
		return nil, nil, nil, nil
	}
	one := int64(H) * int64(I) * int64(dt.Size())
	region := b.offHeap(3 * int64(E) * one)
	at := func(i, e int) []byte { return region[(int64(i*E+e))*one : (int64(i*E+e)+1)*one] }
	hs, is := float32(1/math.Sqrt(float64(H))), float32(1/math.Sqrt(float64(I)))
	for e := range E {
		g, err := b.uploadTo(at(0, e), dt, []int{I, H}, b.random(0, hs))
		if err != nil {
			return nil, nil, nil, err
		}
		u, err := b.uploadTo(at(1, e), dt, []int{I, H}, b.random(0, hs))
		if err != nil {
			return nil, nil, nil, err
		}
		d, err := b.uploadTo(at(2, e), dt, []int{H, I}, b.random(0, is))
		if err != nil {
			return nil, nil, nil, err
		}
		gate, up, down = append(gate, g), append(up, u), append(down, d)
	}
	return gate, up, down, nil
}

// routed is how many distinct experts tokens xs route to.
func routed(xs, rv []float32, T, E, K, H int) int {
	logits := make([]float32, T*E)
	kernels.MatMul(logits, xs, rv, nil, T, E, H)
	ids, _ := kernels.Route(logits, E, K, true)
	touched := map[int32]bool{}
	for _, id := range ids {
		touched[id] = true
	}
	return len(touched)
}

// routeScratch is what routed allocates: the tokens and router widened,
// the logits, the chosen ids and weights.
func routeScratch(T, E, K, H int) int64 {
	return f32(T, H) + f32(E, H) + f32(T, E) + 2*f32(T, K)
}

// moeRef is the reference MoE of the tokens xs, a token at a time with
// only its top-k experts widened to f32, into buffers every token and
// every check reuses: widening every routed expert at once took twice the
// experts' bf16 bytes at each check, and a tune checks each candidate. w
// holds the experts' gate, up and down weights.
func (b *Bench) moeRef(xs, rv []float32, w [3][]*host, topK, H, I int) ([]float32, error) {
	E := len(w[0])
	want := make([]float32, len(xs))
	experts := make([]kernels.Expert, E)
	if b.refExperts == nil {
		b.refExperts = make([]kernels.Expert, topK)
		for j := range b.refExperts {
			b.refExperts[j] = kernels.Expert{Gate: make([]float32, I*H), Up: make([]float32, I*H), Down: make([]float32, H*I)}
		}
	}
	bufs := b.refExperts
	lg := make([]float32, E)
	for r := range len(xs) / H {
		if err := b.ctx.Err(); err != nil {
			return nil, err
		}
		x := xs[r*H : (r+1)*H]
		kernels.MatMul(lg, x, rv, nil, 1, E, H)
		sel, _ := kernels.Route(lg, E, topK, true)
		for j, e := range sel {
			w[0][e].valuesAt(0, bufs[j].Gate)
			w[1][e].valuesAt(0, bufs[j].Up)
			w[2][e].valuesAt(0, bufs[j].Down)
			experts[e] = bufs[j]
		}
		kernels.MoE(want[r*H:(r+1)*H], x, rv, experts, topK, true, H, I)
		for _, e := range sel {
			experts[e] = kernels.Expert{}
		}
	}
	return want, nil
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
	b.needScratch(f32(T, V) + f32(T)) // logits read back, the picks
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
			if want := kernels.Argmax(row); want >= 0 { // finite inputs: always
				worst = max(worst, float64(row[want]-row[g]))
			}
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
	b.tokenIDs(T)
	b.distinctIDs(V)
	b.tolerance(dt)
	b.cost(p, dt)
	b.needScratch(2 * f32(T, W)) // out read back, the rows it should hold
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
