package emu

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge/mtl"
)

type queue struct {
	dev  *Device
	mu   sync.Mutex
	last chan struct{} // completion of the last committed command buffer
}

// NewCommandQueue makes a queue; its command buffers run one after another.
func (d *Device) NewCommandQueue() (mtl.CommandQueue, error) { return &queue{dev: d}, nil }

func (q *queue) CommandBuffer() (mtl.CommandBuffer, error) {
	return &commandBuffer{q: q, done: make(chan struct{})}, nil
}

// command is one dispatch with its arguments resolved at encoding time, as
// Metal captures them.
type command struct {
	order int // encoding order: a concurrent pass runs its dispatches in another
	pipe  *pipeline
	desc  *cDesc
	bufs  []*buffer // to check they were not released before execution
	keep  [][]byte  // setBytes copies the descriptor points into
	fp    footprint // filled when it ran, with the footprint on
}

type commandBuffer struct {
	q         *queue
	mu        sync.Mutex
	cmds      []*command
	open      *encoder
	encErr    error // first encoding mistake
	committed bool
	done      chan struct{}
	err       error
	start     float64
	end       float64
	stats     []mtl.DispatchStats // the cost witness, filled by execute
}

var _ mtl.CostWitness = (*commandBuffer)(nil)

// DispatchStats is the cost witness of each dispatch that ran, in encoding
// order; nil until Wait returns or when Options.NoCostWitness is set.
func (cb *commandBuffer) DispatchStats() []mtl.DispatchStats {
	select {
	case <-cb.done:
		return cb.stats
	default:
		return nil
	}
}

func (cb *commandBuffer) fail(err error) {
	if cb.encErr == nil {
		cb.encErr = err
	}
}

func (cb *commandBuffer) ComputeEncoder() (mtl.ComputeEncoder, error) {
	return cb.newEncoder(false)
}

// ConcurrentEncoder starts a concurrent pass. The emulator runs each run of
// dispatches between two memory barriers in reverse order: a dispatch that
// depends on an earlier one without a barrier between them then reads what
// was there before, as it may on a GPU.
func (cb *commandBuffer) ConcurrentEncoder() (mtl.ComputeEncoder, error) {
	return cb.newEncoder(true)
}

func (cb *commandBuffer) newEncoder(concurrent bool) (mtl.ComputeEncoder, error) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.committed {
		return nil, errors.New("msl-emu: ComputeEncoder on a committed command buffer")
	}
	if cb.open != nil {
		return nil, errors.New("msl-emu: ComputeEncoder while the previous encoder is not ended")
	}
	e := &encoder{cb: cb, concurrent: concurrent, seg: len(cb.cmds)}
	cb.open = e
	return e, nil
}

func (cb *commandBuffer) Commit() {
	cb.mu.Lock()
	if cb.committed {
		cb.mu.Unlock()
		return
	}
	if cb.open != nil {
		cb.fail(errors.New("msl-emu: Commit with an encoder that is not ended"))
	}
	cb.committed = true
	cb.mu.Unlock()
	q := cb.q
	q.mu.Lock()
	prev := q.last
	q.last = cb.done
	q.mu.Unlock()
	go func() {
		if prev != nil {
			<-prev
		}
		cb.execute()
		close(cb.done)
	}()
}

func (cb *commandBuffer) Wait() error {
	cb.mu.Lock()
	committed := cb.committed
	cb.mu.Unlock()
	if !committed {
		return errors.New("msl-emu: Wait on a command buffer that was not committed")
	}
	<-cb.done
	return cb.err
}

func (cb *commandBuffer) GPUTime() (float64, float64) { return cb.start, cb.end }

func (cb *commandBuffer) execute() {
	dev := cb.q.dev
	cb.start = dev.now()
	defer func() { cb.end = dev.now() }()
	if cb.encErr != nil {
		cb.err = cb.encErr
		return
	}
	var order []int
	for _, c := range cb.cmds {
		for _, b := range c.bufs {
			if b.released.Load() {
				cb.err = fmt.Errorf("msl-emu: kernel %s: a buffer was released before the command buffer ran", c.pipe.k.Name)
				return
			}
		}
		groups := c.desc.groups[0] * c.desc.groups[1] * c.desc.groups[2]
		workers := defaultWorkers(dev.opts.Workers)
		if int64(workers) > groups {
			workers = int(groups)
		}
		limit := dev.opts.DispatchTimeout
		if limit == 0 {
			limit = DefaultDispatchTimeout
		}
		fp, err := c.pipe.lib.lib.dispatch(c.desc, workers, dev.opts.Stop, limit)
		c.fp = fp
		// A kernel the rewriter could not key (an unnamed template
		// parameter) learns its static length here (docs/msl-subset.md).
		if st := c.desc.staticTG; st > c.pipe.staticTG.Load() {
			c.pipe.staticTG.Store(st)
		}
		if err != nil {
			if ee, ok := err.(*ExecutionError); ok {
				ee.Kernel = c.pipe.k.Name
				if ee.Msg == "" { // the time limit (lib.go's run)
					ee.Msg = fmt.Sprintf("kernel %s: %s", ee.Kernel, ee.timeout)
				}
			}
			cb.err = err
			return
		}
		if c.desc.flags&2 != 0 {
			cb.stats = append(cb.stats, c.stats())
			order = append(order, c.order)
		}
	}
	// The witness lists dispatches in encoding order, whatever order a
	// concurrent pass ran them in.
	sort.Sort(byOrder{cb.stats, order})
}

