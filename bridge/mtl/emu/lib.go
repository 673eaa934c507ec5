package emu

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// abi is the layout version of cDesc, checked against the runtime's.
const abi = 9

type cBinding struct {
	ptr uintptr
	len int64
}

// cFC is one function constant value: kind 0 bool, 1 signed, 2 unsigned,
// 3 float (bits of a float64).
type cFC struct {
	index int64
	kind  int64
	bits  uint64
}

// cDesc is one dispatch as emu_runtime.cpp's Desc sees it.
type cDesc struct {
	abi      int64
	kernel   int64
	groups   [3]int64
	tpg      [3]int64
	grid     [3]int64
	flags    int64
	tgmax    int64
	buf      [31]cBinding
	tgmem    [31]int64
	fcs      uintptr
	nfc      int64
	next     int64
	errflag  int64
	staticTG int64
	finished int64 // threadgroups that ran to their end
	cost     cCost
	fp       uintptr // *cFPRange
	nfp      int64
	err      [1024]byte
}

// cFPRange is a range of bound memory and its footprint bitmaps, a bit a
// byte, and the bytes read and written in it, every access counted
// (emu_runtime.cpp's FPRange).
type cFPRange struct {
	lo, hi  uintptr
	rd, wr  uintptr
	counted [2]int64
}

// cCost is the cost witness of one dispatch, summed over its threadgroups
// (Desc's c_* fields).
type cCost struct {
	bytesRead, bytesWritten int64
	loads, stores           int64
	simdgroupLoads          int64
	barriers                int64
	simdgroups, threads     int64
	simdgroupLoadsMax       int64 // the busiest simdgroup's loads: a most over threadgroups
}

func (d *cDesc) errString() string {
	n := 0
	for n < len(d.err) && d.err[n] != 0 {
		n++
	}
	return string(d.err[:n])
}

// clib is a loaded library. Function constants and the race flag are
// library-wide state, so its dispatches run one at a time.
type clib struct {
	find func(name string) int64
	// staticTG is a kernel's static threadgroup memory in bytes, the
	// threadgroup variables it declares (msl_emu_static_tg).
	staticTG func(kernel int64) int64
	begin    func(d unsafe.Pointer) int64
	work     func(d unsafe.Pointer)
	mu       sync.Mutex
}

// ErrStopped fails a command buffer whose dispatches Options.Stop ended.
var ErrStopped = errors.New("msl-emu: stopped (Options.Stop) before the command buffer had run")

