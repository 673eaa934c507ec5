//go:build linux

package cuda

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels"
)

// kernelNames lists every kernel the backend looks up at load.
func kernelNames() []string {
	n := []string{"to_half", "add_bias", "rms_norm", "embedding", "gather_rows", "silu_mul", "add", "argmax",
		"rope_qk", "moe_route", "moe_route1", "moe_combine", "read_bw",
		"moe_down_sum_bf16_d2", "moe_down_sum_bf16_d8", "step_begin", "step_end", "layer_norm", "gelu_tanh", "position_embedding",
		"moe_route_tokens", "moe_sort", "moe_gemm_gate_up_bf16", "moe_gemm_down_bf16", "zero_f32",
		"moe_router_route_f16", "moe_router_route_bf16", "gemv_mma_bf16", "gemv_mma_f16", "qachain"}
	n = append(n, quantKernelNames()...)
	n = append(n, qmmaKernelNames()...)
	for _, dt := range KVDTypes {
		// The attention kernels, one per KV cache dtype.
		s := dtName(dt)
		n = append(n, "paged_attention_w4_"+s, "paged_attention_w8_"+s, "paged_attention_rope_w4_"+s,
			"paged_attention_rope_w8_"+s, "paged_decode_"+s, "paged_decode_rope_"+s, "flash_attention_d64_"+s,
			"flash_attention_d128_"+s)
	}
	n = append(n, slices.Sorted(maps.Keys(decodeMMAKernels()))...)
	for _, dt := range []string{"f32", "f16", "bf16"} {
		for _, m := range gemvMs {
			n = append(n, fmt.Sprintf("gemv_%s_m%d_r1", dt, m), fmt.Sprintf("gemv_gu_%s_m%d", dt, m))
			if dt == "bf16" {
				for _, r := range gemvRs(m)[1:] {
					n = append(n, fmt.Sprintf("gemv_%s_m%d_r%d", dt, m, r))
				}
			}
			if m == 1 {
				n = append(n, "gemv_"+dt+"_m1_r1_norm", "gemv_gu_"+dt+"_m1_norm")
				if dt == "bf16" {
					n = append(n, "gemv_bf16_m1_r2_norm")
				}
			}
		}
		n = append(n, "gemv_"+dt+"_scalar", "gemv_gu_"+dt+"_scalar", "moe_down_sum_"+dt+"_d4", "moe_down_sum_"+dt+"_scalar",
			"moe_router_route1_"+dt)
		for _, v := range []string{"m1", "m2", "m4", "m8", "scalar"} {
			n = append(n, "moe_gate_up_"+dt+"_"+v, "moe_down_"+dt+"_"+v)
			if dt == "bf16" && v != "scalar" {
				n = append(n, "moe_gate_up_bf16_"+v+"_r2", "moe_down_bf16_"+v+"_r2")
			}
		}
	}
	return n
}

var gemvMs = []int{1, 2, 4, 8, 16}

// gemvRs are the rows per warp the bf16 GEMV comes in for M tokens a pass
// (other dtypes have 1).
func gemvRs(M int) []int {
	switch M {
	case 1, 2, 4:
		return []int{1, 2, 4}
	case 8, 16:
		return []int{1, 2}
	}
	return []int{1}
}

func dtName(dt bridge.DType) string {
	switch dt {
	case bridge.F16:
		return "f16"
	case bridge.BF16:
		return "bf16"
	}
	return "f32"
}

func cdiv(a, b int) int { return (a + b - 1) / b }

// tensorOf returns t as this backend's tensor, or records an error.
func (b *Backend) tensorOf(x bridge.Tensor, what string) *tensor {
	t, ok := x.(*tensor)
	if !ok || t == nil {
		b.fail("%s: not a CUDA tensor (%T)", what, x)
		return nil
	}
	return t
}

func (b *Backend) f32Tensor(x bridge.Tensor, what string) *tensor {
	t := b.tensorOf(x, what)
	if t != nil && t.dt != bridge.F32 {
		b.fail("%s: want an f32 tensor, got %v", what, t.dt)
		return nil
	}
	return t
}

// scratchBuf returns a device buffer of at least size bytes kept across
// steps under name (thread-safe; may allocate). Each name keeps a shelf of
// buffers, so a step of one shape gets the same address whatever larger
// steps ran between: a CUDA graph is keyed by its arguments, and a decode
// step after a long prefill would otherwise miss every graph it had.
func (b *Backend) scratchBuf(name string, size int64) uint64 {
	d, _ := b.scratchFor(name, size)
	if d == nil {
		return 0
	}
	return d.ptr
}

// scratchFor is scratchBuf's buffer, and whether it was just allocated.
func (b *Backend) scratchFor(name string, size int64) (*devAlloc, bool) {
	size = max(size, 256)
	s := b.scratch[name]
	if d, ok := s.Take(size); ok {
		return d, false
	}
	var d *devAlloc
	err := b.th.do(func() error {
		var err error
		d, err = b.devAlloc(s.Next(size + size/4))
		return err
	})
	if err != nil {
		b.fail("%v", err)
		return nil, false
	}
	s.Put(d.size, d)
	b.scratch[name] = s
	return d, true
}

// scratchZeroed is scratchBuf for buffers kernels expect zeroed at the
// start of a step (and leave zeroed: the attention merge counters).
func (b *Backend) scratchZeroed(name string, size int64) uint64 {
	d, fresh := b.scratchFor(name, size)
	if d == nil {
		return 0
	}
	if fresh {
		if err := b.th.do(func() error {
			return b.check("cuMemsetD8", call(b.api.cuMemsetD8, uintptr(d.ptr), 0, uintptr(d.size)))
		}); err != nil {
			b.fail("%v", err)
			return 0
		}
	}
	return d.ptr
}

// ---- small ops ----

func (b *Backend) Embedding(out, table bridge.Tensor) {
	o, t := b.f32Tensor(out, "embedding out"), b.tensorOf(table, "embedding table")
	if o == nil || t == nil {
		return
	}
	if len(t.shape) != 2 || t.dt == bridge.I32 {
		b.fail("embedding: table must be a [vocab][dim] float matrix, got %v %v", t.dt, t.shape)
		return
	}
	V, W := t.shape[0], t.shape[1]
	T := b.meta.NumTokens
	if o.n != T*W {
		b.fail("embedding: out holds %d elements, want %d×%d", o.n, T, W)
		return
	}
	b.launch("embedding", [3]int{T, 1, 1}, 256, ptr(o), b.metaPtr(b.mo.tokens), ptr(t), i32(int(t.dt)), i32(V), i32(W), b.stats.ptr)
}

func (b *Backend) GatherRows(out, x bridge.Tensor) {
	o, xs := b.f32Tensor(out, "gather out"), b.f32Tensor(x, "gather x")
	if o == nil || xs == nil || b.meta.NumTokens == 0 {
		return
	}
	W := xs.n / b.meta.NumTokens
	R := len(b.meta.LogitRows)
	if o.n < R*W {
		b.fail("gather: out holds %d elements, want %d×%d", o.n, R, W)
		return
	}
	b.launch("gather_rows", [3]int{R, 1, 1}, 256, ptr(o), ptr(xs), b.metaPtr(b.mo.logitRows), i32(W))
}

func normBlock(D int) int {
	switch {
	case D >= 4096:
		return 1024
	case D >= 1024:
		return 256
	}
	return 128
}

func (b *Backend) RMSNorm(out, x, w bridge.Tensor, eps float32) {
	o, xs, ws := b.f32Tensor(out, "rms_norm out"), b.f32Tensor(x, "rms_norm x"), b.f32Tensor(w, "rms_norm weight")
	if o == nil || xs == nil || ws == nil || ws.n == 0 {
		return
	}
	D := ws.n
	b.launch("rms_norm", [3]int{xs.n / D, 1, 1}, normBlock(D), ptr(o), ptr(xs), 0, 0, ptr(ws), i32(D), f32(eps))
}