type byOrder struct {
	s []mtl.DispatchStats
	o []int
}

func (b byOrder) Len() int           { return len(b.s) }
func (b byOrder) Less(i, j int) bool { return b.o[i] < b.o[j] }
func (b byOrder) Swap(i, j int) {
	b.s[i], b.s[j] = b.s[j], b.s[i]
	b.o[i], b.o[j] = b.o[j], b.o[i]
}

// stats turns a dispatch's counts into its DispatchStats.
func (c *command) stats() mtl.DispatchStats {
	d := c.desc
	s := mtl.DispatchStats{Kernel: c.pipe.k.Name}
	for i := 0; i < 3; i++ {
		s.Grid[i], s.Groups[i], s.ThreadsPerGroup[i] = int(d.grid[i]), int(d.groups[i]), int(d.tpg[i])
	}
	// Dynamic lengths are laid out 16-byte aligned before the static
	// variables, as emu_runtime.cpp's run_group does.
	dyn := 0
	for _, l := range d.tgmem {
		if l > 0 {
			dyn = (dyn+15)&^15 + int(l)
		}
	}
	s.ThreadgroupMemory = dyn + int(d.staticTG)
	groups := d.groups[0] * d.groups[1] * d.groups[2]
	s.Cost = mtl.Cost{
		BytesRead: d.cost.bytesRead, BytesWritten: d.cost.bytesWritten,
		Loads: d.cost.loads, Stores: d.cost.stores, SimdgroupLoads: d.cost.simdgroupLoads, CriticalLoads: d.cost.simdgroupLoadsMax,
		Barriers: d.cost.barriers, Threadgroups: groups,
		Simdgroups: d.cost.simdgroups, Threads: d.cost.threads,
		ThreadgroupMemoryLaunched: int64(s.ThreadgroupMemory) * groups,
		FootprintRead:             c.fp.read, FootprintWritten: c.fp.written,
	}
	for _, r := range c.fp.ranges {
		if r.read+r.written+r.distinctRead+r.distinctWritten == 0 {
			continue
		}
		s.Operands = append(s.Operands, mtl.Operand{Name: c.pipe.operandName(r.bindings), Read: r.read, Written: r.written,
			FootprintRead: r.distinctRead, FootprintWritten: r.distinctWritten})
	}
	return s
}

