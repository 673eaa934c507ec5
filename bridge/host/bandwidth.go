package host

import (
	"sync"
	"time"

	"github.com/mtlbench/mtlbench/bridge/cpu/vec"
)

// MeasureReadBandwidth streams a buffer much larger than the caches on
// threads goroutines and returns the best of a few passes in bytes/s: the
// roofline a memory-bound decode step is measured against.
func MeasureReadBandwidth(threads int, size int) float64 {
	buf := make([]byte, size)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = byte(i) // fault every page in before timing
	}
	best := 0.0
	var sink uint64
	var mu sync.Mutex
	for pass := 0; pass < 3; pass++ {
		var wg sync.WaitGroup
		part := (len(buf)/threads + 63) &^ 63
		start := time.Now()
		for t := 0; t < threads; t++ {
			lo, hi := t*part, min((t+1)*part, len(buf))
			if lo >= hi {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := vec.SumBytes(buf[lo:hi])
				mu.Lock()
				sink += s
				mu.Unlock()
			}()
		}
		wg.Wait()
		if bw := float64(len(buf)) / time.Since(start).Seconds(); bw > best {
			best = bw
		}
	}
	_ = sink
	return best
}
