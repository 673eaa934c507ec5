package cuda

import (
	"fmt"
	"maps"
	"slices"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
)

// SetGraphedBeginMax sets the longest list whose step_begin is a node of its
// graph, and returns what restores it.
func SetGraphedBeginMax(n int) func() {
	old := graphedBeginMax
	graphedBeginMax = n
	return func() { graphedBeginMax = old }
}

var DecodeSplit = decodeSplit

// SetSMs has b size its launches for n multiprocessors, and returns what
// restores it.
func (b *Backend) SetSMs(n int) func() {
	old := b.sms
	b.sms = n
	return func() { b.sms = old }
}

// QAMoERows is qamoe_gate_up's gate and up rows a warp for t tokens of k
// experts of i rows.
func (b *Backend) QAMoERows(t, k, i int) int { return b.qaMoERows(t, k, i) }

// QAGateUpRows is a one-token fused packed gate/up GEMV's rows a warp for
// n gate (and n up) rows of k values.
func (b *Backend) QAGateUpRows(n, k int) int {
	g := &qgemv{m: 1, k: k, gu: true, nsegs: 2}
	for i := range 2 {
		g.segs[i] = qseg{q: &qtensor{PackedMatrix: bridge.PackedMatrix{Dims: []int{n, k}}}}
	}
	return b.qaLaunchRows(g, 1)
}

// SetDecodeMergeGroup sets the partitions paged_decode merges in one block,
// and returns what restores it.
func SetDecodeMergeGroup(n int) func() {
	old := decodeMergeGroup
	decodeMergeGroup = n
	return func() { decodeMergeGroup = old }
}

// SetNoDecodeMMA has b run decode attention on paged_decode (off true) or,
// where it applies, paged_decode_mma, and returns what restores it.
func (b *Backend) SetNoDecodeMMA(off bool) func() {
	old := b.opts.NoDecodeMMA
	b.opts.NoDecodeMMA = off
	return func() { b.opts.NoDecodeMMA = old }
}

// SetPackedMMA has b run packed matmuls and experts of many-token steps
// on tensor cores (on true) or on the GEMVs, and returns what restores it.
func (b *Backend) SetPackedMMA(on bool) func() {
	old := b.opts.NoPackedMMA
	b.opts.NoPackedMMA = !on
	return func() { b.opts.NoPackedMMA = old }
}

// DecodeKernel is the kernel of b's decode attention for a step of seqs
// sequences whose longest context is maxSeqLen, with a cache of dtype cache.
func (b *Backend) DecodeKernel(cache bridge.DType, seqs, maxSeqLen, heads, kvHeads, headDim int) string {
	if _, _, pos := b.decodeLaunch(cache, seqs, maxSeqLen, heads, kvHeads, headDim, 16); pos > 0 {
		return "paged_decode_mma"
	}
	return "paged_decode"
}

// DecodeMMAStatic bounds paged_decode_mma's static shared memory.
const DecodeMMAStatic = decodeMMAStatic

// DecodeMMAKernels are paged_decode_mma's kernels.
func DecodeMMAKernels() []string { return slices.Sorted(maps.Keys(decodeMMAKernels())) }

// DecodeLaunchOn is the decode attention launch of a step (the kernel, its
// block and split) on a device of sms multiprocessors whose blocks may ask
// for maxShared bytes of shared memory; no GPU is needed.
func DecodeLaunchOn(sms, maxShared int, cache bridge.DType, seqs, maxSeqLen, heads, kvHeads, headDim int) (kernel string, threads, chunks, nparts int) {
	b := &Backend{device: device{sms: sms, maxSharedBlock: maxShared}}
	chunks, nparts, pos := b.decodeLaunch(cache, seqs, maxSeqLen, heads, kvHeads, headDim, 16)
	if pos == 0 {
		return "paged_decode", 256, chunks, nparts
	}
	return fmt.Sprintf("paged_decode_mma_p%d", pos), decodeMMAThreads(pos), chunks, nparts
}

// KernelStaticShared is the static shared memory a block of the loaded
// kernel name takes.
func (b *Backend) KernelStaticShared(name string) (int, error) {
	return b.kernelAttribute(name, 1) // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
}

// KernelLocalBytes is the local memory (stack frame and spills) a thread
// of the loaded kernel name takes.
func (b *Backend) KernelLocalBytes(name string) (int, error) {
	return b.kernelAttribute(name, 3) // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
}

// KernelRegisters is a loaded kernel's registers a thread.
func (b *Backend) KernelRegisters(name string) (int, error) {
	return b.kernelAttribute(name, 4) // CU_FUNC_ATTRIBUTE_NUM_REGS
}

func (b *Backend) kernelAttribute(name string, attr uintptr) (int, error) {
	f, ok := b.fns[name]
	if !ok {
		return 0, fmt.Errorf("no kernel %q", name)
	}
	var n int32
	if err := b.check("cuFuncGetAttribute "+name, call(b.api.cuFuncGetAttribute, uintptr(unsafe.Pointer(&n)), attr, f)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// KernelNames lists every kernel the backend loads.
var KernelNames = kernelNames

// SetGemvMMA has b run matmuls of 9 to 16 tokens over half weights on
// gemv_mma (on true) or cuBLAS, and returns what restores it.
func (b *Backend) SetGemvMMA(on bool) func() {
	old := b.opts.GemvMMA
	b.opts.GemvMMA = on
	return func() { b.opts.GemvMMA = old }
}

// ChainSlots is the ring slots of b's persistent GEMV chains (0: none).
func (b *Backend) ChainSlots() int { return b.qcSlots }

// PartState is one part of a packed matrix (values, scales, biases) as the
// allocator sees it: Chunk is its arena chunk (nil for a block of its own)
// and Live that chunk's pieces still in use.
type PartState struct {
	Name     string
	Chunk    any
	Live     int
	Released bool // released by Free
	Held     bool // a block of its own not yet given back
}

// PackedParts reads w's parts' state on the backend's thread.
func (b *Backend) PackedParts(w bridge.Tensor) []PartState {
	q := w.(*qtensor)
	var out []PartState
	b.th.do(func() error { //nolint:errcheck // reads only
		for _, p := range []struct {
			name string
			t    *tensor
		}{{"values", q.data}, {"scales", q.scales}, {"biases", q.biases}} {
			if p.t == nil || p.t.mem == nil {
				continue
			}
			d := p.t.mem
			s := PartState{Name: p.name, Released: d.freed.Load(), Held: d.chunk == nil && d.ptr != 0}
			if d.chunk != nil {
				s.Chunk, s.Live = d.chunk, d.chunk.live
			}
			out = append(out, s)
		}
		return nil
	})
	return out
}

// WeightCached reports whether the bytes' device copy is in the weight cache.
func (b *Backend) WeightCached(dt bridge.DType, data []byte) bool {
	b.memMu.Lock()
	defer b.memMu.Unlock()
	_, ok := b.weights[bridge.KeyOf(dt, data)]
	return ok
}

// ArenaMax is the size from which a weight takes a block of its own.
const ArenaMax = arenaMax
