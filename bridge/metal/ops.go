package metal

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// dtName is a weight dtype's kernel suffix.
func dtName(dt bridge.DType) string {
	switch dt {
	case bridge.F32:
		return "f32"
	case bridge.F16:
		return "f16"
	case bridge.BF16:
		return "bf16"
	}
	return ""
}

// Kernel names by weight dtype, built once (no string concatenation per
// dispatch).
var (
	embeddingKernel   = map[bridge.DType]string{bridge.F32: "embedding_f32", bridge.F16: "embedding_f16", bridge.BF16: "embedding_bf16"}
	matvecKernel      = map[bridge.DType]string{bridge.F32: "matvec_f32", bridge.F16: "matvec_f16", bridge.BF16: "matvec_bf16"}
	matvecFusedKernel = map[bridge.DType]string{bridge.F32: "matvec_fused_f32", bridge.F16: "matvec_fused_f16", bridge.BF16: "matvec_fused_bf16"}
	routerRouteKernel = map[bridge.DType]string{bridge.F32: "moe_router_route_f32", bridge.F16: "moe_router_route_f16",
		bridge.BF16: "moe_router_route_bf16"}
	matmulKernel = map[bridge.DType]string{bridge.F32: "matmul_f32", bridge.F16: "matmul_f16", bridge.BF16: "matmul_bf16"}
	moeKernels   = map[bridge.DType][4]string{}
	// moeBlockKernels: a decode step's float MoE block (moe_mv_pair, moe_mv_sum).
	moeBlockKernels = map[bridge.DType][2]string{}
	// Attention by head size, query heads per threadgroup and KV cache dtype.
	attnKernel    = map[attnKey]string{}
	prefillKernel = map[attnKey]string{}
	kvWriteKernel = map[bridge.DType]string{bridge.F32: "kv_write_f32", bridge.F16: "kv_write_f16", bridge.BF16: "kv_write_bf16"}
)

// attnHeadSizes are the head sizes the decode attention is instantiated
// for; a head of another size (at most the largest) runs in the next larger
// one with the lanes past it idle (attn_padded). The tiled prefill (8x8
// tiles along the head) has kernels of prefillHeadSizes; longer queries of
// other sizes take the decode kernel.
var (
	attnHeadSizes    = []int{32, 64, 96, 128, 256}
	prefillHeadSizes = []int{16, 32, 48, 64, 80, 96, 128, 256}
)

// attnKernelSize is the instantiated head size a head of d elements runs
// in: the smallest at least d, or 0 when d is larger than them all.
func attnKernelSize(d int) int {
	for _, s := range attnHeadSizes {
		if d <= s {
			return s
		}
	}
	return 0
}

// moeMaxTopK is the most experts a token is routed to: the routing keeps
// its picks in threadgroup arrays of 32 (moe.metal, route_token).
const moeMaxTopK = 32

// moeGroupBytes is moe_group's threadgroup memory an expert (its counting
// sort's 4 uints); the kernel keeps a few more bytes of its own.
const moeGroupBytes = 16

// CheckShape refuses, before any weight is loaded, a model whose heads are
// larger than the attention kernels hold, whose experts are more than the
// grouping sorts in a threadgroup's memory, or whose tokens go to more
// experts than the routing picks (bridge.ShapeChecker).
func (b *Backend) CheckShape(s bridge.ModelShape) error {
	if s.HeadDim > 0 && attnKernelSize(s.HeadDim) == 0 {
		return fmt.Errorf("metal: heads of %d values: the attention kernels take at most %d", s.HeadDim, attnHeadSizes[len(attnHeadSizes)-1])
	}
	if s.Experts == 0 {
		return nil
	}
	if most := b.dev.MaxThreadgroupMemoryLength()/moeGroupBytes - 1; s.Experts > most {
		return fmt.Errorf("metal: %d experts: the grouping takes at most %d in this device's %d bytes of threadgroup memory", s.Experts, most, b.dev.MaxThreadgroupMemoryLength())
	}
	if s.TopK > moeMaxTopK {
		return fmt.Errorf("metal: top-%d of %d experts: the routing takes at most %d experts a token", s.TopK, s.Experts, moeMaxTopK)
	}
	return nil
}

type attnKey struct {
	d, qh int
	kv    bridge.DType
}

