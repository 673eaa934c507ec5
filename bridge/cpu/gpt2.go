package cpu

import (
	"math"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu/vec"
)

// GPT-2's ops: LayerNorm with bias, GELU (tanh) and learned positions.

func (b *Backend) LayerNorm(out, x, w, bias bridge.Tensor, eps float32) {
	dim := w.Len()
	o, xs, ws, bs := f32s(out), f32s(x), f32s(w), f32s(bias)
	b.pool.forRange(x.Len()/dim, 8, func(lo, hi int) {
		layerNormRows(o[lo*dim:hi*dim], xs[lo*dim:hi*dim], ws, bs, dim, eps)
	})
}

func (b *Backend) AddLayerNorm(out, residual, x, w, bias bridge.Tensor, eps float32) {
	dim := w.Len()
	o, r, xs, ws, bs := f32s(out), f32s(residual), f32s(x), f32s(w), f32s(bias)
	b.pool.forRange(x.Len()/dim, 8, func(lo, hi int) {
		rr := r[lo*dim : hi*dim]
		for i, v := range xs[lo*dim : hi*dim] {
			rr[i] += v
		}
		layerNormRows(o[lo*dim:hi*dim], rr, ws, bs, dim, eps)
	})
}

// layerNormRows takes the mean first and the variance about it after (two
// passes, in float64), which keeps rows with a large mean exact.
func layerNormRows(out, x, w, bias []float32, dim int, eps float32) {
	for r := 0; r < len(x)/dim; r++ {
		row := x[r*dim : (r+1)*dim]
		var s float64
		for _, v := range row {
			s += float64(v)
		}
		mean := float32(s / float64(dim))
		var ss float64
		for _, v := range row {
			d := float64(v - mean)
			ss += d * d
		}
		inv := float32(1 / math.Sqrt(ss/float64(dim)+float64(eps)))
		o := out[r*dim : (r+1)*dim]
		for i, v := range row {
			o[i] = (v-mean)*inv*w[i] + bias[i]
		}
	}
}

func (b *Backend) GELU(out, x bridge.Tensor) {
	o, xs := f32s(out), f32s(x)
	b.pool.forRange(len(o), 4096, func(lo, hi int) {
		vec.GELU(o[lo:hi], xs[lo:hi])
	})
}

func (b *Backend) PositionEmbedding(x, table bridge.Tensor) {
	t := table.(*tensor)
	if len(t.shape) != 2 {
		b.fail("position embedding: table of shape %v", t.shape)
		return
	}
	n, dim := t.shape[0], t.shape[1]
	xs := f32s(x)
	row := b.buf("position_embedding", dim)
	for i, p := range b.meta.Positions {
		if p < 0 || int(p) >= n {
			b.fail("position embedding: position %d outside the table's %d positions", p, n)
			return
		}
		toF32(row, t, int(p)*dim, (int(p)+1)*dim)
		xr := xs[i*dim : (i+1)*dim]
		for j, v := range row {
			xr[j] += v
		}
	}
}
