package backends

import (
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// "auto" on a machine with a Metal device whose compiler refuses the
// kernels runs on the next backend present and says why in one line,
// rather than failing.
func TestAutoFallsBackWhenMetalCannotOpen(t *testing.T) {
	prev := appleGPU
	defer func() { appleGPU = prev }()
	appleGPU = func() (mtl.Device, error) {
		// A device whose library build fails, as Apple's compiler would on
		// an OS too old for every MSL version the kernels compile for.
		return emu.New(emu.Options{Clang: "/nonexistent/clang++"}), nil
	}
	var warnings []string
	be, err := Open("auto", Options{Warn: func(m string) { warnings = append(warnings, m) }})
	if err != nil {
		t.Fatalf("auto: %v", err)
	}
	defer be.Close()
	if n := be.Info().Backend; n != "cpu" && n != "cuda" {
		t.Errorf("auto opened %s, want the CPU (or CUDA where a GPU answers)", n)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "Metal did not open") || strings.Contains(warnings[0], "\n") {
		t.Errorf("warnings %q, want one line saying Metal did not open", warnings)
	}
	t.Log(warnings)
	if _, err := Open("metal-emu", Options{Emu: emu.Options{Clang: "/nonexistent/clang++"}}); err == nil {
		t.Error("metal-emu with no compiler opened")
	}
}