func init() {
	for dt, s := range map[bridge.DType]string{bridge.F32: "f32", bridge.F16: "f16", bridge.BF16: "bf16"} {
		moeKernels[dt] = [4]string{"moe_mv_gate_up_" + s, "moe_mv_down_" + s, "moe_mm_gate_up_" + s, "moe_mm_down_" + s}
		moeBlockKernels[dt] = [2]string{"moe_mv_pair_" + s, "moe_mv_sum_" + s}
	}
	for _, kv := range KVDTypes {
		for _, d := range attnHeadSizes {
			for _, qh := range []int{1, 2, 4, 8} {
				attnKernel[attnKey{d, qh, kv}] = "paged_attention_d" + strconv.Itoa(d) + "_q" + strconv.Itoa(qh) + "_" + dtName(kv)
			}
		}
		for _, d := range prefillHeadSizes {
			prefillKernel[attnKey{d, 0, kv}] = "paged_attention_prefill_d" + strconv.Itoa(d) + "_" + dtName(kv)
		}
	}
}

// checkF32 fails the step when an activation is not f32.
func (b *Backend) checkF32(op string, ts ...*tensor) bool {
	for _, t := range ts {
		if t != nil && t.dt != bridge.F32 {
			b.fail("%s: %v tensor where f32 is expected", op, t.dt)
			return false
		}
	}
	return true
}

func (b *Backend) Embedding(out, table bridge.Tensor) {
	o, tb := tt(out), tt(table)
	if !b.checkF32("embedding", o) {
		return
	}
	name := b.tableKernel("embedding", tb, embeddingKernel)
	if name == "" {
		return
	}
	T, dim := b.step.sec.numTokens, tb.shape[1]
	if o.n < T*dim {
		b.fail("embedding: output of %d elements for %d tokens of %d", o.n, T, dim)
		return
	}
	b.tableRows(name, tb, b.metaView(b.step.sec.tokens, T), T, o)
}

// tableKernel checks a row table (token or position embeddings) the one
// way for its ops and names the kernel of its dtype; "" when it failed.
func (b *Backend) tableKernel(op string, tb *tensor, kernels map[bridge.DType]string) string {
	if len(tb.shape) != 2 {
		b.fail("%s: table of shape %v", op, tb.shape)
		return ""
	}
	name := kernels[tb.dt]
	if name == "" {
		b.fail("%s: %v table", op, tb.dt)
	}
	return name
}

// tableRows dispatches a row-table kernel (embedding_*, position_embedding_*,
// one argument layout) over T rows of tb picked by the indices idx into dst.
func (b *Backend) tableRows(name string, tb *tensor, idx view, T int, dst *tensor) {
	dim := tb.shape[1]
	p := b.pipeline(name, fcNone)
	b.args(argBytes(b, embedArgs{Tokens: uint32(T), Dim: uint32(dim), Vocab: uint32(tb.shape[0])}))
	b.bind(1, idx, false)
	b.in(2, tb)
	b.out(3, dst)
	b.bind(4, view{b.step.errBuf, 0, 16}, true)
	b.dispatchThreads(p, [3]int{dim, T, 1}, [3]int{min(dim, b.tuning.EltThreads), 1, 1})
}

func (b *Backend) GatherRows(out, x bridge.Tensor) {
	o, xs := tt(out), tt(x)
	if !b.checkF32("gather_rows", o, xs) {
		return
	}
	sec := b.step.sec
	if sec.numRows == 0 || sec.numTokens == 0 {
		return
	}
	dim := xs.n / sec.numTokens
	p := b.pipeline("gather_rows", fcNone)
	b.args(argBytes(b, gatherArgs{Rows: uint32(sec.numRows), Dim: uint32(dim), SrcRows: uint32(sec.numTokens)}))
	b.bind(1, b.metaView(sec.logitRows, sec.numRows), false)
	b.in(2, xs)
	b.out(3, o)
	b.dispatchThreads(p, [3]int{dim, sec.numRows, 1}, [3]int{min(dim, b.tuning.EltThreads), 1, 1})
}

// normThreads sizes a row-reduction threadgroup of p: the tuning's, else
// a thread per four elements, in whole simdgroups (ops.MetalNormThreads);
// at most what p takes, as the norms stride over their row with any number
// of simdgroups (a pipeline heavy in registers may take fewer than the
// device's 1024).
func normThreads(p mtl.Pipeline, tu *Tuning, dim int) int {
	n := tu.NormThreads
	if n <= 0 {
		n = ops.MetalNormThreads(dim)
	}
	return threadsFor(p, n)
}

