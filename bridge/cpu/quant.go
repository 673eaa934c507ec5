package cpu

import (
	"fmt"
	"sync"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu/vec"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// Packed weights on the CPU: the tensor aliases the packed bytes (an mmap'd
// checkpoint or the synthetic source's memory) and every op dequantizes a
// block into registers as it reads it (bridge/cpu/vec: QDots), never into a float copy.

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

// QuantRules are the packed formats the CPU runs, known without a backend
// (bridge.QuantSupport, bridge.QuantPreference); Backend has them.
type QuantRules struct{}

// SupportsQuant: the CPU runs every format of kernels/quant but those with
// kernels on Metal only (quant.MetalOnly: Q5_K, Q3_K, IQ4_XS, IQ4_NL, MXFP4),
// which it runs in their transcoders' forms (quant.Forms: Q8_0 or 8-bit
// affine groups, on the SIMD dots).
func (QuantRules) SupportsQuant(spec quant.Spec) error {
	if quant.MetalOnly(spec) {
		f := quant.Forms(spec)
		return fmt.Errorf("cpu: %v weights run transcoded (%v)", spec, f[len(f)-1])
	}
	return nil
}

// PrefersWider: the CPU's 2-, 3-, 5- and 6-bit affine rows run the generic
// Go dots, a tenth of the speed of the 4- and 8-bit SIMD ones a value
// (vec.FasterWidened), so the engine loads them widened.
func (QuantRules) PrefersWider(spec quant.Spec) bool { return vec.FasterWidened(spec) }

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
	p := qprep(b.buf("qmatmul.prep", rows*vec.QPrepLen(m.Spec, k)), xs, m)
	b.pool.forRange(n, matmulGrain, func(lo, hi int) { qgemmRows(o, n, xs, p, m, rows, lo, hi) })
	b.addBias("qmatmul", o, bias, rows, n)
}

// qprep prepares x's rows (of w.K values) for the packed dots of w's
// format (vec.QPrepare) into dst, vec.QPrepLen floats a row.
func qprep(dst, x []float32, w *quant.Matrix) []float32 {
	k, n := w.K, vec.QPrepLen(w.Spec, w.K)
	rows := len(x) / k
	for r := 0; r < rows; r++ {
		vec.QPrepare(dst[r*n:(r+1)*n], x[r*k:(r+1)*k], w.Spec)
	}
	return dst[:rows*n]
}

// qgemmSlice is the weight rows every activation row reads before the next
// ones are loaded, so a GEMM reads its weights from memory once (32 rows
// of a few KiB stay in L2).
const qgemmSlice = 32

