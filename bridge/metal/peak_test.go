package metal_test

import (
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/metal"
)

// The matmul peak probe runs the tiled GEMM and reports a throughput (on
// the emulator the CPU's, at a small shape).
func TestMatMulPeakProbe(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	for _, dt := range []bridge.DType{bridge.BF16, bridge.F32} {
		f, err := be.MeasureMatmulPeak(dt)
		if err != nil {
			t.Fatal(err)
		}
		if !(f > 0) || math.IsInf(f, 0) {
			t.Fatalf("%v peak %v FLOP/s", dt, f)
		}
		t.Logf("emulated %v matmul peak: %.3g FLOP/s", dt, f)
	}
}