// normVec reports whether a norm over rows of dim moves float4s (norm_vec,
// kernels/metal/norm.h): every row of every operand starts on 16 bytes.
func normVec(dim int, ts ...*tensor) bool {
	if !ops.MetalNormVec(dim) {
		return false
	}
	for _, t := range ts {
		if t != nil && t.off%16 != 0 {
			return false
		}
	}
	return true
}

func (b *Backend) RMSNorm(out, x, w bridge.Tensor, eps float32) {
	b.norm(ops.RMSNorm, tt(out), nil, tt(x), tt(w), nil, eps)
}

func (b *Backend) AddRMSNorm(out, residual, x, w bridge.Tensor, eps float32) {
	b.norm(ops.AddRMSNorm, tt(out), tt(residual), tt(x), tt(w), nil, eps)
}

// norm encodes a row norm: rms_norm, or layer_norm with its bias bs, each
// adding x into the residual r first where r is set (add_rms_norm,
// add_layer_norm). One threadgroup a row (docs/metal-kernels.md).
func (b *Backend) norm(op ops.ID, o, r, xs, ws, bs *tensor, eps float32) {
	if !b.checkF32(string(op), o, r, xs, ws, bs) {
		return
	}
	biased := op == ops.LayerNorm || op == ops.AddLayerNorm
	if ws == nil || biased && (bs == nil || bs.n != ws.n) {
		b.fail("%s: a weight and a bias of one length are needed", op)
		return
	}
	dim := ws.n
	rows := xs.n / dim
	if rows == 0 {
		return
	}
	if o.n < rows*dim || (r != nil && r.n < rows*dim) {
		b.fail("%s: %d rows of %d do not fit the output", op, rows, dim)
		return
	}
	vec := normVec(dim, o, r, xs, ws, bs)
	p := b.pipeline(string(op), fcNorm, boolInt[vec])
	tpg := [3]int{normThreads(p, b.tuned(op, "", rowDims, rows, dim), dim), 1, 1}
	b.args(argBytes(b, normArgs{Rows: uint32(rows), Dim: uint32(dim), Eps: eps}))
	i := 1
	if r != nil {
		b.bind(1, r.view(), true)
		i = 2
	}
	b.in(i, xs)
	b.in(i+1, ws)
	if biased {
		b.in(i+2, bs)
		i++
	}
	b.out(i+2, o)
	b.dispatchGroups(p, [3]int{rows, 1, 1}, tpg)
}

func (b *Backend) MatMul(out, x, w, bias bridge.Tensor) {
	o, xs, ws, bs := tt(out), tt(x), tt(w), tt(bias)
	if !b.checkF32("matmul", o, xs, bs) {
		return
	}
	if len(ws.shape) != 2 {
		b.fail("matmul: weight of shape %v", ws.shape)
		return
	}
	n, k := ws.shape[0], ws.shape[1]
	m, bv, ok := b.matmulOperands("matmul", o, xs, bs, n, k)
	if !ok {
		return
	}
	b.matmul(o.view(), xs.view(), m, ws, bv)
}

// matmulOperands checks a float or packed matmul's output and bias against
// its n x k weight the one way for both; it returns x's rows and the bias.
func (b *Backend) matmulOperands(name string, o, xs, bs *tensor, n, k int) (m int, bv view, ok bool) {
	m = xs.n / k
	if o.n < m*n {
		b.fail("%s: output of %d elements for %dx%d", name, o.n, m, n)
		return 0, view{}, false
	}
	if bs != nil && bs.n < n {
		b.fail("%s: bias of %d values for %d outputs a row", name, bs.n, n)
		return 0, view{}, false
	}
	if bs != nil {
		bv = bs.view()
	}
	return m, bv, true
}

