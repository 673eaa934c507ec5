//go:build linux

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// Packed weights (kernels/cuda/quant.cu, docs/quantization.md): a packed
// tensor's values, scales and biases are device copies of the host bytes,
// made once per host tensor (engines made again for each repetition of a
// benchmark get the same device copies, as float weights do).

type qtensor struct {
	bridge.PackedMatrix
	data, scales, biases *tensor // scales, biases nil unless affine
}

// sb returns the scales' and biases' pointers (the values' where there are
// none, never read).
func (t *qtensor) sb() (uint64, uint64) {
	if t.scales == nil {
		return t.data.ptr, t.data.ptr
	}
	return t.scales.ptr, t.biases.ptr
}

func (t *qtensor) args() (rowBytes, groups, sdt int) {
	return t.Spec.RowBytes(t.Dims[1]), max(t.Spec.Groups(t.Dims[1]), 1), int(t.Spec.Scale)
}

func qKernel(s quant.Spec) string {
	switch {
	case s.Type == quant.Affine && s.Bits == 4:
		return "affine4"
	case s.Type == quant.Affine && s.Bits == 8:
		return "affine8"
	case s.Type == quant.Q8_0:
		return "q8_0"
	case s.Type == quant.Q4_0:
		return "q4_0"
	case s.Type == quant.Q4_K:
		return "q4_k"
	case s.Type == quant.Q6_K:
		return "q6_k"
	}
	return ""
}

// quantKernelNames are quant.cu's kernels, for the compile test.
func quantKernelNames() []string {
	var n []string
	for _, f := range []string{"affine4", "affine8", "q8_0", "q4_0", "q4_k", "q6_k"} {
		n = append(n, "qgemv_"+f, "qmoe_gate_up_"+f, "qmoe_down_"+f, "qembed_"+f)
	}
	return n
}

// SupportsQuant: affine at 4 and 8 bits, Q8_0, Q4_0, Q4_K, Q6_K.
func (b *Backend) SupportsQuant(s quant.Spec) error {
	if qKernel(s) == "" {
		return fmt.Errorf("cuda: %v weights are not supported (affine 4 and 8 bits, Q8_0, Q4_0, Q4_K, Q6_K)", s)
	}
	return nil
}

