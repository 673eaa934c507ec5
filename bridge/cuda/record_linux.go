//go:build linux

package cuda

import (
	"fmt"
	"maps"
	"math"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
)

type entryKind uint8

const (
	entLaunch entryKind = iota
	entGemm
	entMark
)

// entry is one recorded unit of work: a kernel launch (args[a0:a1] are its
// parameters, one 8-byte slot each), a cuBLAS GEMM, or a profile mark.
type entry struct {
	kind  entryKind
	fn    uintptr
	grid  [3]uint32
	block uint32
	// smem is the dynamic shared memory of the launch: fixed per kernel
	// (smemKernels), so a graph's key need not hold it.
	smem   uint32
	a0, a1 int32
	// at is the op the launch belongs to, for the in-place timeline
	// (b.tlAts; not part of a graph's key)
	at int32
}

// Mark starts a profile span: an event is recorded between ops.
func (b *Backend) Mark(layer int, component, op string) {
	if b.opts.Timeline {
		b.tlMark(layer, component, op)
	}
	if !b.profile || !b.inStep {
		return
	}
	b.marks = append(b.marks, bridge.OpTiming{Layer: layer, Component: component, Op: op})
	b.ents = append(b.ents, entry{kind: entMark, a0: int32(len(b.marks) - 1)})
}

// subMark splits the current profile span into named parts (op:name) when
// MTLBENCH_CUDA_PROFILE_DETAIL=1, to see the kernels inside an engine op.
func (b *Backend) subMark(name string) {
	if !b.profile || !b.inStep || !b.opts.ProfileDetail || len(b.marks) == 0 {
		return
	}
	m := b.marks[len(b.marks)-1]
	if base, _, ok := strings.Cut(m.Op, ":"); ok {
		m.Op = base
	}
	m.Op += ":" + name
	b.marks = append(b.marks, m)
	b.ents = append(b.ents, entry{kind: entMark, a0: int32(len(b.marks) - 1)})
}

// fail records the step's first error; EndStep returns it.
func (b *Backend) fail(format string, args ...any) {
	if b.stepErr == nil {
		b.stepErr = fmt.Errorf("cuda: "+format, args...)
	}
}

// launch records a kernel launch. Grids with a zero dimension launch nothing.
func (b *Backend) launch(name string, grid [3]int, block int, args ...uint64) {
	if !b.inStep {
		b.fail("%s outside a step", name)
		return
	}
	fn, ok := b.fns[name]
	if !ok {
		b.fail("internal: no kernel %q", name)
		return
	}
	for i, g := range grid {
		if g <= 0 {
			return
		}
		if g > math.MaxInt32 || (i > 0 && g > 65535) {
			b.fail("%s: grid %v too large", name, grid)
			return
		}
	}
	b.appendLaunch(fn, grid, block, args...)
	b.ents[len(b.ents)-1].smem = uint32(smemKernels[name])
	b.streamSegment()
}

// smemKernels are the kernels that take dynamic shared memory, with its
// size: more than the 48 KiB a block gets without asking, which load sets
// as their limit (cuFuncSetAttribute).
var smemKernels = map[string]int{
	"moe_gemm_gate_up_bf16": moeGemmSmem, "moe_gemm_down_bf16": moeGemmSmem,
}

func init() {
	for _, dt := range KVDTypes {
		for _, d := range []int{64, 128} {
			smemKernels[fmt.Sprintf("flash_attention_d%d_%s", d, dtName(dt))] = flashSmem(d)
		}
	}
	maps.Copy(smemKernels, decodeMMAKernels())
}

func (b *Backend) appendLaunch(fn uintptr, grid [3]int, block int, args ...uint64) {
	a0 := len(b.args)
	b.args = append(b.args, args...)
	b.ents = append(b.ents, entry{kind: entLaunch, fn: fn, grid: [3]uint32{uint32(grid[0]), uint32(grid[1]), uint32(grid[2])},
		block: uint32(block), a0: int32(a0), a1: int32(len(b.args)), at: b.tlCur})
}

// streamSegment hands the entries recorded so far to the CUDA thread once
// there are enough of them (bridge.StreamPieces), and records on: a deep
// model's decode step takes the host hundreds of microseconds to record,
// which the GPU would otherwise spend idle. The newest entry stays behind,
// since the next op may still fuse into it.
func (b *Backend) streamSegment() {
	cut := len(b.ents) - 1
	if !b.streaming || b.stepErr != nil || !b.pieces.Take(cut-b.flushed) {
		return
	}
	ents, args := b.ents[b.flushed:cut:cut], b.args[:b.ents[cut].a0:b.ents[cut].a0]
	first := !b.started
	b.flushed, b.started = cut, true
	// The recorder appends past cut (or into a new array), so the thread
	// reads entries and arguments no one writes.
	b.th.post(func() {
		defer func() {
			if r := recover(); r != nil && b.segErr == nil {
				b.segErr = fmt.Errorf("cuda: panic: %v", r)
			}
		}()
		if b.segErr != nil {
			return
		}
		if first {
			if b.segErr = b.markStart(); b.segErr != nil {
				return
			}
			if b.segErr = b.stepPrologue(); b.segErr != nil {
				return
			}
		}
		b.segErr = b.runGraph(ents, args)
	})
}

// Argument slots: every kernel parameter takes 8 bytes in the list; the
// driver reads as many as the parameter's size (little endian).
func i32(v int) uint64     { return uint64(uint32(int32(v))) }
func i64(v int64) uint64   { return uint64(v) }
func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }
func f64(v float64) uint64 { return math.Float64bits(v) }
func ptr(t *tensor) uint64 { return t.ptr }
func boolArg(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}
