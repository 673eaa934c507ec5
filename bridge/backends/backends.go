// Package backends opens a compute backend by name, so commands and suites
// share one list of what exists on this machine.
package backends

import (
	"fmt"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
)

// Options are backend settings that commands expose.
type Options struct {
	Threads int // CPU goroutines (0: all cores)
}

// Names lists the backend names a user may ask for.
var Names = []string{"auto", "cpu", "metal", "metal-emu", "cuda"}

// Open returns the backend called name. "auto" picks the best one present;
// on this build that is the CPU unless a GPU backend is available.
func Open(name string, o Options) (bridge.Backend, error) {
	switch name {
	case "", "auto", "cpu":
		return cpu.New(cpu.Options{Threads: o.Threads}), nil
	case "metal", "metal-emu", "cuda":
		return nil, fmt.Errorf("backend %q is not available in this build (available: cpu)", name)
	}
	return nil, fmt.Errorf("unknown backend %q (want one of %v)", name, Names)
}
