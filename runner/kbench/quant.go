package kbench

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// Kernel cases of the packed-weight ops (qmatmul, qmoe, qembedding): the
// weights are drawn packed (quant.Random) and handed to the backend's
// QuantBackend; the check is kernels/quant's reference on the same bytes.

// quantDType is the case's packed format.
func (p *params) quantDType() (ops.DType, quant.Spec) {
	s := p.op.WeightDType(p.a)
	q, ok := s.Quant()
	if !ok || !slices.Contains(ops.QuantDTypes, s) {
		names := make([]string, len(ops.QuantDTypes))
		for i, d := range ops.QuantDTypes {
			names[i] = string(d)
		}
		p.fail(ops.DTypeParam, string(s), "the packed formats are %s", strings.Join(names, ", "))
	}
	return s, q
}

// quantBackend is the backend's packed-weight interface for q, or an
// unsupported error (the case is skipped, not failed) where the backend
// runs no packed weights or not q's format.
func (b *Bench) quantBackend(q quant.Spec) (bridge.QuantBackend, error) {
	qb, ok := b.be.(bridge.QuantBackend)
	if !ok {
		return nil, unsupported(fmt.Sprintf("op=%s: the %s backend does not run packed weights", b.op, b.be.Info().Backend))
	}
	if qs, ok := b.be.(bridge.QuantSupport); ok {
		if err := qs.SupportsQuant(q); err != nil {
			return nil, unsupported(fmt.Sprintf("op=%s: %v", b.op, err))
		}
	}
	return qb, nil
}

// quantWeight is how packed weights in off-heap memory are handed to the
// backend: aliased where it can (bridge.QuantMappedWeighter), else copied.
func (b *Bench) quantWeight(qb bridge.QuantBackend) func(quant.Spec, []int, []byte, []byte, []byte) (bridge.Tensor, error) {
	if mw, ok := b.be.(bridge.QuantMappedWeighter); ok {
		return mw.QuantWeightMapped
	}
	return qb.QuantWeight
}

// packed draws a [rows][k] packed matrix and uploads it; kp is the case's
// parameter that gives k, which a row the format cannot pack is refused as.
func (b *Bench) packed(q quant.Spec, shape []int, kp ops.Param, amp float32) (*quant.Matrix, bridge.Tensor, error) {
	qb, err := b.quantBackend(q)
	if err != nil {
		return nil, nil, err
	}
	rows, k := shape[0], shape[1]
	if err := q.Validate(k); err != nil {
		return nil, nil, &ParamError{Param: string(kp), Value: fmt.Sprint(k), Msg: err.Error()}
	}
	b.reserve(mulSat(int64(rows), int64(q.RowBytes(k)+2*q.Groups(k)*q.Scale.Size())))
	if b.plan {
		return nil, nil, nil
	}
	if err := b.ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: filling its tensors: %w", b.desc, err)
	}
	// Off the heap, where Metal aliases it.
	gb := int64(rows) * int64(q.Groups(k)*q.Scale.Size())
	var sc, bi []byte
	if gb > 0 {
		sc, bi = b.offHeap(gb), b.offHeap(gb)
	}
	m := quant.Random(q, rows, k, amp, b.rng, b.offHeap(int64(rows)*int64(q.RowBytes(k))), sc, bi)
	t, err := b.quantWeight(qb)(q, shape, m.Data, m.Scales, m.Biases)
	if err != nil {
		return nil, nil, err
	}
	b.tensors = append(b.tensors, t)
	return m, t, nil
}

