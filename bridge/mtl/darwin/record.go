package darwin

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mtlbench/mtlbench/bridge/mtl"
)

// The Go side of the device: buffers, pipelines and the recording of compute
// passes, with the checks Metal's API validation would make. Nothing here
// calls into Metal, so it is tested on every OS; the darwin files make the
// objects and replay recordings.

// mtlSize is MTLSize: three NSUIntegers. At 24 bytes it is neither returned
// in registers nor passed in them on arm64: AAPCS64 (B.4) passes a copy by
// address in the next integer register, and returns it through x8.
type mtlSize struct {
	W, H, D uint64
}

// opCode is a recorded encoder call.
type opCode uint8

// dispatchConcurrent is MTLDispatchTypeConcurrent.
const dispatchConcurrent = 1

const (
	opEncoder      opCode = iota // computeCommandEncoder; b = dispatchConcurrent: computeCommandEncoderWithDispatchType:
	opTimedEncoder               // computeCommandEncoderWithDescriptor: sampling the pass's start and end; a = pass
	opPipeline                   // setComputePipelineState: a
	opBuffer                     // setBuffer: a offset: b atIndex: c
	opBytes                      // setBytes: arena[a:a+b] length: b atIndex: c
	opTGMemory                   // setThreadgroupMemoryLength: a atIndex: b
	opGroups                     // dispatchThreadgroups: g threadsPerThreadgroup: t
	opThreads                    // dispatchThreads: g threadsPerThreadgroup: t
	opBarrier                    // memoryBarrierWithScope: MTLBarrierScopeBuffers
	opEnd                        // endEncoding
)

type op struct {
	code    opCode
	a, b, c uintptr
	g, t    mtlSize
}

// buffer is an MTLBuffer in shared storage; mem is its contents.
type buffer struct {
	id       uintptr
	mem      []byte
	released atomic.Bool
	free     func(id uintptr) // releases the MTLBuffer
}

func (b *buffer) Contents() []byte {
	if b.released.Load() {
		return nil
	}
	return b.mem
}

func (b *buffer) Length() int { return len(b.mem) }

// Release drops the buffer. Command buffers committed before keep the
// MTLBuffer alive until they complete (they retain what they use).
func (b *buffer) Release() {
	if b.released.CompareAndSwap(false, true) && b.free != nil {
		b.free(b.id)
	}
}

// pipeline is an MTLComputePipelineState.
type pipeline struct {
	name     string
	id       uintptr
	maxTotal int
	width    int
	staticTG int
	// tgArgs are the kernel's [[threadgroup(n)]] arguments, from the
	// pipeline's reflection; reflected says whether there was one to read.
	tgArgs    []mtl.ThreadgroupArg
	reflected bool
}

// bindingThreadgroupMemory is MTLBindingTypeThreadgroupMemory.
const bindingThreadgroupMemory = 1

// binding is what this package reads of one MTLBinding of a pipeline's
// reflection (MTLComputePipelineReflection.bindings).
type binding struct {
	name  string
	typ   int64 // MTLBindingType
	index int
}

// threadgroupArgsOf picks a kernel's threadgroup arguments out of its
// pipeline's bindings.
func threadgroupArgsOf(bs []binding) []mtl.ThreadgroupArg {
	var out []mtl.ThreadgroupArg
	for _, b := range bs {
		if b.typ == bindingThreadgroupMemory {
			out = append(out, mtl.ThreadgroupArg{Name: b.name, Index: b.index})
		}
	}
	return out
}

// threadgroupArgs is what a dispatch of p is given threadgroup memory for:
// its reflected arguments, or, for a pipeline made without reflection,
// every index the encoder set a length at (more than Metal gives the
// kernel, never less).
func (p *pipeline) threadgroupArgs(l *mtl.ThreadgroupLengths) []mtl.ThreadgroupArg {
	if p.reflected {
		return p.tgArgs
	}
	var out []mtl.ThreadgroupArg
	for i, n := range l {
		if n > 0 {
			out = append(out, mtl.ThreadgroupArg{Name: "?", Index: i})
		}
	}
	return out
}

var (
	_ mtl.Buffer   = (*buffer)(nil)
	_ mtl.Pipeline = (*pipeline)(nil)
)

