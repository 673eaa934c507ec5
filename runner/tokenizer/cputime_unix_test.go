//go:build unix

package tokenizer

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process has used: a bound on work that a
// loaded machine, which stretches wall time, leaves as it is.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return wallTime()
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
