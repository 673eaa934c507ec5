package metal_test

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/kbench"
)

// A MoE kernel case holds its experts once on Metal: kbench stacks them
// off the heap as the loader does, and the backend aliases the stacks and
// reads them in place. Copied into buffers of their own and then gathered,
// they took the experts' bytes of the working set on top of the host
// values (a 128-expert bf16 case at Qwen3-30B-A3B's shape peaked at 3.9 GB
// on metal-emu, now 1.5 GB).
func TestKernelCaseExpertsHeldOnce(t *testing.T) {
	const E, K, H, I = 16, 4, 128, 64
	for _, c := range []struct {
		op    ops.ID
		dt    ops.DType
		bytes int64 // the experts' values
	}{
		{ops.MoE, ops.BF16, 3 * E * H * I * 2},
		{ops.MoE, ops.F32, 3 * E * H * I * 4},
		{ops.QMoE, ops.Q4, 3 * E * H * I / 2},
	} {
		t.Run(string(c.op)+"/"+string(c.dt), func(t *testing.T) {
			be := newEmu(t, metal.Tuning{})
			b, err := kbench.Prepare(be, ops.Args{Op: c.op, DType: c.dt, Ints: ops.Shape{ops.Tokens: 3, ops.Experts: E, ops.TopK: K, ops.Hidden: H, ops.Intermediate: I}})
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
			t.Logf("%s: max abs error %.2g, %d bytes of the working set in use, the experts' values %d", b.Describe(), e, used, c.bytes)
			if used >= c.bytes {
				t.Errorf("%d bytes of the working set in use: the experts' %d were copied", used, c.bytes)
			}
		})
	}
}
