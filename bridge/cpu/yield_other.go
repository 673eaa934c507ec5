//go:build !linux

package cpu

import "runtime"

// osYield gives the processor to another goroutine: outside Linux the
// standard library reaches no yield of the thread.
func osYield() { runtime.Gosched() }
