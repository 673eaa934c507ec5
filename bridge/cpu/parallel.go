package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// pool runs index ranges on a fixed number of goroutines: the caller and
// persistent workers (crew). Work is split in contiguous ranges so each
// goroutine streams its own part of a weight matrix.
type pool struct{ threads int }

// forRange calls fn on [lo,hi) pieces of [0,n), at least grain wide.
func (p pool) forRange(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	parts := min(p.threads, (n+grain-1)/grain)
	step := (n + parts - 1) / parts
	step = (step + grain - 1) / grain * grain
	parts = (n + step - 1) / step
	crew.run(parts, func(i int) { fn(i*step, min((i+1)*step, n)) })
}

// forEach calls fn(i) for i in [0,n), handing items out dynamically for
// uneven work (attention over sequences of different lengths, experts with
// different token counts).
func (p pool) forEach(n int, fn func(i int)) {
	workers := min(p.threads, n)
	var next atomic.Int64
	crew.run(workers, func(int) {
		for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
			fn(i)
		}
	})
}

// crew is the process's workers. A decode step is hundreds of short
// parallel ops (a GEMV of a few MB takes tens of microseconds), and waking a
// parked OS thread can take as long, more so in a virtual machine: a
// goroutine started per op often ran only after the caller had done its
// own part, so two threads were no faster than one. The workers instead
// wait for work spinning, for up to crewSpin after their last piece, and
// only then park. Beside other processes a worker's thread may not run for
// a time slice: the dispatcher then takes back the pieces not started and
// blocks for the rest (docs/quantization.md, "What is measured, and what is
// left").
var crew workers

// crewSpin is how long an idle worker spins before it parks: longer than
// the gaps between a step's parallel ops, short enough that an idle engine
// costs no CPU.
const crewSpin = 2 * time.Millisecond

type workers struct {
	mu   sync.Mutex // held by the dispatching goroutine for a whole run
	list []*worker
	// The dispatcher blocks on done once it has spun for crewWait; the
	// worker that ends a run's last piece sends to it while waiting is set.
	waiting atomic.Bool
	done    chan struct{}
}

// crewWait is how long the dispatcher spins for its workers' pieces before
// it blocks. Pieces of one run take about as long as each other, so on idle
// cores they end within microseconds of the dispatcher's own; a worker
// whose thread another process holds may take a scheduler's time slice
// (milliseconds), which spinning would only lengthen.
const crewWait = 50 * time.Microsecond

// worker runs the pieces handed to it in slot; parked tells the dispatcher
// to wake it through wake.
type worker struct {
	slot   atomic.Pointer[piece]
	parked atomic.Bool
	wake   chan struct{}
}

type piece struct {
	fn      func(i int)
	i       int
	pending *atomic.Int32
	crew    *workers
}

// run calls fn(i) for i in [0,parts): the caller takes piece 0 and
// workers the rest, all at once (pieces beyond GOMAXPROCS the caller takes
// after its own). Called while another run holds the crew (from inside a
// piece, or from another goroutine), it runs the pieces itself, in order.
func (c *workers) run(parts int, fn func(i int)) {
	if parts <= 1 || !c.mu.TryLock() {
		for i := range parts {
			fn(i)
		}
		return
	}
	defer c.mu.Unlock()
	// A spinning worker holds a P: no more of them than the other Ps.
	nw := min(parts-1, runtime.GOMAXPROCS(0)-1)
	for len(c.list) < nw {
		w := &worker{wake: make(chan struct{}, 1)}
		c.list = append(c.list, w)
		go w.loop()
	}
	if c.done == nil {
		c.done = make(chan struct{}, 1)
	}
	var pending atomic.Int32
	pending.Store(int32(nw))
	pieces := make([]piece, nw)
	for i := 1; i <= nw; i++ {
		w, p := c.list[i-1], &pieces[i-1]
		*p = piece{fn: fn, i: i, pending: &pending, crew: c}
		w.slot.Store(p)
		if w.parked.Load() {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
	fn(0)
	for i := nw + 1; i < parts; i++ {
		fn(i)
	}
	// A piece no worker has taken yet (its thread parked, or held by
	// another process) is run here rather than waited for.
	for i := 1; i <= nw; i++ {
		if p := &pieces[i-1]; c.list[i-1].slot.CompareAndSwap(p, nil) {
			fn(i)
			pending.Add(-1)
		}
	}
	c.wait(&pending)
}

// wait returns once pending is 0: spinning for crewWait, then blocked on
// done. A wake-up left in done by an earlier run only sends it round the
// loop again.
func (c *workers) wait(pending *atomic.Int32) {
	var start time.Time // read once the spin is not over at once
	for spins := 0; pending.Load() > 0; spins++ {
		if spins%64 != 63 {
			continue
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) > crewWait {
			c.waiting.Store(true)
			for pending.Load() > 0 {
				<-c.done
			}
			c.waiting.Store(false)
			return
		}
	}
}

// finish counts a piece done, waking the dispatcher when it was the last
// and the dispatcher blocks.
func (p *piece) finish() {
	if p.pending.Add(-1) == 0 && p.crew.waiting.Load() {
		select {
		case p.crew.done <- struct{}{}:
		default:
		}
	}
}

func (w *worker) loop() {
	last := time.Now()
	for spins := 0; ; spins++ {
		if w.slot.Load() != nil {
			// The dispatcher may have taken the piece back since the load.
			if p := w.slot.Swap(nil); p != nil {
				p.fn(p.i)
				p.finish()
			}
			last, spins = time.Now(), 0
			continue
		}
		if spins%1024 != 1023 {
			continue
		}
		if time.Since(last) < crewSpin {
			// A thread of another process waiting for this core goes
			// first: spinning on through its time slice would only delay
			// the pieces it holds up.
			osYield()
			continue
		}
		// Park; a piece stored before parked was set is seen here, one
		// stored after finds parked set and sends a wake-up.
		w.parked.Store(true)
		if w.slot.Load() == nil {
			<-w.wake
		}
		w.parked.Store(false)
		last = time.Now()
	}
}