// matmul encodes out[m][n] = x[m][k] * w^T (+ bias when bias.buf is set).
func (b *Backend) matmul(out, x view, m int, w *tensor, bias view) {
	n, k := w.shape[0], w.shape[1]
	if m == 0 || n == 0 {
		return
	}
	hasBias := boolInt[bias.buf != nil]
	tu := b.matmulTuning(w.dt, m, n, k)
	if m <= tu.MatVecMaxM {
		name := matvecKernel[w.dt]
		if name == "" {
			b.fail("matmul: %v weights", w.dt)
			return
		}
		rows, sgs := tu.MatVecRows, tu.MatVecSimdgroups
		p := b.pipeline(name, fcMatVec, hasBias, int32(rows), int32(m))
		sgs = simdgroupsFor(p, sgs)
		if !b.fits(p, [3]int{32 * sgs, 1, 1}) {
			return
		}
		b.args(argBytes(b, matArgs{M: uint32(m), N: uint32(n), K: uint32(k)}))
		b.bind(1, x, false)
		b.in(2, w)
		b.bind(3, out, true)
		if bias.buf != nil {
			b.bind(4, bias, false)
		}
		b.dispatchGroups(p, [3]int{ceilDiv(n, sgs*rows), 1, 1}, [3]int{32 * sgs, 1, 1})
		return
	}
	name := matmulKernel[w.dt]
	if name == "" {
		b.fail("matmul: %v weights", w.dt)
		return
	}
	t := tu.MatMulTile
	mem, stages, ok := b.tileMemory("matmul", t, 1, w.dt)
	if !ok {
		return
	}
	p := b.pipeline(name, fcMatMul, hasBias, int32(t.BM), int32(t.BN), int32(t.BK), int32(t.SGM), int32(t.SGN), int32(stages))
	if !b.fits(p, [3]int{t.Threads(), 1, 1}) {
		return
	}
	b.args(argBytes(b, matArgs{M: uint32(m), N: uint32(n), K: uint32(k)}))
	b.bind(1, x, false)
	b.in(2, w)
	b.bind(3, out, true)
	if bias.buf != nil {
		b.bind(4, bias, false)
	}
	b.threadgroupMemory(mem)
	b.dispatchGroups(p, [3]int{ceilDiv(n, t.BN), ceilDiv(m, t.BM), 1}, [3]int{t.Threads(), 1, 1})
}

// stageSize is the bytes one weight element of dt takes staged in a GEMM
// tile (gemm.h mm_stage): its own, but bf16 is widened to f32 before MSL
// 3.1, which has no bfloat.
func (b *Backend) stageSize(dt bridge.DType) int {
	if dt == bridge.BF16 && b.lang < "3.1" {
		return 4
	}
	return dt.Size()
}

// StageBytes is stageSize for a dtype's name (0 for one that is not a
// float dtype: packed formats stage as their kernels' spaces say); the
// tuning spaces size their tiles by it (runner/tune.Stager).
func (b *Backend) StageBytes(dtype string) int {
	dt, err := bridge.ParseDType(dtype)
	if err != nil || dt == bridge.I32 {
		return 0
	}
	return b.stageSize(dt)
}

// tileMemory is the threadgroup memory and staging buffers of tile t with
// mats weight matrices of dt (ops.MetalTileMemory: double buffered where
// that fits); a tile whose one stage does not fit fails the step.
func (b *Backend) tileMemory(what string, t Tile, mats int, dt bridge.DType) (bytes, stages int, ok bool) {
	bytes, stages = t.memory(mats, b.stageSize(dt))
	if bytes > tileMemory {
		b.fail("%s tile %v: %d bytes of threadgroup memory for %v weights exceed 31 KiB", what, t, bytes, dt)
		return 0, 0, false
	}
	return bytes, stages, true
}

