package emu

import (
	"sync/atomic"
	"time"
)

// SetProcessCPU replaces the dispatch time limit's CPU clock until the
// returned function puts it back.
func SetProcessCPU(f func() time.Duration) (restore func()) {
	old := processCPU
	processCPU = f
	return func() { processCPU = old }
}

// SetAfterWork runs f after a dispatch's workers have returned and before
// its time limit's watcher is joined, until the returned function puts it
// back; timedOut says whether the limit has fired.
func SetAfterWork(f func(timedOut func() bool)) (restore func()) {
	old := afterWork
	afterWork = func(d *cDesc) {
		f(func() bool { return atomic.LoadInt64(&d.errflag) == 2 })
	}
	return func() { afterWork = old }
}

// ProcessCPU is the CPU time the process has used, all its threads
// together.
func ProcessCPU() time.Duration { return processCPU() }
