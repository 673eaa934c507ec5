package selftest

import (
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/suites"
)

// On metal-emu the selftest holds decode-path kernels to TrafficLimit of
// their ideal bytes, and their footprint to FootprintLimit: the shipped
// launch shapes pass at Qwen3-30B-A3B's decode shapes, a GEMV tuned to
// re-read its activations (one row per threadgroup) fails, naming the
// traffic, and one whose dispatches touch a fifth more distinct bytes than
// they need fails, naming the footprint.
func TestDecodeTrafficLimit(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	qproj := suites.Case{Name: "qwen3-q-proj", Kind: suites.KindKernel, Op: ops.MatMul,
		Kernel: ops.Args{Op: ops.MatMul, Ints: map[ops.Param]int{ops.M: 1, ops.N: 4096, ops.K: 2048}, DType: ops.BF16}}
	attn := suites.Case{Name: "qwen3-attention", Kind: suites.KindKernel, Op: ops.PagedAttentionDecode,
		Kernel: ops.Args{Op: ops.PagedAttentionDecode, Ints: map[ops.Param]int{ops.NumHeads: 32, ops.NumKVHeads: 4, ops.HeadSize: 128,
			ops.Context: 512, ops.Seqs: 1, ops.BlockSize: 16}, DType: ops.BF16}}
	for _, c := range []struct {
		name   string
		tuning metal.Tuning
		cases  []suites.Case
		fail   string
	}{
		{"shipped", metal.Tuning{}, []suites.Case{qproj, attn}, ""},
		{"one row per threadgroup", metal.Tuning{MatVecRows: 1, MatVecSimdgroups: 1}, []suites.Case{qproj},
			"a decode-path kernel may move 1.25×); most re-read: matvec_bf16's x, 4096.0 reads of its 8192 distinct bytes"},
		{"a fifth more distinct bytes", metal.Tuning{}, []suites.Case{qproj}, "a decode-path kernel may touch 1.10×"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mb, err := metal.New(emu.New(emu.Options{}), metal.Options{Tuning: c.tuning})
			if err != nil {
				t.Fatal(err)
			}
			defer mb.Close()
			var be bridge.Backend = mb
			if strings.HasPrefix(c.name, "a fifth") {
				be = widerFootprint{mb}
			}
			rs, err := RunCases(be, c.cases, Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				t.Logf("%s: traffic efficiency %.3f, err %v", r.Case, r.Efficiency, r.Err)
				switch {
				case c.fail == "" && r.Err != nil:
					t.Errorf("%s: %v", r.Case, r.Err)
				case c.fail != "" && (r.Err == nil || !strings.Contains(r.Err.Error(), c.fail)):
					t.Errorf("%s: error %v, want one saying %q", r.Case, r.Err, c.fail)
				case r.Efficiency <= 0 || r.FootprintEfficiency <= 0:
					t.Errorf("%s: traffic efficiency %g, footprint efficiency %g: want both", r.Case, r.Efficiency, r.FootprintEfficiency)
				}
			}
		})
	}
}

// widerFootprint reports each dispatch touching a fifth more distinct bytes
// than the emulator counted, as a kernel reading padding would.
type widerFootprint struct{ *metal.Backend }

func (w widerFootprint) LastStepCost() ([]mtl.DispatchStats, bool) {
	ds, ok := w.Backend.LastStepCost()
	out := slices.Clone(ds)
	for i := range out {
		out[i].FootprintRead += out[i].FootprintRead / 5
	}
	return out, ok
}
