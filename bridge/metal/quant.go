package metal

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// Packed weights (kernels/metal/quant.metal, docs/quantization.md): a
// packed tensor is its values, and for affine formats its scales and
// biases, each a byte range of a shared buffer (mapped without a copy
// where the source mmap'd them).

// qtensor is a packed [rows][k] weight.
type qtensor struct {
	bridge.PackedMatrix
	data, scales, biases *tensor // scales, biases nil unless affine
}

func (t *qtensor) rowBytes() int      { return t.Spec.RowBytes(t.Dims[1]) }
func (t *qtensor) scaleRowBytes() int { return t.Spec.Groups(t.Dims[1]) * t.Spec.Scale.Size() }
func (t *qtensor) sv() (view, view)   { return t.part(t.scales), t.part(t.biases) }
func (t *qtensor) part(x *tensor) view {
	if x == nil {
		return t.data.view()
	}
	return x.view()
}

// QuantRules are the packed formats Metal runs, known without a device
// (bridge.QuantSupport); Backend has them.
type QuantRules struct{}

// SupportsQuant: every format with kernels (quant.KernelName); a refusal
// names them from quant's tables (quant.KernelFormats).
func (QuantRules) SupportsQuant(s quant.Spec) error {
	if quant.KernelName(s) == "" {
		return fmt.Errorf("metal: %v weights are not supported (%s)", s, quant.KernelFormats(func(quant.Spec) bool { return true }))
	}
	return nil
}

func (b *Backend) QuantWeight(spec quant.Spec, shape []int, data, scales, biases []byte) (bridge.Tensor, error) {
	return b.quantWeight(spec, shape, data, scales, biases, false)
}

// QuantWeightMapped aliases mmap'd packed bytes (no-copy buffers).
func (b *Backend) QuantWeightMapped(spec quant.Spec, shape []int, data, scales, biases []byte) (bridge.Tensor, error) {
	return b.quantWeight(spec, shape, data, scales, biases, true)
}

func (b *Backend) quantWeight(spec quant.Spec, shape []int, data, scales, biases []byte, mapped bool) (bridge.Tensor, error) {
	if err := b.SupportsQuant(spec); err != nil {
		return nil, err
	}
	if len(shape) != 2 {
		return nil, fmt.Errorf("metal: packed weight of shape %v: want [rows, k]", shape)
	}
	m := &quant.Matrix{Spec: spec, Rows: shape[0], K: shape[1], Data: data, Scales: scales, Biases: biases}
	if err := m.Check("metal: packed weight"); err != nil {
		return nil, err
	}
	key := qkey{spec, shape[0], shape[1], bridge.KeyOf(bridge.Packed, data), bridge.KeyOf(bridge.Packed, scales), bridge.KeyOf(bridge.Packed, biases)}
	b.mu.Lock()
	q := b.qbyHost[key]
	b.mu.Unlock()
	if q != nil && q.data != nil && q.data.buf != nil {
		// Free(q) frees each part: each is handed out once more with it.
		for _, x := range []*tensor{q.data, q.scales, q.biases} {
			if x != nil {
				x.holders.Add()
			}
		}
		return q, nil
	}
	q = &qtensor{PackedMatrix: bridge.PackedMatrix{Spec: spec, Dims: append([]int(nil), shape...)}}
	var err error
	if q.data, err = b.packedBytes(data, mapped); err != nil {
		return nil, err
	}
	if spec.Type == quant.Affine {
		if q.scales, err = b.packedBytes(scales, mapped); err != nil {
			return nil, err
		}
		if q.biases, err = b.packedBytes(biases, mapped); err != nil {
			return nil, err
		}
	}
	b.mu.Lock()
	if b.qbyHost == nil {
		b.qbyHost = map[qkey]*qtensor{}
	}
	b.qbyHost[key] = q
	b.mu.Unlock()
	return q, nil
}

// qkey names a packed matrix by its spec, shape and host bytes
// (bridge.HostKey).
type qkey struct {
	spec                 quant.Spec
	rows, k              int
	data, scales, biases bridge.HostKey
}

// packedBytes puts bytes in a buffer: aliased when mapped (and 16-byte
// aligned, as the kernels' widest loads need), else copied.
func (b *Backend) packedBytes(data []byte, mapped bool) (*tensor, error) {
	if mapped {
		if t, err := b.WeightMapped(bridge.Packed, []int{len(data)}, data); err == nil {
			return t.(*tensor), nil
		}
	}
	key := bridge.KeyOf(bridge.Packed, data)
	if t := b.kept(key, []int{len(data)}); t != nil {
		return t, nil
	}
	buf, err := b.newBuffer(max(len(data), 16))
	if err != nil {
		return nil, err
	}
	copy(buf.Contents(), data)
	b.dropCopied(data)
	t := &tensor{dt: bridge.Packed, shape: []int{len(data)}, n: len(data), buf: buf, owned: true}
	if len(data) > 0 {
		b.keep(key, t)
	}
	return t, nil
}

// qArgs are a packed matrix's kernel arguments.
func qArgs(q *qtensor, m int) qMatArgs {
	return qMatArgs{M: uint32(m), N: uint32(q.Dims[0]), K: uint32(q.Dims[1]), RowBytes: uint32(q.rowBytes()),
		Groups: uint32(max(q.Spec.Groups(q.Dims[1]), 1)), GroupShift: qGroupShift(q.Spec)}
}

