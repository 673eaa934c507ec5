// Package backends opens a compute backend by name, so commands and suites
// share one list of what exists on this machine.
package backends

import (
	"fmt"
	"strings"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/bridge/cuda"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/darwin"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/internal/suggest"
)

// Options are the backends' settings: what commands expose as flags, and
// each backend's own options (runner/envconfig fills them from the
// environment).
type Options struct {
	Threads int // CPU goroutines (0: all cores)
	// CUDA configures the CUDA backend.
	CUDA cuda.Options
	// Emu configures the Metal emulator (the metal-emu backend).
	Emu emu.Options
	// Metal configures metal and metal-emu (language version, tuning);
	// tuned launch configs are applied per kernel on top of its Tuning.
	Metal metal.Options
	// Warn receives one line when "auto" passes over a backend that is
	// present but failed to open (Metal on a Mac whose compiler refuses
	// the kernels); nil: not told.
	Warn func(string)
}

// appleGPU opens this machine's Metal device; tests stand in another.
var appleGPU = func() (mtl.Device, error) { return darwin.New() }

// Names lists the backend names a user may ask for.
var Names = []string{"auto", "cpu", "metal", "metal-emu", "cuda"}

// QuantRules are the packed formats the backend called name runs, known
// without opening it (its QuantRules): what `mtlbench models` counts a
// checkpoint's weights by. "auto" has none, as it depends on the machine.
func QuantRules(name string) (bridge.QuantSupport, error) {
	switch name {
	case "cpu":
		return cpu.QuantRules{}, nil
	case "cuda":
		return cuda.QuantRules{}, nil
	case "metal", "metal-emu":
		return metal.QuantRules{}, nil
	}
	return nil, fmt.Errorf("unknown backend %q (want cpu, metal, metal-emu or cuda)", name)
}

// OpenCompileLimit is how long the first open of the backend called name
// may compile its kernels, by that backend's own build limit: metal-emu's
// clang steps stop after emu.Options.BuildTimeout (0: its default; below
// 0: no limit), a minute or two on a cold cache (docs/msl-subset.md,
// "Speed"). ok is false for a backend whose open has no such limit.
func OpenCompileLimit(name string, o Options) (limit time.Duration, ok bool) {
	if name != "metal-emu" {
		return 0, false
	}
	if limit = o.Emu.BuildTimeout; limit == 0 {
		limit = emu.DefaultBuildTimeout
	}
	return limit, true
}

// Open returns the backend called name. "auto" picks the best one present:
// Metal on a Mac, CUDA where a driver and GPU answer, else the CPU.
func Open(name string, o Options) (bridge.Backend, error) {
	switch name {
	case "", "auto":
		if dev, err := appleGPU(); err == nil {
			b, err := metal.New(dev, o.Metal)
			if err == nil {
				return b, nil
			}
			if o.Warn != nil {
				first, _, _ := strings.Cut(err.Error(), "\n")
				o.Warn("Metal did not open (" + first + "); running on the next backend present")
			}
		}
		if b, err := cuda.New(o.CUDA); err == nil {
			return b, nil
		}
		return cpu.New(cpu.Options{Threads: o.Threads}), nil
	case "cpu":
		return cpu.New(cpu.Options{Threads: o.Threads}), nil
	case "cuda":
		b, err := cuda.New(o.CUDA)
		if err != nil {
			return nil, err
		}
		return b, nil
	case "metal":
		dev, err := darwin.New()
		if err != nil {
			return nil, err
		}
		return metal.New(dev, o.Metal)
	case "metal-emu":
		// The Metal kernels on the CPU: slow, for correctness; timings are
		// marked emulated and never compared with real ones.
		if _, err := emu.FindCompiler(o.Emu.Clang); err != nil {
			return nil, err
		}
		return metal.New(emu.New(o.Emu), o.Metal)
	}
	// As a suite's backend key says it: the near miss, else every name.
	if hint := suggest.DidYouMean(name, Names); hint != "" {
		return nil, fmt.Errorf("unknown backend %q (%s)", name, hint)
	}
	return nil, fmt.Errorf("unknown backend %q (want one of %s)", name, strings.Join(Names, ", "))
}
