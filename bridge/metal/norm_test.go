package metal_test

import (
	"fmt"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// Each path of the row norms (kernels/metal/norm.h) holds the Go reference
// within its kernel case's tolerance, and the witness shows which path ran:
// float4 loads (16 B/load) where the width is a multiple of 4, floats (4)
// otherwise; x and the residual read once (a row's traffic efficiency 1)
// where a thread's share fits NORM_KEEP values, read again on each later
// pass where it does not (a threadgroup narrower than the untuned one, or
// a row past 16384 at 1024 threads).
func TestNormPaths(t *testing.T) {
	for _, c := range []struct {
		op            ops.ID
		tokens, width int
		threads       int // 0: the untuned count (ops.MetalNormThreads)
		vec, kept     bool
	}{
		{ops.RMSNorm, 1, 4096, 0, true, true},
		{ops.RMSNorm, 3, 4096, 0, true, true},
		{ops.RMSNorm, 2, 64, 0, true, true},
		{ops.RMSNorm, 1, 16384, 0, true, true},  // four float4s a thread
		{ops.RMSNorm, 1, 16388, 0, true, false}, // one float4 past them
		{ops.RMSNorm, 2, 4096, 32, true, false}, // 32 float4s a thread
		{ops.RMSNorm, 3, 4095, 0, false, true},  // four floats a thread
		{ops.RMSNorm, 1, 6, 0, false, true},
		{ops.RMSNorm, 2, 4095, 256, false, false}, // 16 floats a thread
		{ops.AddRMSNorm, 1, 4096, 0, true, true},
		{ops.AddRMSNorm, 3, 4096, 0, true, true},
		{ops.AddRMSNorm, 2, 4096, 64, true, false},
		{ops.AddRMSNorm, 3, 1025, 0, false, true},
		{ops.AddRMSNorm, 2, 1025, 32, false, false},
		{ops.LayerNorm, 1, 768, 0, true, true},
		{ops.LayerNorm, 3, 768, 0, true, true},
		{ops.LayerNorm, 2, 768, 32, true, false},
		{ops.LayerNorm, 3, 33, 0, false, true},
		{ops.AddLayerNorm, 3, 768, 0, true, true},
		{ops.AddLayerNorm, 2, 768, 32, true, false},
		{ops.AddLayerNorm, 3, 6, 0, false, true},
	} {
		t.Run(fmt.Sprintf("%s/%dx%d/threads=%d", c.op, c.tokens, c.width, c.threads), func(t *testing.T) {
			be := newEmu(t, metal.Tuning{NormThreads: c.threads})
			w, maxErr, _ := checkedWitness(t, be, ops.Args{Op: c.op, Ints: ops.Shape{ops.Tokens: c.tokens, ops.Width: c.width}})
			wantLoad := 4.0
			if c.vec {
				wantLoad = 16
			}
			if got := w.BytesPerLoad(); got != wantLoad {
				t.Errorf("%.1f B/load, want %.0f (vector path: %v)", got, wantLoad, c.vec)
			}
			// The row normalised (x, or the residual x is added into): every
			// byte read once where kept; w is read by each row's threadgroup
			// whatever the path.
			row := "x"
			if c.op == ops.AddRMSNorm || c.op == ops.AddLayerNorm {
				row = "residual"
			}
			seen := 0
			for _, o := range w.Operands {
				if o.Name != row {
					continue
				}
				seen++
				if r := o.Rereads(); c.kept && r != 1 || !c.kept && r < 2 {
					t.Errorf("%s read %.2f times (%d bytes of %d distinct): kept in registers %v", o.Name, r, o.Read, o.FootprintRead, c.kept)
				}
			}
			if seen == 0 {
				t.Errorf("no operand %s in %+v", row, w.Operands)
			}
			// One row moves the op's ideal bytes exactly.
			if c.tokens == 1 && c.kept && w.Efficiency != 1 {
				t.Errorf("traffic efficiency %.3f (%d bytes counted, %d ideal), want 1", w.Efficiency, w.Bytes(), w.Ideal)
			}
			t.Logf("max abs error %.3g, %.1f B/load, traffic efficiency %.3f", maxErr, w.BytesPerLoad(), w.Efficiency)
		})
	}
}