// qScaleDT is the packed kernels' FC_Q_SCALE_DT: the affine scales' dtype
// (quant.Float's codes: 0 f32, 1 f16, 2 bf16), 0 for the GGUF formats.
func qScaleDT(s quant.Spec) int32 {
	if s.Type != quant.Affine {
		return 0
	}
	return int32(s.Scale)
}

// qGroupShift is log2 of an affine group's 32-value units: the kernels find
// a unit's group by a shift (mlx's group sizes, 32, 64 and 128, are powers
// of two; quant.Spec refuses others). 0 for the GGUF formats.
func qGroupShift(s quant.Spec) uint32 {
	if s.Type != quant.Affine || s.Group < 32 {
		return 0
	}
	return uint32(bits.TrailingZeros(uint(s.Group / 32)))
}

func (b *Backend) QMatMul(out, x, w, bias bridge.Tensor) {
	o, xs, bs := tt(out), tt(x), tt(bias)
	if !b.checkF32("qmatmul", o, xs, bs) {
		return
	}
	q, ok := w.(*qtensor)
	if !ok {
		b.fail("qmatmul: %T is not a packed weight", w)
		return
	}
	n, k := q.Dims[0], q.Dims[1]
	m, bv, ok := b.matmulOperands("qmatmul", o, xs, bs, n, k)
	if !ok {
		return
	}
	b.qmatmul(o.view(), xs.view(), m, q, bv)
}

// qmv is one qmatvec dispatch (quant.metal): up to three packed matrices
// of one format and depth reading x (m rows), or with swiglu gate and up
// into out[0]; with g, x is the input of an RMSNorm (weights g, eps)
// computed as it is staged; with resid the output is also added into it.
type qmv struct {
	x     *tensor
	m     int
	q     [3]*qtensor
	out   [3]*tensor
	bias  [3]*tensor
	nsegs int
	swig  bool
	g     *tensor // a folded RMSNorm's weight (a LayerNorm's with gb)
	gb    *tensor // a folded LayerNorm's bias
	eps   float32
	resid *tensor
	gelu  bool    // GELU of the output (a lone matrix)
	pick  *tensor // gemv_argmax: the greedy pick of the lone output row (i32), merged after
}

// qmvOf is a packed matmul op's dispatch when the fusions can take it: f32
// tensors of matching sizes, a packed weight, and few enough rows for the
// GEMV (more go to qmatmul_mm's tiles, unfused, as the float matmuls do).
func (b *Backend) qmvOf(op *bridge.QMatMulOp) (qmv, bool) {
	o, x, bias := tt(op.Out), tt(op.X), tt(op.Bias)
	q, ok := op.W.(*qtensor)
	if !ok || o == nil || x == nil || o.dt != bridge.F32 || x.dt != bridge.F32 || bias != nil && bias.dt != bridge.F32 {
		return qmv{}, false
	}
	n, k := q.Dims[0], q.Dims[1]
	m := x.n / k
	if x.n%k != 0 || o.n < m*n || m > b.qmatvecMaxM(m, n, k) || (bias != nil && bias.n < n) {
		return qmv{}, false
	}
	return qmv{x: x, m: m, q: [3]*qtensor{q}, out: [3]*tensor{o}, bias: [3]*tensor{bias}, nsegs: 1}, true
}

// qmatmul encodes out[m][n] = x[m][k]·wᵀ (+ bias) on a packed w.
func (b *Backend) qmatmul(out, x view, m int, q *qtensor, bias view) {
	b.qmatvec(&qmv{m: m, q: [3]*qtensor{q}, nsegs: 1}, x, [3]view{out}, [3]view{bias})
}