// qgemmRows computes output columns [lo,hi) of out[rows][ldo] = x · wᵀ;
// p is x prepared for w's format (qprep).
func qgemmRows(out []float32, ldo int, x, p []float32, w *quant.Matrix, rows, lo, hi int) {
	k, n := w.K, vec.QPrepLen(w.Spec, w.K)
	step := hi - lo
	if rows > 1 {
		step = qgemmSlice
	}
	for j0 := lo; j0 < hi; j0 += step {
		j1 := min(hi, j0+step)
		for i := 0; i < rows; i++ {
			vec.QDots(out[i*ldo+j0:i*ldo+j1], w, j0, j1, x[i*k:(i+1)*k], p[i*n:(i+1)*n])
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
	ids, weights, groups := b.routeGroups(logits, w, p)
	y := b.buf("moe.y", len(ids)*H)
	// Work items are (group, slice of rows) so one token's top-k experts
	// still spread over every core.
	b.pool.forEach(len(groups), func(gi int) {
		g := groups[gi]
		m := len(g.pairs)
		sc := qmoeScratchPool.Get().(*qmoeScratch)
		defer qmoeScratchPool.Put(sc)
		xg, gate, up, yg := sc.grow(m*H, m*I)
		for r, pi := range g.pairs {
			copy(xg[r*H:(r+1)*H], xs[int(pi)/K*H:(int(pi)/K+1)*H])
		}
		gw, uw, dw := w.Gate[g.expert].(*tensor).q, w.Up[g.expert].(*tensor).q, w.Down[g.expert].(*tensor).q
		pg := qprep(grow(&sc.pg, m*vec.QPrepLen(gw.Spec, H)), xg, gw)
		pu := pg
		if uw.Spec != gw.Spec {
			pu = qprep(grow(&sc.pu, m*vec.QPrepLen(uw.Spec, H)), xg, uw)
		}
		qgemmRows(gate, I, xg, pg, gw, m, 0, I)
		qgemmRows(up, I, xg, pu, uw, m, 0, I)
		vec.SiLUMul(gate, gate, up)
		pd := qprep(grow(&sc.pd, m*vec.QPrepLen(dw.Spec, I)), gate, dw)
		qgemmRows(yg, H, gate, pd, dw, m, 0, H)
		for r, pi := range g.pairs {
			copy(y[int(pi)*H:(int(pi)+1)*H], yg[r*H:(r+1)*H])
		}
	})
	combineTopK(f32s(out), y, weights, T, K, H)
}

type qmoeScratch struct {
	moeScratch
	pg, pu, pd []float32 // the activations prepared for gate, up and down (qprep)
}

// grow returns (*s)[:n], reallocated when shorter.
func grow(s *[]float32, n int) []float32 {
	if cap(*s) < n {
		*s = make([]float32, n)
	}
	return (*s)[:n]
}

var qmoeScratchPool = sync.Pool{New: func() any { return new(qmoeScratch) }}

// dequantRow writes row r of m as float32 (embedding rows: the op's output).
func dequantRow(m *quant.Matrix, r int, dst []float32) { m.Row(r, dst) }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// Fusions is the CPU backend's fusion table (bridge.Pattern).
func (b *Backend) Fusions() []bridge.Pattern {
	return []bridge.Pattern{{
		Name: "qgemm_shared_input",
		Doc:  "packed matmuls of one input and packing (q, k, v; gate, up) prepare the input once and split their rows over the threads together",
		Try:  b.tryQGemmGroup, Always: true,
	}}
}

// tryQGemmGroup runs up to 3 consecutive packed matmuls that read the same
// input with weights of one packing as one: x prepared once (vec.QPrepare),
// one split of all their rows over the threads, so the small ones (a
// GQA model's k and v) neither take a fork and join of their own nor leave
// a thread idle.
func (b *Backend) tryQGemmGroup(ops []bridge.Op, span int) (int, bridge.Op) {
	ops = ops[:span]
	var mms []*bridge.QMatMulOp
	for _, op := range ops {
		mm, ok := op.(*bridge.QMatMulOp)
		if !ok || len(mms) == 3 {
			break
		}
		w, ok := mm.W.(*tensor)
		if !ok || w.q == nil || mm.X.Len()%w.q.K != 0 || mm.Out.Len() != mm.X.Len()/w.q.K*w.q.Rows ||
			(mm.Bias != nil && mm.Bias.Len() < w.q.Rows) {
			break // a short bias: QMatMul alone says so
		}
		if len(mms) > 0 {
			w0 := mms[0].W.(*tensor).q
			if mm.X != mms[0].X || w.q.Spec != w0.Spec || w.q.K != w0.K || mm.Out == mm.X {
				break
			}
			dup := false
			for _, o := range mms {
				dup = dup || o.Out == mm.Out || o.Out == mm.X
			}
			if dup {
				break
			}
		}
		mms = append(mms, mm)
	}
	if len(mms) < 2 {
		return 0, nil
	}
	w0 := mms[0].W.(*tensor).q
	k := w0.K
	xs := f32s(mms[0].X)
	rows := len(xs) / k
	p := qprep(b.buf("qmatmul.prep", rows*vec.QPrepLen(w0.Spec, k)), xs, w0)
	// Rows of the group: matrix i's rows are [starts[i], starts[i+1]).
	var starts [4]int
	for i, mm := range mms {
		starts[i+1] = starts[i] + mm.W.(*tensor).q.Rows
	}
	total := starts[len(mms)]
	b.pool.forRange(total, matmulGrain, func(lo, hi int) {
		for i, mm := range mms {
			l, h := max(lo, starts[i]), min(hi, starts[i+1])
			if l < h {
				m := mm.W.(*tensor).q
				qgemmRows(f32s(mm.Out), m.Rows, xs, p, m, rows, l-starts[i], h-starts[i])
			}
		}
	})
	for _, mm := range mms {
		b.addBias("qmatmul", f32s(mm.Out), mm.Bias, rows, mm.W.(*tensor).q.Rows)
	}
	return len(mms), nil
}

// addBias adds bias (nil: none) to each of out's rows of n values; a bias
// of fewer values fails the step, naming op.
func (b *Backend) addBias(op string, out []float32, bias bridge.Tensor, rows, n int) {
	if bias == nil {
		return
	}
	bs := f32s(bias)
	if len(bs) < n {
		b.fail("%s: bias of %d values for %d outputs a row", op, len(bs), n)
		return
	}
	for i := 0; i < rows; i++ {
		row := out[i*n : (i+1)*n]
		for j, v := range bs[:n] {
			row[j] += v
		}
	}
}
