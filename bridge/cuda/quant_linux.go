//go:build linux

package cuda

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/ops"
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

// quantKernelNames are quant.cu's kernels, for the compile test.
func quantKernelNames() []string {
	var n []string
	for _, f := range packedFormats() {
		for _, v := range qgemvVariants {
			n = append(n, "qgemv_"+f+v)
		}
		n = append(n, "qmoe_gate_up_"+f, "qmoe_down_"+f, "qmoe_down_sum_"+f, "qrouter_route1_"+f, "qembed_"+f)
	}
	for _, f := range []string{"affine4", "affine8"} {
		for _, v := range []string{"qagemv_%s_c1_r1", "qagemv_%s_c1_r2", "qagemv_%s_c1_r4", "qagemv_%s_c4_r1", "qagemv_%s_c4_r2",
			"qagemv_am_%s_c1_r1", "qagemv_am_%s_c1_r4",
			"qagemv_gu_%s_c1_r1", "qagemv_gu_%s_c1_r2", "qagemv_gu_%s_c1_r3", "qagemv_gu_%s_c4_r1",
			"qamoe_gate_up_%s_r2", "qamoe_gate_up_%s_r3"} {
			n = append(n, fmt.Sprintf(v, f))
		}
		n = append(n, "qamoe_down_sum_"+f, "qamoe_down_chunks_"+f, "qarouter_route1_"+f)
	}
	return n
}

// packedFormats are the kernel suffixes (quant.KernelName) of the packed
// dtypes (ops.QuantDTypes) that quant.cu has kernels for.
func packedFormats() []string {
	var f []string
	for _, d := range ops.QuantDTypes {
		if q, _ := d.Quant(); hasKernels(q) {
			f = append(f, quant.KernelName(q))
		}
	}
	return f
}

// quant_int.cu's affine kernels (integer dot products): qaXB activation
// values staged a block at a time; qamoe_gate_up takes 2 or 3 gate and up
// rows a warp (qaMoERows), qamoe_down_sum and the router one.
const (
	qaXB   = 8192
	qaMaxK = 64 // QA_MAXK: experts a token
)

// qaFits: the integer kernels take affine rows whose groups are a power of
// two of whole 32-value units (a unit's group is a shift).
func qaFits(s quant.Spec) bool {
	return s.Type == quant.Affine && (s.Bits == 4 || s.Bits == 8) && s.Group%32 == 0 && bits.OnesCount(uint(s.Group/32)) == 1
}

// qaRows is a qagemv launch's rows a warp: the most of choices that still
// gives every SM 16 warps (two blocks) for the grid's y rows, so a small
// matrix is spread over the whole GPU and a large one keeps more loads of a
// warp in flight.
func (b *Backend) qaRows(rows, gy int, choices ...int) int {
	want := b.qaWarps(gy)
	for _, r := range choices {
		if cdiv(rows, r) >= want {
			return r
		}
	}
	return choices[len(choices)-1]
}

// qaWarps is the warps resident at once for a qa launch of gy grid rows:
// two blocks an SM.
func (b *Backend) qaWarps(gy int) int { return max(1, 2*qWarps*max(b.sms, 1)/max(gy, 1)) }

// qaPassRows is a launch's rows a warp that takes the fewest rounds of its
// resident warps over the row groups, and of those the fewest rows: a warp
// that loops back for a second group puts a second chain of loads and dots
// on the kernel's path, which costs more than a third row in the first.
// groups(r) is the launch's row groups at r rows a warp.
func (b *Backend) qaPassRows(gy int, groups func(r int) int, choices ...int) int {
	warps := b.qaWarps(gy)
	best, rounds := 0, 0
	for _, r := range choices {
		n := cdiv(groups(r), warps)
		if best == 0 || n < rounds || n == rounds && r < best {
			best, rounds = r, n
		}
	}
	return best
}

// qaBlocks is a qa launch's grid x: enough blocks for the row groups, at
// most two a multiprocessor over the grid's y rows (each block stages its
// activations once and loops over row groups).
func (b *Backend) qaBlocks(groups, gy int) int {
	return max(1, min(cdiv(groups, qWarps), b.qaWarps(gy)/qWarps))
}