// qmatvec encodes f: the GEMV for up to 8 rows of x a threadgroup, more
// rows as more threadgroups; x, outs and biases as views (f's tensors are
// not read). A lone matrix of more rows than the GEMVs take goes to
// qmatmul_mm's tiles.
func (b *Backend) qmatvec(f *qmv, x view, outs, biases [3]view) {
	q0 := f.q[0]
	if f.m == 0 || q0.Dims[0] == 0 {
		return
	}
	if f.nsegs == 1 && f.g == nil && f.resid == nil && !f.swig && !f.gelu &&
		f.m > b.qmatvecMaxM(f.m, q0.Dims[0], q0.Dims[1]) && b.qmm(f.m, q0, x, outs[0], biases[0]) {
		return
	}
	// The GEMV's launch, tuned per shape as qmatmul (by the first matrix).
	tu := b.tuned(ops.QMatMul, "", matmulDims, f.m, q0.Dims[0], q0.Dims[1])
	rows, sgs, cols := tu.QMatVecRows, tu.QMatVecSimdgroups, min(f.m, 8)
	mask := int32(0) // mv_biases: a bit for each matrix with a bias
	for i := range f.nsegs {
		if biases[i].buf != nil {
			mask |= 1 << i
		}
	}
	pipe := func(rows int) mtl.Pipeline {
		return b.pipeline("qmatvec_"+quant.KernelName(q0.Spec), fcQMatVec, mask, int32(rows), int32(cols),
			boolInt[f.g != nil], boolInt[f.resid != nil], int32(f.nsegs), boolInt[f.swig], qScaleDT(q0.Spec),
			boolInt[f.gb != nil], boolInt[f.gelu], boolInt[f.pick != nil])
	}
	p := pipe(rows)
	// A pipeline whose registers allow fewer simdgroups gives each more
	// rows (up to 4), so a threadgroup covers as many rows and stages its
	// activations as often (docs/metal-kernels.md, "Packed weights").
	for p != nil && simdgroupsFor(p, sgs) < sgs && 2*rows <= maxQMatVecRows {
		rows, sgs = 2*rows, sgs/2
		p = pipe(rows)
	}
	sgs = simdgroupsFor(p, sgs)
	if !b.fits(p, [3]int{32 * sgs, 1, 1}) {
		return
	}
	args := qArgs(q0, f.m)
	args.Eps = f.eps
	tiles := 0
	for i, q := range f.q[:f.nsegs] {
		switch i {
		case 1:
			args.N1 = uint32(q.Dims[0])
		case 2:
			args.N2 = uint32(q.Dims[0])
		}
		if i == 0 || !f.swig {
			tiles += ceilDiv(q.Dims[0], rows)
		}
	}
	b.args(argBytes(b, args))
	b.bind(1, x, false)
	for i, q := range f.q[:f.nsegs] {
		base := []int{2, 9, 14}[i]
		sv, bv := q.sv()
		b.in(base, q.data)
		b.bind(base+1, sv, false)
		b.bind(base+2, bv, false)
		if i == 0 || !f.swig {
			b.bind(base+3, outs[i], true)
		}
		if biases[i].buf != nil { // up's too: added before the SiLU·mul
			b.bind(base+4, biases[i], false)
		}
	}
	if f.g != nil {
		b.bind(7, f.g.view(), false)
	}
	if f.resid != nil {
		b.bind(8, f.resid.view(), true)
	}
	if f.gb != nil {
		b.bind(19, f.gb.view(), false)
	}
	groups := ceilDiv(tiles, sgs)
	var pv, pi view
	if f.pick != nil {
		pv, pi = b.gemvParts(groups, 20)
	}
	b.dispatchGroups(p, [3]int{groups, ceilDiv(f.m, cols), 1}, [3]int{32 * sgs, 1, 1})
	if f.pick != nil {
		b.gemvPick(pv, pi, q0.Dims[0], rows*sgs, groups, f.pick)
	}
}

// qmm encodes out[m][n] = x·qᵀ (+ bias) on qmatmul_mm's tiles (the
// tuning's QMatMulTile, tuned per shape as qmatmul), and reports false
// where the tile does not fit the device's threadgroup memory or the
// pipeline's threads, for the GEMVs to take it.
func (b *Backend) qmm(m int, q *qtensor, x, out, bias view) bool {
	n := q.Dims[0]
	t := b.tuned(ops.QMatMul, "", matmulDims, m, n, q.Dims[1]).QMatMulTile
	mem, stages := qmmMemory(t, 1)
	if mem > tileMemory {
		return false
	}
	hasBias := bias.buf != nil
	p := b.pipeline("qmatmul_mm_"+quant.KernelName(q.Spec), fcQMatMul, boolInt[hasBias], int32(t.BM), int32(t.BN),
		int32(qmmBK), int32(t.SGM), int32(t.SGN), int32(stages), qScaleDT(q.Spec))
	if p == nil {
		return true // the pipeline's failure is the step's
	}
	if t.Threads() > p.MaxTotalThreadsPerThreadgroup() {
		return false
	}
	b.args(argBytes(b, qArgs(q, m)))
	b.bind(1, x, false)
	sv, bv := q.sv()
	b.in(2, q.data)
	b.bind(3, sv, false)
	b.bind(4, bv, false)
	b.bind(5, out, true)
	if hasBias {
		b.bind(6, bias, false)
	}
	b.threadgroupMemory(mem)
	b.dispatchGroups(p, [3]int{ceilDiv(n, t.BN), ceilDiv(m, t.BM), 1}, [3]int{t.Threads(), 1, 1})
	return true
}

// qmmTile is qmatmul_mm's untuned tile (ops' metalQMatMulTile): wide,
// because x (f32, read again for each column tile) is most of a packed
// tile's traffic. At m=128, n=2048,
// k=2048, MLX 4-bit, the witness counts 23.1 MB for it, 28.3 MB for 32 ×
// 128 and 39.9 MB for the float matmul's default 64 × 64
// (docs/metal-kernels.md).
var qmmTile = Tile{BM: 64, BN: 128, BK: qmmBK, SGM: 2, SGN: 4}

// qmmBK is quant.metal's QMM_BK: values of a k step, one unit of every
// format's 32-value dequantization (q_values).
const qmmBK = 32

// qmmMemory is a packed tile's threadgroup memory and staging buffers
// (quant.metal's qmm_accumulate, FC_MM_STAGES) for tile t and mats weight
// matrices: per stage its activation and weight rows of one k step as
// floats, rows padded by 16 bytes (QMM_LD); two stages where they fit in
// the tile memory (ops.MetalQTileMemory), as the float tiles.
func qmmMemory(t Tile, mats int) (bytes, stages int) {
	return ops.MetalQTileMemory(t.BM, t.BN, mats, tileMemory)
}

// encode records f from its tensors.
func (b *Backend) encodeQMV(f *qmv) {
	var outs, biases [3]view
	for i := range f.nsegs {
		outs[i] = f.out[i].view()
		if f.bias[i] != nil {
			biases[i] = f.bias[i].view()
		}
	}
	b.qmatvec(f, f.x.view(), outs, biases)
}