func (b *Backend) AddRMSNorm(out, residual, x, w bridge.Tensor, eps float32) {
	o, r := b.f32Tensor(out, "add_rms_norm out"), b.f32Tensor(residual, "add_rms_norm residual")
	xs, ws := b.f32Tensor(x, "add_rms_norm x"), b.f32Tensor(w, "add_rms_norm weight")
	if o == nil || r == nil || xs == nil || ws == nil || ws.n == 0 {
		return
	}
	D := ws.n
	b.launch("rms_norm", [3]int{xs.n / D, 1, 1}, normBlock(D), ptr(o), 0, ptr(r), ptr(xs), ptr(ws), i32(D), f32(eps))
}

func elementwiseGrid(n int) int { return min(cdiv(n, 256), 8192) }

func (b *Backend) SiLUMul(out, gate, up bridge.Tensor) {
	o, g, u := b.f32Tensor(out, "silu_mul out"), b.f32Tensor(gate, "silu_mul gate"), b.f32Tensor(up, "silu_mul up")
	if o == nil || g == nil || u == nil {
		return
	}
	b.launch("silu_mul", [3]int{elementwiseGrid(o.n), 1, 1}, 256, ptr(o), ptr(g), ptr(u), i64(int64(o.n)))
}

func (b *Backend) Add(out, x, y bridge.Tensor) {
	o, p, q := b.f32Tensor(out, "add out"), b.f32Tensor(x, "add a"), b.f32Tensor(y, "add b")
	if o == nil || p == nil || q == nil {
		return
	}
	b.launch("add", [3]int{elementwiseGrid(o.n), 1, 1}, 256, ptr(o), ptr(p), ptr(q), i64(int64(o.n)))
}

func (b *Backend) Argmax(out, logits bridge.Tensor) {
	o, l := b.tensorOf(out, "argmax out"), b.f32Tensor(logits, "argmax logits")
	if o == nil || l == nil || o.n == 0 {
		return
	}
	if o.dt != bridge.I32 {
		b.fail("argmax: out must be i32, got %v", o.dt)
		return
	}
	// A block per 4096 logits, at most 64 per row: a 150k vocabulary in one
	// block would take 60 µs.
	V := l.n / o.n
	parts := min(max(cdiv(V, 4096), 1), 64)
	var pv, pi, counters uint64
	if parts > 1 {
		pv = b.scratchBuf("argmax.v", int64(o.n*parts)*4)
		pi = b.scratchBuf("argmax.i", int64(o.n*parts)*4)
		counters = b.scratchZeroed("argmax.counters", int64(o.n)*4)
	}
	b.launch("argmax", [3]int{o.n, parts, 1}, 256, ptr(o), ptr(l), i32(V), pv, pi, counters)
}

func (b *Backend) RoPE(q, k, qNorm, kNorm bridge.Tensor, heads, kvHeads, headDim int, rot kernels.Rotary, eps float32) {
	qs, ks := b.f32Tensor(q, "rope q"), b.f32Tensor(k, "rope k")
	r, ok := b.ropeArgs(qNorm, kNorm, headDim, rot, eps)
	if qs == nil || ks == nil || !ok {
		return
	}
	T := b.meta.NumTokens
	b.launch("rope_qk", [3]int{T, cdiv(heads+kvHeads, 4), 1}, 128, ptr(qs), ptr(ks), r.qn, r.kn, b.metaPtr(b.mo.positions),
		i32(heads), i32(kvHeads), i32(headDim), r.inv, f32(r.eps))
}

// ropeArgs are the arguments of RoPE with QK-norm that a kernel takes: the
// norm weights (0: none), the inverse-frequency table and epsilon.
type ropeArgs struct {
	qn, kn, inv uint64
	eps         float32
}

func (b *Backend) ropeArgs(qNorm, kNorm bridge.Tensor, headDim int, rot kernels.Rotary, eps float32) (ropeArgs, bool) {
	if headDim%2 != 0 || headDim > attnMaxHeadDim {
		b.fail("rope: head size %d unsupported (even, at most %d)", headDim, attnMaxHeadDim)
		return ropeArgs{}, false
	}
	if err := rot.Check(headDim); err != nil {
		b.fail("rope: %v", err)
		return ropeArgs{}, false
	}
	r := ropeArgs{eps: eps}
	if qNorm != nil {
		if t := b.f32Tensor(qNorm, "rope q_norm"); t != nil {
			r.qn = t.ptr
		}
	}
	if kNorm != nil {
		if t := b.f32Tensor(kNorm, "rope k_norm"); t != nil {
			r.kn = t.ptr
		}
	}
	r.inv = b.ropeTable(headDim, rot)
	return r, r.inv != 0
}

// uploadTable copies size bytes at p into a device allocation of their own:
// a table the kernels read, made once and kept in b.tables.
func (b *Backend) uploadTable(p unsafe.Pointer, size int) (*devAlloc, error) {
	var d *devAlloc
	err := b.th.do(func() error {
		var err error
		if d, err = b.devAlloc(int64(size)); err != nil {
			return err
		}
		if err = b.check("cuMemcpyHtoD", call(b.api.cuMemcpyHtoD, uintptr(d.ptr), uintptr(p), uintptr(size))); err != nil {
			b.freeNow(d)
		}
		return err
	})
	return d, err
}

// ropeTable returns the device copy of rot's frequencies for heads of
// headDim, as the reference computes them (kernels.Rotary).
func (b *Backend) ropeTable(headDim int, rot kernels.Rotary) uint64 {
	key := rot.Key(headDim) // made once for a model's ops: no allocation a step
	if p, ok := b.ropes[key]; ok {
		return p
	}
	inv := rot.InvFreq(headDim)
	d, err := b.uploadTable(unsafe.Pointer(&inv[0]), len(inv)*4)
	if err != nil {
		b.fail("%v", err)
		return 0
	}
	b.ropes[key] = d.ptr
	return d.ptr
}

func (b *Backend) Attention(out, q, k, v bridge.Tensor, cache bridge.KVCache, heads, kvHeads, headDim int, scale float32, window int) {
	b.attention(out, q, k, v, cache, heads, kvHeads, headDim, scale, window, nil)
}

// RunsWindows: the attention kernels start at a sliding window's first key
// (their window argument; bridge.WindowRunner).
func (b *Backend) RunsWindows() bool { return true }

// kernelWindow is a sliding window as the kernels take it, an int32: one
// longer than int32 positions reach slides nothing.
func kernelWindow(window int) uint64 {
	if window < 0 || window > math.MaxInt32 {
		return i32(0)
	}
	return i32(window)
}