func (b *Backend) QuantWeight(spec quant.Spec, shape []int, data, scales, biases []byte) (bridge.Tensor, error) {
	if err := b.SupportsQuant(spec); err != nil {
		return nil, err
	}
	if len(shape) != 2 {
		return nil, fmt.Errorf("cuda: packed weight of shape %v: want [rows, k]", shape)
	}
	m := &quant.Matrix{Spec: spec, Rows: shape[0], K: shape[1], Data: data, Scales: scales, Biases: biases}
	if err := m.Check("cuda: packed weight"); err != nil {
		return nil, err
	}
	q := &qtensor{PackedMatrix: bridge.PackedMatrix{Spec: spec, Dims: append([]int(nil), shape...)}}
	var err error
	if q.data, err = b.packedBytes(data); err != nil {
		return nil, err
	}
	if spec.Type == quant.Affine {
		if q.scales, err = b.packedBytes(scales); err != nil {
			return nil, err
		}
		if q.biases, err = b.packedBytes(biases); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// packedBytes copies bytes to the device once per host range (weightKey).
func (b *Backend) packedBytes(data []byte) (*tensor, error) {
	if len(data) == 0 {
		return b.newTensor(bridge.Packed, []int{0}, 0, nil), nil
	}
	key := weightKey{addr: uintptr(unsafe.Pointer(&data[0])), size: len(data), dt: bridge.Packed, fp: fingerprint(data)}
	b.memMu.Lock()
	t := b.weights[key]
	b.memMu.Unlock()
	if t != nil && t.mem != nil && !t.mem.freed.Load() {
		return t, nil
	}
	var d *devAlloc
	err := b.th.do(func() error {
		if !b.inStep {
			b.processFrees()
		}
		var err error
		if d, err = b.arenaAlloc(int64(len(data))); err != nil {
			return err
		}
		return b.check("cuMemcpyHtoD", call(b.api.cuMemcpyHtoD, uintptr(d.ptr), uintptr(unsafe.Pointer(&data[0])), uintptr(len(data))))
	})
	if err != nil {
		if d != nil {
			b.releaseAlloc(d)
		}
		return nil, err
	}
	t = b.newTensor(bridge.Packed, []int{len(data)}, len(data), d)
	t.wkey = &key
	b.memMu.Lock()
	b.weights[key] = t
	b.memMu.Unlock()
	return t, nil
}

func (b *Backend) qtensorOf(x bridge.Tensor, what string) *qtensor {
	q, ok := x.(*qtensor)
	if !ok || q == nil {
		b.fail("%s: not a packed CUDA tensor (%T)", what, x)
		return nil
	}
	return q
}

// qBlockRows are the weight rows one block of quant.cu computes (QWARPS
// warps of QROWS rows), qCols the activation rows.
const (
	qBlockRows = 8 * 2
	qCols      = 4
)

func (b *Backend) QMatMul(out, x, w, bias bridge.Tensor) {
	o, xs, q := b.f32Tensor(out, "qmatmul out"), b.f32Tensor(x, "qmatmul x"), b.qtensorOf(w, "qmatmul weight")
	if o == nil || xs == nil || q == nil {
		return
	}
	var bp uint64
	if bias != nil {
		bt := b.f32Tensor(bias, "qmatmul bias")
		if bt == nil {
			return
		}
		bp = bt.ptr
	}
	n, k := q.Dims[0], q.Dims[1]
	m := xs.n / k
	if o.n < m*n {
		b.fail("qmatmul: output of %d elements for %dx%d", o.n, m, n)
		return
	}
	b.qmatmul(o.ptr, xs.ptr, q, bp, m)
}

func (b *Backend) qmatmul(out, x uint64, q *qtensor, bias uint64, m int) {
	n, k := q.Dims[0], q.Dims[1]
	if m == 0 || n == 0 {
		return
	}
	s, bi := q.sb()
	rb, g, sdt := q.args()
	b.launch("qgemv_"+qKernel(q.Spec), [3]int{cdiv(n, qBlockRows), cdiv(m, qCols), 1}, 256, x, q.data.ptr, s, bi, bias, out,
		i32(m), i32(n), i32(k), i32(rb), i32(g), i32(sdt))
}

func (b *Backend) QEmbedding(out, table bridge.Tensor) {
	o, q := b.f32Tensor(out, "qembedding out"), b.qtensorOf(table, "qembedding table")
	if o == nil || q == nil {
		return
	}
	V, W := q.Dims[0], q.Dims[1]
	T := b.meta.NumTokens
	if o.n != T*W {
		b.fail("qembedding: out holds %d elements, want %d×%d", o.n, T, W)
		return
	}
	s, bi := q.sb()
	rb, g, sdt := q.args()
	b.launch("qembed_"+qKernel(q.Spec), [3]int{cdiv(T, 8), 1, 1}, 256, o.ptr, b.metaPtr(b.mo.tokens), q.data.ptr, s, bi,
		i32(T), i32(V), i32(W), i32(rb), i32(g), i32(sdt), b.stats.ptr)
}

// qmoeTable is a MoE layer's expert pointer table for quant.cu: values,
// scales and biases of gate (E each), up, down, in that order of nine.
type qmoeTable struct {
	ptr       uint64
	spec      [3]quant.Spec
	first     bridge.Tensor
	rowsBytes [3]int
}

func (b *Backend) qmoeTable(w *bridge.MoEWeights) *qmoeTable {
	if t, ok := b.qmoeByW[w]; ok && t.first == w.Gate[0] {
		return t
	}
	E := len(w.Gate)
	ptrs := make([]uint64, 9*E)
	t := &qmoeTable{first: w.Gate[0]}
	for i, set := range [][]bridge.Tensor{w.Gate, w.Up, w.Down} {
		if len(set) != E {
			b.fail("qmoe: %d gate, %d up and %d down experts", len(w.Gate), len(w.Up), len(w.Down))
			return nil
		}
		for e, x := range set {
			q := b.qtensorOf(x, "qmoe expert")
			if q == nil {
				return nil
			}
			if e == 0 {
				t.spec[i] = q.Spec
			} else if q.Spec != t.spec[i] {
				b.fail("qmoe: expert %d is %v, expert 0 %v", e, q.Spec, t.spec[i])
				return nil
			}
			s, bi := q.sb()
			ptrs[i*E+e], ptrs[(3+i)*E+e], ptrs[(6+i)*E+e] = q.data.ptr, s, bi
		}
	}
	if t.spec[0] != t.spec[1] {
		b.fail("qmoe: gate (%v) and up (%v) experts packed differently", t.spec[0], t.spec[1])
		return nil
	}
	d, err := b.uploadTable(unsafe.Pointer(&ptrs[0]), len(ptrs)*8)
	if err != nil {
		b.fail("%v", err)
		return nil
	}
	t.ptr = d.ptr
	if b.qmoeByW == nil || len(b.qmoeByW) > 1024 {
		b.qmoeByW = map[*bridge.MoEWeights]*qmoeTable{}
	}
	b.qmoeByW[w] = t
	return t
}

// QMoE records a MoE block with packed experts: the router (packed or
// float), the routing (moe_route1 / moe_route), per (token, expert) pair
// the gate/up GEMV with SwiGLU and the down GEMV, and the weighted combine.
func (b *Backend) QMoE(out, x bridge.Tensor, w *bridge.MoEWeights, p bridge.MoEParams) {
	o, xs := b.f32Tensor(out, "qmoe out"), b.f32Tensor(x, "qmoe x")
	if o == nil || xs == nil {
		return
	}
	H, I, K, E := w.Hidden, w.Inter, w.TopK, len(w.Gate)
	if E == 0 || E > moeMaxExperts || K < 1 || K > E || H == 0 || xs.n%H != 0 {
		b.fail("qmoe: %d experts (at most %d), top-%d, hidden %d unsupported", E, moeMaxExperts, K, H)
		return
	}
	T := xs.n / H
	if T == 0 {
		return
	}
	tab := b.qmoeTable(w)
	if tab == nil {
		return
	}
	P := T * K
	logits := b.scratchBuf("moe.logits", int64(T)*int64(E)*4)
	ids := b.scratchBuf("moe.ids", int64(P)*4)
	wts := b.scratchBuf("moe.w", int64(P)*4)
	slotExpert := b.scratchBuf("moe.slot_expert", int64(P)*4)
	slotStart := b.scratchBuf("moe.slot_start", int64(P)*4)
	slotCount := b.scratchBuf("moe.slot_count", int64(P)*4)
	pairs := b.scratchBuf("moe.pairs", int64(P)*4)
	hbuf := b.scratchBuf("moe.h", int64(P)*int64(I)*4)
	y := b.scratchBuf("moe.y", int64(P)*int64(H)*4)
	if b.stepErr != nil {
		return
	}
	stat := min(1+b.moeCalls, statsCap-1)
	b.moeCalls++
	b.subMark("router")
	if rq, ok := w.Router.(*qtensor); ok {
		b.qmatmul(logits, xs.ptr, rq, 0, T)
	} else {
		router := b.tensorOf(w.Router, "qmoe router")
		if router == nil {
			return
		}
		b.matmul(logits, xs.ptr, router, 0, T, E, H, true)
	}
	b.subMark("route")
	if T == 1 {
		b.launch("moe_route1", [3]int{1, 1, 1}, 32, logits, i32(E), i32(K), boolArg(w.NormTopK),
			ids, wts, slotExpert, slotStart, slotCount, pairs, b.stats.ptr, i32(stat))
	} else {
		b.launch("moe_route", [3]int{1, 1, 1}, 1024, logits, i32(T), i32(E), i32(K), boolArg(w.NormTopK), i32(P), i32(min(E, P)),
			ids, wts, slotExpert, slotStart, slotCount, pairs, b.stats.ptr, i32(stat))
	}
	b.subMark("gate_up")
	gs := tab.spec[0]
	b.launch("qmoe_gate_up_"+qKernel(gs), [3]int{cdiv(I, qBlockRows), P, 1}, 256, xs.ptr, hbuf, tab.ptr, ids,
		i32(H), i32(I), i32(K), i32(E), i32(gs.RowBytes(H)), i32(max(gs.Groups(H), 1)), i32(int(gs.Scale)), b.stats.ptr)
	b.subMark("down")
	ds := tab.spec[2]
	b.launch("qmoe_down_"+qKernel(ds), [3]int{cdiv(H, qBlockRows), P, 1}, 256, hbuf, y, tab.ptr, ids,
		i32(H), i32(I), i32(E), i32(ds.RowBytes(I)), i32(max(ds.Groups(I), 1)), i32(int(ds.Scale)), b.stats.ptr)
	b.launch("moe_combine", [3]int{T, cdiv(H, 256), 1}, 256, o.ptr, y, wts, i32(H), i32(K))
}

var (
	_ bridge.QuantBackend = (*Backend)(nil)
	_ bridge.QuantSupport = (*Backend)(nil)
)
