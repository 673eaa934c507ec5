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