func (b *Backend) QEmbedding(out, table bridge.Tensor) {
	o := tt(out)
	q, ok := table.(*qtensor)
	if !b.checkF32("qembedding", o) || !ok {
		if !ok {
			b.fail("qembedding: %T is not a packed table", table)
		}
		return
	}
	T, dim := b.step.sec.numTokens, q.Dims[1]
	if T == 0 {
		return
	}
	if o.n < T*dim {
		b.fail("qembedding: output of %d elements for %d tokens of %d", o.n, T, dim)
		return
	}
	p := b.pipeline("qembedding_"+quant.KernelName(q.Spec), fcQEmbed, qScaleDT(q.Spec))
	sgs := simdgroupsFor(p, 4)
	sv, bv := q.sv()
	b.args(argBytes(b, qArgs(q, T)))
	b.bind(1, b.metaView(b.step.sec.tokens, T), false)
	b.in(2, q.data)
	b.bind(3, sv, false)
	b.bind(4, bv, false)
	b.out(5, o)
	b.bind(6, view{b.step.errBuf, 0, 16}, true)
	b.dispatchGroups(p, [3]int{ceilDiv(T, sgs), 1, 1}, [3]int{32 * sgs, 1, 1})
}

// qexperts are a MoE layer's packed experts as the expert kernels reach
// them: per matrix (gate, up, down) the values of all experts one after
// another at a fixed stride, and their scales and biases likewise
// (expertRegion).
type qexperts struct {
	spec                 [3]quant.Spec      // gate and up alike; down may differ (Q4_K_M)
	data, scales, biases [3]view            // E experts' bytes each
	wStride, sStride     [3]int             // bytes per expert
	w                    *bridge.MoEWeights // the weights last found to lie here (holds)
}

// holds reports whether every expert of w lies in pk's regions: an engine
// may reuse one expert's tensor of an earlier engine (byHost, by its host
// bytes) while the others are new, and pk is then another layout's.
func (pk *qexperts) holds(w *bridge.MoEWeights) bool {
	for i, ts := range [3][]bridge.Tensor{w.Gate, w.Up, w.Down} {
		for e, t := range ts {
			q, ok := t.(*qtensor)
			if !ok || q.data.buf != pk.data[i].buf || q.data.off != pk.data[i].off+e*pk.wStride[i] {
				return false
			}
			if pk.sStride[i] != 0 && (q.scales.buf != pk.scales[i].buf || q.scales.off != pk.scales[i].off+e*pk.sStride[i] ||
				q.biases.buf != pk.biases[i].buf || q.biases.off != pk.biases[i].off+e*pk.sStride[i]) {
				return false
			}
		}
	}
	return true
}

// bindExperts binds matrix i's (gate, up, down) values, scales and biases
// at buffer indices base.. base+2; formats without scales bind their
// values there, never read.
func (b *Backend) bindExperts(base int, pk *qexperts, i int) {
	s, bi := pk.data[i], pk.data[i]
	if pk.sStride[i] != 0 {
		s, bi = pk.scales[i], pk.biases[i]
	}
	b.bind(base, pk.data[i], false)
	b.bind(base+1, s, false)
	b.bind(base+2, bi, false)
}

// args are the expert kernels' arguments for matrix i (n rows of k) over
// m rows of pairs (top-k of E experts).
func (pk *qexperts) args(i, m, n, k, topK, E int) qMatArgs {
	spec := pk.spec[i]
	return qMatArgs{M: uint32(m), N: uint32(n), K: uint32(k), RowBytes: uint32(spec.RowBytes(k)),
		Groups: uint32(max(spec.Groups(k), 1)), TopK: uint32(topK), Experts: uint32(E),
		WStride: uint64(pk.wStride[i]), SStride: uint64(pk.sStride[i]), GroupShift: qGroupShift(spec)}
}

func (b *Backend) qexperts(w *bridge.MoEWeights) *qexperts {
	E := len(w.Gate)
	if E == 0 || len(w.Up) != E || len(w.Down) != E {
		b.fail("qmoe: %d gate, %d up, %d down experts", len(w.Gate), len(w.Up), len(w.Down))
		return nil
	}
	first, ok := w.Gate[0].(*qtensor)
	if !ok {
		b.fail("qmoe: %T experts", w.Gate[0])
		return nil
	}
	if pk := b.qpacked[first]; pk != nil && (pk.w == w || pk.holds(w)) {
		pk.w = w // checked once an engine: its steps pass the same weights
		return pk
	}
	pk := &qexperts{}
	for i, ts := range [3][]bridge.Tensor{w.Gate, w.Up, w.Down} {
		var data, scales, biases []**tensor
		for e, t := range ts {
			q, ok := t.(*qtensor)
			if !ok {
				b.fail("qmoe: %T experts", t)
				return nil
			}
			if e == 0 {
				pk.spec[i] = q.Spec
				pk.wStride[i], pk.sStride[i] = q.Dims[0]*q.rowBytes(), q.Dims[0]*q.scaleRowBytes()
			}
			if q.Spec != pk.spec[i] || q.Dims[0]*q.rowBytes() != pk.wStride[i] || q.Dims[0]*q.scaleRowBytes() != pk.sStride[i] {
				b.fail("qmoe: expert %d is not packed as expert 0 (%v)", e, pk.spec[i])
				return nil
			}
			data = append(data, &q.data)
			if q.scales != nil {
				scales, biases = append(scales, &q.scales), append(biases, &q.biases)
			}
		}
		pk.data[i] = b.expertRegion(data, pk.wStride[i])
		if pk.sStride[i] != 0 {
			pk.scales[i], pk.biases[i] = b.expertRegion(scales, pk.sStride[i]), b.expertRegion(biases, pk.sStride[i])
		}
		if b.step.err != nil {
			return nil
		}
	}
	if b.qpacked == nil {
		b.qpacked = map[*qtensor]*qexperts{}
	}
	pk.w, b.qpacked[first] = w, pk
	return pk
}

