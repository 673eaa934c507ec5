//go:build linux

package cuda

import (
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

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
	kind   entryKind
	fn     uintptr
	grid   [3]uint32
	block  uint32
	a0, a1 int32
	// patch: the arguments change from step to step (step_begin's and
	// step_end's pinned buffers); they are left out of the graph's key and
	// set on its node before each launch
	patch bool
}

// metaOffsets locate the step's metadata in the device buffer (int32s).
type metaOffsets struct {
	tokens, positions, slots, tokSeq, qsl, seqLens, logitRows, blockTable int
	stride                                                                int // block table row length
	total                                                                 int
	numTokens                                                             int
}

func (b *Backend) metaPtr(off int) uint64 { return b.metaDev.ptr + uint64(off)*4 }

// BeginStep lays the step's metadata out in a pinned host buffer that the
// step's first kernel (or a copy ahead of it) brings to the device.
func (b *Backend) BeginStep(meta *bridge.StepMeta, tokens []int32, profile bool) error {
	if len(tokens) != meta.NumTokens {
		return fmt.Errorf("begin step: %d tokens for a step of %d", len(tokens), meta.NumTokens)
	}
	return b.beginStep(meta, tokens, 0, profile)
}

// BeginStepFrom begins a step whose token ids the device copies from src
// when the step starts (bridge.AsyncStepper).
func (b *Backend) BeginStepFrom(meta *bridge.StepMeta, src bridge.Tensor) error {
	t, ok := src.(*tensor)
	if !ok || t == nil || t.dt != bridge.I32 || t.n < meta.NumTokens {
		return fmt.Errorf("begin step: token source must be an i32 tensor of at least %d values", meta.NumTokens)
	}
	if err := b.beginStep(meta, nil, t.ptr, false); err != nil {
		return err
	}
	b.chained++
	return nil
}

