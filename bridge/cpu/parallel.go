package cpu

import "sync"

// pool runs index ranges on a fixed number of goroutines. Work is split in
// contiguous ranges so each goroutine streams its own part of a weight
// matrix.
type pool struct{ threads int }

// forRange calls fn on [lo,hi) pieces of [0,n), at least grain wide.
func (p pool) forRange(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	parts := min(p.threads, (n+grain-1)/grain)
	if parts <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	step := (n + parts - 1) / parts
	step = (step + grain - 1) / grain * grain
	for lo := step; lo < n; lo += step {
		wg.Add(1)
		go func(lo int) {
			defer wg.Done()
			fn(lo, min(lo+step, n))
		}(lo)
	}
	fn(0, min(step, n))
	wg.Wait()
}

// forEach calls fn(i) for i in [0,n), handing items out dynamically for
// uneven work (attention over sequences of different lengths, experts with
// different token counts).
func (p pool) forEach(n int, fn func(i int)) {
	workers := min(p.threads, n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var mu sync.Mutex
	next := 0
	take := func() int {
		mu.Lock()
		defer mu.Unlock()
		i := next
		next++
		return i
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := take(); i < n; i = take() {
				fn(i)
			}
		}()
	}
	wg.Wait()
}