// expertRegion lays the experts' parts (values, scales or biases of one
// matrix, stride bytes each) one after another in one region and points
// each expert's tensor at its place there. Parts that already lie so in
// mapped memory, a stacked checkpoint's tensor (mlx-lm's switch_mlp,
// GGUF's ffn_*_exps), are aliased in place: a quantized MoE model then
// takes its file's bytes and no more. Others are copied into a buffer.
func (b *Backend) expertRegion(parts []**tensor, stride int) view {
	E := len(parts)
	base := unsafe.Pointer(unsafe.SliceData((*parts[0]).contents()))
	stacked := true
	for e, p := range parts {
		c := (*p).contents()
		if !(*p).buf.mapped || len(c) != stride || unsafe.Pointer(unsafe.SliceData(c)) != unsafe.Add(base, e*stride) {
			stacked = false
			break
		}
	}
	var region view
	if stacked {
		if t, err := b.WeightMapped(bridge.Packed, []int{E * stride}, unsafe.Slice((*byte)(base), E*stride)); err == nil {
			region = t.(*tensor).view()
		}
	}
	gathered := region.buf == nil
	if gathered {
		buf, err := b.newBuffer(E * stride)
		if err != nil {
			b.fail("qmoe: gathering the experts: %v", err)
			return view{}
		}
		dst := buf.Contents()
		for e, p := range parts {
			copy(dst[e*stride:(e+1)*stride], (*p).contents())
		}
		region = view{buf, 0, E * stride}
	}
	b.share(region.buf, E)
	// The experts' own buffers are no longer read: they live in the region
	// from now on, and mapped bytes that were copied there give back their
	// file's pages.
	for e, p := range parts {
		old := *p
		if old.buf == region.buf {
			// The region is this part's own tensor (one expert, mapped in
			// place: the same host bytes), which b.owned now releases.
			old.owned = false
		}
		if gathered && old.buf.mapped {
			b.dropCopied(old.contents())
		}
		switch {
		case old.owned:
			b.release(old.buf)
			old.buf = nil // byHost may hold it: no longer a tensor of its bytes
		case old.buf != nil && old.buf != region.buf && old.buf.shared > 0:
			b.unshare(old.buf) // an earlier layout's region
		}
		*p = &tensor{dt: bridge.Packed, shape: []int{stride}, n: stride, buf: region.buf, off: region.off + e*stride}
	}
	return region
}

// QMoE encodes a MoE block with packed experts: the router (packed or
// float), then per (token, expert) pair the gate/up GEMV with SwiGLU and
// the down GEMV (qmoe_mv), the routing inside the first and the weighted
// combine inside the second (moe_route and moe_combine on their own with
// fusion off); or, where the experts' rows fill tiles (prefill), the
// routing, the pairs grouped by expert (moe_group) and the experts' packed
// GEMMs (qmoe_mm_gate_up, qmoe_mm_down, whose epilogue adds the weighted
// rows into the output).
func (b *Backend) QMoE(out, x bridge.Tensor, w *bridge.MoEWeights, mp bridge.MoEParams) {
	b.qmoe(out, x, w, mp, moeFold{})
}

// moeFold is what a MoE block takes in from the ops around it (fusion.go):
// the RMSNorm before it, whose input x then is (weights g, eps), and the
// residual the AddRMSNorm after it adds its output into.
type moeFold struct {
	g        *tensor
	eps      float32
	residual *tensor
}

// moeRouteExperts bounds the experts a decode step's gate/up GEMV routes
// itself (qmoe_mv, moe_mv_pair: mtlbench.h's MOE_ROUTE_LANE a lane);
// larger MoEs route in moe_route. moeSumTopK bounds the experts a token its
// down GEMV sums (qmoe_mv_sum, moe_mv_sum: the K pairs' staged chunks of
// 256 values at least); more go to moe_combine.
const (
	moeRouteExperts = 32 * 8
	moeSumTopK      = 16
)

// qmoeTiled reports whether a packed MoE of T tokens runs on the tiles
// (the tuning's MoEMatVecMaxRows rows a routed expert, tuned as qmoe).
func (b *Backend) qmoeTiled(T, E, K, H, I int) (bool, *Tuning) {
	tu := b.tuned(ops.QMoE, "", moeDims, T, E, K, H, I)
	return ops.MetalMoERows(T, E, K) > tu.MoEMatVecMaxRows, tu
}

