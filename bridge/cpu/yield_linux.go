package cpu

import "syscall"

// osYield lets a thread of another process that waits for this core run
// before the spin goes on; with none waiting it returns at once.
func osYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
