package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// A compiler's whole log does not become a table cell: the first error and
// what to install do.
func TestBackendStatusIsShort(t *testing.T) {
	log := strings.Repeat("kernels/x.metal:12:5: error: cannot convert 'bfloat' to 'float'\n  note: candidate...\n", 500)
	for _, err := range []error{
		fmt.Errorf("metal: %w", &emu.CompileError{Msg: log}),
		fmt.Errorf("metal: compiling the kernels: MSL 3.2, 3.1, 3.0: %s", strings.SplitN(log, "\n", 2)[0]),
	} {
		got := backendStatus("metal-emu", err)
		if len(got) > maxStatus {
			t.Errorf("status is %d bytes", len(got))
		}
		for _, want := range []string{"x.metal:12:5: error: cannot convert", "clang-19", "MTLBENCH_CLANG"} {
			if !strings.Contains(got, want) {
				t.Errorf("status %q lacks %q", got, want)
			}
		}
	}
	if got := backendStatus("cuda", errors.New("cuda: no driver\nsecond line")); got != "cuda: no driver (more: mtlbench selftest --backend cuda)" {
		t.Errorf("multi-line status: %q", got)
	}
}