func (b *Backend) beginStep(meta *bridge.StepMeta, tokens []int32, tokSrc uint64, profile bool) error {
	if b.closed {
		return fmt.Errorf("cuda: backend is closed")
	}
	if b.inStep {
		return fmt.Errorf("cuda: BeginStep inside a step (EndStep was not called)")
	}
	if b.inflight >= len(b.slots) {
		return fmt.Errorf("cuda: %d steps already in flight: wait for one before beginning another", b.inflight)
	}
	T, S := meta.NumTokens, meta.NumSeqs
	if len(meta.Positions) != T || len(meta.SlotMapping) != T || len(meta.QueryStartLoc) != S+1 || len(meta.SeqLens) != S ||
		len(meta.BlockTable) < S*meta.MaxBlocks {
		return fmt.Errorf("begin step: inconsistent metadata (%d tokens: %d positions, %d slots; %d seqs: %d query starts, %d lengths; block table %d < %d×%d)",
			T, len(meta.Positions), len(meta.SlotMapping), S, len(meta.QueryStartLoc), len(meta.SeqLens), len(meta.BlockTable), S, meta.MaxBlocks)
	}
	// The block table's row length is rounded up so a decode step keeps its
	// layout (and its graph) while sequences grow by a block.
	stride := (meta.MaxBlocks + 63) / 64 * 64
	mo := metaOffsets{stride: stride, numTokens: T}
	off := 0
	place := func(n int) int {
		o := off
		off += (n + 3) / 4 * 4
		return o
	}
	mo.tokens, mo.positions, mo.slots, mo.tokSeq = place(T), place(T), place(T), place(T)
	mo.qsl, mo.seqLens, mo.logitRows = place(S+1), place(S), place(len(meta.LogitRows))
	mo.blockTable = place(S * stride)
	mo.total = max(off, 4)
	// The metadata has two pinned buffers: the one a step in flight uploads
	// from stays untouched until the device has read it.
	b.metaSlot = 0
	for i := range b.slots {
		if s := &b.slots[i]; s.busy && s.metaBuf == 0 {
			b.metaSlot = 1
		}
	}
	if hb := &b.metaBufs[b.metaSlot]; hb.n < mo.total {
		err := b.th.do(func() error {
			b.hostFree(hb)
			return b.hostAlloc(hb, mo.total*5/4)
		})
		if err != nil {
			return err
		}
	}
	b.metaHost = b.metaBufs[b.metaSlot].i32()
	h := b.metaHost[:mo.total]
	clear(h)
	copy(h[mo.tokens:], tokens)
	copy(h[mo.positions:], meta.Positions)
	copy(h[mo.slots:], meta.SlotMapping)
	for s := 0; s < S; s++ {
		lo, hi := int(meta.QueryStartLoc[s]), int(meta.QueryStartLoc[s+1])
		if lo < 0 || hi > T || lo > hi {
			return fmt.Errorf("begin step: query start locations %v do not fit %d tokens", meta.QueryStartLoc, T)
		}
		if int(meta.SeqLens[s]) < hi-lo {
			return fmt.Errorf("begin step: sequence %d has length %d but %d new tokens", s, meta.SeqLens[s], hi-lo)
		}
		for t := lo; t < hi; t++ {
			h[mo.tokSeq+t] = int32(s)
		}
		copy(h[mo.blockTable+s*stride:], meta.BlockTable[s*meta.MaxBlocks:(s+1)*meta.MaxBlocks])
	}
	copy(h[mo.qsl:], meta.QueryStartLoc)
	copy(h[mo.seqLens:], meta.SeqLens)
	for i, r := range meta.LogitRows {
		if r < 0 || int(r) >= T {
			return fmt.Errorf("begin step: logit row %d outside the step's %d tokens", r, T)
		}
		h[mo.logitRows+i] = r
	}
	if b.metaDev == nil || b.metaDev.size < int64(mo.total)*4 {
		err := b.th.do(func() error {
			if b.inflight > 0 {
				// a step in flight reads the old buffer
				if err := b.check("cuStreamSynchronize", call(b.api.cuStreamSynchronize, b.stream)); err != nil {
					return err
				}
			}
			b.processFrees()
			if b.metaDev != nil {
				b.freeNow(b.metaDev)
			}
			var err error
			b.metaDev, err = b.devAlloc(int64(mo.total) * 4 * 2)
			return err
		})
		if err != nil {
			return err
		}
	}
	b.mo, b.meta, b.tokSrc = mo, meta, tokSrc
	b.inStep, b.profile, b.stepErr = true, profile, nil
	// Segments are handed off only while the device would otherwise wait
	// for them: behind a step in flight, it has work.
	b.streaming = !profile && !b.opts.NoStream && b.inflight == 0
	b.flushed, b.started, b.segNext, b.segs = 0, false, firstSegment, 0
	b.ents, b.args, b.marks = b.ents[:0], b.args[:0], b.marks[:0]
	b.moeCalls = 0
	// The step's first kernel brings its metadata in. A profiled step keeps
	// the copies, so that its spans time the model's kernels alone.
	hb := &b.metaBufs[b.metaSlot]
	b.stepKern = !profile && !b.opts.NoStepKernels && hb.dev != 0 && (b.opts.NoGraphs || b.api.graphPatch)
	if b.stepKern {
		n := max(mo.total, statsCap)
		b.launch("step_begin", [3]int{min(cdiv(n, 256), 64), 1, 1}, 256, b.metaPtr(0), hb.dev, i32(mo.total),
			tokSrc, i32(mo.tokens), i32(T), b.stats.ptr, i32(statsCap))
		b.ents[len(b.ents)-1].patch = true
	}
	return nil
}

// Mark starts a profile span: an event is recorded between ops.
func (b *Backend) Mark(layer int, component, op string) {
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
	b.streamSegment()
}

func (b *Backend) appendLaunch(fn uintptr, grid [3]int, block int, args ...uint64) {
	a0 := len(b.args)
	b.args = append(b.args, args...)
	b.ents = append(b.ents, entry{kind: entLaunch, fn: fn, grid: [3]uint32{uint32(grid[0]), uint32(grid[1]), uint32(grid[2])},
		block: uint32(block), a0: int32(a0), a1: int32(len(b.args))})
}

// firstSegment is how many entries the first hand-off of a step waits for;
// each later one waits for twice as many as the one before, so a step of
// hundreds of kernels is a handful of graphs.
const firstSegment = 24

// streamSegment hands the entries recorded so far to the CUDA thread once
// there are enough of them, and records on: a deep model's decode step
// takes the host hundreds of microseconds to record, which the GPU would
// otherwise spend idle. The newest entry stays behind, since its caller
// may still mark it (step_begin's patched arguments).
func (b *Backend) streamSegment() {
	cut := len(b.ents) - 1
	if !b.streaming || b.stepErr != nil || cut-b.flushed < b.segNext {
		return
	}
	ents, args := b.ents[b.flushed:cut:cut], b.args[:b.ents[cut].a0:b.ents[cut].a0]
	first := !b.started
	b.flushed, b.started, b.segNext = cut, true, 2*b.segNext
	b.segs++
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
			if b.segErr = b.stepPrologue(); b.segErr != nil {
				return
			}
		}
		b.segErr = b.runGraph(ents, args)
	})
}