func (b *Bench) prepareQMatMul(p *params) error {
	M, N, K := p.int(ops.M), p.int(ops.N), p.int(ops.K)
	dt, q := p.quantDType()
	withBias := p.flag(ops.Bias)
	if err := p.err(); err != nil {
		return err
	}
	b.desc = fmt.Sprintf("qmatmul m=%d n=%d k=%d dtype=%v%s", M, N, K, dt, biasLabel(withBias))
	b.tokenIDs(M)
	b.tolerance()
	b.bytesFor(p, dt)
	x, err := b.upload(b.act, []int{M, K}, 0, 1)
	if err != nil {
		return err
	}
	w, wt, err := b.packed(q, []int{N, K}, ops.K, float32(math.Sqrt(3/float64(K))))
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
	rows := min(M, checkMatMulRows)
	// x and out read back, the checked rows of both, the reference, a
	// dequantized weight row.
	b.needScratch(f32(M, K) + f32(M, N) + f32(rows, K) + 2*f32(rows, N) + f32(K))
	qb, _ := b.be.(bridge.QuantBackend)
	b.call = func(int) { qb.QMatMul(out, x.t, wt, bias.tensor()) }
	b.check = func() (float64, float64, error) {
		in, res, err := b.around([]bridge.Tensor{x.t}, out)
		if err != nil {
			return 0, 0, err
		}
		xs, got := in[0], res[0]
		rows := spread(M, checkMatMulRows)
		want := make([]float32, len(rows)*N)
		quant.MatMul(want, gatherRows(xs, rows, K), bias.values(), w, len(rows))
		return maxDiff(gatherRows(got, rows, N), want), maxAbs(want), nil
	}
	return nil
}

func (b *Bench) prepareQEmbedding(p *params) error {
	T, W, V := p.int(ops.Tokens), p.int(ops.Width), p.int(ops.N)
	dt, q := p.quantDType()
	if err := p.err(); err != nil {
		return err
	}
	b.desc = fmt.Sprintf("qembedding tokens=%d width=%d n=%d dtype=%v", T, W, V, dt)
	b.tolerance()
	b.bytesFor(p, dt)
	b.tokenIDs(T)
	b.distinctIDs(V)
	w, wt, err := b.packed(q, []int{V, W}, ops.Width, 1)
	if err != nil {
		return err
	}
	out, err := b.output(b.act, T, W)
	if err != nil {
		return err
	}
	b.needScratch(2 * f32(T, W)) // out read back, the rows it should hold
	qb, _ := b.be.(bridge.QuantBackend)
	b.call = func(int) { qb.QEmbedding(out, wt) }
	b.check = func() (float64, float64, error) {
		_, res, err := b.around(nil, out)
		if err != nil {
			return 0, 0, err
		}
		got := res[0]
		want := make([]float32, T*W)
		quant.Gather(want, w, b.ids)
		return maxDiff(got, want), maxAbs(want), nil
	}
	return nil
}