func (p *pipeline) Name() string                       { return p.name }
func (p *pipeline) MaxTotalThreadsPerThreadgroup() int { return p.maxTotal }
func (p *pipeline) ThreadExecutionWidth() int          { return p.width }
func (p *pipeline) StaticThreadgroupMemoryLength() int { return p.staticTG }

// recording is a command buffer's commands, kept in Go until Commit replays
// them into an MTLCommandBuffer in one trip to the Metal thread.
type recording struct {
	maxTGMemory int // the device's threadgroup memory limit

	mu        sync.Mutex
	ops       []op
	arena     []byte    // setBytes copies
	bufs      []*buffer // bound buffers, checked for Release at Commit
	open      *encoder
	encErr    error // first encoding mistake
	committed bool
	timed     int      // timed passes
	kernels   []string // the kernels dispatched, each once, in order: a failed command buffer names them
}

func (r *recording) fail(err error) {
	if r.encErr == nil {
		r.encErr = err
	}
}

func (r *recording) newEncoder(timed, concurrent bool) (mtl.ComputeEncoder, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.committed {
		return nil, errors.New("metal: ComputeEncoder on a committed command buffer")
	}
	if r.open != nil {
		return nil, errors.New("metal: ComputeEncoder while the previous encoder is not ended")
	}
	e := &encoder{r: r}
	r.open = e
	if timed {
		r.ops = append(r.ops, op{code: opTimedEncoder, a: uintptr(r.timed)})
		r.timed++
	} else if concurrent {
		r.ops = append(r.ops, op{code: opEncoder, b: dispatchConcurrent})
	} else {
		r.ops = append(r.ops, op{code: opEncoder})
	}
	return e, nil
}

// commit ends the recording; it reports whether this call did (a second
// Commit does nothing) and the first encoding mistake, an encoder left open
// included.
func (r *recording) commit() (first bool, encErr error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.committed {
		return false, nil
	}
	if r.open != nil {
		r.fail(errors.New("metal: Commit with an encoder that is not ended"))
	}
	r.committed = true
	return true, r.encErr
}

func (r *recording) isCommitted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.committed
}

// encoder records a compute pass; the darwin build replays it
// (commandBuffer.submit).
type encoder struct {
	r     *recording
	pipe  *pipeline
	tgmem mtl.ThreadgroupLengths
	ended bool
}

var _ mtl.ComputeEncoder = (*encoder)(nil)

func (e *encoder) fail(format string, args ...any) {
	e.r.mu.Lock()
	if !e.r.committed {
		e.r.fail(fmt.Errorf("metal: "+format, args...))
	}
	e.r.mu.Unlock()
}

// usable reports whether the encoder can take a call, recording a mistake
// when it cannot.
func (e *encoder) usable(what string) bool {
	e.r.mu.Lock()
	committed := e.r.committed
	e.r.mu.Unlock()
	switch {
	case committed:
		return false // as in Metal, where the encoder is gone
	case e.ended:
		e.fail("%s after End", what)
		return false
	}
	return true
}

// add records o, unless the command buffer was committed meanwhile.
func (e *encoder) add(o op) {
	e.r.mu.Lock()
	if !e.r.committed {
		e.r.ops = append(e.r.ops, o)
	}
	e.r.mu.Unlock()
}

func (e *encoder) SetPipeline(p mtl.Pipeline) {
	if !e.usable("SetPipeline") {
		return
	}
	pp, ok := p.(*pipeline)
	if !ok || pp == nil {
		e.fail("SetPipeline: %T is not a Metal pipeline", p)
		return
	}
	e.pipe = pp
	e.add(op{code: opPipeline, a: pp.id})
}

func (e *encoder) SetBuffer(b mtl.Buffer, offset, index int) {
	if !e.usable("SetBuffer") {
		return
	}
	bb, ok := b.(*buffer)
	switch {
	case index < 0 || index > 30:
		e.fail("SetBuffer: index %d out of range [0, 30]", index)
	case b == nil || ok && bb == nil:
		e.add(op{code: opBuffer, c: uintptr(index)}) // setBuffer:nil unbinds
	case !ok:
		e.fail("SetBuffer: %T is not a Metal buffer", b)
	case offset < 0 || offset >= len(bb.mem):
		e.fail("SetBuffer: offset %d outside the %d-byte buffer", offset, len(bb.mem))
	default:
		e.r.mu.Lock()
		if !e.r.committed {
			e.r.bufs = append(e.r.bufs, bb)
			e.r.ops = append(e.r.ops, op{code: opBuffer, a: bb.id, b: uintptr(offset), c: uintptr(index)})
		}
		e.r.mu.Unlock()
	}
}