// attention records paged attention; rope, when set, is the RoPE before it,
// which a step of at most one query token per sequence applies in the same
// kernel (fusion_linux.go).
func (b *Backend) attention(out, q, k, v bridge.Tensor, cache bridge.KVCache, heads, kvHeads, headDim int, scale float32, window int, rope *ropeArgs) {
	o, qs, ks, vs := b.f32Tensor(out, "attention out"), b.f32Tensor(q, "attention q"), b.f32Tensor(k, "attention k"), b.f32Tensor(v, "attention v")
	kc, vc := b.cacheTensors(cache)
	if o == nil || qs == nil || ks == nil || vs == nil || kc == nil || vc == nil {
		return
	}
	if headDim > attnMaxHeadDim || heads%kvHeads != 0 {
		b.fail("attention: head size %d (at most %d) or %d heads over %d KV heads unsupported", headDim, attnMaxHeadDim, heads, kvHeads)
		return
	}
	m := b.meta
	T := m.NumTokens
	if T == 0 {
		return
	}
	BS := cache.BlockSize
	if len(kc.shape) != 4 || kc.shape[1] != kvHeads || kc.shape[2] != BS || kc.shape[3] != headDim {
		b.fail("attention: cache shape %v, want [blocks][%d][%d][%d]", kc.shape, kvHeads, BS, headDim)
		return
	}
	if rope != nil && m.MaxQueryLen > 1 {
		b.fail("internal: RoPE fused into a prefill attention")
		return
	}
	l := b.attnLaunch(m, kc.dt, heads, kvHeads, headDim, BS, window, rope != nil)
	var tmpAcc, tmpML, counters uint64
	if l.nparts > 1 {
		tmpAcc = b.scratchBuf("attn.acc", l.acc)
		tmpML = b.scratchBuf("attn.ml", l.ml)
		counters = b.scratchZeroed("attn.counters", l.counters)
	}
	b.subMark("attention")
	if l.decode {
		var r ropeArgs
		if rope != nil {
			r = *rope
		}
		b.launch(l.kernel, l.grid, l.threads, ptr(o), ptr(qs), ptr(ks), ptr(vs), ptr(kc), ptr(vc),
			b.metaPtr(b.mo.seqLens), b.metaPtr(b.mo.blockTable), b.metaPtr(b.mo.slots), b.metaPtr(b.mo.positions),
			i32(heads), i32(kvHeads), i32(headDim), i32(BS), i32(b.mo.stride), i32(kc.shape[0]), f32(scale),
			i32(l.chunks), i32(l.mgroup), tmpAcc, tmpML, b.stats.ptr, counters, r.qn, r.kn, r.inv, f32(r.eps), kernelWindow(window))
		return
	}
	args := []uint64{ptr(o), ptr(qs), ptr(ks), ptr(vs), ptr(kc), ptr(vc),
		b.metaPtr(b.mo.tokSeq), b.metaPtr(b.mo.qsl), b.metaPtr(b.mo.seqLens), b.metaPtr(b.mo.blockTable), b.metaPtr(b.mo.slots),
		i32(heads), i32(kvHeads), i32(headDim), i32(BS), i32(b.mo.stride), i32(kc.shape[0]), f32(scale),
		i32(l.part), i32(l.nparts), tmpAcc, tmpML, b.stats.ptr, counters, kernelWindow(window)}
	if rope != nil {
		args = append(args, rope.qn, rope.kn, b.metaPtr(b.mo.positions), rope.inv, f32(rope.eps))
	}
	b.launch(l.kernel, l.grid, l.threads, args...)
}

// attnSplit is a paged-attention step's launch (attention.cu or decode.cu),
// planned from the step's metadata and the device's size alone.
type attnSplit struct {
	kernel  string // with its cache dtype suffix
	decode  bool   // paged_decode or paged_decode_mma (decode.cu), else attention.cu
	grid    [3]int // z: the split-K partitions
	threads int
	part    int // keys a partition
	chunks  int // decode.cu: DEC_CHUNK chunks a partition
	nparts  int
	mgroup  int // decode.cu: partitions one block merges (decodeMergeGroup)
	// The split's scratch in bytes (none with one partition): the
	// partitions' value sums, their (max, sum) pairs, the merge counters.
	acc, ml, counters int64
}

// attnLaunch plans the attention of step m over a cache of dtype cache
// with a sliding window (0: none); rope, the RoPE fused into a decode
// step's kernel. The kernels number a token's split-K partitions from its
// first key, the window's with one, so the split, its tuned config and
// its scratch are over the most keys a token reads (kernels.QueryKeys),
// not the context (docs/cuda.md, "Limits").
func (b *Backend) attnLaunch(m *bridge.StepMeta, cache bridge.DType, heads, kvHeads, headDim, BS, window int, rope bool) attnSplit {
	T := m.NumTokens
	keys := max(kernels.QueryKeys(m.MaxSeqLen, window), 1)
	ropeName := ""
	if rope {
		ropeName = "rope_"
	}
	// paged_decode (decode.cu) takes one new token per sequence, token t
	// of sequence t, head size at most 128, GQA groups of at most 8 query
	// heads; it copies cache rows 16 bytes at a time: 4 f32 or 8 half values.
	if m.MaxQueryLen == 1 && T == m.NumSeqs && headDim <= 128 && headDim%(16/cache.Size()) == 0 && heads/kvHeads <= 8 {
		chunks, nparts, pos := b.decodeLaunch(cache, m.NumSeqs, keys, heads, kvHeads, headDim, BS)
		l := attnSplit{kernel: "paged_decode_" + ropeName + dtName(cache), decode: true, grid: [3]int{T, kvHeads, nparts},
			threads: 256, part: chunks * decodeChunk, chunks: chunks, nparts: nparts, mgroup: min(decodeMergeGroup, nparts)}
		if pos > 0 {
			l.kernel = fmt.Sprintf("paged_decode_mma_%sd%d_p%d_%s", ropeName, headDim, pos, dtName(cache))
			l.threads = decodeMMAThreads(pos)
		}
		if nparts > 1 {
			// A head's slots: its partitions' partial sums, then the
			// merged groups of mgroup partitions; a counter for each
			// (sequence, KV head), then one for each of its groups.
			groups := int64(cdiv(nparts, l.mgroup))
			slots := int64(nparts) + groups
			l.acc = int64(T) * int64(heads) * slots * int64(headDim) * 4
			l.ml = int64(T) * int64(heads) * slots * 2 * 4
			l.counters = max(int64(T)*int64(kvHeads)*(1+groups), int64(T)*int64(heads)) * 4
		}
		return l
	}
	// Prefill steps split the keys in parts of 256 positions, at most 256
	// of them; decode steps as attentionConfig says.
	kernel, part := "paged_attention_w8", 256
	nparts := cdiv(keys, part)
	for nparts > 256 {
		part *= 2
		nparts = cdiv(keys, part)
	}
	if m.MaxQueryLen <= 1 {
		kernel, part, nparts = b.attentionConfig(m.NumSeqs, keys, heads, kvHeads, headDim, BS)
	}
	if rope {
		kernel = strings.Replace(kernel, "paged_attention_", "paged_attention_rope_", 1)
	}
	l := attnSplit{kernel: kernel + "_" + dtName(cache), grid: [3]int{T, heads, nparts}, threads: 256, part: part, nparts: nparts}
	if strings.HasSuffix(kernel, "_w4") {
		l.threads = 128
	}
	if nparts > 1 {
		l.acc = int64(T) * int64(heads) * int64(nparts) * int64(headDim) * 4
		l.ml = int64(T) * int64(heads) * int64(nparts) * 2 * 4
		l.counters = int64(T) * int64(heads) * 4
	}
	return l
}

// cacheTensors returns a KV cache's two tensors, failing the step unless
// they share one of KVDTypes.
func (b *Backend) cacheTensors(cache bridge.KVCache) (k, v *tensor) {
	k, v = b.tensorOf(cache.K, "attention K cache"), b.tensorOf(cache.V, "attention V cache")
	if k == nil || v == nil {
		return nil, nil
	}
	if k.dt != v.dt || !slices.Contains(KVDTypes, k.dt) {
		b.fail("attention: KV cache of %v keys and %v values, want both f32, f16 or bf16", k.dt, v.dt)
		return nil, nil
	}
	return k, v
}

