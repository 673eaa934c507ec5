package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The pool covers every index exactly once, whatever the split, whether
// its workers spin or have parked, when a piece calls the pool again
// (inline), and when two goroutines use it at once (one of them inline).
func TestPoolCoversEveryIndexOnce(t *testing.T) {
	check := func(t *testing.T, p pool, n, grain int, nested bool) {
		t.Helper()
		seen := make([]atomic.Int32, n)
		p.forRange(n, grain, func(lo, hi int) {
			if nested {
				p.forRange(hi-lo, 1, func(a, b int) {
					for i := lo + a; i < lo+b; i++ {
						seen[i].Add(1)
					}
				})
				return
			}
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Fatalf("threads %d, n %d, grain %d, nested %v: index %d run %d times", p.threads, n, grain, nested, i, c)
			}
		}
		each := make([]atomic.Int32, n)
		p.forEach(n, func(i int) { each[i].Add(1) })
		for i := range each {
			if c := each[i].Load(); c != 1 {
				t.Fatalf("threads %d, forEach over %d: item %d run %d times", p.threads, n, i, c)
			}
		}
	}
	for _, threads := range []int{1, 2, 3, runtime.GOMAXPROCS(0) + 2} {
		p := pool{threads: threads}
		for _, n := range []int{1, 2, 7, 16, 33, 1000} {
			for _, grain := range []int{1, 4, 16} {
				check(t, p, n, grain, false)
				check(t, p, n, grain, true)
			}
		}
		// After crewSpin idle the workers park; the next run wakes them.
		time.Sleep(3 * crewSpin)
		check(t, p, 1000, 16, false)
	}
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < 200; r++ {
				var sum atomic.Int64
				pool{threads: 2}.forRange(100, 1, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						sum.Add(int64(i))
					}
				})
				if s := sum.Load(); s != 4950 {
					t.Errorf("concurrent run summed %d, want 4950", s)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A run ends without the worker that was handed a piece ever taking it
// (its thread parked, or held by another process): the dispatcher takes the
// piece back. And a worker's piece that outlasts the dispatcher's spin
// wakes it when done, whatever wake-ups earlier runs left.
func TestCrewNeverWaitsOnAnUntakenPiece(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	within := func(t *testing.T, what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the run never returned", what)
		}
	}
	// A worker with no goroutine behind it never takes what it is handed.
	stuck := &workers{list: []*worker{{wake: make(chan struct{}, 1)}}}
	for r := range 3 {
		var ran [2]atomic.Int32
		within(t, "a worker that never runs", func() { stuck.run(2, func(i int) { ran[i].Add(1) }) })
		if a, b := ran[0].Load(), ran[1].Load(); a != 1 || b != 1 {
			t.Fatalf("run %d: pieces ran %d and %d times, want once each", r, a, b)
		}
	}
	for _, d := range []time.Duration{0, 10 * crewWait, 0, 10 * crewWait} {
		var ran [2]atomic.Int32
		started := make(chan struct{})
		within(t, "a slow piece", func() {
			// Piece 0 waits for a worker to start piece 1, so the
			// dispatcher waits for it rather than taking it back.
			(&crew).run(2, func(i int) {
				if i == 1 {
					close(started)
					time.Sleep(d)
				} else {
					<-started
				}
				ran[i].Add(1)
			})
		})
		if a, b := ran[0].Load(), ran[1].Load(); a != 1 || b != 1 {
			t.Fatalf("piece of %v: pieces ran %d and %d times, want once each", d, a, b)
		}
	}
}

// A run of short pieces, as a decode step's small ops are: its cost is
// the crew's hand-off and wait, alone and beside other processes that
// want the same cores (docs/quantization.md, "What is measured, and what
// is left").
func BenchmarkCrewShortRuns(b *testing.B) {
	var sink atomic.Int64
	p := pool{threads: runtime.GOMAXPROCS(0)}
	for b.Loop() {
		p.forRange(1024, 64, func(lo, hi int) {
			s := 0
			for i := lo; i < hi; i++ {
				s += i * i
			}
			sink.Add(int64(s))
		})
	}
}