// stepPrologue uploads the step's metadata (and copies in token ids still
// on the device) and clears its error word and counters, ahead of its first
// kernel, unless that kernel is step_begin, which does it (thread only).
func (b *Backend) stepPrologue() error {
	if b.stepKern {
		return nil
	}
	if err := b.uploadMeta(); err != nil {
		return err
	}
	if b.tokSrc != 0 {
		if err := b.check("cuMemcpyDtoDAsync", call(b.api.cuMemcpyDtoDAsync, uintptr(b.metaPtr(b.mo.tokens)), uintptr(b.tokSrc),
			uintptr(b.mo.numTokens*4), b.stream)); err != nil {
			return err
		}
	}
	return b.check("cuMemsetD32Async", call(b.api.cuMemsetD32Async, uintptr(b.stats.ptr), 0, statsCap, b.stream))
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

// EndStep runs the step and waits for it.
func (b *Backend) EndStep() (bridge.StepStats, error) {
	_, _, st, err := b.endStep(nil, true)
	return st, err
}

// SubmitStep queues the step's remaining work and returns without waiting
// for it (bridge.AsyncStepper). A profiled step is waited for here: its
// events are shared.
func (b *Backend) SubmitStep(ids bridge.Tensor) (bridge.PendingStep, error) {
	var t *tensor
	if ids != nil {
		var ok bool
		if t, ok = ids.(*tensor); !ok || t == nil || t.dt != bridge.I32 {
			return nil, fmt.Errorf("cuda: submit step: ids must be an i32 tensor")
		}
	}
	if b.profile {
		_, v, st, err := b.endStep(t, true)
		if err != nil {
			return nil, err
		}
		return donePending{st, v}, nil
	}
	slot, _, _, err := b.endStep(t, false)
	if err != nil {
		return nil, err
	}
	return &pendingStep{b: b, slot: slot}, nil
}

// endStep queues what the step has not yet handed off, and waits for it
// when wait is set, in one trip to the CUDA thread.
func (b *Backend) endStep(ids *tensor, wait bool) (*stepSlot, []int32, bridge.StepStats, error) {
	if !b.inStep {
		return nil, nil, bridge.StepStats{}, fmt.Errorf("cuda: EndStep without BeginStep")
	}
	var (
		slot  *stepSlot
		stats bridge.StepStats
		vals  []int32
	)
	err := b.th.do(func() error {
		b.inStep = false
		if b.stepErr != nil || b.segErr != nil {
			err := b.segErr
			b.segErr = nil
			b.abandon()
			return err
		}
		var err error
		if slot, err = b.submitLocked(ids); err != nil {
			b.abandon()
			return err
		}
		if wait {
			stats, vals, err = b.waitLocked(slot)
		}
		return err
	})
	b.inStep = false
	if b.stepErr != nil {
		err = b.stepErr
	}
	return slot, vals, stats, err
}

// abandon waits for whatever was queued, so a failed step's buffers can be
// reused, and frees what the step released (thread only).
func (b *Backend) abandon() {
	call(b.api.cuStreamSynchronize, b.stream)
	b.freeList(b.retired)
	b.retired = b.retired[:0]
	b.ents, b.args = b.ents[:0], b.args[:0]
	b.processFrees()
}

func (b *Backend) uploadMeta() error {
	a := b.api
	return b.check("cuMemcpyHtoDAsync", call(a.cuMemcpyHtoDAsync, uintptr(b.metaDev.ptr),
		uintptr(unsafe.Pointer(&b.metaHost[0])), uintptr(b.mo.total*4), b.stream))
}

// submitLocked runs the entries not yet handed off (as a graph when this
// list was seen before), queues the copies of the stats and of ids into a
// free slot's pinned buffer and records the slot's event (thread only).
func (b *Backend) submitLocked(ids *tensor) (*stepSlot, error) {
	a := b.api
	var slot *stepSlot
	for i := range b.slots {
		if !b.slots[i].busy {
			slot = &b.slots[i]
			break
		}
	}
	if slot == nil {
		return nil, fmt.Errorf("cuda: internal: no free step slot")
	}
	if !b.started {
		if err := b.stepPrologue(); err != nil {
			return nil, err
		}
	}
	nIDs := 0
	if ids != nil {
		nIDs = ids.n
	}
	if slot.host.n < statsCap+nIDs {
		b.hostFree(&slot.host)
		if err := b.hostAlloc(&slot.host, statsCap+max(nIDs, 64)); err != nil {
			return nil, err
		}
	}
	// The step's last kernel hands its stats and ids to the slot's pinned
	// buffer: no copies after the graph.
	n := min(b.moeCalls+1, statsCap)
	endKern := b.stepKern && slot.host.dev != 0
	if endKern {
		b.appendLaunch(b.fns["step_end"], [3]int{1, 1, 1}, 256, slot.host.dev, b.stats.ptr, i32(n), idPtr(ids), i32(statsCap), i32(nIDs))
		b.ents[len(b.ents)-1].patch = true
	}
	switch rest := b.ents[b.flushed:]; {
	case b.profile:
		if err := b.ensureEvents(len(b.marks) + 2); err != nil {
			return nil, err
		}
		if err := b.check("cuEventRecord", call(a.cuEventRecord, b.events[0], b.stream)); err != nil {
			return nil, err
		}
		// Direct launches: event records captured in a graph between
		// programmatically dependent kernels did not time them.
		if err := b.runDirect(rest, b.args, b.events); err != nil {
			return nil, err
		}
		if err := b.check("cuEventRecord", call(a.cuEventRecord, b.events[len(b.marks)+1], b.stream)); err != nil {
			return nil, err
		}
	case len(rest) > 0:
		if err := b.runGraph(rest, b.args); err != nil {
			return nil, err
		}
	}
	b.lastLaunches, b.lastSegments, slot.launches = 0, b.segs+1, 0
	for _, e := range b.ents {
		switch e.kind {
		case entLaunch:
			b.lastLaunches++
			slot.launches++
		case entGemm:
			slot.launches++
		}
	}
	b.ents, b.args = b.ents[:0], b.args[:0]

	if slot.event == 0 {
		if err := b.check("cuEventCreate", call(a.cuEventCreate, uintptr(unsafe.Pointer(&slot.event)), cuEventDisableTiming)); err != nil {
			return nil, err
		}
	}
	host := slot.host.i32()
	// Without step_end, the stats and ids come back by copies.
	if !endKern {
		if err := b.check("cuMemcpyDtoHAsync", call(a.cuMemcpyDtoHAsync, uintptr(unsafe.Pointer(&host[0])), uintptr(b.stats.ptr), uintptr(n*4), b.stream)); err != nil {
			return nil, err
		}
		if nIDs > 0 {
			if err := b.check("cuMemcpyDtoHAsync", call(a.cuMemcpyDtoHAsync, uintptr(unsafe.Pointer(&host[statsCap])), uintptr(ids.ptr), uintptr(nIDs*4), b.stream)); err != nil {
				return nil, err
			}
		}
	}
	if err := b.check("cuEventRecord", call(a.cuEventRecord, slot.event, b.stream)); err != nil {
		return nil, err
	}
	// What was released or replaced up to here may be in use until this
	// step has run; later steps cannot use it.
	slot.frees = append(slot.frees[:0], b.retired...)
	b.retired = b.retired[:0]
	b.memMu.Lock()
	slot.frees = append(slot.frees, b.freeQ...)
	b.freeQ = nil
	b.memMu.Unlock()
	slot.busy, slot.nStats, slot.nIDs, slot.profile, slot.metaBuf = true, n, nIDs, b.profile, b.metaSlot
	b.inflight++
	return slot, nil
}

// idPtr is the device address of a step's sampled ids, 0 without them.
func idPtr(ids *tensor) uint64 {
	if ids == nil {
		return 0
	}
	return ids.ptr
}

// waitLocked waits for a submitted step and reads its results (thread only).
func (b *Backend) waitLocked(slot *stepSlot) (bridge.StepStats, []int32, error) {
	st := bridge.StepStats{Dispatches: slot.launches}
	r := call(b.api.cuEventSynchronize, slot.event)
	slot.busy = false
	b.inflight--
	b.freeList(slot.frees)
	slot.frees = slot.frees[:0]
	if b.inflight == 0 && !b.inStep {
		b.processFrees()
	}
	if err := b.check("step", r); err != nil {
		return st, nil, err
	}
	host := slot.host.i32()
	if e := host[0]; e != 0 {
		return st, nil, fmt.Errorf("cuda: %s", errorWord(e))
	}
	for i := 1; i < slot.nStats && i < statsCap-1; i++ {
		st.ExpertsTouched = append(st.ExpertsTouched, int(host[i]))
	}
	ids := append([]int32(nil), host[statsCap:statsCap+slot.nIDs]...)
	if slot.profile {
		st.Timings = b.timings(b.events)
	}
	return st, ids, nil
}

func errorWord(e int32) string {
	var s []string
	if e&1 != 0 {
		s = append(s, "embedding: token id outside the vocabulary")
	}
	if e&2 != 0 {
		s = append(s, "moe: router produced NaN logits")
	}
	if e&4 != 0 {
		s = append(s, "attention: slot mapping outside the KV cache")
	}
	if len(s) == 0 {
		return fmt.Sprintf("kernel error word %#x", e)
	}
	return fmt.Sprint(s)
}

func (b *Backend) ensureEvents(n int) error {
	for len(b.events) < n {
		var e uintptr
		if err := b.check("cuEventCreate", call(b.api.cuEventCreate, uintptr(unsafe.Pointer(&e)), 0)); err != nil {
			return err
		}
		b.events = append(b.events, e)
	}
	return nil
}

// timings sums the time between consecutive events per mark, in the order
// marks first appear (as the CPU backend reports them).
func (b *Backend) timings(ev []uintptr) []bridge.OpTiming {
	type key struct {
		layer    int
		comp, op string
	}
	sum := map[key]time.Duration{}
	var order []key
	for i, m := range b.marks {
		var ms float32
		if call(b.api.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), ev[i+1], ev[i+2]) != 0 {
			continue
		}
		k := key{m.Layer, m.Component, m.Op}
		if _, ok := sum[k]; !ok {
			order = append(order, k)
		}
		sum[k] += time.Duration(float64(ms) * 1e6)
	}
	out := make([]bridge.OpTiming, 0, len(order))
	for _, k := range order {
		out = append(out, bridge.OpTiming{Layer: k.layer, Component: k.comp, Op: k.op, Duration: sum[k]})
	}
	return out
}