// flashAttention records prefill attention on tensor cores (flash.cu) for a
// step of at least tcMinRows tokens of a model with half weights, head size
// 64 or 128; it reports false, recording nothing, for any other step.
func (b *Backend) flashAttention(a *bridge.AttentionOp) bool {
	m := b.meta
	if m.MaxQueryLen <= 1 || !b.tensorCores(m.NumTokens, a.Operand) || (a.HeadDim != 64 && a.HeadDim != 128) ||
		a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 {
		return false
	}
	o, qs, ks, vs := b.asTensor(a.Out), b.asTensor(a.Q), b.asTensor(a.K), b.asTensor(a.V)
	kc, vc := b.asTensor(a.Cache.K), b.asTensor(a.Cache.V)
	for _, t := range []*tensor{o, qs, ks, vs, kc, vc} {
		if t == nil {
			return false
		}
	}
	for _, t := range []*tensor{o, qs, ks, vs} {
		if t.dt != bridge.F32 {
			return false
		}
	}
	if kc.dt != vc.dt || !slices.Contains(KVDTypes, kc.dt) {
		return false
	}
	BS := a.Cache.BlockSize
	if len(kc.shape) != 4 || kc.shape[1] != a.KVHeads || kc.shape[2] != BS || kc.shape[3] != a.HeadDim {
		return false
	}
	tiles := cdiv(m.NumTokens, flashBQ) + m.NumSeqs // each sequence's tiles, the last one partial
	n := int64(m.NumTokens) * int64(a.KVHeads*a.HeadDim)
	kb, vb := b.scratchBuf("attn.kb", n*2), b.scratchBuf("attn.vb", n*2)
	if b.stepErr != nil {
		return true
	}
	b.subMark("attention")
	// bf16 copies of the step's keys and values, which the kernel streams
	// into shared memory as they are.
	b.launch("to_half", [3]int{elementwiseGrid(int(n)), 1, 1}, 256, ptr(ks), kb, 0, i64(n), i32(int(bridge.BF16)))
	b.launch("to_half", [3]int{elementwiseGrid(int(n)), 1, 1}, 256, ptr(vs), vb, 0, i64(n), i32(int(bridge.BF16)))
	b.launch(fmt.Sprintf("flash_attention_d%d_%s", a.HeadDim, dtName(kc.dt)), [3]int{tiles, a.Heads, 1}, 128, ptr(o), ptr(qs), ptr(ks), ptr(vs),
		ptr(kc), ptr(vc), kb, vb, b.metaPtr(b.mo.qsl), b.metaPtr(b.mo.seqLens), b.metaPtr(b.mo.blockTable), b.metaPtr(b.mo.slots),
		i32(m.NumSeqs), i32(a.Heads), i32(a.KVHeads), i32(BS), i32(b.mo.stride), i32(kc.shape[0]), f32(a.Scale), b.stats.ptr,
		kernelWindow(a.Window))
	return true
}

// flashBQ is flash.cu's FA_BQ: query rows a block.
const flashBQ = 64

// flashSmem is the flash kernel's dynamic shared memory for head size d:
// two buffers of 64 keys and 64 values, rows of d+8 halves (bf16 whatever
// the cache's dtype).
func flashSmem(d int) int { return 2 * 2 * 64 * (d + 8) * 2 }

// decodeLaunch is the split (decodeConfig) and kernel of a decode step
// whose tokens read at most keys keys: pos is the positions of the
// paged_decode_mma variant it takes, 0 for paged_decode.
func (b *Backend) decodeLaunch(cache bridge.DType, seqs, keys, heads, kvHeads, headDim, BS int) (chunks, nparts, pos int) {
	chunks, nparts = b.decodeConfig(cache, seqs, keys, heads, kvHeads, headDim, BS)
	if b.decodeMMA(cache, heads/kvHeads, headDim, chunks, nparts) {
		pos = decodeMMAPositions(chunks)
	}
	return chunks, nparts, pos
}

// decodeMMA reports whether a decode step of nparts partitions of chunks
// chunks takes paged_decode_mma, the tensor-core kernel (decode.cu): it
// has one (decodeMMAFits), and the partitions hold at most
// decodeMMAPartPositions, or the one partition a whole context of at most
// decodeMMAWhole.
func (b *Backend) decodeMMA(cache bridge.DType, group, headDim, chunks, nparts int) bool {
	pos := chunks * decodeChunk
	return b.decodeMMAFits(cache, group, headDim) &&
		(pos <= decodeMMAPartPositions || nparts == 1 && pos <= b.decodeMMAWhole())
}

// decodeMMAWhole is the longest context paged_decode_mma holds in one
// block: decodeMMAWholePositions where the device lets a block ask for that
// variant's shared memory (139 KB and its static arrays: not on GPUs of 99
// KB a block, such as sm_86 and sm_89), else decodeMMAPartPositions.
func (b *Backend) decodeMMAWhole() int {
	if b.maxSharedBlock > 0 && decodeMMASmem(decodeMMAWholePositions)+decodeMMAStatic > b.maxSharedBlock {
		return decodeMMAPartPositions
	}
	return decodeMMAWholePositions
}

// decodeMMAFits reports whether paged_decode_mma has a kernel for the
// step: half caches, head sizes 64 and 128, GQA groups of at most 8.
func (b *Backend) decodeMMAFits(cache bridge.DType, group, headDim int) bool {
	return !b.opts.NoDecodeMMA && (cache == bridge.BF16 || cache == bridge.F16) && group <= 8 &&
		(headDim == 64 || headDim == 128)
}

// decodeMMAPositions is the paged_decode_mma variant (the positions a block
// holds) for partitions of chunks chunks: one-chunk partitions take the
// small one, whose shared memory lets more blocks share an SM, and a whole
// context of more than decodeMMAPartPositions the large one.
func decodeMMAPositions(chunks int) int {
	switch pos := chunks * decodeChunk; {
	case pos <= decodeChunk:
		return decodeChunk
	case pos <= decodeMMAPartPositions:
		return decodeMMAPartPositions
	}
	return decodeMMAWholePositions
}

// decodeMMAThreads is the block of the paged_decode_mma variant holding
// pos positions (DEC_MMA_WARPS): 8 warps, or a warp for each 16 positions.
func decodeMMAThreads(pos int) int { return 32 * max(pos/16, 8) }

// decodeMMASmem is paged_decode_mma's dynamic shared memory (DEC_MMA_KV):
// keys and values of pos positions, rows of 136 halves.
func decodeMMASmem(pos int) int { return 2 * pos * (128 + 8) * 2 }

// decodeMMAStatic bounds paged_decode_mma's static shared memory (its q
// rows, the step's key and the warps' probabilities: 12.6 KB with 16
// warps; TestDecodeMMAStaticShared).
const decodeMMAStatic = 16 << 10

// paged_decode_mma's largest partition of a split context, and its
// largest whole context (one partition, no merge: docs/cuda.md, "Short
// contexts in one block").
const (
	decodeMMAPartPositions  = 128
	decodeMMAWholePositions = 256
)

// decodeMMAKernels are paged_decode_mma's kernels: with and without RoPE,
// per head size, positions a block holds and half cache dtype, with their
// dynamic shared memory.
func decodeMMAKernels() map[string]int {
	n := map[string]int{}
	for _, dt := range []bridge.DType{bridge.F16, bridge.BF16} {
		for _, d := range []int{64, 128} {
			for _, pos := range []int{decodeChunk, decodeMMAPartPositions, decodeMMAWholePositions} {
				for _, rope := range []string{"", "rope_"} {
					n[fmt.Sprintf("paged_decode_mma_%sd%d_p%d_%s", rope, d, pos, dtName(dt))] = decodeMMASmem(pos)
				}
			}
		}
	}
	return n
}

// ---- matmul ----

// gemvMaxM is the largest m the GEMV kernels take; above it a matmul of
// half weights goes to cuBLAS: activations rounded once to the weights'
// dtype up to halfMaxM rows (the batched decode steps, as bf16 engines run
// them), split in two halves above (prefill, where f32 accuracy is kept).
// Without cuBLAS the GEMV kernels take every m, in passes of 16.
const (
	gemvMaxM = 8
	halfMaxM = 16
)

