//go:build !unix

package tokenizer

// cpuTime is wall time where no CPU clock is read (cputime_unix_test.go).
var cpuTime = wallTime