// operandName names buffer arguments by the kernel's parameter names,
// joined with "+" where bound at one address; "buffer(N)" for an index the
// kernel does not declare.
func (p *pipeline) operandName(indices []int) string {
	names := make([]string, 0, len(indices))
	for _, i := range indices {
		name := fmt.Sprintf("buffer(%d)", i)
		for _, prm := range p.k.Params {
			if prm.Kind == "buffer" && prm.Index == i {
				name = prm.Name
				break
			}
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return strings.Join(names, "+")
}

type binding struct {
	buf   *buffer
	off   int
	bytes []byte
}

type encoder struct {
	cb         *commandBuffer
	pipe       *pipeline
	bind       [31]binding
	tgmem      mtl.ThreadgroupLengths
	ended      bool
	concurrent bool
	seg        int // first command since the last barrier (concurrent)
}

// runConcurrent reverses the dispatches since the last barrier of a
// concurrent pass (see ConcurrentEncoder).
func (e *encoder) runConcurrent() {
	if !e.concurrent {
		return
	}
	e.cb.mu.Lock()
	slices.Reverse(e.cb.cmds[e.seg:])
	e.seg = len(e.cb.cmds)
	e.cb.mu.Unlock()
}

func (e *encoder) fail(format string, args ...any) {
	e.cb.mu.Lock()
	e.cb.fail(fmt.Errorf("msl-emu: "+format, args...))
	e.cb.mu.Unlock()
}

func (e *encoder) usable(what string) bool {
	e.cb.mu.Lock()
	committed := e.cb.committed
	e.cb.mu.Unlock()
	switch {
	case committed:
		return false // Metal raises; the command buffer is already running
	case e.ended:
		e.fail("%s after End", what)
		return false
	}
	return true
}

func (e *encoder) SetPipeline(p mtl.Pipeline) {
	if !e.usable("SetPipeline") {
		return
	}
	pp, ok := p.(*pipeline)
	if !ok {
		e.fail("SetPipeline: %T is not an msl-emu pipeline", p)
		return
	}
	e.pipe = pp
}

func (e *encoder) SetBuffer(b mtl.Buffer, offset, index int) {
	if !e.usable("SetBuffer") {
		return
	}
	bb, ok := b.(*buffer)
	switch {
	case index < 0 || index > 30:
		e.fail("SetBuffer: index %d out of range [0, 30]", index)
	case b == nil:
		e.bind[index] = binding{}
	case !ok:
		e.fail("SetBuffer: %T is not an msl-emu buffer", b)
	case offset < 0 || offset >= len(bb.mem):
		e.fail("SetBuffer: offset %d outside the %d-byte buffer", offset, len(bb.mem))
	default:
		e.bind[index] = binding{buf: bb, off: offset}
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
		e.bind[index] = binding{bytes: append([]byte(nil), data...)}
	}
}

func (e *encoder) SetThreadgroupMemoryLength(length, index int) {
	if !e.usable("SetThreadgroupMemoryLength") {
		return
	}
	if err := e.tgmem.Set(length, index); err != nil {
		e.fail("%v", err)
	}
}

func (e *encoder) DispatchThreadgroups(groups, tpg [3]int) {
	e.dispatch(mtl.CheckThreadgroups, groups, tpg)
}

func (e *encoder) DispatchThreads(threads, tpg [3]int) {
	e.dispatch(mtl.CheckThreads, threads, tpg)
}

// dispatch validates a dispatch as Metal's API validation would and
// captures its arguments; check is bridge/mtl's rule for the sizes, which
// the darwin device shares.
func (e *encoder) dispatch(check func(string, [3]int, [3]int, int) (mtl.Dispatch, error), size, tpg [3]int) {
	if !e.usable("dispatch") {
		return
	}
	p := e.pipe
	if p == nil {
		e.fail("dispatch without SetPipeline")
		return
	}
	name := p.k.Name
	sz, err := check(name, size, tpg, p.maxTotal)
	if err != nil {
		e.fail("%v", err)
		return
	}
	if sz.Empty {
		return
	}
	groups, grid := sz.Groups, sz.Grid
	d := &cDesc{abi: abi, kernel: p.index, tgmax: int64(p.lib.dev.MaxThreadgroupMemoryLength())}
	if !p.lib.dev.opts.NoRaceCheck {
		d.flags |= 1
	}
	if p.lib.dev.opts.ReverseLanes {
		d.flags |= 8
	}
	if !p.lib.dev.opts.NoCostWitness {
		d.flags |= 2
		if !p.lib.dev.opts.NoFootprint {
			d.flags |= 4
		}
	}
	for i := 0; i < 3; i++ {
		d.groups[i], d.tpg[i], d.grid[i] = int64(groups[i]), int64(tpg[i]), int64(grid[i])
	}
	c := &command{pipe: p, desc: d}
	for _, prm := range p.k.Params {
		if prm.Kind != "buffer" {
			continue
		}
		if b := e.bind[prm.Index]; b.buf == nil && b.bytes == nil && prm.FC == "" {
			e.fail("kernel %s: buffer(%d) '%s' is not bound", name, prm.Index, prm.Name)
			return
		}
	}
	// Only the kernel's own [[threadgroup(n)]] arguments take memory, as on
	// Metal: a length left at another index by an earlier dispatch is not
	// this kernel's (bridge/mtl's rule, which the darwin device shares).
	if _, err := e.tgmem.Dynamic(name, p.tgArgs, p.StaticThreadgroupMemoryLength(), p.lib.dev.MaxThreadgroupMemoryLength()); err != nil {
		e.fail("%s:%d: %v", p.k.File, p.k.Line, err)
		return
	}
	for _, a := range p.tgArgs {
		d.tgmem[a.Index] = int64(e.tgmem[a.Index])
	}
	for i, b := range e.bind {
		switch {
		case b.buf != nil:
			d.buf[i] = cBinding{uintptr(unsafe.Pointer(&b.buf.mem[b.off])), int64(len(b.buf.mem) - b.off)}
			c.bufs = append(c.bufs, b.buf)
		case b.bytes != nil:
			d.buf[i] = cBinding{uintptr(unsafe.Pointer(&b.bytes[0])), int64(len(b.bytes))}
			c.keep = append(c.keep, b.bytes)
		}
	}
	if len(p.fcs) > 0 {
		d.fcs = uintptr(unsafe.Pointer(&p.fcs[0]))
		d.nfc = int64(len(p.fcs))
	}
	e.cb.mu.Lock()
	c.order = len(e.cb.cmds)
	e.cb.cmds = append(e.cb.cmds, c)
	e.cb.mu.Unlock()
}

// MemoryBarrier ends a run of concurrent dispatches; a serial pass runs
// each dispatch to completion before the next already.
func (e *encoder) MemoryBarrier() {
	if e.usable("MemoryBarrier") {
		e.runConcurrent()
	}
}

func (e *encoder) End() {
	if e.ended {
		return
	}
	e.runConcurrent()
	e.ended = true
	e.cb.mu.Lock()
	if e.cb.open == e {
		e.cb.open = nil
	}
	e.cb.mu.Unlock()
}