func (b *Backend) MatMul(out, x, w, bias bridge.Tensor) {
	if g, ok := b.gemvOf(out, x, w, bias, true); ok {
		b.matmul(g.segs[0].out, g.x, g.segs[0].w, g.segs[0].bias, g.m, g.segs[0].n, g.k, false)
	}
}

// gemvSeg is one weight matrix of a GEMV launch: out[m][n] = x·wᵀ + bias.
type gemvSeg struct {
	w         *tensor
	out, bias uint64
	n         int
}

// gemv is one GEMV launch: up to three matrices over the same input (q, k
// and v; gate and up), and the ops before and after it that it takes in
// (fusion_linux.go).
type gemv struct {
	x     uint64
	m, k  int
	dt    bridge.DType
	segs  [3]gemvSeg
	nsegs int
	// norm, when norm.x is set, is the RMSNorm that makes x: the kernel
	// normalises its input as it reads it (and writes x for other readers);
	// with norm.b set it is a LayerNorm with that bias (GPT-2).
	norm struct {
		x, w, b, out uint64
		eps          float32
	}
	// residual, when set, is where the single output is added as written.
	residual uint64
	// silu applies silu(gate)·up to the two outputs, into the first.
	silu bool
	// gelu applies GELU (tanh) to the single output as it is written.
	gelu bool
}

// gemvOf checks a matmul's tensors and returns its launch, or reports the
// error (report) and returns false.
func (b *Backend) gemvOf(out, x, w, bias bridge.Tensor, report bool) (gemv, bool) {
	bad := func(format string, args ...any) (gemv, bool) {
		if report {
			b.fail(format, args...)
		}
		return gemv{}, false
	}
	o, xs, wt := b.asTensor(out), b.asTensor(x), b.asTensor(w)
	if o == nil || xs == nil || wt == nil || o.dt != bridge.F32 || xs.dt != bridge.F32 {
		if report {
			b.f32Tensor(out, "matmul out")
			b.f32Tensor(x, "matmul x")
			b.tensorOf(w, "matmul weight")
		}
		return gemv{}, false
	}
	if len(wt.shape) != 2 || wt.dt == bridge.I32 {
		return bad("matmul: weight must be a float matrix, got %v %v", wt.dt, wt.shape)
	}
	n, k := wt.shape[0], wt.shape[1]
	if k == 0 || xs.n%k != 0 {
		return bad("matmul: x has %d elements, not rows of %d", xs.n, k)
	}
	m := xs.n / k
	if o.n != m*n {
		return bad("matmul: out holds %d elements, want %d×%d", o.n, m, n)
	}
	var bp uint64
	if bias != nil {
		bt := b.asTensor(bias)
		if bt == nil || bt.dt != bridge.F32 {
			if report {
				b.f32Tensor(bias, "matmul bias")
			}
			return gemv{}, false
		}
		if bt.n < n {
			return bad("matmul: bias of %d values for %d outputs a row", bt.n, n)
		}
		bp = bt.ptr
	}
	g := gemv{x: xs.ptr, m: m, k: k, dt: wt.dt, nsegs: 1}
	g.segs[0] = gemvSeg{w: wt, out: o.ptr, bias: bp, n: n}
	return g, true
}

// asTensor is x as this backend's tensor, nil when it is not one.
func (b *Backend) asTensor(x bridge.Tensor) *tensor {
	t, _ := x.(*tensor)
	return t
}

// matmul records out[m][n] = x[m][k]·wᵀ + bias: cuBLAS above gemvMaxM rows
// (unless exact: the MoE router, whose top-k must see f32 activations), the
// GEMV kernels below.
func (b *Backend) matmul(out, x uint64, w *tensor, bias uint64, m, n, k int, exact bool) {
	if m == 0 || n == 0 {
		return
	}
	if m > gemvMaxM && b.cublas != 0 && (!exact || b.tensorCores(m, w.dt)) {
		b.gemm(out, x, w, bias, m, n, k, exact)
		return
	}
	g := gemv{x: x, m: m, k: k, dt: w.dt, nsegs: 1}
	g.segs[0] = gemvSeg{w: w, out: out, bias: bias, n: n}
	b.launchGemv(&g)
}

// onGemv reports whether an m-row matmul runs on the GEMV kernels (where
// fusions apply) rather than cuBLAS.
func (b *Backend) onGemv(m int) bool { return m <= gemvMaxM || b.cublas == 0 }

// launchGemv records one GEMV launch.
func (b *Backend) launchGemv(g *gemv) {
	s0 := g.segs[0]
	c := b.gemvShape(g.m, s0.n, g.k, g.dt)
	name, ks, blocks := c.name, c.ks, 0
	for _, s := range g.segs[:g.nsegs] {
		blocks += cdiv(s.n, c.rows)
	}
	if g.silu {
		// gemv_gu: eight rows of gate and up a block, K split in ks.
		ks = 1
		for ks < 8 && cdiv(s0.n, 8/ks) < 4*b.sms {
			ks *= 2
		}
		name, blocks = fmt.Sprintf("gemv_gu_%s_m%d", dtName(g.dt), c.M), cdiv(s0.n, 8/ks)
		if g.k%8 != 0 {
			name, ks, blocks = "gemv_gu_"+dtName(g.dt)+"_scalar", 1, cdiv(s0.n, 8)
		}
	}
	if g.norm.x != 0 {
		name += "_norm"
	}
	var seg [3][4]uint64
	for i, s := range g.segs[:g.nsegs] {
		seg[i] = [4]uint64{s.w.ptr, s.out, s.bias, i32(s.n)}
	}
	flags := c.flags
	if g.gelu && !g.silu {
		flags |= 2 // gemv.cu: GELU on the output
	}
	b.launch(name, [3]int{blocks, 1, 1}, 256, g.x, i32(g.k), i32(g.m),
		seg[0][0], seg[0][1], seg[0][2], seg[0][3], seg[1][0], seg[1][1], seg[1][2], seg[1][3], seg[2][0], seg[2][1], seg[2][2], seg[2][3],
		i32(ks), i32(flags), g.residual, g.norm.x, g.norm.w, g.norm.out, f32(g.norm.eps), g.norm.b)
}

// tcMinRows is the fewest tokens a step needs to run its matmuls, attention
// and experts on bf16 tensor cores (with half-precision weights, unless
// Options.ExactPrefill): below it the two-part f32-accurate product is
// bound by reading the weights and costs about as much.
const tcMinRows = 128

// tensorCores reports whether an m-row product over weights of dtype dt
// runs with its activations rounded to bf16 (or f16) on tensor cores.
func (b *Backend) tensorCores(m int, dt bridge.DType) bool {
	return !b.opts.ExactPrefill && m >= tcMinRows && (dt == bridge.BF16 || dt == bridge.F16)
}

// gemvNormMaxK is the largest k of the _norm GEMVs (GEMV_NORM_MAXK).
const gemvNormMaxK = 6144

// cuBLAS enums.
const (
	cudaR32F         = 0
	cudaR16F         = 2
	cudaR16BF        = 14
	cublasOpN        = 0
	cublasOpT        = 1
	cublasCompute32F = 68
)

// gemm records a cuBLAS GEMM: f32 weights multiply f32 activations; half
// weights multiply the activations rounded to the same half type (up to
// halfMaxM rows, and on tensor-core steps), or else split in two halves
// (hi + lo, to about 16 bits), W·hi + W·lo accumulated in f32, as cuBLAS
// has no mixed f32×bf16 product. exact asks for the split in any case (the
// MoE router, whose top-k must see the activations as f32 would).
func (b *Backend) gemm(out, x uint64, w *tensor, bias uint64, m, n, k int, exact bool) {
	b.gemms(x, m, k, exact, []gemvSeg{{w: w, out: out, bias: bias, n: n}})
}

