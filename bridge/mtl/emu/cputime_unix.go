//go:build darwin || linux || freebsd || netbsd

package emu

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used, all its threads
// together: the dispatch time limit's second clock (lib.go's run). A
// variable so that tests can stand in for a process the machine stalls.
var processCPU = func() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return wallClock() // the limit is then wall time alone
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
