package metal

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl"
)

// Overlapped steps (bridge.AsyncStepper): a decode step is committed and
// the host goes on to encode the next while the GPU runs it, as the engine
// design in docs/architecture.md describes. Each step in flight has its own
// metadata, error and expert-count buffers (a stepSlot); everything else a
// step touches is ordered by the queue, whose command buffers run one after
// another.

// stepSlot is the host-written buffers of one step in flight.
type stepSlot struct {
	metaBuf, errBuf *dbuf
	counts          []*dbuf
	// ids holds the step's token ids as it leaves them: the step queued
	// behind it writes its own argmax into the same tensor before the host
	// waits for this one.
	ids  *dbuf
	busy bool // submitted and not yet waited for
}

// take makes the first free slot the current step's.
func (s *stepState) take() error {
	for i := range s.slots {
		if !s.slots[i].busy {
			s.cur = i
			sl := &s.slots[i]
			s.metaBuf, s.errBuf, s.counts = sl.metaBuf, sl.errBuf, sl.counts
			return nil
		}
	}
	return errors.New("metal: begin step: two steps are in flight already")
}

// store keeps the current step's buffers (grown during the step) in its
// slot.
func (s *stepState) store() {
	sl := &s.slots[s.cur]
	sl.metaBuf, sl.errBuf, sl.counts = s.metaBuf, s.errBuf, s.counts
}

var _ bridge.AsyncStepper = (*Backend)(nil)

// BeginStepFrom begins a step whose token ids the GPU copies from src
// (the previous step's argmax) before its first op.
func (b *Backend) BeginStepFrom(meta *bridge.StepMeta, src bridge.Tensor) error {
	st := tt(src)
	if st == nil || st.dt != bridge.I32 || st.n < meta.NumTokens {
		return fmt.Errorf("metal: begin step: token source %v, want at least %d i32 values", src, meta.NumTokens)
	}
	if cap(b.zeroIDs) < meta.NumTokens {
		b.zeroIDs = make([]int32, meta.NumTokens)
	}
	if err := b.BeginStep(meta, b.zeroIDs[:meta.NumTokens], false); err != nil {
		return err
	}
	n := meta.NumTokens
	b.args(argBytes(b, eltArgs{N: uint32(n)}))
	b.in(1, st)
	b.bind(2, b.metaView(b.step.sec.tokens, n), true)
	b.dispatchThreads(b.pipeline("copy_i32", fcNone), [3]int{n, 1, 1}, [3]int{min(n, b.tuning.EltThreads), 1, 1})
	return nil
}

// SubmitStep commits the step and returns without waiting. A profiled step
// is waited for here.
func (b *Backend) SubmitStep(ids bridge.Tensor) (bridge.PendingStep, error) {
	s := &b.step
	var it *tensor
	if ids != nil {
		if it = tt(ids); it == nil || it.dt != bridge.I32 {
			return nil, fmt.Errorf("metal: submit step: ids %v are not an i32 tensor", ids)
		}
	}
	if s.profile || !s.active {
		st, err := b.EndStep()
		if err != nil {
			return nil, err
		}
		return &pendingStep{b: b, done: true, stats: st, idsOut: readIDs(it)}, nil
	}
	if s.err != nil { // an encoding failure: nothing worth running
		_, err := b.EndStep()
		return nil, err
	}
	var idsBuf *dbuf
	n := 0
	if it != nil {
		n = it.n
		var err error
		if idsBuf, err = b.copyIDs(it); err != nil {
			_, _ = b.EndStep()
			return nil, err
		}
	}
	b.commit()
	p := &pendingStep{b: b, slot: s.cur, cbs: append([]committed(nil), s.pending...), ids: idsBuf, n: n,
		stats: bridge.StepStats{Dispatches: s.dispatches}, moeCalls: s.moeCalls, retired: append([]*dbuf(nil), s.retired...)}
	clear(s.pending)
	s.pending = s.pending[:0]
	clear(s.retired)
	s.retired = s.retired[:0]
	s.active = false
	s.store()
	s.slots[s.cur].busy = true
	b.inFlight = append(b.inFlight, p)
	return p, nil
}

// pendingStep is a step SubmitStep committed.
type pendingStep struct {
	b        *Backend
	slot     int
	cbs      []committed
	ids      *dbuf // the slot's copy of the step's token ids
	n        int
	stats    bridge.StepStats
	moeCalls int
	retired  []*dbuf
	done     bool
	idsOut   []int32
	waited   bool
}

func readIDs(t *tensor) []int32 {
	if t == nil {
		return nil
	}
	c := t.contents()
	return append([]int32(nil), unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(c))), t.n)...)
}

func (p *pendingStep) Wait() (bridge.StepStats, []int32, error) {
	if p.waited {
		return bridge.StepStats{}, nil, errors.New("metal: step waited for twice")
	}
	p.waited = true
	if p.done {
		return p.stats, p.idsOut, nil
	}
	b := p.b
	var (
		err error
		dev gpuSpan
		ds  []mtl.DispatchStats
	)
	for _, c := range p.cbs {
		if e := c.cb.Wait(); e != nil && err == nil {
			err = fmt.Errorf("metal: command buffer: %w", e)
		}
		ds = append(ds, witnessStats(c.cb)...)
		dev.add(c.cb)
	}
	cost := mtl.Sum(ds).Cost
	p.stats.CountedBytes, p.stats.FootprintBytes = cost.Bytes(), cost.Footprint()
	p.stats.Loads, p.stats.SimdgroupLoads, p.stats.CriticalLoads = cost.Loads, cost.SimdgroupLoads, cost.CriticalLoads
	p.stats.Operands = operandBytes(ds)
	p.stats.DeviceTime = dev.duration()
	for i, q := range b.inFlight {
		if q == p {
			b.inFlight = append(b.inFlight[:i], b.inFlight[i+1:]...)
			break
		}
	}
	sl := &b.step.slots[p.slot]
	sl.busy = false
	for _, buf := range p.retired {
		b.release(buf)
	}
	if err == nil {
		err = stepError(sl.errBuf)
	}
	if err != nil {
		return bridge.StepStats{}, nil, err
	}
	p.stats.ExpertsTouched = expertCounts(sl.counts, p.moeCalls)
	var ids []int32
	if p.ids != nil {
		ids = append(ids, unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(p.ids.Contents()))), p.n)...)
	}
	return p.stats, ids, nil
}

// copyIDs ends the step with a copy of ids into the current slot's own
// buffer, which no later step writes before this one is waited for.
func (b *Backend) copyIDs(ids *tensor) (*dbuf, error) {
	sl := &b.step.slots[b.step.cur]
	if sl.ids == nil || sl.ids.Length() < 4*ids.n {
		if sl.ids != nil {
			b.release(sl.ids) // the slot's last step was waited for
		}
		buf, err := b.newBuffer(4 * ids.n)
		if err != nil {
			return nil, err
		}
		sl.ids = buf
	}
	b.args(argBytes(b, eltArgs{N: uint32(ids.n)}))
	b.in(1, ids)
	b.bind(2, view{sl.ids, 0, 4 * ids.n}, true)
	b.dispatchThreads(b.pipeline("copy_i32", fcNone), [3]int{ids.n, 1, 1}, [3]int{min(ids.n, b.tuning.EltThreads), 1, 1})
	return sl.ids, nil
}

// waitInFlight waits until the steps in flight have run (their results
// stay for their own Wait): a host read must see what they wrote.
func (b *Backend) waitInFlight() {
	for _, p := range b.inFlight {
		for _, c := range p.cbs {
			_ = c.cb.Wait()
		}
	}
}