// routerLogits encodes a MoE block's router GEMV over xs (T tokens) into
// scratch and returns its logits: packed routers on qmatvec, float ones on
// matmul, or with fold's norm on matvec_fused (moeRouterFolds).
func (b *Backend) routerLogits(xs *tensor, w *bridge.MoEWeights, T int, fold moeFold) view {
	E := len(w.Gate)
	logits := b.scratchView("moe.logits", 4*T*E)
	switch rq, packed := w.Router.(*qtensor); {
	case packed:
		b.qmatvec(&qmv{m: T, q: [3]*qtensor{rq}, nsegs: 1, g: fold.g, eps: fold.eps}, xs.view(), [3]view{logits}, [3]view{})
	case fold.g != nil:
		r := tt(w.Router)
		lt := &tensor{dt: bridge.F32, shape: []int{T, E}, n: T * E, buf: logits.buf, off: logits.off}
		b.matvecFused(&mvFused{x: xs, m: T, k: w.Hidden, dt: r.dt, w: [3]*tensor{r}, out: [3]*tensor{lt}, nsegs: 1, norm: fold.g,
			eps: fold.eps})
	default:
		b.matmul(logits, xs.view(), T, tt(w.Router), view{})
	}
	return logits
}

// moeRouterFolds reports whether the router of a MoE block over T tokens
// can take the RMSNorm before the block: a packed router on qmatvec, a
// float one on matvec_fused's rows.
func (b *Backend) moeRouterFolds(w *bridge.MoEWeights, T int) bool {
	if _, ok := w.Router.(*qtensor); ok {
		return true
	}
	r := tt(w.Router)
	return r != nil && len(r.shape) == 2 && matvecFusedKernel[r.dt] != "" &&
		T <= b.matmulTuning(r.dt, T, r.shape[0], r.shape[1]).MatVecMaxM
}

// sumSimdgroups is a down-and-sum kernel's simdgroups a threadgroup for K
// experts a token: as many as pipeline p takes (up to 32), a multiple of K,
// since every threadgroup stages all K pairs' activations and so takes as
// many rows as it can (docs/metal-kernels.md); 0 when p takes fewer than K.
func sumSimdgroups(p mtl.Pipeline, K int) int {
	n := K * (simdgroupsFor(p, 32) / K)
	if n == 0 || 32*n > p.MaxTotalThreadsPerThreadgroup() {
		return 0
	}
	return n
}

