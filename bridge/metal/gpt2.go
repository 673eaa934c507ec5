package metal

import (
	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// GPT-2's ops (kernels/metal/layernorm.metal, gpt2.metal).

var positionKernel = map[bridge.DType]string{bridge.F32: "position_embedding_f32", bridge.F16: "position_embedding_f16",
	bridge.BF16: "position_embedding_bf16"}

func (b *Backend) LayerNorm(out, x, w, bias bridge.Tensor, eps float32) {
	b.norm(ops.LayerNorm, tt(out), nil, tt(x), tt(w), tt(bias), eps)
}

func (b *Backend) AddLayerNorm(out, residual, x, w, bias bridge.Tensor, eps float32) {
	b.norm(ops.AddLayerNorm, tt(out), tt(residual), tt(x), tt(w), tt(bias), eps)
}

func (b *Backend) GELU(out, x bridge.Tensor) {
	o, xs := tt(out), tt(x)
	if !b.checkF32("gelu_tanh", o, xs) {
		return
	}
	n := o.n
	if n == 0 {
		return
	}
	p := b.pipeline("gelu_tanh", fcNone)
	b.args(argBytes(b, eltArgs{N: uint32(n)}))
	b.in(1, xs)
	b.out(2, o)
	b.dispatchThreads(p, [3]int{n, 1, 1}, [3]int{min(n, b.tuning.EltThreads), 1, 1})
}

func (b *Backend) PositionEmbedding(x, table bridge.Tensor) {
	xs, tb := tt(x), tt(table)
	if !b.checkF32("position_embedding", xs) {
		return
	}
	name := b.tableKernel("position_embedding", tb, positionKernel)
	if name == "" {
		return
	}
	T, dim := b.step.sec.numTokens, tb.shape[1]
	if T == 0 {
		return
	}
	if xs.n < T*dim {
		b.fail("position_embedding: x of %d elements for %d tokens of %d", xs.n, T, dim)
		return
	}
	b.tableRows(name, tb, b.metaView(b.step.sec.positions, T), T, xs) // added into x
}