// runDirect issues the entries on the stream (thread only). events, in
// profile mode, are recorded at each mark (events[i+1] for mark i).
func (b *Backend) runDirect(ents []entry, args []uint64, events []uintptr) error {
	a := b.api
	for _, e := range ents {
		switch e.kind {
		case entMark:
			if events != nil {
				if err := b.check("cuEventRecord", call(a.cuEventRecord, events[e.a0+1], b.stream)); err != nil {
					return err
				}
			}
		case entLaunch:
			n := int(e.a1 - e.a0)
			for i := 0; i < n; i++ {
				b.params[i] = uintptr(unsafe.Pointer(&args[int(e.a0)+i]))
			}
			var r int32
			if b.pdl {
				c := &b.lcfg
				c.gridX, c.gridY, c.gridZ, c.blockX, c.blockY, c.blockZ = e.grid[0], e.grid[1], e.grid[2], e.block, 1, 1
				r = call(a.cuLaunchKernelEx, uintptr(unsafe.Pointer(c)), e.fn, uintptr(unsafe.Pointer(&b.params[0])), 0)
				if r != 0 && r != cudaErrorLaunchFailure && r != cudaErrorIllegalAddress {
					b.pdl = false // the attribute was refused: plain launches from now on
				}
			}
			if !b.pdl {
				r = call(a.cuLaunchKernel, e.fn, uintptr(e.grid[0]), uintptr(e.grid[1]), uintptr(e.grid[2]),
					uintptr(e.block), 1, 1, 0, b.stream, uintptr(unsafe.Pointer(&b.params[0])), 0)
			}
			if r != 0 {
				return b.check("cuLaunchKernel "+b.fnName(e.fn), r)
			}
		case entGemm:
			if err := b.runGemm(args[e.a0:e.a1]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *Backend) fnName(fn uintptr) string {
	for n, f := range b.fns {
		if f == fn {
			return n
		}
	}
	return "?"
}

// ---- graphs ----

type graph struct {
	key     []uint64
	exec    uintptr
	gr      uintptr // the captured graph, kept for its nodes while exec has patches
	patches []graphPatch
	used    uint64
}

// graphPatch is a kernel node whose arguments are set before each launch:
// ent is its entry in the list, cur the arguments it holds.
type graphPatch struct {
	ent  int
	node uintptr
	cur  []uint64
}

// kernelNodeParams is CUDA_KERNEL_NODE_PARAMS_v2.
type kernelNodeParams struct {
	fn                                                uintptr
	gridX, gridY, gridZ, blockX, blockY, blockZ, smem uint32
	_                                                 uint32
	params, extra, kern, ctx                          uintptr
}

const maxGraphs = 64

// graphedBeginMax is the longest list whose step_begin is a node of its
// graph; a longer one's runs as a kernel of its own before the graph. On an
// H100, step_begin in the graph took 41 µs off TinyLlama's 116-kernel step
// but added about 70 µs to Qwen3-30B-A3B's (48 layers, about 390 kernels):
// the longer a graph, the longer its first node waits for the launch, which
// work queued ahead of the graph overlaps.
var graphedBeginMax = 256

var graphSeed = maphash.MakeSeed()

// listKey encodes the entries (kernels, grids, arguments) as one slice.
func (b *Backend) listKey(ents []entry, args []uint64) []uint64 {
	k := b.keyBuf[:0]
	for _, e := range ents {
		if e.kind == entMark {
			k = append(k, uint64(e.kind)|uint64(e.a0)<<8)
			continue
		}
		k = append(k, uint64(e.kind)|uint64(e.block)<<8|uint64(e.a1-e.a0)<<40|uint64(boolArg(e.patch))<<56, uint64(e.fn),
			uint64(e.grid[0])|uint64(e.grid[1])<<32, uint64(e.grid[2]))
		if !e.patch {
			k = append(k, args[e.a0:e.a1]...)
		}
	}
	b.keyBuf = k
	return k
}

func hashKey(k []uint64) uint64 {
	if len(k) == 0 {
		return 0
	}
	return maphash.Bytes(graphSeed, unsafe.Slice((*byte)(unsafe.Pointer(&k[0])), len(k)*8))
}

func equalKeys(a, c []uint64) bool {
	if len(a) != len(c) {
		return false
	}
	for i := range a {
		if a[i] != c[i] {
			return false
		}
	}
	return true
}

// runGraph replays the graph of this exact list, captures one when the list
// is seen for the second time, and otherwise launches directly.
func (b *Backend) runGraph(ents []entry, args []uint64) error {
	a := b.api
	if b.opts.NoGraphs {
		return b.runDirect(ents, args, nil)
	}
	if len(ents) > graphedBeginMax && ents[0].fn == b.fns["step_begin"] {
		if err := b.runDirect(ents[:1], args, nil); err != nil {
			return err
		}
		ents = ents[1:]
	}
	k := b.listKey(ents, args)
	h := hashKey(k)
	b.useCount++
	if g := b.graphs[h]; g != nil && equalKeys(g.key, k) {
		g.used = b.useCount
		if err := b.patchGraph(g, ents, args); err != nil {
			return err
		}
		return b.check("cuGraphLaunch", call(a.cuGraphLaunch, g.exec, b.stream))
	}
	b.seen[h]++
	if b.seen[h] < 2 {
		if len(b.seen) > 4096 {
			clear(b.seen)
		}
		return b.runDirect(ents, args, nil)
	}
	if err := b.check("cuStreamBeginCapture", call(a.cuStreamBeginCapture, b.stream, 2 /* relaxed */)); err != nil {
		return b.runDirect(ents, args, nil)
	}
	runErr := b.runDirect(ents, args, nil)
	var gr uintptr
	endErr := b.check("cuStreamEndCapture", call(a.cuStreamEndCapture, b.stream, uintptr(unsafe.Pointer(&gr))))
	if runErr != nil || endErr != nil {
		if gr != 0 {
			call(a.cuGraphDestroy, gr)
		}
		b.seen[h] = math.MinInt32 // do not try this list again
		return b.runDirect(ents, args, nil)
	}
	g := &graph{key: append([]uint64(nil), k...), gr: gr, used: b.useCount}
	err := b.check("cuGraphInstantiate", call(a.cuGraphInstantiate, uintptr(unsafe.Pointer(&g.exec)), gr, 0))
	if err == nil {
		g.patches, err = b.findPatches(gr, ents, args)
	}
	if g.patches == nil {
		call(a.cuGraphDestroy, gr)
		g.gr = 0
	}
	if err != nil {
		b.dropGraph(g)
		b.seen[h] = math.MinInt32
		return b.runDirect(ents, args, nil)
	}
	if len(b.graphs) >= maxGraphs {
		var oldest uint64
		var og *graph
		for kh, g := range b.graphs {
			if og == nil || g.used < og.used {
				oldest, og = kh, g
			}
		}
		b.dropGraph(og)
		delete(b.graphs, oldest)
	}
	if old := b.graphs[h]; old != nil { // a hash collision: keep the newest
		b.dropGraph(old)
	}
	b.graphs[h] = g
	return b.check("cuGraphLaunch", call(a.cuGraphLaunch, g.exec, b.stream))
}

func (b *Backend) dropGraph(g *graph) {
	if g.exec != 0 {
		call(b.api.cuGraphExecDestroy, g.exec)
	}
	if g.gr != 0 {
		call(b.api.cuGraphDestroy, g.gr)
	}
}

// findPatches finds the kernel nodes of the list's patched entries in the
// captured graph gr, by their function (each is in a list at most once).
func (b *Backend) findPatches(gr uintptr, ents []entry, args []uint64) ([]graphPatch, error) {
	var ps []graphPatch
	for i, e := range ents {
		if e.patch {
			ps = append(ps, graphPatch{ent: i, cur: append([]uint64(nil), args[e.a0:e.a1]...)})
		}
	}
	if len(ps) == 0 {
		return nil, nil
	}
	a := b.api
	var n uintptr
	if err := b.check("cuGraphGetNodes", call(a.cuGraphGetNodes, gr, 0, uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("cuda: the captured graph has no nodes")
	}
	nodes := make([]uintptr, n)
	if err := b.check("cuGraphGetNodes", call(a.cuGraphGetNodes, gr, uintptr(unsafe.Pointer(&nodes[0])), uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, err
	}
	for _, nd := range nodes[:n] {
		var typ int32
		var p kernelNodeParams
		if call(a.cuGraphNodeGetType, nd, uintptr(unsafe.Pointer(&typ))) != 0 || typ != 0 /* kernel */ ||
			call(a.cuGraphKernelNodeGetParams, nd, uintptr(unsafe.Pointer(&p))) != 0 {
			continue
		}
		for j := range ps {
			if ps[j].node == 0 && ents[ps[j].ent].fn == p.fn {
				ps[j].node = nd
				break
			}
		}
	}
	for _, p := range ps {
		if p.node == 0 {
			return nil, fmt.Errorf("cuda: no node of %s in the captured graph", b.fnName(ents[p.ent].fn))
		}
	}
	return ps, nil
}

// patchGraph sets the arguments this launch gives the graph's patched
// nodes, where they differ from what the nodes hold. Launches already
// queued keep the arguments they were queued with.
func (b *Backend) patchGraph(g *graph, ents []entry, args []uint64) error {
	for i := range g.patches {
		p := &g.patches[i]
		e := ents[p.ent]
		a := args[e.a0:e.a1]
		if slices.Equal(a, p.cur) {
			continue
		}
		for j := range a {
			b.params[j] = uintptr(unsafe.Pointer(&a[j]))
		}
		kp := kernelNodeParams{fn: e.fn, gridX: e.grid[0], gridY: e.grid[1], gridZ: e.grid[2], blockX: e.block, blockY: 1, blockZ: 1,
			params: uintptr(unsafe.Pointer(&b.params[0]))}
		if err := b.check("cuGraphExecKernelNodeSetParams", call(b.api.cuGraphExecKernelNodeSetParams, g.exec, p.node, uintptr(unsafe.Pointer(&kp)))); err != nil {
			return err
		}
		p.cur = append(p.cur[:0], a...)
	}
	return nil
}

// GraphCount is the number of CUDA graphs held (for tests).
func (b *Backend) GraphCount() int { return len(b.graphs) }

// LastStepLaunches is the number of kernels the last step launched (for
// tests of the fusions).
func (b *Backend) LastStepLaunches() int { return b.lastLaunches }

// ChainedSteps is the number of steps begun with their token ids on the
// device (BeginStepFrom), for tests.
func (b *Backend) ChainedSteps() int { return b.chained }

// LastStepSegments is the number of pieces the last step ran in: one, plus
// one for each hand-off while it was recorded (for tests).
func (b *Backend) LastStepSegments() int { return b.lastSegments }