// qmoe encodes a packed MoE block with what it folds in (moeFold; its
// norm only on the GEMVs, which the fusion checks first).
func (b *Backend) qmoe(out, x bridge.Tensor, w *bridge.MoEWeights, mp bridge.MoEParams, fold moeFold) {
	o, xs := tt(out), tt(x)
	T := b.moeTokens("qmoe", o, xs, w)
	if T == 0 {
		return
	}
	H, I, K := w.Hidden, w.Inter, w.TopK
	E := len(w.Gate)
	pk := b.qexperts(w)
	if pk == nil {
		return
	}
	if pk.spec[0] != pk.spec[1] {
		b.fail("qmoe: gate (%v) and up (%v) experts packed differently", pk.spec[0], pk.spec[1])
		return
	}
	tiled, tu := b.qmoeTiled(T, E, K, H, I)
	if fold.g != nil && (tiled || !b.moeRouterFolds(w, T)) {
		b.fail("qmoe: an RMSNorm folded into a block that cannot take it")
		return
	}
	P := T * K
	logits := b.routerLogits(xs, w, T, fold)
	ids, weights, flags, counts, slot, ok := b.routing(E, P)
	if !ok {
		return
	}
	// A decode step's block routes in its gate/up GEMV and sums the experts
	// in its down GEMV (docs/metal-kernels.md, "The MoE block in a decode
	// step"); pairs grouped by expert run the GEMVs over moe_group's tiles.
	grouped := !tiled && !moePerPair(T, mp)
	route := !tiled && !grouped && !mp.Unfused && E <= moeRouteExperts
	var sum mtl.Pipeline
	sumSgs := 0
	if !tiled && !grouped && !mp.Unfused && K <= moeSumTopK {
		sum = b.pipeline("qmoe_mv_sum_"+quant.KernelName(pk.spec[2]), fcQMoESum, int32(tu.QMoEMatVecRows), 1, qScaleDT(pk.spec[2]),
			boolInt[fold.residual != nil])
		if sum == nil {
			return // the pipeline's failure is the step's
		}
		if sumSgs = sumSimdgroups(sum, K); sumSgs == 0 {
			sum = nil
		}
	}
	if !route {
		b.args(argBytes(b, routeArgs{Tokens: uint32(T), Experts: uint32(E), TopK: uint32(K), NormTopK: uint32(boolInt[w.NormTopK]),
			StatsSlot: uint32(slot), Hidden: uint32(H)}))
		b.bind(1, logits, false)
		b.bind(2, ids, true)
		b.bind(3, weights, true)
		b.bind(4, flags, true)
		b.bind(5, view{counts, 0, 4 * countChunk}, true)
		// The expert GEMMs take the block above the tuning's MoEMatVecMaxRows
		// rows a routed expert gets; their down GEMM adds into out, which the
		// routing then clears.
		if tiled {
			b.out(7, o)
		}
		b.bind(8, view{b.step.errBuf, 0, 16}, true)
		b.threadgroupMemory(4 * E)
		rp := b.pipeline("moe_route", fcRoute, boolInt[tiled])
		b.dispatchGroups(rp, [3]int{T, 1, 1}, [3]int{threadsFor(rp, min(1024, max(32, align(E, 32)))), 1, 1})
	}
	if tiled {
		b.qmoeTiles(pk, xs, o, ids, weights, flags, fold.residual, T, E, K, H, I, mp, tu)
		return
	}
	if grouped {
		b.qmoeGroupedMV(pk, xs, o, ids, weights, flags, fold, T, E, K, H, I, mp, tu)
		return
	}

	// Gate and up, with SwiGLU (and the norm and the routing).
	h := b.scratchView("moe.h", 4*P*I)
	rows, sgs := tu.QMoEMatVecRows, tu.QMoESimdgroups
	p := b.pipeline("qmoe_mv_"+quant.KernelName(pk.spec[0]), fcQMoE, int32(rows), 1, 1, qScaleDT(pk.spec[0]),
		boolInt[fold.g != nil], boolInt[route], 0)
	sgs = simdgroupsFor(p, sgs)
	if !b.fits(p, [3]int{32 * sgs, 1, 1}) {
		return
	}
	args := pk.args(0, P, I, H, K, E)
	args.Eps, args.NormTopK, args.StatsSlot = fold.eps, uint32(boolInt[w.NormTopK]), uint32(slot)
	b.args(argBytes(b, args))
	b.in(1, xs)
	b.bind(2, ids, route)
	b.bindExperts(3, pk, 0)
	b.bindExperts(6, pk, 1)
	b.bind(9, h, true)
	b.bind(10, view{b.step.errBuf, 0, 16}, true)
	if fold.g != nil {
		b.in(11, fold.g)
	}
	if route {
		b.bind(12, logits, false)
		b.bind(13, weights, true)
		b.bind(14, flags, true)
		b.bind(15, view{counts, 0, 4 * countChunk}, true)
	}
	b.dispatchGroups(p, [3]int{ceilDiv(I, sgs*rows), P, 1}, [3]int{32 * sgs, 1, 1})

	// Down: summed under the routing weights (and into the residual).
	if sum != nil {
		b.args(argBytes(b, pk.args(2, P, H, I, K, E)))
		b.bind(1, h, false)
		b.bind(2, ids, false)
		b.bindExperts(3, pk, 2)
		b.bind(6, weights, false)
		b.bind(7, flags, true)
		b.out(8, o)
		b.bind(9, view{b.step.errBuf, 0, 16}, true)
		if fold.residual != nil {
			b.bind(10, fold.residual.view(), true)
		}
		b.dispatchGroups(sum, [3]int{ceilDiv(H, sumSgs/K*rows), T, 1}, [3]int{32 * sumSgs, 1, 1})
		return
	}
	y := b.scratchView("moe.y", 4*P*H)
	p = b.pipeline("qmoe_mv_"+quant.KernelName(pk.spec[2]), fcQMoE, int32(rows), 1, 0, qScaleDT(pk.spec[2]), 0, 0, 0)
	sgs = simdgroupsFor(p, tu.QMoESimdgroups)
	if !b.fits(p, [3]int{32 * sgs, 1, 1}) {
		return
	}
	b.args(argBytes(b, pk.args(2, P, H, I, K, E)))
	b.bind(1, h, false)
	b.bind(2, ids, false)
	b.bindExperts(3, pk, 2)
	b.bind(9, y, true)
	b.bind(10, view{b.step.errBuf, 0, 16}, true)
	b.dispatchGroups(p, [3]int{ceilDiv(H, sgs*rows), P, 1}, [3]int{32 * sgs, 1, 1})

	b.moeCombine(o, y, ids, weights, flags, fold.residual, T, E, K, H)
}

// qmoeGroupedMV encodes a packed block's expert GEMVs with its pairs
// grouped by expert (moePerPair false): moe_group's tiles in the
// strategy's chunks, each at most 8 pairs of one expert, so qmoe_mv reads
// an expert's rows once for all of a tile's pairs (mv_tiles), gate/up with
// fold's norm in its staging, then down, then moe_combine (and fold's
// residual).
func (b *Backend) qmoeGroupedMV(pk *qexperts, xs, o *tensor, ids, weights, flags view, fold moeFold, T, E, K, H, I int,
	mp bridge.MoEParams, tu *Tuning) {
	P := T * K
	cols := min(8, T, moeChunk(mp, P))
	perm, tileList, tiles := b.moeGroup(ids, T, E, K, cols, mp, tu)
	h, y := b.scratchView("moe.h", 4*P*I), b.scratchView("moe.y", 4*P*H)
	rows := tu.QMoEMatVecRows
	for pass := 0; pass < 2; pass++ {
		g, n, k, norm := 0, I, H, fold.g != nil // gate (and up), then down
		if pass == 1 {
			g, n, k, norm = 2, H, I, false
		}
		p := b.pipeline("qmoe_mv_"+quant.KernelName(pk.spec[g]), fcQMoE, int32(rows), int32(cols), boolInt[pass == 0],
			qScaleDT(pk.spec[g]), boolInt[norm], 0, 1)
		if p == nil {
			return // the pipeline's failure is the step's
		}
		sgs := simdgroupsFor(p, tu.QMoESimdgroups)
		if !b.fits(p, [3]int{32 * sgs, 1, 1}) {
			return
		}
		args := pk.args(g, P, n, k, K, E)
		args.Eps = fold.eps
		b.args(argBytes(b, args))
		if pass == 0 {
			b.in(1, xs)
			b.bindExperts(6, pk, 1)
			b.bind(9, h, true)
			if norm {
				b.in(11, fold.g)
			}
		} else {
			b.bind(1, h, false)
			b.bind(9, y, true)
		}
		b.bind(2, ids, false)
		b.bindExperts(3, pk, g)
		b.bind(10, view{b.step.errBuf, 0, 16}, true)
		b.bind(16, perm, false)
		b.bind(17, tileList, false)
		b.dispatchGroups(p, [3]int{ceilDiv(n, sgs*rows), tiles, 1}, [3]int{32 * sgs, 1, 1})
	}
	b.moeCombine(o, y, ids, weights, flags, fold.residual, T, E, K, H)
}