func (e *encoder) SetBytes(data []byte, index int) {
	if !e.usable("SetBytes") {
		return
	}
	switch {
	case index < 0 || index > 30:
		e.fail("SetBytes: index %d out of range [0, 30]", index)
	case len(data) == 0 || len(data) > 4096:
		e.fail("SetBytes: %d bytes; Metal takes 1 to 4096 (use a buffer)", len(data))
	default:
		e.r.mu.Lock()
		if !e.r.committed {
			off := len(e.r.arena)
			e.r.arena = append(e.r.arena, data...)
			e.r.ops = append(e.r.ops, op{code: opBytes, a: uintptr(off), b: uintptr(len(data)), c: uintptr(index)})
		}
		e.r.mu.Unlock()
	}
}

func (e *encoder) SetThreadgroupMemoryLength(length, index int) {
	if !e.usable("SetThreadgroupMemoryLength") {
		return
	}
	if err := e.tgmem.Set(length, index); err != nil {
		e.fail("%v", err)
		return
	}
	e.add(op{code: opTGMemory, a: uintptr(length), b: uintptr(index)})
}

func (e *encoder) DispatchThreadgroups(groups, tpg [3]int) { e.dispatch(opGroups, groups, tpg) }

func (e *encoder) DispatchThreads(threads, tpg [3]int) { e.dispatch(opThreads, threads, tpg) }

// dispatch checks what Metal's API validation would (a GPU given a bad
// dispatch faults or hangs instead) and records it: size is threadgroups
// for opGroups, threads for opThreads, checked by bridge/mtl's rule, which
// the emulator shares.
func (e *encoder) dispatch(code opCode, size, tpg [3]int) {
	if !e.usable("dispatch") {
		return
	}
	p := e.pipe
	if p == nil {
		e.fail("dispatch without SetPipeline")
		return
	}
	check := mtl.CheckThreads
	if code == opGroups {
		check = mtl.CheckThreadgroups
	}
	d, err := check(p.name, size, tpg, p.maxTotal)
	if err != nil {
		e.fail("%v", err)
		return
	}
	if d.Empty {
		return // nothing to run; Metal rejects empty dispatches
	}
	groups, grid := d.Groups, d.Grid
	// Only the kernel's own threadgroup arguments take memory: lengths an
	// earlier dispatch of this encoder left at other indices stay set in
	// Metal but are not this kernel's (bridge/mtl's rule, as in the emulator).
	if _, err := e.tgmem.Dynamic(p.name, p.threadgroupArgs(&e.tgmem), p.staticTG, e.r.maxTGMemory); err != nil {
		e.fail("%v", err)
		return
	}
	o := op{code: code}
	if code == opGroups {
		o.g = mtlSize{uint64(groups[0]), uint64(groups[1]), uint64(groups[2])}
	} else {
		o.g = mtlSize{uint64(grid[0]), uint64(grid[1]), uint64(grid[2])}
	}
	o.t = mtlSize{uint64(tpg[0]), uint64(tpg[1]), uint64(tpg[2])}
	e.r.mu.Lock()
	if !e.r.committed {
		e.r.ops = append(e.r.ops, o)
		if !slices.Contains(e.r.kernels, p.name) {
			e.r.kernels = append(e.r.kernels, p.name)
		}
	}
	e.r.mu.Unlock()
}

// MemoryBarrier is memoryBarrierWithScope:MTLBarrierScopeBuffers.
func (e *encoder) MemoryBarrier() {
	if e.usable("MemoryBarrier") {
		e.add(op{code: opBarrier})
	}
}

// End is endEncoding.
func (e *encoder) End() {
	if e.ended {
		return
	}
	e.ended = true
	e.r.mu.Lock()
	if e.r.open == e {
		e.r.open = nil
		if !e.r.committed {
			e.r.ops = append(e.r.ops, op{code: opEnd})
		}
	}
	e.r.mu.Unlock()
}
