package cpu

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// Packed weights on the CPU: the tensor aliases the packed bytes (an mmap'd
// checkpoint or the synthetic source's memory) and every op dequantizes a
// block into registers as it reads it (qdot.go), never into a float copy.

func (t *tensor) Quant() quant.Spec { return t.q.Spec }

func (b *Backend) QuantWeight(spec quant.Spec, shape []int, data, scales, biases []byte) (bridge.Tensor, error) {
	if len(shape) != 2 {
		return nil, errorf("packed weight of shape %v: want [rows, k]", shape)
	}
	m := &quant.Matrix{Spec: spec, Rows: shape[0], K: shape[1], Data: data, Scales: scales, Biases: biases}
	if err := m.Check("packed weight"); err != nil {
		return nil, err
	}
	return &tensor{dt: bridge.Packed, shape: append([]int(nil), shape...), n: shape[0] * shape[1], q: m}, nil
}

// SupportsQuant: the CPU runs every format of kernels/quant.
func (b *Backend) SupportsQuant(spec quant.Spec) error { return nil }

func (b *Backend) QEmbedding(out, table bridge.Tensor) {
	m := table.(*tensor).q
	o := f32s(out)
	for i, id := range b.ids {
		if id < 0 || int(id) >= m.Rows {
			b.fail("embedding: token id %d outside the vocabulary (0..%d)", id, m.Rows-1)
			return
		}
		dequantRow(m, int(id), o[i*m.K:(i+1)*m.K])
	}
}

func (b *Backend) QMatMul(out, x, w, bias bridge.Tensor) {
	m := w.(*tensor).q
	n, k := m.Rows, m.K
	rows := x.Len() / k
	o, xs := f32s(out), f32s(x)
	sums := b.buf("qmatmul.sums", rows*k/16+rows*k)
	blockSums(sums, xs, k)
	b.pool.forRange(n, matmulGrain, func(lo, hi int) { qgemmRows(o, n, xs, sums, m, rows, lo, hi) })
	if bias != nil {
		bs := f32s(bias)
		for i := 0; i < rows; i++ {
			row := o[i*n : (i+1)*n]
			for j := range row {
				row[j] += bs[j]
			}
		}
	}
}

// qgemmRows computes output columns [lo,hi) of out[rows][ldo] = x · wᵀ;
// sums are x's sums over every 16 values (blockSums), which turn a group's
// bias or min into one multiply.
func qgemmRows(out []float32, ldo int, x, sums []float32, w *quant.Matrix, rows, lo, hi int) {
	k := w.K
	xd := sums[rows*k/16:]
	for n := lo; n < hi; n++ {
		for i := 0; i < rows; i++ {
			out[i*ldo+n] = qdot(w, n, x[i*k:(i+1)*k], sums[i*k/16:(i+1)*k/16], xd[i*k:(i+1)*k])
		}
	}
}

// blockSums prepares x's rows (of k values) for the packed dots: dst holds
// the sum of every 16 values, then each row deinterleaved (its even
// values, then its odd ones), which MLX's 4-bit nibbles pair with: dst is
// len(x)/16 + len(x) long.
func blockSums(dst, x []float32, k int) {
	sums, xd := dst[:len(x)/16], dst[len(x)/16:]
	for i := range sums {
		var s float32
		for _, v := range x[16*i : 16*i+16] {
			s += v
		}
		sums[i] = s
	}
	for r := 0; r < len(x)/k; r++ {
		row, d := x[r*k:(r+1)*k], xd[r*k:(r+1)*k]
		ev, od := d[:k/2], d[k/2:]
		for j := range ev {
			ev[j], od[j] = row[2*j], row[2*j+1]
		}
	}
}

func (b *Backend) QMoE(out, x bridge.Tensor, w *bridge.MoEWeights, p bridge.MoEParams) {
	H, I, K := w.Hidden, w.Inter, w.TopK
	E := len(w.Gate)
	xs := f32s(x)
	T := len(xs) / H
	logits := b.buf("moe.logits", T*E)
	lt := &tensor{dt: bridge.F32, shape: []int{T, E}, n: T * E, f32: logits}
	if _, ok := bridge.QuantOf(w.Router); ok {
		b.QMatMul(lt, x, w.Router, nil)
	} else {
		b.MatMul(lt, x, w.Router, nil)
	}
	ids, weights := kernels.Route(logits, E, K, w.NormTopK)
	b.stats.ExpertsTouched = append(b.stats.ExpertsTouched, len(sortedUnique(ids)))
	var groups []pairGroup
	switch p.Strategy {
	case bridge.MoELoop:
		for i, e := range ids {
			groups = append(groups, pairGroup{expert: e, pairs: []int32{int32(i)}})
		}
	case bridge.MoEChunked:
		chunk := max(p.ChunkSize, 1)
		for lo := 0; lo < len(ids); lo += chunk {
			groups = append(groups, groupByExpert(ids, lo, min(lo+chunk, len(ids)), E)...)
		}
	default:
		groups = groupByExpert(ids, 0, len(ids), E)
	}
	y := b.buf("moe.y", len(ids)*H)
	// Work items are (group, slice of rows) so one token's top-k experts
	// still spread over every core.
	b.pool.forEach(len(groups), func(gi int) {
		g := groups[gi]
		m := len(g.pairs)
		sc := qmoeScratchPool.Get().(*qmoeScratch)
		defer qmoeScratchPool.Put(sc)
		xg, gate, up, yg := sc.grow(m*H, m*I)
		sx, sg := sc.sums(m*H/16, m*I/16)
		for r, pi := range g.pairs {
			copy(xg[r*H:(r+1)*H], xs[int(pi)/K*H:(int(pi)/K+1)*H])
		}
		blockSums(sx, xg, H)
		qgemmRows(gate, I, xg, sx, w.Gate[g.expert].(*tensor).q, m, 0, I)
		qgemmRows(up, I, xg, sx, w.Up[g.expert].(*tensor).q, m, 0, I)
		kernels.SiLUMul(gate, gate, up)
		blockSums(sg, gate, I)
		qgemmRows(yg, H, gate, sg, w.Down[g.expert].(*tensor).q, m, 0, H)
		for r, pi := range g.pairs {
			copy(y[int(pi)*H:(int(pi)+1)*H], yg[r*H:(r+1)*H])
		}
	})
	o := f32s(out)
	for t := 0; t < T; t++ {
		row := o[t*H : (t+1)*H]
		clear(row)
		for j := 0; j < K; j++ {
			wt := weights[t*K+j]
			yr := y[(t*K+j)*H : (t*K+j+1)*H]
			for i := range row {
				row[i] += wt * yr[i]
			}
		}
	}
}

type qmoeScratch struct {
	moeScratch
	sx, sg []float32
}

func (s *qmoeScratch) sums(a, b int) ([]float32, []float32) {
	a, b = a*17, b*17 // sums and the deinterleaved rows (blockSums)
	if cap(s.sx) < a {
		s.sx = make([]float32, a)
	}
	if cap(s.sg) < b {
		s.sg = make([]float32, b)
	}
	return s.sx[:a], s.sg[:b]
}

var qmoeScratchPool = sync.Pool{New: func() any { return new(qmoeScratch) }}

// dequantRow writes row r of m as float32 (embedding rows: the op's output).
func dequantRow(m *quant.Matrix, r int, dst []float32) { m.Row(r, dst) }

// scaleAt reads value i of a scale or bias array.
func scaleAt(b []byte, i int, f quant.Float) float32 {
	switch f {
	case quant.BF16:
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
	case quant.F16:
		return quant.HalfToF32(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}