func (b *Bench) prepareQMoE(p *params) error {
	T, E, K := p.int(ops.Tokens), p.int(ops.Experts), p.int(ops.TopK)
	H, I := p.int(ops.Hidden), p.int(ops.Intermediate)
	strategy := p.moeStrategy()
	chunk := p.int(ops.MoEChunk)
	dt, q := p.quantDType()
	if K > E {
		p.fail(ops.TopK, fmt.Sprint(K), "must be at most experts=%d", E)
	}
	if err := p.err(); err != nil {
		return err
	}
	if err := b.checkExperts(E, K); err != nil {
		return err
	}
	b.desc = fmt.Sprintf("qmoe tokens=%d experts=%d top_k=%d hidden=%d intermediate=%d dtype=%v strategy=%s", T, E, K, H, I, dt, strategy)
	b.tokenIDs(T)
	b.tolerance(bridge.BF16)
	x, err := b.upload(b.act, []int{T, H}, 0, 1)
	if err != nil {
		return err
	}
	hs := float32(1 / math.Sqrt(float64(H)))
	router, err := b.upload(bridge.BF16, []int{E, H}, 0, hs)
	if err != nil {
		return err
	}
	// Experts stacked [experts][rows][k] as checkpoints store them; each
	// expert's tensor is its slice.
	gate, _, err := b.packedStack(q, E, I, H, ops.Hidden)
	if err != nil {
		return err
	}
	up, _, err := b.packedStack(q, E, I, H, ops.Hidden)
	if err != nil {
		return err
	}
	down, _, err := b.packedStack(q, E, H, I, ops.Intermediate)
	if err != nil {
		return err
	}
	mw := &bridge.MoEWeights{Router: router.t, TopK: K, NormTopK: true, Hidden: H, Inter: I}
	qb, _ := b.be.(bridge.QuantBackend)
	// A backend that aliases the stacks reads the experts in place, where
	// copies of each and a gather of the copies held them three times.
	weight := b.quantWeight(qb)
	for e := 0; e < E && !b.plan; e++ {
		for _, s := range []struct {
			m   *quant.Matrix
			dst *[]bridge.Tensor
		}{{gate, &mw.Gate}, {up, &mw.Up}, {down, &mw.Down}} {
			x := s.m.Expert(e, E)
			t, err := weight(q, []int{x.Rows, x.K}, x.Data, x.Scales, x.Biases)
			if err != nil {
				return err
			}
			b.tensors = append(b.tensors, t)
			*s.dst = append(*s.dst, t)
		}
	}
	out, err := b.output(b.act, T, H)
	if err != nil {
		return err
	}
	mp := bridge.MoEParams{Strategy: strategy, ChunkSize: chunk}
	b.needScratch(routeScratch(T, E, K, H))
	p.shape[ops.Routed] = K // a plan's guess, as prepareMoE's
	if !b.plan {
		p.shape[ops.Routed] = routed(x.values(), router.values(), T, E, K, H)
	}
	b.bytesFor(p, dt)
	rows := min(T, checkMoETokens)
	// x and out read back, the checked rows of both, the reference, the
	// router widened and its logits, an expert's rows dequantized, each
	// token's sums.
	b.needScratch(2*f32(T, H) + 3*f32(rows, H) + f32(E, H) + f32(rows, E) + f32(2*I+H) + f32(rows, 2*K+2*H))
	ex := quant.Experts{Gate: gate, Up: up, Down: down, Count: E}
	b.call = func(int) { qb.QMoE(out, x.t, mw, mp) }
	b.check = func() (float64, float64, error) {
		in, res, err := b.around([]bridge.Tensor{x.t}, out)
		if err != nil {
			return 0, 0, err
		}
		xs, got := in[0], res[0]
		rows := spread(T, checkMoETokens)
		want := make([]float32, len(rows)*H)
		quant.MoE(want, gatherRows(xs, rows, H), nil, router.values(), ex, K, true, H, I)
		return maxDiff(gatherRows(got, rows, H), want), maxAbs(want), nil
	}
	return nil
}

// packedStack draws experts stacked [E][rows][k] in one packed matrix; kp
// is the case's parameter that gives k (down's rows are intermediate wide).
func (b *Bench) packedStack(q quant.Spec, E, rows, k int, kp ops.Param) (*quant.Matrix, bridge.Tensor, error) {
	if _, err := b.quantBackend(q); err != nil {
		return nil, nil, err
	}
	if err := q.Validate(k); err != nil {
		return nil, nil, &ParamError{Param: string(kp), Value: fmt.Sprint(k), Msg: err.Error()}
	}
	b.reserve(mulSat(int64(E)*int64(rows), int64(q.RowBytes(k)+2*q.Groups(k)*q.Scale.Size())))
	if b.plan {
		return nil, nil, nil
	}
	if err := b.ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: filling its tensors: %w", b.desc, err)
	}
	// Off the heap, where Metal aliases them (prepareQMoE).
	gb := int64(E) * int64(rows) * int64(q.Groups(k)*q.Scale.Size())
	var sc, bi []byte
	if gb > 0 {
		sc, bi = b.offHeap(gb), b.offHeap(gb)
	}
	m := quant.Random(q, E*rows, k, float32(math.Sqrt(3/float64(k))), b.rng, b.offHeap(int64(E)*int64(rows)*int64(q.RowBytes(k))), sc, bi)
	return m, nil, nil
}

// bytesFor records the case's cost with the packed format as its weights.
func (b *Bench) bytesFor(p *params, dt ops.DType) {
	c := p.op.Cost(p.shape, ops.Types{Act: opsDType(b.act), Weight: dt})
	b.bytes, b.flops = c.Bytes(), c.FLOPs
}