// dispatch runs one dispatch on workers OS threads and returns its error;
// a closed stop ends it at its next threadgroup or loop back-edge, and so
// does limit (when positive) passing without a threadgroup starting. With the footprint asked
// for (flags & 4), it returns the distinct bytes the dispatch read and
// wrote.
func (l *clib) dispatch(d *cDesc, workers int, stop <-chan struct{}, limit time.Duration) (footprint, error) {
	select {
	case <-stop:
		return footprint{}, ErrStopped
	default:
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if d.flags&4 == 0 {
		return footprint{}, l.run(d, workers, stop, limit)
	}
	m, err := newFootprintMaps(d.buf[:])
	if err != nil {
		return footprint{}, err
	}
	defer m.free()
	if len(m.ranges) > 0 {
		var pin runtime.Pinner
		pin.Pin(&m.ranges[0])
		defer pin.Unpin()
		d.fp, d.nfp = uintptr(unsafe.Pointer(&m.ranges[0])), int64(len(m.ranges))
		defer func() { d.fp, d.nfp = 0, 0 }()
	}
	if err := l.run(d, workers, stop, limit); err != nil {
		return footprint{}, err
	}
	return m.count(), nil
}

// run runs the dispatch d describes; l.mu is held. A stop closed while it
// runs raises errflag, which the workers look at before each threadgroup
// they take and the kernel at each loop back-edge and function entry
// (metal_stdlib's loop_tick and stack_check). So does the time limit, with errflag 2: the first thread to
// see it writes where it was into err (emu_runtime.cpp's loop_stop).
func (l *clib) run(d *cDesc, workers int, stop <-chan struct{}, limit time.Duration) error {
	p := unsafe.Pointer(d)
	if l.begin(p) != 0 {
		return fmt.Errorf("msl-emu: bad dispatch (kernel %d)", d.kernel)
	}
	var stopped, timedOut atomic.Bool
	join := func() {}
	if stop != nil || limit > 0 {
		done, watched := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(watched)
			var tick <-chan time.Time
			if limit > 0 {
				// Progress is a threadgroup started: a dispatch of many
				// groups may run long, one group stuck in a loop may not.
				t := time.NewTicker(max(min(limit/4, time.Second), time.Millisecond))
				defer t.Stop()
				tick = t.C
			}
			// Progress is a threadgroup taken or one finished.
			last, since, sinceCPU := atomic.LoadInt64(&d.next)+atomic.LoadInt64(&d.finished), time.Now(), processCPU()
			for {
				select {
				case <-stop:
					stopped.Store(true)
					atomic.StoreInt64(&d.errflag, 1)
					return
				case <-done:
					return
				case now := <-tick:
					// Until a worker takes the first threadgroup the
					// limit does not run: a loaded machine may not have
					// scheduled one yet, which is no fault of the kernel.
					// Nor does it run while the process gets no CPU: a
					// loaded machine that stalls a worker mid-group is not
					// taken for a stuck kernel, which spins and so burns
					// CPU time as well as wall time.
					cpu := processCPU()
					if n := atomic.LoadInt64(&d.next) + atomic.LoadInt64(&d.finished); n != last || n == 0 {
						last, since, sinceCPU = n, now, cpu
					} else if now.Sub(since) >= limit && cpu-sinceCPU >= limit {
						timedOut.Store(atomic.CompareAndSwapInt64(&d.errflag, 0, 2))
						return
					}
				}
			}
		}()
		join = func() { close(done); <-watched }
	}
	if workers <= 1 {
		l.work(p)
	} else {
		var wg sync.WaitGroup
		for i := 0; i < workers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.work(p)
			}()
		}
		wg.Wait()
	}
	if afterWork != nil {
		afterWork(d)
	}
	join() // the watcher has ended before stopped and errflag are read
	if stopped.Load() {
		return ErrStopped
	}
	// The limit may fire after the last threadgroup's last progress and
	// before its end is seen: a dispatch whose groups all finished has not
	// timed out.
	if timedOut.Load() && d.errflag == 2 && d.finished == d.groups[0]*d.groups[1]*d.groups[2] {
		return nil
	}
	if timedOut.Load() {
		where := "stopped before its next threadgroup"
		if d.errflag == 3 { // "in the loop at k.metal:4 (thread ...)", or "in a call of f at ..."
			where = "stopped " + d.errString()
		}
		return &ExecutionError{timeout: fmt.Sprintf("no progress within the dispatch time limit of %v "+
			"(Options.DispatchTimeout; an endless loop or recursion?): %s", limit, where)}
	}
	if d.errflag != 0 {
		return &ExecutionError{Msg: d.errString()}
	}
	return nil
}

// afterWork, when set (tests), runs after the workers have returned and
// before the time limit's watcher is joined.
var afterWork func(d *cDesc)

// wallClock is wall time since the package started, processCPU where no
// CPU clock can be read.
func wallClock() time.Duration { return time.Since(started) }

var started = time.Now()

// ExecutionError is a kernel fault the emulator caught: an out-of-bounds
// access, a divergent barrier, a threadgroup memory race. Metal would
// report the first two as a command buffer error, or not at all.
type ExecutionError struct {
	Kernel string
	Msg    string // starts with "kernel <name>: "

	timeout string // the time limit's message, which execute prefixes with the kernel
}

func (e *ExecutionError) Error() string { return e.Msg }
