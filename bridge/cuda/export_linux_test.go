package cuda

import (
	"fmt"
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
	chunks, _ := b.decodeConfig(seqs, maxSeqLen, heads, kvHeads, headDim, 16)
	if b.decodeMMA(cache, heads/kvHeads, headDim, chunks) {
		return "paged_decode_mma"
	}
	return "paged_decode"
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
