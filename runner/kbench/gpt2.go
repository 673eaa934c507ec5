package kbench

import (
	"fmt"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// GPT-2's ops: layer_norm, add_layer_norm, gelu_tanh, position_embedding.

// gpt2Eps is GPT-2's layer_norm_epsilon.
const gpt2Eps = 1e-5

func (b *Bench) prepareLayerNorm(p *params, add bool) error {
	T, W := p.int(ops.Tokens), p.int(ops.Width)
	if err := p.err(); err != nil {
		return err
	}
	b.desc = fmt.Sprintf("%s tokens=%d width=%d", b.op, T, W)
	b.tokenIDs(T)
	b.tolerance()
	b.cost(p, b.act)
	// Rows with a mean far from zero: a one-pass variance would lose them.
	x, err := b.upload(b.act, []int{T, W}, 3, 1)
	if err != nil {
		return err
	}
	w, err := b.upload(bridge.F32, []int{W}, 1, 0.1)
	if err != nil {
		return err
	}
	bias, err := b.upload(bridge.F32, []int{W}, 0, 0.1)
	if err != nil {
		return err
	}
	out, err := b.output(b.act, T, W)
	if err != nil {
		return err
	}
	if !add {
		b.needScratch(3 * f32(T, W)) // x and out read back, the reference
		b.call = func(int) { b.be.LayerNorm(out, x.t, w.t, bias.t, gpt2Eps) }
		b.check = func() (float64, float64, error) {
			in, res, err := b.around([]bridge.Tensor{x.t}, out)
			if err != nil {
				return 0, 0, err
			}
			want := make([]float32, len(in[0]))
			kernels.LayerNorm(want, in[0], w.values(), bias.values(), W, gpt2Eps)
			return maxDiff(res[0], want), maxAbs(want), nil
		}
		return nil
	}
	// The residual takes x and -x in turn (addNorm).
	return b.addNorm(x, out, T, W,
		func(res, x bridge.Tensor) { b.be.AddLayerNorm(out, res, x, w.t, bias.t, gpt2Eps) },
		func(want, rs, xs []float32) {
			kernels.AddLayerNorm(want, rs, xs, w.values(), bias.values(), W, gpt2Eps)
		})
}

func (b *Bench) prepareGELU(p *params) error {
	T, I := p.int(ops.Tokens), p.int(ops.Intermediate)
	if err := p.err(); err != nil {
		return err
	}
	b.desc = fmt.Sprintf("gelu_tanh tokens=%d intermediate=%d", T, I)
	b.tokenIDs(T)
	b.tolerance()
	b.cost(p, b.act)
	x, err := b.upload(b.act, []int{T, I}, 0, 3) // both tails of the curve
	if err != nil {
		return err
	}
	out, err := b.output(b.act, T, I)
	if err != nil {
		return err
	}
	b.needScratch(3 * f32(T, I)) // x and out read back, the reference
	b.call = func(int) { b.be.GELU(out, x.t) }
	b.check = func() (float64, float64, error) {
		in, res, err := b.around([]bridge.Tensor{x.t}, out)
		if err != nil {
			return 0, 0, err
		}
		want := make([]float32, len(in[0]))
		kernels.GELU(want, in[0])
		return maxDiff(res[0], want), maxAbs(want), nil
	}
	return nil
}

func (b *Bench) preparePositionEmbedding(p *params) error {
	T, W, N := p.int(ops.Tokens), p.int(ops.Width), p.int(ops.N)
	dt := p.dtype()
	if err := p.err(); err != nil {
		return err
	}
	b.desc = fmt.Sprintf("position_embedding tokens=%d positions=%d hidden=%d dtype=%v", T, N, W, dt)
	b.tokenIDs(T)
	b.meta = b.plainMeta(T)
	// A prompt's consecutive positions from a seeded start, as a prefill at
	// that depth reads them; past the table's N rows they wrap.
	start := b.rng.IntN(max(N-T, 0) + 1)
	for i := range b.meta.Positions {
		b.meta.Positions[i] = int32((start + i) % N)
	}
	b.tolerance(dt)
	b.cost(p, dt)
	// The table and its negation in turn: x returns to where it was after
	// each pair of calls, whatever their number.
	table, err := b.upload(dt, []int{N, W}, 0, 1)
	if err != nil {
		return err
	}
	neg, err := b.uploadFrom(dt, []int{N, W}, negated(table))
	if err != nil {
		return err
	}
	x, err := b.upload(b.act, []int{T, W}, 0, 1)
	if err != nil {
		return err
	}
	tin := func(i int) *host {
		if i%2 == 0 {
			return table
		}
		return neg
	}
	b.needScratch(2*f32(T, W) + f32(N, W)) // x read back before and after, the table widened
	b.call = func(i int) { b.be.PositionEmbedding(x.t, tin(i).t) }
	b.check = func() (float64, float64, error) {
		before, after, err := b.around([]bridge.Tensor{x.t}, x.t)
		if err != nil {
			return 0, 0, err
		}
		want := before[0]
		kernels.AddPositions(want, table.values(), b.meta.Positions, W)
		return maxDiff(after[0], want), maxAbs(want), nil
	}
	return nil
}
