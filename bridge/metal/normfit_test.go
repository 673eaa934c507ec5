package metal_test

import (
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/quanttest"
)

// Every norm refuses an output (or residual) shorter than its rows, by one
// rule: the kernel would write past it on a GPU.
func TestNormsRefuseAShortOutput(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	const rows, dim = 3, 64
	weight := func(n int) bridge.Tensor {
		w, err := be.Weight(bridge.F32, []int{n}, quanttest.F32Bytes(make([]float32, n)))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	x, err := be.Weight(bridge.F32, []int{rows, dim}, quanttest.F32Bytes(make([]float32, rows*dim)))
	if err != nil {
		t.Fatal(err)
	}
	w, bias := weight(dim), weight(dim)
	short, err := be.Alloc(bridge.F32, rows-1, dim)
	if err != nil {
		t.Fatal(err)
	}
	full, err := be.Alloc(bridge.F32, rows, dim)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call func()
	}{
		{"rms_norm", func() { be.RMSNorm(short, x, w, 1e-5) }},
		{"add_rms_norm", func() { be.AddRMSNorm(short, full, x, w, 1e-5) }},
		{"add_rms_norm", func() { be.AddRMSNorm(full, short, x, w, 1e-5) }},
		{"layer_norm", func() { be.LayerNorm(short, x, w, bias, 1e-5) }},
		{"add_layer_norm", func() { be.AddLayerNorm(short, full, x, w, bias, 1e-5) }},
	} {
		meta := &bridge.StepMeta{NumTokens: rows, NumSeqs: 1, MaxQueryLen: rows, MaxSeqLen: rows, Positions: make([]int32, rows),
			SlotMapping: make([]int32, rows), QueryStartLoc: []int32{0, rows}, SeqLens: []int32{rows},
			BlockTable: []int32{0}, MaxBlocks: 1, BlockSize: 16}
		if err := be.BeginStep(meta, make([]int32, rows), false); err != nil {
			t.Fatal(err)
		}
		tc.call()
		_, err := be.EndStep()
		if want := tc.name + ": 3 rows of 64 do not fit the output"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", tc.name, err, want)
		}
	}
}
