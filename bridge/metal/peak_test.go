package metal_test

import (
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
)

// The matmul peak probe runs the tiled GEMM and reports a throughput (on
// the emulator the CPU's, at a small shape).
func TestMatMulPeakProbe(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	f, err := be.MeasureMatMulPeak()
	if err != nil {
		t.Fatal(err)
	}
	if !(f > 0) || math.IsInf(f, 0) {
		t.Fatalf("peak %v FLOP/s", f)
	}
	t.Logf("emulated matmul peak: %.3g FLOP/s", f)
}