// gemms records the GEMMs of matrices of one dtype over the same x[m][k]
// (q, k and v): the activations are rounded to half once for all of them.
func (b *Backend) gemms(x uint64, m, k int, exact bool, segs []gemvSeg) {
	dt := segs[0].w.dt
	if !exact && b.onGemvMMA(m, k, dt) {
		for i := 0; i < len(segs); i += 3 {
			b.launchGemvMMA(x, m, k, segs[i:min(i+3, len(segs))])
		}
		return
	}
	if dt == bridge.F32 {
		for _, s := range segs {
			b.gemmEntry(s.out, x, s.w, cudaR32F, m, s.n, k, 0)
		}
	} else {
		atype := uint64(cudaR16BF)
		if dt == bridge.F16 {
			atype = cudaR16F
		}
		mk := int64(m) * int64(k)
		hi := b.scratchBuf("gemm.hi", mk*2)
		var lo uint64
		if exact || (m > halfMaxM && !b.tensorCores(m, dt)) {
			lo = b.scratchBuf("gemm.lo", mk*2)
		}
		b.launch("to_half", [3]int{elementwiseGrid(m * k), 1, 1}, 256, x, hi, lo, i64(mk), i32(int(dt)))
		for _, s := range segs {
			b.gemmEntry(s.out, hi, s.w, atype, m, s.n, k, 0)
			if lo != 0 {
				b.gemmEntry(s.out, lo, s.w, atype, m, s.n, k, 1)
			}
		}
	}
	for _, s := range segs {
		if s.bias != 0 {
			b.launch("add_bias", [3]int{elementwiseGrid(m * s.n), 1, 1}, 256, s.out, s.bias, i64(int64(m)*int64(s.n)), i32(s.n))
		}
	}
}

// onGemvMMA reports whether a matmul of m rows (above gemvMaxM) over dtype
// dt runs on gemv_mma.cu's kernels rather than cuBLAS: with Options.GemvMMA,
// up to halfMaxM rows of half weights whose k is a multiple of the kernels'
// 32-column step.
func (b *Backend) onGemvMMA(m, k int, dt bridge.DType) bool {
	return b.opts.GemvMMA && m <= halfMaxM && k%gemvMMAStep == 0 && (dt == bridge.BF16 || dt == bridge.F16)
}

// gemv_mma.cu's shape: columns a warp takes per step (GMMA_STEP), steps
// whose weights load together (GMMA_U), rows a block (GMMA_ROWS) and the
// most tokens (GMMA_TOKENS).
const (
	gemvMMAStep   = 32
	gemvMMAU      = 4
	gemvMMARows   = 128
	gemvMMATokens = 16
)

// launchGemvMMA records one gemv_mma launch over up to three matrices of x:
// out = half(x)·wᵀ + bias. Each matrix's 128-row groups take ksb blocks,
// one a slice of k: ksb doubles (to 16 at most) until the launch has two
// blocks an SM, while each warp keeps at least two steps of GMMA_U.
func (b *Backend) launchGemvMMA(x uint64, m, k int, segs []gemvSeg) {
	groups, rows := 0, 0
	for _, s := range segs {
		groups += cdiv(s.n, gemvMMARows)
		rows += s.n
	}
	ksb, steps := 1, k/gemvMMAStep
	for ksb < 16 && groups*ksb < 2*b.sms && steps/(2*ksb) >= gemvMMAU {
		ksb *= 2
	}
	var part, counters uint64
	if ksb > 1 {
		part = b.scratchBuf("gemv_mma.part", int64(ksb)*gemvMMATokens*int64(rows)*4)
		counters = b.scratchZeroed("gemv_mma.counters", int64(groups)*4)
	}
	args := []uint64{x, i32(k), i32(m)}
	blocks := 0
	for i := 0; i < 3; i++ {
		if i >= len(segs) {
			args = append(args, 0, 0, 0, 0, 0, 0)
			continue
		}
		s := segs[i]
		args = append(args, s.w.ptr, s.out, s.bias, i32(s.n), part, counters)
		if ksb > 1 {
			part += uint64(ksb) * gemvMMATokens * uint64(s.n) * 4
			counters += uint64(cdiv(s.n, gemvMMARows)) * 4
		}
		blocks += cdiv(s.n, gemvMMARows) * ksb
	}
	args = append(args, i32(ksb))
	b.launch("gemv_mma_"+dtName(segs[0].w.dt), [3]int{blocks, 1, 1}, 256, args...)
}

// gemmEntry records out = W·B (+ out when accumulate is 1), column-major:
// out[m][n]ᵀ (n×m) = W (k×n)ᵀ · B (k×m).
func (b *Backend) gemmEntry(out, B uint64, w *tensor, atype uint64, m, n, k int, accumulate uint64) {
	args := []uint64{cublasOpT, cublasOpN, uint64(n), uint64(m), uint64(k), w.ptr, atype, uint64(k), B, atype, uint64(k), out, cudaR32F, uint64(n), accumulate}
	a0 := len(b.args)
	b.args = append(b.args, args...)
	b.ents = append(b.ents, entry{kind: entGemm, a0: int32(a0), a1: int32(len(b.args))})
}

// runGemm issues one recorded GEMM (thread only).
func (b *Backend) runGemm(g []uint64) error {
	alpha, beta := float32(1), float32(g[14])
	r := call(b.api.cublasGemmEx, b.cublas, uintptr(g[0]), uintptr(g[1]), uintptr(g[2]), uintptr(g[3]), uintptr(g[4]),
		uintptr(unsafe.Pointer(&alpha)), uintptr(g[5]), uintptr(g[6]), uintptr(g[7]),
		uintptr(g[8]), uintptr(g[9]), uintptr(g[10]),
		uintptr(unsafe.Pointer(&beta)), uintptr(g[11]), uintptr(g[12]), uintptr(g[13]),
		cublasCompute32F, 0xffffffff /* CUBLAS_GEMM_DEFAULT */)
	if r != 0 {
		return fmt.Errorf("cuda: cublasGemmEx(m=%d n=%d k=%d): cuBLAS status %d", g[3], g[2], g[4], r)
	}
	return nil
}

// ---- MoE ----

// moeTable returns the device array of the experts' gate, up and down
// pointers ([3][E]), shared by every MoEWeights with the same tensors.
// moeTableRef is a MoE block's table as last seen, with the tensors that
// tell whether the block still holds the same experts.
type moeTableRef struct {
	ptr          uint64
	dt           bridge.DType
	n            int
	first, last  bridge.Tensor
	router, down bridge.Tensor
}

func (b *Backend) moeTable(w *bridge.MoEWeights) (uint64, bridge.DType, bool) {
	E := len(w.Gate)
	if r, ok := b.moeByW[w]; ok && E > 0 && r.n == E && len(w.Up) == E && len(w.Down) == E &&
		r.first == w.Gate[0] && r.last == w.Up[E-1] && r.down == w.Down[E-1] && r.router == w.Router {
		return r.ptr, r.dt, true
	}
	ptrs := make([]uint64, 0, 3*E)
	var dt bridge.DType
	for i, set := range [][]bridge.Tensor{w.Gate, w.Up, w.Down} {
		if len(set) != E {
			b.fail("moe: %d gate, %d up and %d down experts", len(w.Gate), len(w.Up), len(w.Down))
			return 0, 0, false
		}
		for j, x := range set {
			t := b.tensorOf(x, "moe expert")
			if t == nil {
				return 0, 0, false
			}
			if i == 0 && j == 0 {
				dt = t.dt
			}
			want := [2]int{w.Inter, w.Hidden}
			if i == 2 {
				want = [2]int{w.Hidden, w.Inter}
			}
			if t.dt != dt || t.dt == bridge.I32 || len(t.shape) != 2 || t.shape[0] != want[0] || t.shape[1] != want[1] {
				b.fail("moe: expert %d tensor %d is %v %v; want %v %v", j, i, t.dt, t.shape, dt, want)
				return 0, 0, false
			}
			ptrs = append(ptrs, t.ptr)
		}
	}
	p, err := b.pointerTable(ptrs)
	if err != nil {
		b.fail("%v", err)
		return 0, 0, false
	}
	if len(b.moeByW) > 1024 {
		clear(b.moeByW)
	}
	b.moeByW[w] = moeTableRef{ptr: p, dt: dt, n: E, first: w.Gate[0], last: w.Up[E-1], down: w.Down[E-1], router: w.Router}
	return p, dt, true
}

