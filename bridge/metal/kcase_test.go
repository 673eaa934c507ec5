package metal_test

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/kbench"
)

// A kernel case holds its weights once on Metal: kbench draws them off the
// heap, a MoE case's experts stacked as the loader stacks a checkpoint's,
// and the backend aliases them and reads the experts in place. Copied into
// buffers of their own (and the experts then gathered), they took their
// bytes of the working set again on top of the host values (a 128-expert
// bf16 MoE case at Qwen3-30B-A3B's shape peaked at 3.9 GB on metal-emu, now
// 1.5 GB).
func TestKernelCaseWeightsHeldOnce(t *testing.T) {
	const E, K, H, I, N = 16, 4, 128, 64, 1024
	for _, c := range []struct {
		op    ops.ID
		dt    ops.DType
		bytes int64 // the weights' values
	}{
		{ops.MoE, ops.BF16, 3 * E * H * I * 2},
		{ops.MoE, ops.F32, 3 * E * H * I * 4},
		{ops.QMoE, ops.Q4, 3 * E * H * I / 2},
		{ops.MatMul, ops.BF16, N * H * 2},
		{ops.QMatMul, ops.Q4, N * H / 2},
	} {
		t.Run(string(c.op)+"/"+string(c.dt), func(t *testing.T) {
			be := newEmu(t, metal.Tuning{})
			shape := ops.Shape{ops.Tokens: 3, ops.Experts: E, ops.TopK: K, ops.Hidden: H, ops.Intermediate: I}
			if c.op == ops.MatMul || c.op == ops.QMatMul {
				shape = ops.Shape{ops.M: 3, ops.N: N, ops.K: H}
			}
			b, err := kbench.Prepare(be, ops.Args{Op: c.op, DType: c.dt, Ints: shape})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			e, err := b.Check()
			if err != nil {
				t.Fatal(err)
			}
			info := be.Info()
			used := info.MemoryBytes - info.AvailableBytes
			t.Logf("%s: max abs error %.2g, %d bytes of the working set in use, the weights' values %d", b.Describe(), e, used, c.bytes)
			if used >= c.bytes {
				t.Errorf("%d bytes of the working set in use: the weights' %d were copied", used, c.bytes)
			}
		})
	}
}
