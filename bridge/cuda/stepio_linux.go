//go:build linux

package cuda

import (
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
)

// statsCap is the size of the step's stats buffer (int32s): the error word,
// then the distinct experts of each MoE call (calls beyond it share the
// last entry and are not reported).
const statsCap = 8192

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
	hb, ok := b.metaBufs[b.metaSlot].Take(int64(mo.total))
	if !ok {
		hb = &hostBuf{}
		n := int(b.metaBufs[b.metaSlot].Next(int64(mo.total * 5 / 4)))
		if err := b.th.do(func() error { return b.hostAlloc(hb, n) }); err != nil {
			return err
		}
		b.metaBufs[b.metaSlot].Put(int64(hb.n), hb)
	}
	b.metaHost = hb.i32()
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
	if b.metaDev, ok = b.metaDevs.Take(int64(mo.total) * 4); !ok {
		err := b.th.do(func() error {
			var err error
			b.metaDev, err = b.devAlloc(b.metaDevs.Next(int64(mo.total) * 4 * 2))
			return err
		})
		if err != nil {
			return err
		}
		b.metaDevs.Put(b.metaDev.size, b.metaDev)
	}
	b.mo, b.meta, b.tokSrc = mo, meta, tokSrc
	b.stepMisses = b.misses
	b.inStep, b.profile, b.stepErr = true, profile, nil
	// Segments are handed off only while the device would otherwise wait
	// for them: behind a step in flight, it has work.
	b.streaming = !profile && !b.opts.NoStream && b.inflight == 0
	b.flushed, b.started, b.pieces = 0, false, bridge.StreamPieces{}
	b.ents, b.args, b.marks = b.ents[:0], b.args[:0], b.marks[:0]
	b.moeCalls = 0
	// The step's first kernel brings its metadata in. A profiled step keeps
	// the copies, so that its spans time the model's kernels alone.
	b.stepKern = !profile && !b.opts.NoStepKernels && hb.dev != 0
	if b.opts.Timeline {
		b.tlMark(-1, bridge.CompOther, "step") // step_begin belongs to no op of the model
	}
	if b.stepKern {
		n := max(mo.total, statsCap)
		b.launch("step_begin", [3]int{min(cdiv(n, 256), 64), 1, 1}, 256, b.metaPtr(0), hb.dev, i32(mo.total),
			tokSrc, i32(mo.tokens), i32(T), b.stats.ptr, i32(statsCap))
	}
	return nil
}

// markStart records the step's start event ahead of its first work: the
// device reaches it once the work queued before it is done (thread only).
func (b *Backend) markStart() error {
	b.startCur = slices.IndexFunc(b.starts[:], func(e uintptr) bool {
		return !slices.ContainsFunc(b.slots[:], func(s stepSlot) bool { return s.busy && s.start == e && e != 0 })
	})
	if b.startCur < 0 {
		return fmt.Errorf("cuda: internal: every step start event is held by a step in flight")
	}
	ev := &b.starts[b.startCur]
	if *ev == 0 {
		if err := b.check("cuEventCreate", call(b.api.cuEventCreate, uintptr(unsafe.Pointer(ev)), 0)); err != nil {
			return err
		}
	}
	return b.check("cuEventRecord", call(b.api.cuEventRecord, *ev, b.stream))
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
		if err := b.markStart(); err != nil {
			return nil, err
		}
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
		if b.opts.Timeline {
			b.tlMark(-1, bridge.CompOther, "step")
		}
		b.appendLaunch(b.fns["step_end"], [3]int{1, 1, 1}, 256, slot.host.dev, b.stats.ptr, i32(n), idPtr(ids), i32(statsCap), i32(nIDs))
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
		b.tlRecord(rest)
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
	b.lastLaunches, b.lastSegments, slot.launches = 0, b.pieces.Pieces(), 0
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
		if err := b.check("cuEventCreate", call(a.cuEventCreate, uintptr(unsafe.Pointer(&slot.event)), 0)); err != nil {
			return nil, err
		}
	}
	slot.start = b.starts[b.startCur]
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
	// What was released up to here may be in use until this step has run;
	// later steps cannot use it.
	b.memMu.Lock()
	slot.frees = append(slot.frees[:0], b.freeQ...)
	b.freeQ = nil
	b.memMu.Unlock()
	slot.busy, slot.nStats, slot.nIDs, slot.profile, slot.metaBuf = true, n, nIDs, b.profile, b.metaSlot
	slot.misses = b.misses - b.stepMisses
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
	st := bridge.StepStats{Dispatches: slot.launches, GraphMisses: slot.misses}
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
	var ms float32
	if slot.start != 0 && call(b.api.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), slot.start, slot.event) == 0 {
		st.DeviceTime = time.Duration(float64(ms) * 1e6)
	}
	host := slot.host.i32()
	if e := host[0]; e != 0 {
		return st, nil, stepError(e)
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

// stepError reads a step's error word: a router's NaN logits wrap
// bridge.ErrNonFinite.
func stepError(e int32) error {
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
	if e&8 != 0 { // gpt2.cu
		s = append(s, "position embedding: position outside the position table")
	}
	if len(s) == 0 {
		return fmt.Errorf("cuda: kernel error word %#x", e)
	}
	if e&2 != 0 {
		return fmt.Errorf("cuda: %w: %v", bridge.ErrNonFinite, s)
	}
	return fmt.Errorf("cuda: %v", s)
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

// ChainedSteps is the number of steps begun with their token ids on the
// device (BeginStepFrom), for tests.
func (b *Backend) ChainedSteps() int { return b.chained }

// drain runs what a step recorded so far (a read in the middle of a step)
// and waits for the stream (thread only).
func (b *Backend) drain() error {
	if b.inStep && len(b.ents) > b.flushed && b.stepErr == nil {
		if err := b.segErr; err != nil {
			return err
		}
		if !b.started {
			if err := b.stepPrologue(); err != nil {
				return err
			}
			b.started = true
		}
		b.tlRecord(b.ents[b.flushed:])
		if err := b.runDirect(b.ents[b.flushed:], b.args, nil); err != nil {
			return err
		}
		b.ents, b.args, b.flushed = b.ents[:0], b.args[:0], 0
	}
	return b.check("cuStreamSynchronize", call(b.api.cuStreamSynchronize, b.stream))
}