// pointerTable returns a device copy of ptrs, one per content: an engine
// made again on the same weights gets the table, and so the kernel
// arguments, the one before it had (pool.Blocks).
func (b *Backend) pointerTable(ptrs []uint64) (uint64, error) {
	key := string(unsafe.Slice((*byte)(unsafe.Pointer(&ptrs[0])), len(ptrs)*8))
	if p, ok := b.tables[key]; ok {
		return p, nil
	}
	d, err := b.uploadTable(unsafe.Pointer(&ptrs[0]), len(ptrs)*8)
	if err != nil {
		return 0, err
	}
	if len(b.tables) > 256 {
		clear(b.tables) // old engines' tables; their memory stays until Close
	}
	b.tables[key] = d.ptr
	return d.ptr, nil
}

// moeMaxExperts is the largest expert count moe_route handles.
const moeMaxExperts = 512

// attnMaxHeadDim is the largest head the RoPE and attention kernels take.
const attnMaxHeadDim = 256

// CheckShape refuses, before any weight is loaded, a model whose heads or
// expert count the kernels do not take (bridge.ShapeChecker).
func (b *Backend) CheckShape(s bridge.ModelShape) error {
	if s.HeadDim > attnMaxHeadDim {
		return fmt.Errorf("cuda: heads of %d values: the attention kernels take at most %d", s.HeadDim, attnMaxHeadDim)
	}
	if s.Experts > moeMaxExperts {
		return fmt.Errorf("cuda: %d experts: the routing takes at most %d", s.Experts, moeMaxExperts)
	}
	return nil
}

// moe_router_route (moe.cu) routes steps of 2 to routerRouteMaxT tokens
// (ROUTE_MAXT) over at most routerRouteMaxE experts (a thread of its last
// block for each).
const (
	routerRouteMaxT = 16
	routerRouteMaxE = 256
)

// routerRoutes reports whether moe_router_route computes a T-token step's
// router logits over this E×H router and routes from them in one launch.
func routerRoutes(router *tensor, T, E, H int) bool {
	return T >= 2 && T <= routerRouteMaxT && E <= routerRouteMaxE && H%8 == 0 &&
		(router.dt == bridge.BF16 || router.dt == bridge.F16) &&
		len(router.shape) == 2 && router.shape[0] == E && router.shape[1] == H
}

// launchRouterRoute records moe_router_route: the router GEMV of T tokens
// and moe_route's routing of them, with pairs in chunks of chunk and spc
// slots a chunk.
func (b *Backend) launchRouterRoute(x uint64, router *tensor, logits uint64, T, H, E, K int, norm bool, chunk, spc int,
	ids, wts, slotExpert, slotStart, slotCount, pairs uint64, stat int) {
	b.launch("moe_router_route_"+dtName(router.dt), [3]int{cdiv(E, 8), 1, 1}, 256, x, router.ptr, logits,
		i32(T), i32(H), i32(E), i32(K), boolArg(norm), i32(chunk), i32(spc), ids, wts, slotExpert, slotStart, slotCount,
		pairs, b.stats.ptr, i32(stat), b.scratchZeroed("moe.route_counter", 4))
}

func (b *Backend) MoE(out, x bridge.Tensor, w *bridge.MoEWeights, p bridge.MoEParams) {
	o, xs := b.f32Tensor(out, "moe out"), b.f32Tensor(x, "moe x")
	router := b.tensorOf(w.Router, "moe router")
	if o == nil || xs == nil || router == nil {
		return
	}
	H, I, K, E := w.Hidden, w.Inter, w.TopK, len(w.Gate)
	if E == 0 || E > moeMaxExperts || K < 1 || K > E || H == 0 || xs.n%H != 0 {
		b.fail("moe: %d experts (at most %d), top-%d, hidden %d unsupported", E, moeMaxExperts, K, H)
		return
	}
	T := xs.n / H
	if T == 0 {
		return
	}
	table, dt, ok := b.moeTable(w)
	if !ok {
		return
	}
	if b.moeGroupedGEMM(o, xs, router, w, p, table, dt, T) {
		return
	}
	P := T * K
	chunk := P
	single := T == 1 // one token: its experts are distinct, each pair its own slot
	switch p.Strategy {
	case bridge.MoELoop:
		chunk = 1
	case bridge.MoEChunked:
		chunk = min(max(p.ChunkSize, 1), P)
	}
	if single {
		chunk = 1
	}
	spc := min(E, chunk)
	slots := cdiv(P, chunk) * spc

	logits := b.scratchBuf("moe.logits", int64(T)*int64(E)*4)
	ids := b.scratchBuf("moe.ids", int64(P)*4)
	wts := b.scratchBuf("moe.w", int64(P)*4)
	slotExpert := b.scratchBuf("moe.slot_expert", int64(slots)*4)
	slotStart := b.scratchBuf("moe.slot_start", int64(slots)*4)
	slotCount := b.scratchBuf("moe.slot_count", int64(slots)*4)
	pairs := b.scratchBuf("moe.pairs", int64(P)*4)
	hbuf := b.scratchBuf("moe.h", int64(P)*int64(I)*4)
	if b.stepErr != nil {
		return
	}
	stat := min(1+b.moeCalls, statsCap-1)
	b.moeCalls++

	// The router GEMV routes too (one launch fewer): one token, or a few
	// over a half-precision router.
	fuse := !b.opts.NoFuse && !p.Unfused
	fusedRoute := fuse && single && H%8 == 0 && router.dt != bridge.I32 && len(router.shape) == 2 && router.shape[0] == E && router.shape[1] == H
	manyRoute := fuse && routerRoutes(router, T, E, H)
	b.subMark("router")
	switch {
	case fusedRoute:
		counter := b.scratchZeroed("moe.route_counter", 4)
		b.launch("moe_router_route1_"+dtName(router.dt), [3]int{cdiv(E, 8), 1, 1}, 256, xs.ptr, router.ptr, logits,
			i32(H), i32(E), i32(K), boolArg(w.NormTopK), ids, wts, slotExpert, slotStart, slotCount, pairs, b.stats.ptr,
			i32(stat), counter)
	case manyRoute:
		b.launchRouterRoute(xs.ptr, router, logits, T, H, E, K, w.NormTopK, chunk, spc, ids, wts, slotExpert, slotStart,
			slotCount, pairs, stat)
	default:
		b.matmul(logits, xs.ptr, router, 0, T, E, H, true)
	}
	b.subMark("route")
	switch {
	case fusedRoute, manyRoute:
	case single:
		b.launch("moe_route1", [3]int{1, 1, 1}, 32, logits, i32(E), i32(K), boolArg(w.NormTopK),
			ids, wts, slotExpert, slotStart, slotCount, pairs, b.stats.ptr, i32(stat))
	default:
		b.launch("moe_route", [3]int{1, 1, 1}, 1024, logits, i32(T), i32(E), i32(K), boolArg(w.NormTopK), i32(chunk), i32(spc),
			ids, wts, slotExpert, slotStart, slotCount, pairs, b.stats.ptr, i32(stat))
	}

	mc := b.moeConfig(T, E, K, H, I, dt)
	vec := H%8 == 0 && I%8 == 0
	variant := "scalar"
	if vec && mc.pass != "" && chunk > 1 {
		variant = "m" + mc.pass
	} else if vec {
		// Pairs per slot decide how many a pass takes: one for a single
		// token or the loop strategy, more as tokens share experts.
		per := cdiv(min(chunk, P), spc)
		switch {
		case chunk == 1 || (per <= 1 && P <= E/2):
			variant = "m1"
		case per <= 2:
			variant = "m2"
		case per <= 4:
			variant = "m4"
		default:
			variant = "m8"
		}
	}
	rows, suffix := 8, "" // rows per block: 8 warps of mc.rows rows
	if vec && mc.rows == 2 {
		rows, suffix = 16, "_r2"
	}
	gu, gate, up := "moe_gate_up_"+dtName(dt)+"_"+variant+suffix, table, table+uint64(E)*8
	down := table + uint64(2*E)*8
	b.subMark("gate_up")
	b.launch(gu, [3]int{slots, cdiv(I, rows), 1}, 256, xs.ptr, hbuf, gate, up, slotExpert, slotStart, slotCount, pairs,
		i32(H), i32(I), i32(K))
	b.subMark("down")
	if T == 1 && K <= 32 {
		name, ds := "moe_down_sum_"+dtName(dt)+"_d"+strconv.Itoa(mc.dsRows), mc.dsRows
		if !vec {
			name, ds = "moe_down_sum_"+dtName(dt)+"_scalar", 4
		}
		flags := 0
		if mc.prefetch {
			flags = 1
		}
		b.launch(name, [3]int{cdiv(H, ds), 1, 1}, 256, hbuf, ptr(o), down, ids, wts, i32(H), i32(I), i32(K), i32(E), i32(flags))
		return
	}
	y := b.scratchBuf("moe.y", int64(P)*int64(H)*4)
	if b.stepErr != nil {
		return
	}
	b.launch("moe_down_"+dtName(dt)+"_"+variant+suffix, [3]int{slots, cdiv(H, rows), 1}, 256, hbuf, y, down, slotExpert, slotStart,
		slotCount, pairs, i32(H), i32(I))
	b.launch("moe_combine", [3]int{T, cdiv(H, 256), 1}, 256, ptr(o), y, wts, i32(H), i32(K))
}