// ropeFreqs returns rot's frequencies for heads of headDim as the reference
// computes them, in a buffer made once.
func (b *Backend) ropeFreqs(headDim int, rot kernels.Rotary) *tensor {
	if err := rot.Check(headDim); err != nil {
		b.fail("rope: %v", err)
		return nil
	}
	key := rot.Key(headDim)
	if t := b.invFreq[key]; t != nil {
		return t
	}
	f := rot.InvFreq(headDim)
	data := make([]byte, 4*len(f))
	for i, v := range f {
		u := math.Float32bits(v)
		data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	t, err := b.Weight(bridge.F32, []int{len(f)}, data)
	if err != nil {
		b.fail("rope: %v", err)
		return nil
	}
	b.invFreq[key] = t.(*tensor)
	return t.(*tensor)
}

func (b *Backend) RoPE(q, k, qNorm, kNorm bridge.Tensor, heads, kvHeads, headDim int, rot kernels.Rotary, eps float32) {
	qs, ks, qn, kn := tt(q), tt(k), tt(qNorm), tt(kNorm)
	if !b.checkF32("rope", qs, ks, qn, kn) {
		return
	}
	if headDim%2 != 0 || (qn == nil) != (kn == nil) {
		b.fail("rope: head size %d, q norm %v, k norm %v", headDim, qn != nil, kn != nil)
		return
	}
	T := b.step.sec.numTokens
	if T == 0 {
		return
	}
	freqs := b.ropeFreqs(headDim, rot)
	if freqs == nil {
		return
	}
	norm := boolInt[qn != nil]
	p := b.pipeline("rope_qk", fcRoPE, norm)
	b.args(argBytes(b, ropeArgs{Tokens: uint32(T), Heads: uint32(heads), KVHeads: uint32(kvHeads), HeadDim: uint32(headDim), Eps: eps}))
	b.bind(1, qs.view(), true)
	b.bind(2, ks.view(), true)
	if qn != nil {
		b.in(3, qn)
		b.in(4, kn)
	}
	b.bind(5, b.metaView(b.step.sec.positions, T), false)
	b.in(6, freqs)
	nh := simdgroupsFor(p, b.tuning.RoPEHeads) // a head a simdgroup: any number will do
	b.dispatchGroups(p, [3]int{ceilDiv(heads+kvHeads, nh), T, 1}, [3]int{32 * nh, 1, 1})
}

func (b *Backend) Attention(out, q, k, v bridge.Tensor, cache bridge.KVCache, heads, kvHeads, headDim int, scale float32, window int) {
	b.attention(out, q, k, v, cache, heads, kvHeads, headDim, scale, window, nil)
}

// RunsWindows: the attention kernels start at a sliding window's first key
// (AttnArgs.window; bridge.WindowRunner).
func (b *Backend) RunsWindows() bool { return true }

// attnRoPE is the RoPE a decode attention takes in (fusion.go).
type attnRoPE struct {
	freqs, qn, kn *tensor
	eps           float32
}

// prefillTiled reports whether attention runs a step of queries of at most
// maxQuery tokens through the tiled prefill kernel, which needs the step's
// keys in the cache first (kv_write), so no RoPE can be folded into it.
func prefillTiled(tu *Tuning, maxQuery, blockSize, headDim int, kvdt bridge.DType) bool {
	return tu.AttnPrefillMinQuery > 0 && maxQuery >= tu.AttnPrefillMinQuery && blockSize%prefillRows == 0 &&
		prefillKernel[attnKey{headDim, 0, kvdt}] != ""
}

// attention encodes paged attention, with rope applied to q and the new k
// when set (decode steps with the KV write inside the attention only).
func (b *Backend) attention(out, q, k, v bridge.Tensor, cache bridge.KVCache, heads, kvHeads, headDim int, scale float32, window int, rope *attnRoPE) {
	o, qs, ks, vs, kc, vc := tt(out), tt(q), tt(k), tt(v), tt(cache.K), tt(cache.V)
	if !b.checkF32("attention", o, qs, ks, vs) {
		return
	}
	kvdt := kc.dt
	if vc.dt != kvdt || kvWriteKernel[kvdt] == "" {
		b.fail("attention: KV cache of %v keys and %v values (want both f32, f16 or bf16)", kc.dt, vc.dt)
		return
	}
	D, BS := headDim, cache.BlockSize
	if window < 0 {
		b.fail("attention: sliding window %d (0: none)", window)
		return
	}
	if kvHeads <= 0 || heads%kvHeads != 0 || BS <= 0 {
		b.fail("attention: %d heads over %d kv heads, block size %d", heads, kvHeads, BS)
		return
	}
	s := &b.step
	m, sec := s.meta, s.sec
	T := sec.numTokens
	if T == 0 {
		return
	}
	// The most keys a query token reads: its context, or with a sliding
	// window at most the window. paged_attention numbers a token's
	// partitions from its own first key, so the split-K grid and scratch
	// cover these and not the positions before the window
	// (docs/metal-kernels.md, "Sliding windows").
	keys := max(kernels.QueryKeys(m.MaxSeqLen, window), 1)
	// Decode steps take the decode kernel's config at the longest
	// sequence's cached context (the keys it reads but its own), steps with
	// longer queries the prefill's.
	var tu *Tuning
	if m.MaxQueryLen <= 1 {
		tu = b.tuned(ops.PagedAttentionDecode, "", decodeDims, sec.numSeqs, max(keys-1, 1), heads, kvHeads, D, BS)
	} else {
		tu = b.tuned(ops.PagedAttentionPrefill, "", prefillDims, sec.numSeqs, m.MaxQueryLen, heads, kvHeads, D, BS)
	}
	qh := ops.MetalAttnGroupHeads(heads/kvHeads, tu.AttnHeadsPerGroup)
	KD := attnKernelSize(D)
	name := attnKernel[attnKey{KD, qh, kvdt}]
	if name == "" || D <= 0 {
		b.fail("attention: head size %d (at most %d)", D, attnHeadSizes[len(attnHeadSizes)-1])
		return
	}
	if m.BlockSize != 0 && m.BlockSize != BS {
		b.fail("attention: cache block size %d, step metadata says %d", BS, m.BlockSize)
		return
	}
	parts, psize := 1, keys
	if tu.AttnPartitions > 0 {
		parts = min(tu.AttnPartitions, keys)
		psize = ceilDiv(keys, parts)
		parts = ceilDiv(keys, psize)
	} else if tu.AttnPartitionSize > 0 && keys > tu.AttnPartitionSize {
		// As many partitions as take at most AttnPartitionSize keys each,
		// the keys spread evenly over them: 513 keys are two of 257, not
		// 512 and the one that leaves the first's simdgroups the critical
		// path (docs/metal-kernels.md, "Decode attention at short contexts").
		parts = ceilDiv(keys, tu.AttnPartitionSize)
		psize = ceilDiv(keys, parts)
	}
	partitioned := parts > 1
	tiled := prefillTiled(tu, m.MaxQueryLen, BS, D, kvdt)
	a := attnArgs{NumTokens: uint32(T), NumSeqs: uint32(sec.numSeqs), Heads: uint32(heads), KVHeads: uint32(kvHeads),
		HeadDim: uint32(D), BlockSize: uint32(BS), MaxBlocks: uint32(m.MaxBlocks), NumBlocks: uint32(kc.n / (kvHeads * BS * D)),
		PartitionSize: uint32(psize), NumPartitions: uint32(parts), HeadsPerGroup: uint32(qh), Scale: scale}
	if window <= math.MaxInt32 { // a longer one than int32 positions reach slides nothing
		a.Window = uint32(window)
	}
	if rope != nil && (tu.AttnTwoPhase || tiled || m.MaxQueryLen > 1) {
		b.fail("internal: RoPE fused into an attention that reads new keys from the cache")
		return
	}
	if rope != nil {
		a.Eps = rope.eps
	}
	if tu.AttnTwoPhase || tiled {
		pw := b.pipeline(kvWriteKernel[kvdt], fcNone)
		b.args(argBytes(b, a))
		b.in(1, ks)
		b.in(2, vs)
		b.out(3, kc)
		b.out(4, vc)
		b.bind(5, b.metaView(sec.slots, T), false)
		b.bind(6, view{s.errBuf, 0, 16}, true)
		b.dispatchThreads(pw, [3]int{D, kvHeads, T}, [3]int{D, 1, 1})
	}
	if tiled {
		b.prefill(tu, a, o, qs, kc, vc)
		return
	}
	p := b.pipeline(name, fcAttn, boolInt[partitioned], boolInt[!tu.AttnTwoPhase], boolInt[rope != nil], boolInt[rope != nil && rope.qn != nil],
		boolInt[KD != D])
	// Simdgroups walking a few keys each of the partition, their (o, m, l)
	// meeting in rounds of the slots threadgroup memory holds.
	nsg := simdgroupsFor(p, ops.MetalAttnSimdgroups(tu.AttnSimdgroups, psize))
	mem, slots := ops.MetalAttnMemory(nsg, qh, D, 32<<10)
	if slots == 0 {
		b.fail("attention: %d query heads of size %d take %d bytes of threadgroup memory", qh, D, mem)
		return
	}
	if !b.fits(p, [3]int{32 * nsg, 1, 1}) {
		return
	}
	a.MergeSlots = uint32(slots)
	b.args(argBytes(b, a))
	b.in(1, qs)
	b.in(2, ks)
	b.in(3, vs)
	// The cache is written (the new keys, unless two-phase) and read.
	b.bind(4, kc.view(), !tu.AttnTwoPhase)
	b.bind(5, vc.view(), !tu.AttnTwoPhase)
	b.bind(6, b.metaView(sec.blockTable, sec.numSeqs*m.MaxBlocks), false)
	b.bind(7, b.metaView(sec.seqLens, sec.numSeqs), false)
	b.bind(8, b.metaView(sec.queryStart, sec.numSeqs+1), false)
	b.bind(9, b.metaView(sec.tokenSeq, T), false)
	b.bind(10, b.metaView(sec.slots, T), false)
	var partO, partML view
	if partitioned {
		partO = b.scratchView("attn.part_o", 4*T*heads*parts*D)
		partML = b.scratchView("attn.part_ml", 4*T*heads*parts*2)
		b.bind(11, partO, true)
		b.bind(12, partML, true)
	} else {
		b.out(11, o)
	}
	b.bind(13, view{s.errBuf, 0, 16}, true)
	b.bind(17, b.metaView(sec.tokenPos, T), false)
	if rope != nil {
		b.in(14, rope.freqs)
		if rope.qn != nil {
			b.in(15, rope.qn)
			b.in(16, rope.kn)
		}
	}
	b.threadgroupMemory(mem)
	b.dispatchGroups(p, [3]int{T, heads / qh, parts}, [3]int{32 * nsg, 1, 1})
	if !partitioned {
		return
	}
	pr := b.pipeline("paged_attention_reduce", fcNone)
	if pr == nil {
		return
	}
	// A simdgroup per 32 head elements, and as many heads a threadgroup as
	// fill a load of their partitions' (m, l) pairs.
	hr := ops.MetalAttnReduceHeads(parts, D, heads, pr.MaxTotalThreadsPerThreadgroup())
	b.args(argBytes(b, a))
	b.bind(1, partO, false)
	b.bind(2, partML, false)
	b.bind(3, b.metaView(sec.tokenPos, T), false)
	b.out(4, o)
	b.threadgroupMemory(ops.MetalAttnReduceMemory(hr, parts))
	b.dispatchGroups(pr, [3]int{T, ceilDiv(heads, hr), 1}, [3]int{32 * ceilDiv(D, 32) * hr, 1, 1})
}

// prefill encodes the tiled prefill attention (the keys already in the
// cache): a threadgroup per query tile and slice of a KV head's query
// heads, which share the K and V it stages.
func (b *Backend) prefill(tu *Tuning, a attnArgs, o, qs, kc, vc *tensor) {
	s := &b.step
	sec, D := s.sec, int(a.HeadDim)
	group := int(a.Heads / a.KVHeads)
	qh := ops.MetalAttnGroupHeads(group, tu.AttnPrefillHeads)
	// Fewer keys a step where one stage of an f32 cache would not fit.
	keys, stage := tu.AttnPrefillKeys, b.stageSize(kc.dt)
	for keys > 8 && ops.MetalPrefillStage(keys, D, stage) > 32<<10 {
		keys /= 2
	}
	mem, stages := ops.MetalPrefillMemory(keys, D, stage, 32<<10)
	if mem > 32<<10 {
		b.fail("prefill attention: %d keys of head size %d take %d bytes of threadgroup memory", keys, D, mem)
		return
	}
	// The tile's query blocks, then its heads, halved until the pipeline
	// takes their simdgroups.
	qi := slices.Index(prefillQueries[:], tu.AttnPrefillQueries)
	if qi < 0 {
		b.fail("prefill attention: a tile of %d queries (8, 16 or 32)", tu.AttnPrefillQueries)
		return
	}
	var p mtl.Pipeline
	for {
		qb := prefillQueries[qi] / prefillRows
		p = b.pipeline(prefillKernel[attnKey{D, 0, kc.dt}], fcPrefill, int32(keys), int32(stages), int32(qb))
		if p == nil || 32*qh*qb <= p.MaxTotalThreadsPerThreadgroup() || qi == 0 && qh == 1 {
			break
		}
		if qi > 0 {
			qi--
		} else {
			qh = ops.MetalAttnGroupHeads(group, qh/2)
		}
	}
	threads := 32 * qh * prefillQueries[qi] / prefillRows
	if !b.fits(p, [3]int{threads, 1, 1}) {
		return
	}
	a.HeadsPerGroup, a.NumTiles = uint32(qh), uint32(sec.numTiles[qi])
	b.args(argBytes(b, a))
	b.in(1, qs)
	b.in(2, kc)
	b.in(3, vc)
	b.bind(4, b.metaView(sec.blockTable, sec.numSeqs*s.meta.MaxBlocks), false)
	b.bind(5, b.metaView(sec.seqLens, sec.numSeqs), false)
	b.bind(6, b.metaView(sec.queryStart, sec.numSeqs+1), false)
	b.bind(7, b.metaView(sec.tokenSeq, sec.numTokens), false)
	b.bind(8, b.metaView(sec.tiles[qi], sec.numTiles[qi]), false)
	b.out(9, o)
	b.bind(10, view{s.errBuf, 0, 16}, true)
	b.threadgroupMemory(mem)
	b.dispatchGroups(p, [3]int{sec.numTiles[qi], int(a.KVHeads) * group / qh, 1}, [3]int{threads, 1, 1})
}

func (b *Backend) SiLUMul(out, gate, up bridge.Tensor) {
	b.elementwise("silu_mul", tt(out), tt(gate), tt(up))
}

func (b *Backend) Add(out, a, c bridge.Tensor) { b.elementwise("add", tt(out), tt(a), tt(c)) }

func (b *Backend) elementwise(kernel string, o, x, y *tensor) {
	if !b.checkF32(kernel, o, x, y) {
		return
	}
	n := o.n
	if n == 0 {
		return
	}
	p := b.pipeline(kernel, fcNone)
	b.args(argBytes(b, eltArgs{N: uint32(n)}))
	b.in(1, x)
	b.in(2, y)
	b.out(3, o)
	b.dispatchThreads(p, [3]int{n, 1, 1}, [3]int{min(n, b.tuning.EltThreads), 1, 1})
}

func (b *Backend) Argmax(out, logits bridge.Tensor) {
	o, l := tt(out), tt(logits)
	if !b.checkF32("argmax", l) {
		return
	}
	if o.dt != bridge.I32 {
		b.fail("argmax: output is %v, not i32", o.dt)
		return
	}
	rows := o.n
	if rows == 0 {
		return
	}
	n := l.n / rows
	tu := b.tuned(ops.Argmax, "", rowDims, rows, n)
	part, parts := ops.MetalArgmaxParts(n, tu.ArgmaxPart)
	a := argmaxArgs{Rows: uint32(rows), N: uint32(n), Part: uint32(part), Parts: uint32(parts), Lead: uint32(l.off % 16 / 4)}
	if parts == 1 {
		p := b.pipeline("argmax", fcNone)
		b.args(argBytes(b, a))
		b.in(1, l)
		b.out(2, o)
		b.dispatchGroups(p, [3]int{rows, 1, 1}, [3]int{threadsFor(p, tu.ArgmaxThreads), 1, 1})
		return
	}
	pv, pi := b.scratchView("argmax.v", 4*rows*parts), b.scratchView("argmax.i", 4*rows*parts)
	p := b.pipeline("argmax_part", fcNone)
	b.args(argBytes(b, a))
	b.in(1, l)
	b.bind(2, pv, true)
	b.bind(3, pi, true)
	b.dispatchGroups(p, [3]int{rows, parts, 1}, [3]int{threadsFor(p, tu.ArgmaxThreads), 1, 1})
	b.argmaxMerge(a, pv, pi, o)
}

// argmaxMerge encodes argmax_merge of a.parts partitions a row (pv, pi:
// argmax_part's or a gemv_argmax GEMV's, each from the start of its
// scratch buffer, so a row's vector loads are aligned past its head) into
// o: a lane reads four partitions a load, a simdgroup up to
// ops.MetalArgmaxMaxParts in one; the thousands of a folded LM head (a
// partition a GEMV threadgroup) take more threads, up to 1024.
func (b *Backend) argmaxMerge(a argmaxArgs, pv, pi view, o *tensor) {
	pm := b.pipeline("argmax_merge", fcNone)
	b.args(argBytes(b, a))
	b.bind(1, pv, false)
	b.bind(2, pi, false)
	b.out(3, o)
	// A row's units (argmax_merge): at most 3 + Parts/4 + 3, a lane each.
	threads := 32 * ceilDiv(ceilDiv(int(a.Parts)+24, 4), 32)
	b.dispatchGroups(pm, [3]int{int(a.Rows), 1, 1}, [3]int{threadsFor(pm, min(threads, 1024)), 1, 1})
}
