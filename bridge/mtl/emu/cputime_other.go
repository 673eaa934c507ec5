//go:build !(darwin || linux || freebsd || netbsd)

package emu

// processCPU has no CPU clock to read here: the dispatch time limit is
// wall time alone (lib.go's run).
var processCPU = wallClock
