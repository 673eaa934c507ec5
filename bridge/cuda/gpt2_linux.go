//go:build linux

package cuda

import "github.com/mtlbench/mtlbench/bridge"

// GPT-2's ops (kernels/cuda/gpt2.cu).

func (b *Backend) LayerNorm(out, x, w, bias bridge.Tensor, eps float32) {
	o, xs := b.f32Tensor(out, "layer_norm out"), b.f32Tensor(x, "layer_norm x")
	ws, bs := b.f32Tensor(w, "layer_norm weight"), b.f32Tensor(bias, "layer_norm bias")
	if o == nil || xs == nil || ws == nil || bs == nil || ws.n == 0 {
		return
	}
	D := ws.n
	if bs.n != D || o.n < xs.n {
		b.fail("layer_norm: weight %d, bias %d, x %d, out %d elements", D, bs.n, xs.n, o.n)
		return
	}
	b.launch("layer_norm", [3]int{xs.n / D, 1, 1}, normBlock(D), ptr(o), ptr(xs), 0, 0, ptr(ws), ptr(bs), i32(D), f32(eps))
}

func (b *Backend) AddLayerNorm(out, residual, x, w, bias bridge.Tensor, eps float32) {
	o, r := b.f32Tensor(out, "add_layer_norm out"), b.f32Tensor(residual, "add_layer_norm residual")
	xs, ws := b.f32Tensor(x, "add_layer_norm x"), b.f32Tensor(w, "add_layer_norm weight")
	bs := b.f32Tensor(bias, "add_layer_norm bias")
	if o == nil || r == nil || xs == nil || ws == nil || bs == nil || ws.n == 0 {
		return
	}
	D := ws.n
	if bs.n != D || o.n < xs.n || r.n < xs.n {
		b.fail("add_layer_norm: weight %d, bias %d, x %d, residual %d, out %d elements", D, bs.n, xs.n, r.n, o.n)
		return
	}
	b.launch("layer_norm", [3]int{xs.n / D, 1, 1}, normBlock(D), ptr(o), 0, ptr(r), ptr(xs), ptr(ws), ptr(bs), i32(D), f32(eps))
}

func (b *Backend) GELU(out, x bridge.Tensor) {
	o, xs := b.f32Tensor(out, "gelu out"), b.f32Tensor(x, "gelu x")
	if o == nil || xs == nil {
		return
	}
	b.launch("gelu_tanh", [3]int{elementwiseGrid(o.n), 1, 1}, 256, ptr(o), ptr(xs), i64(int64(o.n)))
}

func (b *Backend) PositionEmbedding(x, table bridge.Tensor) {
	xs, t := b.f32Tensor(x, "position_embedding x"), b.tensorOf(table, "position table")
	if xs == nil || t == nil {
		return
	}
	if len(t.shape) != 2 || t.dt == bridge.I32 {
		b.fail("position_embedding: table must be a [positions][dim] float matrix, got %v %v", t.dt, t.shape)
		return
	}
	P, W := t.shape[0], t.shape[1]
	T := b.meta.NumTokens
	if xs.n < T*W {
		b.fail("position_embedding: x holds %d elements, want %d×%d", xs.n, T, W)
		return
	}
	b.launch("position_embedding", [3]int{T, 1, 1}, 256, ptr(xs), b.metaPtr(b.mo.positions), ptr(t), i32(int(t.dt)), i32(P), i32(W),
		b.stats.ptr)
}