// qmoeTiles encodes the grouped packed MoE: moe_group's tiles of one
// expert's pairs, then qmoe_mm_gate_up (h in expert order) and
// qmoe_mm_down (the weighted rows added into out, and residual) on
// the tuning's QMoETile.
func (b *Backend) qmoeTiles(pk *qexperts, xs, o *tensor, ids, weights, flags view, residual *tensor, T, E, K, H, I int,
	mp bridge.MoEParams, tu *Tuning) {
	t := tu.QMoETile
	perm, tileList, tiles := b.moeGroup(ids, T, E, K, t.BM, mp, tu)
	h := b.scratchView("moe.h", 4*T*K*I)
	for pass := 0; pass < 2; pass++ {
		n, k, g := I, H, 0 // gate (and up), then down
		if pass == 1 {
			n, k, g = H, I, 2
		}
		spec := pk.spec[g]
		mem, stages := qmmMemory(t, 2-pass)
		var p mtl.Pipeline
		if pass == 0 {
			p = b.pipeline("qmoe_mm_gate_up_"+quant.KernelName(spec), fcQMoEMM, int32(t.BM), int32(t.BN), int32(qmmBK), int32(t.SGM),
				int32(t.SGN), int32(stages), qScaleDT(spec))
		} else {
			p = b.pipeline("qmoe_mm_down_"+quant.KernelName(spec), fcQMoEDown, int32(t.BM), int32(t.BN), int32(qmmBK), int32(t.SGM),
				int32(t.SGN), int32(stages), boolInt[residual != nil], qScaleDT(spec))
		}
		tpg := [3]int{t.Threads(), 1, 1}
		if !b.fits(p, tpg) {
			return
		}
		b.args(argBytes(b, pk.args(g, T*K, n, k, K, E)))
		if pass == 0 {
			b.in(1, xs)
		} else {
			b.bind(1, h, false)
		}
		b.bind(2, perm, false)
		b.bind(3, tileList, false)
		b.bindExperts(4, pk, g)
		if pass == 0 {
			b.bindExperts(7, pk, 1)
			b.bind(10, h, true)
		} else {
			b.out(7, o)
			b.bind(8, weights, false)
			b.bind(9, flags, true)
			if residual != nil {
				b.bind(10, residual.view(), true)
			}
		}
		b.threadgroupMemory(mem)
		b.dispatchGroups(p, [3]int{ceilDiv(n, t.BN), tiles, 1}, tpg)
	}
}

// qmoeTile is the grouped packed MoE's untuned tile (ops' metalQMoETile):
// 32 pairs of one expert by 64 outputs, 2 × 2 simdgroups, whose gate and up
// rows (two matrices) stage in 23 KB.
var qmoeTile = Tile{BM: 32, BN: 64, BK: qmmBK, SGM: 2, SGN: 2}

// qmvRows weight rows a simdgroup and qmvSimdgroups simdgroups a
// threadgroup (qmatvec), qRows and qSimdgroups the expert GEMVs' (qmoe_mv):
// every threadgroup stages its activation rows once, which for packed
// weights (a quarter or an eighth of bf16's bytes) is a larger share of the
// traffic than for float ones, so packed GEMVs take large threadgroups. Two
// rows in 32 simdgroups stage as often as four in 16 and launch twice the
// simdgroups, each issuing half the loads in a row (docs/metal-kernels.md,
// "Packed weights").
const (
	qmvRows       = 2
	qmvSimdgroups = 32
	qRows         = 4
	qSimdgroups   = 16
	// maxQMatVecRows is the most rows a packed GEMV's simdgroup takes, as
	// tuned (Tuning.validate) or raised for a pipeline of fewer simdgroups.
	maxQMatVecRows = 4
)

// fcQMoE: rows a simdgroup, activation rows a threadgroup (1, or a tile's
// pairs), SwiGLU, the scale type, what a decode step's gate/up folds in
// (the norm and the routing), and whether the pairs come in moe_group's
// tiles. fcQMoESum: qmoe_mv_sum's rows, columns (1), scale type and
// residual.
var (
	fcQMoE = []fcSpec{{fcMVRows, false}, {fcMVCols, false}, {fcMVSwiGLU, true}, {fcQScaleDT, false}, {fcMVNorm, true}, {fcMVRoute, true},
		{fcMVTiles, true}}
	fcQMoESum = []fcSpec{{fcMVRows, false}, {fcMVCols, false}, {fcQScaleDT, false}, {fcMoEResidual, true}}
)

var (
	_ bridge.QuantBackend = (*Backend)(nil)
	_ bridge.QuantSupport = (*Backend)(nil)
)