var _ bridge.Backend = (*Backend)(nil)

// moe_mma.cu's tile: rows of pairs, and the multiples of the hidden and
// intermediate sizes the grouped GEMM needs.
const (
	moeTileRows = 128
	moeTileK    = 32
	// moeGemmSmem is MG_SMEM: 4 stages of 128 + 128 rows of 40 halves.
	moeGemmSmem = 4 * (128 + 128) * 40 * 2
)

// moeGroupedGEMM records the MoE block of a many-token step as a grouped
// GEMM on tensor cores (moe_mma.cu) and reports true, or records nothing
// and reports false where it does not apply: fewer than tcMinRows tokens,
// weights other than bf16, a strategy other than grouped, or sizes off its
// tiles.
func (b *Backend) moeGroupedGEMM(o, xs, router *tensor, w *bridge.MoEWeights, p bridge.MoEParams, table uint64, dt bridge.DType, T int) bool {
	H, I, K, E := w.Hidden, w.Inter, w.TopK, len(w.Gate)
	if dt != bridge.BF16 || !b.tensorCores(T, dt) || !groupedFits(w, p) ||
		router.dt == bridge.I32 || len(router.shape) != 2 || router.shape[0] != E || router.shape[1] != H {
		return false
	}
	gp := b.groupPairs(xs, w, T, func(logits uint64) { b.matmul(logits, xs.ptr, router, 0, T, E, H, true) })
	if b.stepErr != nil {
		return true
	}
	gate, up, down := table, table+uint64(E)*8, table+uint64(2*E)*8
	b.subMark("gate_up")
	b.launch("moe_gemm_gate_up_bf16", [3]int{gp.tiles, I / 64, 1}, 128, gp.xh, gate, up, gp.start, gp.count, gp.tileStart,
		gp.pairs, gp.h, i32(E), i32(K), i32(H), i32(I))
	b.subMark("down")
	b.launch("zero_f32", [3]int{elementwiseGrid(T * H / 4), 1, 1}, 256, ptr(o), i64(int64(T)*int64(H)))
	b.launch("moe_gemm_down_bf16", [3]int{gp.tiles, H / 128, 1}, 128, gp.h, down, gp.start, gp.count, gp.tileStart, gp.pairs,
		gp.wts, ptr(o), i32(E), i32(K), i32(H), i32(I))
	return true
}

// groupedPairs are the buffers of a grouped MoE GEMM (moe_mma.cu): the
// tokens' top-k experts and weights, the (token, expert) pairs sorted by
// expert with each expert's start, count and first row tile, the tiles
// bound for the grid, the activations as bf16 and the SwiGLU outputs h
// (bf16, a row per pair).
type groupedPairs struct {
	ids, wts, start, count, tileStart, pairs, xh, h uint64
	tiles                                           int
}

// groupedFits: the grouped GEMMs' tiles take the block's sizes (hidden a
// multiple of the down projection's 128 columns, intermediate of gate/up's
// 64) and the strategy is grouped.
func groupedFits(w *bridge.MoEWeights, p bridge.MoEParams) bool {
	return (p.Strategy == bridge.MoEGrouped || p.Strategy == "") && w.Hidden%moeTileRows == 0 &&
		w.Inter%(moeTileRows/2) == 0 && len(w.Gate) <= moeMaxExperts
}

// groupPairs records the router (router, into the logits it is given) of
// T tokens, their routing, the sort of their pairs by expert, and xs
// rounded to bf16.
func (b *Backend) groupPairs(xs *tensor, w *bridge.MoEWeights, T int, router func(logits uint64)) groupedPairs {
	H, I, K, E := w.Hidden, w.Inter, w.TopK, len(w.Gate)
	P := T * K
	logits := b.scratchBuf("moe.logits", int64(T)*int64(E)*4)
	if b.stepErr != nil {
		return groupedPairs{}
	}
	stat := min(1+b.moeCalls, statsCap-1)
	b.moeCalls++
	b.subMark("router")
	router(logits)
	gp := groupedPairs{
		ids: b.scratchBuf("moe.ids", int64(P)*4), wts: b.scratchBuf("moe.w", int64(P)*4),
		start: b.scratchBuf("moe.slot_start", int64(E)*4), count: b.scratchBuf("moe.slot_count", int64(E)*4),
		tileStart: b.scratchBuf("moe.tile_start", int64(E+1)*4), pairs: b.scratchBuf("moe.pairs", int64(P)*4),
		xh: b.scratchBuf("moe.xh", int64(T)*int64(H)*2), h: b.scratchBuf("moe.hb", int64(P)*int64(I)*2),
		// Row tiles: at most one partial tile per expert beyond the full ones.
		tiles: cdiv(P, moeTileRows) + min(E, P),
	}
	if b.stepErr != nil {
		return gp
	}
	b.subMark("route")
	b.launch("moe_route_tokens", [3]int{cdiv(T, 8), 1, 1}, 256, logits, i32(T), i32(E), i32(K), boolArg(w.NormTopK), gp.ids, gp.wts,
		b.stats.ptr)
	b.launch("moe_sort", [3]int{1, 1, 1}, 1024, gp.ids, i32(P), i32(E), gp.start, gp.count, gp.tileStart, gp.pairs, b.stats.ptr, i32(stat))
	b.launch("to_half", [3]int{elementwiseGrid(T * H), 1, 1}, 256, xs.ptr, gp.xh, 0, i64(int64(T)*int64(H)), i32(int(bridge.BF16)))
	return gp
}