// qaMoERows is qamoe_gate_up's gate and up rows a warp for t tokens of k
// experts each, i rows an expert.
func (b *Backend) qaMoERows(t, k, i int) int {
	return b.qaPassRows(t, func(r int) int { return k * cdiv(i, r) }, 3, 2)
}

// qgemvVariants are the qgemv kernels' activation rows a block (c) and
// weight rows a warp (r), as quant.cu's QKERNELS instantiates them.
var qgemvVariants = []string{"_c1_r1", "_c1_r2", "_c1_r4", "_c4_r2"}

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

// packedBytes copies bytes to the device once per host range (bridge.HostKey).
func (b *Backend) packedBytes(data []byte) (*tensor, error) {
	if len(data) == 0 {
		return b.newTensor(bridge.Packed, []int{0}, 0, nil), nil
	}
	key := bridge.KeyOf(bridge.Packed, data)
	if t := b.cachedWeight(key, []int{len(data)}); t != nil {
		return t, nil
	}
	d, err := b.upload(data)
	if err != nil {
		return nil, err
	}
	t := b.newTensor(bridge.Packed, []int{len(data)}, len(data), d)
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

// quant.cu's blocks: qWarps warps; qCols activation rows a block of
// several; in the expert kernels qmoeRows weight rows a warp, qmoeKS warps
// splitting k in qmoe_gate_up, qmoeDownRows rows a block of qmoe_down_sum.
const (
	qWarps       = 8
	qCols        = 4
	qmoeRows     = 2
	qmoeKS       = 2
	qmoeDownRows = 4
)

func (b *Backend) QMatMul(out, x, w, bias bridge.Tensor) {
	g, ok := b.qgemvOf(out, x, w, bias, true)
	if !ok {
		return
	}
	b.launchQGemv(&g)
}

// routerLogits records a packed router's logits out[m][E] = x·qᵀ with f32
// activations at any m: its top-k would flip near ties under the bf16
// rounding of the tensor-core path.
func (b *Backend) routerLogits(out, x uint64, q *qtensor, m int) {
	g := qgemv{x: x, m: m, k: q.Dims[1], segs: [3]qseg{{q: q, out: out}}, nsegs: 1, exact: true}
	b.launchQGemv(&g)
}

// qUnitValues is the values one lane of quant.cu takes at a time, in every
// format (quant.cu's QUNIT).
const qUnitValues = 32

// qseg is one matrix of a qgemv launch.
type qseg struct {
	q         *qtensor
	bias, out uint64
}

// qgemv is one qgemv launch: up to three matrices of one packing and k
// that read the same x (q, k, v), or with gu gate and up (segs 0 and 1)
// with SwiGLU into seg 0's output.
type qgemv struct {
	x     uint64
	m, k  int
	segs  [3]qseg
	nsegs int
	gu    bool
	// norm: the RMSNorm of x (weight w, output out) folded into the
	// launch's staging (affine matrices only; x is then the norm's input)
	norm struct {
		w, out uint64
		eps    float32
	}
	// exact keeps f32 activations at any m (a router's top-k)
	exact bool
	// argmax, when set, receives the activation row's largest output's
	// index (the ArgmaxOp after a decode step's LM head, folded into its
	// launch: qagemv_am)
	argmax uint64
	// residual, when set, is where a lone matrix's output is added (after
	// its bias) as written; the output is the residual itself. The
	// integer kernels take it (qgemvResidual).
	residual uint64
}

// groups is the launch's groups of r weight rows: each matrix's, or with
// gu the gate's (gate and up rows go together).
func (g *qgemv) groups(r int) int {
	n := 0
	for i, s := range g.segs[:g.nsegs] {
		if !g.gu || i == 0 {
			n += cdiv(s.q.Dims[0], r)
		}
	}
	return n
}

// segArgs appends the three matrices' kernel arguments to a: values,
// scales, biases, bias, output, rows (unused ones repeat the first's
// pointers with no rows).
func (g *qgemv) segArgs(a []uint64) []uint64 {
	s0 := g.segs[0].q.data.ptr
	for i := range 3 {
		if i >= g.nsegs {
			a = append(a, s0, s0, s0, 0, 0, 0)
			continue
		}
		s := g.segs[i]
		sp, bp := s.q.sb()
		a = append(a, s.q.data.ptr, sp, bp, s.bias, s.out, i32(s.q.Dims[0]))
	}
	return a
}

// qgemvOf checks a packed matmul's tensors (reporting errors when report)
// and returns its launch.
func (b *Backend) qgemvOf(out, x, w, bias bridge.Tensor, report bool) (qgemv, bool) {
	var o, xs *tensor
	var q *qtensor
	if report {
		o, xs, q = b.f32Tensor(out, "qmatmul out"), b.f32Tensor(x, "qmatmul x"), b.qtensorOf(w, "qmatmul weight")
	} else {
		o, xs = b.asTensor(out), b.asTensor(x)
		q, _ = w.(*qtensor)
		if o != nil && o.dt != bridge.F32 || xs != nil && xs.dt != bridge.F32 {
			return qgemv{}, false
		}
	}
	if o == nil || xs == nil || q == nil {
		return qgemv{}, false
	}
	n, k := q.Dims[0], q.Dims[1]
	m := xs.n / k
	if xs.n%k != 0 || o.n < m*n {
		if report {
			b.fail("qmatmul: x of %d elements, output of %d for [%d, %d] weights", xs.n, o.n, n, k)
		}
		return qgemv{}, false
	}
	var bp uint64
	if bias != nil {
		bt := b.asTensor(bias)
		if bt == nil || bt.dt != bridge.F32 || bt.n < n {
			if report && bt != nil && bt.dt == bridge.F32 {
				b.fail("qmatmul: bias of %d values for %d outputs a row", bt.n, n)
			} else if report {
				b.fail("qmatmul: bias must be an f32 tensor of %d elements", n)
			}
			return qgemv{}, false
		}
		bp = bt.ptr
	}
	return qgemv{x: xs.ptr, m: m, k: k, segs: [3]qseg{{q: q, bias: bp, out: o.ptr}}, nsegs: 1}, true
}

// qgemvShape picks a launch's weight rows a warp (r), activation rows a block
// (c) and warps splitting k (ks): four rows a warp where that still gives
// every SM a block, fewer and then split-K for short matrices, so small
// projections keep enough loads in flight.
func (b *Backend) qgemvShape(g *qgemv) (r, c, ks int) {
	units := g.k / qUnitValues
	blocks := func(r, ks int) int { return g.groups(qWarps / ks * r) }
	sms := max(b.sms, 1)
	c, r = 1, 1
	switch {
	case g.m > 1:
		c, r = qCols, 2
	case blocks(4, 1) >= sms:
		r = 4
	case blocks(2, 1) >= sms/2:
		r = 2
	}
	ks = 1
	for ks < qWarps && blocks(r, ks) < sms && units >= 64*ks {
		ks *= 2
	}
	return r, c, ks
}

// qgemvRoute is where a qgemv runs: tensor cores (qmma), a persistent
// chain (quant_persist.cu), quant_int.cu's integer kernels, or quant.cu's.
type qgemvRoute int

const (
	routeQGemv qgemvRoute = iota
	routeQMMA
	routeChain
	routeQA
)

// qgemvRoute is g's route; launchQGemv follows it, and the fusions that
// need one kernel family (the argmax's qagemv_am) ask it.
func (b *Backend) qgemvRoute(g *qgemv) qgemvRoute {
	switch {
	case g.norm.w == 0 && b.qmmaTakes(g.m, g.k, g.exact):
		return routeQMMA
	case !qaFits(g.segs[0].q.Spec):
		return routeQGemv
	case b.qcTakes(g):
		return routeChain
	}
	return routeQA
}

// launchQGemv records one qgemv launch.
func (b *Backend) launchQGemv(g *qgemv) {
	if g.m == 0 {
		return
	}
	s0 := g.segs[0]
	route := b.qgemvRoute(g)
	if g.residual != 0 && route != routeQA && route != routeChain {
		b.fail("internal: qgemv: a folded residual off the integer kernels")
		return
	}
	switch route {
	case routeQMMA:
		b.launchQMMA(g)
		return
	case routeChain:
		b.chainQA(g, s0.q.Spec.Bits)
		return
	case routeQA:
		b.launchQAGemv(g)
		return
	}
	r, c, ks := b.qgemvShape(g)
	rows := qWarps / ks * r
	rb, grp, sdt := s0.q.args()
	a := g.segArgs([]uint64{g.x, i32(g.m), i32(g.k), i32(rb), i32(grp), i32(sdt), i32(ks), boolArg(g.gu)})
	name := fmt.Sprintf("qgemv_%s_c%d_r%d", quant.KernelName(s0.q.Spec), c, r)
	b.launch(name, [3]int{g.groups(rows), cdiv(g.m, c), 1}, qWarps*32, a...)
}

// launchQAGemv records a qgemv launch of affine matrices on quant_int.cu's
// integer kernels: one activation row a block, or qCols.
func (b *Backend) launchQAGemv(g *qgemv) {
	s0 := g.segs[0]
	c := 1
	if g.m > 1 {
		c = qCols
	}
	gy := cdiv(g.m, c)
	r := b.qaLaunchRows(g, c)
	rb, grp, sdt := s0.q.args()
	a := g.segArgs([]uint64{g.x, i32(g.m), i32(g.k), i32(rb), i32(grp), i32(sdt)})
	a = append(a, g.norm.w, g.norm.out, f32(g.norm.eps))
	if g.argmax != 0 {
		// The keys and the count are left cleared by the launch's last block.
		a = append(a, g.argmax, b.scratchZeroed("qargmax.keys", int64(g.m)*8), b.scratchZeroed("qargmax.count", 4))
	} else {
		a = append(a, 0, 0, 0)
	}
	a = append(a, g.residual)
	kind := "qagemv"
	switch {
	case g.gu:
		kind = "qagemv_gu"
	case g.argmax != 0:
		kind = "qagemv_am"
	}
	b.launch(fmt.Sprintf("%s_%s_c%d_r%d", kind, quant.KernelName(s0.q.Spec), c, r), [3]int{b.qaBlocks(g.groups(r), gy), gy, 1}, qWarps*32, a...)
}

// qaLaunchRows is a qagemv launch's weight rows a warp with c activation
// rows a block: the rows quant_int.cu instantiates for the variant, the
// most that still fill the GPU (qaRows), or a tuned config's (the qmatmul
// space's rows, looked up by the launch's first matrix: q of q/k/v, gate of
// gate/up).
func (b *Backend) qaLaunchRows(g *qgemv, c int) int {
	var choices []int
	var r int
	switch gy := cdiv(g.m, c); {
	case g.gu && c > 1:
		choices = []int{1}
		r = 1
	case g.gu:
		choices = []int{3, 2, 1}
		r = b.qaPassRows(gy, g.groups, choices...)
	case c == 1:
		choices = []int{4, 2, 1}
		r = b.qaRows(g.groups(1), gy, choices...)
	default:
		choices = []int{2, 1}
		r = b.qaRows(g.groups(1), gy, choices...)
	}
	if t := b.tuned(string(ops.QMatMul), "", matmulDims, g.m, g.segs[0].q.Dims[0], g.k); t != nil {
		if v, ok := configInt(t, ops.KnobRows); ok && slices.Contains(choices, v) {
			r = v
		}
	}
	return r
}

// tryQGemvGroup: packed matmuls of one input and one packing (q, k, v;
// gate and up, with the SiLUMul after them) in one launch.
func (b *Backend) tryQGemvGroup(ops []bridge.Op, span int) (int, bridge.Op) {
	ops = ops[:span]
	mm, ok := ops[0].(*bridge.QMatMulOp)
	if !ok {
		return 0, nil
	}
	g, ok := b.qgemvOf(mm.Out, mm.X, mm.W, mm.Bias, false)
	if !ok {
		return 0, nil
	}
	n := b.growQGemv(&g, ops)
	if n < 2 {
		return 0, nil
	}
	b.launchQGemv(&g)
	return n, nil
}

// growQGemv adds to g (made from ops[0]) the packed matmuls of the same
// input and packing that follow, and a SiLUMul of the first two outputs;
// it returns the ops taken.
func (b *Backend) growQGemv(g *qgemv, ops []bridge.Op) int {
	x := ops[0].(*bridge.QMatMulOp).X
	n := 1
	for ; n < len(ops) && g.nsegs < 3; n++ {
		o, ok := ops[n].(*bridge.QMatMulOp)
		if !ok || o.X != x {
			break
		}
		h, ok := b.qgemvOf(o.Out, o.X, o.W, o.Bias, false)
		hs := h.segs[0]
		if !ok || h.k != g.k || h.m != g.m || hs.q.Spec != g.segs[0].q.Spec || hs.out == g.x {
			break
		}
		dup := false
		for _, s := range g.segs[:g.nsegs] {
			dup = dup || s.out == hs.out
		}
		if dup || g.segs[0].out == g.x {
			break
		}
		g.segs[g.nsegs] = hs
		g.nsegs++
	}
	if g.nsegs == 2 && n < len(ops) {
		if sm, ok := ops[n].(*bridge.SiLUMulOp); ok {
			gate, up, out := b.asTensor(sm.Gate), b.asTensor(sm.Up), b.asTensor(sm.Out)
			s0, s1 := g.segs[0], g.segs[1]
			rows := s0.q.Dims[0]
			if gate != nil && up != nil && out != nil && gate.ptr == s0.out && up.ptr == s1.out && out.ptr == s0.out &&
				rows == s1.q.Dims[0] && out.n == g.m*rows && up.n == out.n {
				g.gu = true
				n++
			}
		}
	}
	return n
}

// qnormGemv records the packed GEMV group after ops[0], an RMSNorm of x
// (weight w) into out, with the norm folded into its staging
// (quant_int.cu); a single token and affine matrices only.
func (b *Backend) qnormGemv(ops []bridge.Op, out, x, w bridge.Tensor, eps float32) (int, bridge.Op) {
	mm, ok := ops[1].(*bridge.QMatMulOp)
	if !ok || out == x || mm.X != out {
		return 0, nil
	}
	o, xs, ws := b.asTensor(out), b.asTensor(x), b.asTensor(w)
	if o == nil || xs == nil || ws == nil || o.dt != bridge.F32 || xs.dt != bridge.F32 || ws.dt != bridge.F32 {
		return 0, nil
	}
	g, ok := b.qgemvOf(mm.Out, mm.X, mm.W, mm.Bias, false)
	if !ok || g.m != 1 || g.k != ws.n || xs.n != g.k || !qaFits(g.segs[0].q.Spec) {
		return 0, nil
	}
	n := 1 + b.growQGemv(&g, ops[1:])
	for _, s := range g.segs[:g.nsegs] {
		if s.out == xs.ptr { // other blocks may still be reading the norm's input
			return 0, nil
		}
	}
	g.x = xs.ptr
	g.norm.w, g.norm.out, g.norm.eps = ws.ptr, o.ptr, eps
	n += b.takeArgmax(&g, mm, ops[n:])
	b.launchQGemv(&g)
	return n, nil
}

// takeArgmax folds the ArgmaxOp that may follow a lone single-row packed
// GEMV (a decode step's LM head) into its launch, where quant_int.cu has a
// qagemv_am kernel for it; it returns the ops taken (0 or 1). Launches of
// more rows keep the argmax apart: folded, they ran slower (docs/cuda.md,
// "The argmax in the LM head").
func (b *Backend) takeArgmax(g *qgemv, mm *bridge.QMatMulOp, rest []bridge.Op) int {
	if len(rest) == 0 || g.m != 1 || g.nsegs != 1 || g.gu || !b.qaArgmaxTakes(g) {
		return 0
	}
	am, ok := rest[0].(*bridge.ArgmaxOp)
	if !ok || am.Logits != mm.Out {
		return 0
	}
	o := b.asTensor(am.Out)
	if o == nil || o.dt != bridge.I32 || o.n != g.m {
		return 0
	}
	g.argmax = o.ptr
	return 1
}

// qaArgmaxTakes reports whether g runs on a quant_int.cu GEMV kernel with a
// qagemv_am twin at the rows a warp it would take.
func (b *Backend) qaArgmaxTakes(g *qgemv) bool {
	if b.qgemvRoute(g) != routeQA {
		return false
	}
	_, ok := b.fns[fmt.Sprintf("qagemv_am_%s_c1_r%d", quant.KernelName(g.segs[0].q.Spec), b.qaLaunchRows(g, 1))]
	return ok
}

// qgemvResidual is tryGemvResidual for a lone single-token packed matmul,
// biased or not: its output is added into the residual in place (read and
// written by the same thread), and the AddRMSNorm is left as an RMSNorm.
func (b *Backend) qgemvResidual(mm *bridge.QMatMulOp, residual bridge.Tensor) bool {
	g, ok := b.qgemvOf(mm.Out, mm.X, mm.W, mm.Bias, false)
	r := b.asTensor(residual)
	if !ok || g.m != 1 || r == nil || r.dt != bridge.F32 || r.n != g.segs[0].q.Dims[0] ||
		!qaFits(g.segs[0].q.Spec) || r.ptr == g.x {
		return false
	}
	g.segs[0].out, g.residual = r.ptr, r.ptr
	b.launchQGemv(&g)
	return true
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
	b.launch("qembed_"+quant.KernelName(q.Spec), [3]int{cdiv(T, 8), 1, 1}, 256, o.ptr, b.metaPtr(b.mo.tokens), q.data.ptr, s, bi,
		i32(T), i32(V), i32(W), i32(rb), i32(g), i32(sdt), b.stats.ptr)
}

// qmoeTable is a MoE layer's expert pointer table for quant.cu: values,
// scales and biases of gate (E each), up, down, in that order of nine.
type qmoeTable struct {
	ptr   uint64
	spec  [3]quant.Spec
	first bridge.Tensor
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
	p, err := b.pointerTable(ptrs)
	if err != nil {
		b.fail("%v", err)
		return nil
	}
	t.ptr = p
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
	b.qmoe(out, x, w, p, qmoeFold{})
}

// qmoeFold is what a packed MoE launch takes in from the ops around it
// (fusion_linux.go): the RMSNorm whose output x is, computed by the router
// kernel from the norm's input (its first block stores x); and the residual
// its down projections add into, in place of out.
type qmoeFold struct {
	normX, normW uint64
	eps          float32
	residual     uint64
}

// qmoeRouterFolds: a single-token MoE whose affine router routes in its
// own kernel (qarouter_route1), which can take the norm in.
func (b *Backend) qmoeRouterFolds(w *bridge.MoEWeights, p bridge.MoEParams, T int) bool {
	rq, ok := w.Router.(*qtensor)
	return ok && T == 1 && !b.opts.NoFuse && !p.Unfused && qaFits(rq.Spec) && rq.Dims[0] == len(w.Gate) && rq.Dims[1] == w.Hidden
}

// qmoeGateUpRoutes: a single token's MoE whose router folds (as for
// qarouter_route1) and whose gate/up experts run on the integer kernels
// routes in qamoe_gate_up, from the logits of a plain router GEMV.
func (b *Backend) qmoeGateUpRoutes(w *bridge.MoEWeights, p bridge.MoEParams, T int, gs quant.Spec) bool {
	return b.qmoeRouterFolds(w, p, T) && qaFits(gs) && w.Hidden <= qaXB && w.TopK <= qaMaxK
}

// qmoeDownFolds: the expert down projections run in qamoe_down_sum (or
// qamoe_down_chunks), which can add into the residual.
func (b *Backend) qmoeDownFolds(w *bridge.MoEWeights, p bridge.MoEParams) bool {
	if len(w.Down) == 0 {
		return false
	}
	d, ok := w.Down[0].(*qtensor)
	return ok && !b.opts.NoFuse && !p.Unfused && qaFits(d.Spec) && w.TopK <= qaMaxK
}

func (b *Backend) qmoe(out, x bridge.Tensor, w *bridge.MoEWeights, p bridge.MoEParams, fold qmoeFold) {
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
	if tab == nil || b.qmoeGrouped(o, xs, w, p, tab, fold, T) {
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
	if b.stepErr != nil {
		return
	}
	stat := min(1+b.moeCalls, statsCap-1)
	b.moeCalls++
	fused := !b.opts.NoFuse && !p.Unfused
	b.subMark("router")
	rq, packedRouter := w.Router.(*qtensor)
	var router *tensor
	if !packedRouter {
		if router = b.tensorOf(w.Router, "qmoe router"); router == nil {
			return
		}
	}
	// One token: the router GEMV routes too (one launch fewer), as MoE's,
	// or with integer expert kernels qamoe_gate_up routes from its logits.
	single := fused && T == 1
	gs := tab.spec[0]
	gateUpRoutes := b.qmoeGateUpRoutes(w, p, T, gs)
	routed := false
	switch {
	case gateUpRoutes:
		g := qgemv{x: xs.ptr, m: 1, k: H, segs: [3]qseg{{q: rq, out: logits}}, nsegs: 1, exact: true}
		if fold.normW != 0 {
			g.x, g.norm.w, g.norm.out, g.norm.eps = fold.normX, fold.normW, xs.ptr, fold.eps
		}
		b.launchQGemv(&g)
		routed = true
	case single && packedRouter && rq.Dims[0] == E && rq.Dims[1] == H && qaFits(rq.Spec):
		s, bi := rq.sb()
		rb, g, sdt := rq.args()
		// With the norm folded in, the router reads the norm's input and
		// its first block stores x for the expert kernels after it.
		rx, nh := xs.ptr, uint64(0)
		if fold.normW != 0 {
			rx, nh = fold.normX, xs.ptr
		}
		b.launch("qarouter_route1_"+quant.KernelName(rq.Spec), [3]int{b.qaBlocks(E, 1), 1, 1}, qWarps*32,
			rx, rq.data.ptr, s, bi, logits, i32(H), i32(E), i32(K), boolArg(w.NormTopK), i32(rb), i32(g), i32(sdt), ids, wts,
			slotExpert, slotStart, slotCount, pairs, b.stats.ptr, i32(stat), b.scratchZeroed("qmoe.route_counter", 4),
			fold.normW, nh, f32(fold.eps))
		routed = true
	case single && packedRouter && rq.Dims[0] == E && rq.Dims[1] == H && H%qUnitValues == 0:
		s, bi := rq.sb()
		rb, g, sdt := rq.args()
		b.launch("qrouter_route1_"+quant.KernelName(rq.Spec), [3]int{cdiv(E, qWarps), 1, 1}, qWarps*32, xs.ptr, rq.data.ptr, s, bi,
			logits, i32(H), i32(E), i32(K), boolArg(w.NormTopK), i32(rb), i32(g), i32(sdt), ids, wts, slotExpert, slotStart,
			slotCount, pairs, b.stats.ptr, i32(stat), b.scratchZeroed("qmoe.route_counter", 4))
		routed = true
	case single && !packedRouter && H%8 == 0 && router.dt != bridge.I32 && len(router.shape) == 2 && router.shape[0] == E && router.shape[1] == H:
		b.launch("moe_router_route1_"+dtName(router.dt), [3]int{cdiv(E, 8), 1, 1}, 256, xs.ptr, router.ptr, logits,
			i32(H), i32(E), i32(K), boolArg(w.NormTopK), ids, wts, slotExpert, slotStart, slotCount, pairs, b.stats.ptr,
			i32(stat), b.scratchZeroed("moe.route_counter", 4))
		routed = true
	case fused && !packedRouter && routerRoutes(router, T, E, H):
		b.launchRouterRoute(xs.ptr, router, logits, T, H, E, K, w.NormTopK, P, min(E, P), ids, wts, slotExpert, slotStart,
			slotCount, pairs, stat)
		routed = true
	case packedRouter:
		b.routerLogits(logits, xs.ptr, rq, T)
	default:
		b.matmul(logits, xs.ptr, router, 0, T, E, H, true)
	}
	if fold.normW != 0 && !routed {
		b.fail("internal: qmoe: a folded norm without its router kernel")
		return
	}
	b.subMark("route")
	switch {
	case routed:
	case T == 1:
		b.launch("moe_route1", [3]int{1, 1, 1}, 32, logits, i32(E), i32(K), boolArg(w.NormTopK),
			ids, wts, slotExpert, slotStart, slotCount, pairs, b.stats.ptr, i32(stat))
	default:
		b.launch("moe_route", [3]int{1, 1, 1}, 1024, logits, i32(T), i32(E), i32(K), boolArg(w.NormTopK), i32(P), i32(min(E, P)),
			ids, wts, slotExpert, slotStart, slotCount, pairs, b.stats.ptr, i32(stat))
	}
	b.subMark("gate_up")
	if qaFits(gs) && H <= qaXB {
		a := []uint64{xs.ptr, hbuf, tab.ptr, ids, i32(H), i32(I), i32(K), i32(E), i32(gs.RowBytes(H)),
			i32(max(gs.Groups(H), 1)), i32(int(gs.Scale)), b.stats.ptr}
		if gateUpRoutes {
			a = append(a, logits, boolArg(w.NormTopK), wts, slotExpert, slotStart, slotCount, pairs, i32(stat))
		} else {
			a = append(a, 0, 0, 0, 0, 0, 0, 0, 0)
		}
		r := b.qaMoERows(T, K, I)
		b.launch(fmt.Sprintf("qamoe_gate_up_%s_r%d", quant.KernelName(gs), r), [3]int{b.qaBlocks(K*cdiv(I, r), T), T, 1}, qWarps*32, a...)
	} else {
		b.launch("qmoe_gate_up_"+quant.KernelName(gs), [3]int{cdiv(I, qWarps/qmoeKS*qmoeRows), P, 1}, qWarps*32, xs.ptr, hbuf, tab.ptr, ids,
			i32(H), i32(I), i32(K), i32(E), i32(gs.RowBytes(H)), i32(max(gs.Groups(H), 1)), i32(int(gs.Scale)), b.stats.ptr)
	}
	b.subMark("down")
	ds := tab.spec[2]
	if fold.residual != 0 && !(fused && qaFits(ds) && K <= qaMaxK) {
		b.fail("internal: qmoe: a folded residual without qamoe_down_sum or qamoe_down_chunks")
		return
	}
	if fused && qaFits(ds) && K <= qaMaxK {
		dst := o.ptr
		if fold.residual != 0 {
			dst = fold.residual
		}
		// A token's k rows of h staged once a block, or in chunks
		// (qamoe_down_chunks) when they are more than a stage holds.
		name := "qamoe_down_sum_"
		if K*I > qaXB {
			name = "qamoe_down_chunks_"
		}
		b.launch(name+quant.KernelName(ds), [3]int{b.qaBlocks(H, T), T, 1}, qWarps*32, hbuf, dst, tab.ptr, ids,
			wts, i32(H), i32(I), i32(K), i32(E), i32(ds.RowBytes(I)), i32(max(ds.Groups(I), 1)), i32(int(ds.Scale)), b.stats.ptr,
			fold.residual)
		return
	}
	if fused {
		// The down projections and the weighted sum of the k experts in one
		// launch, a block row of tokens.
		b.launch("qmoe_down_sum_"+quant.KernelName(ds), [3]int{cdiv(H, qmoeDownRows), T, 1}, qWarps*32, hbuf, o.ptr, tab.ptr, ids,
			wts, i32(H), i32(I), i32(K), i32(E), i32(ds.RowBytes(I)), i32(max(ds.Groups(I), 1)), i32(int(ds.Scale)), b.stats.ptr)
		return
	}
	y := b.scratchBuf("moe.y", int64(P)*int64(H)*4)
	if b.stepErr != nil {
		return
	}
	b.launch("qmoe_down_"+quant.KernelName(ds), [3]int{cdiv(H, qWarps*qmoeRows), P, 1}, qWarps*32, hbuf, y, tab.ptr, ids,
		i32(H), i32(I), i32(E), i32(ds.RowBytes(I)), i32(max(ds.Groups(I), 1)), i32(int(ds.Scale)), b.stats.ptr)
	b.launch("moe_combine", [3]int{T, cdiv(H, 256), 1}, 256, o.ptr, y, wts, i32(H), i32(K))
}

var (
	_ bridge.QuantBackend = (*Backend)(nil)
	_ bridge.QuantSupport = (*Backend)(nil)
)
