package emu

import "time"

// SetProcessCPU replaces the dispatch time limit's CPU clock until the
// returned function puts it back.
func SetProcessCPU(f func() time.Duration) (restore func()) {
	old := processCPU
	processCPU = f
	return func() { processCPU = old }
}
