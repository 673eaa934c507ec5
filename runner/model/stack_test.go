package model

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
)

// The expert matrices a source makes (draws, conversions, widenings,
// transcodes) lie in their layer's stacks (owned.place): floats as every
// gate, then every up, then every down; packed values, scales and biases
// each at a fixed stride. A backend that reads a layer's experts as one
// region then takes them in place rather than gather a second copy. The
// bytes are those the same source makes tensor by tensor.
func TestExpertsStacked(t *testing.T) {
	dt := func(d bridge.DType) *bridge.DType { return &d }
	for _, c := range []struct {
		name string
		spec Spec
	}{
		{"bf16 preset", Spec{Model: "qwen3-moe-mini", Layers: 1, Seed: 1}},
		{"f32 preset", Spec{Model: "qwen3-moe-mini", DType: dt(bridge.F32), Layers: 1, Seed: 2}},
		{"q4 preset", Spec{Model: "qwen3-moe-mini", Quant: "q4", Layers: 1, Seed: 1}},
		{"q3 preset, widened", Spec{Model: "qwen3-moe-mini", Quant: "q3", Layers: 1, Seed: 1}},
		{"q5_k_m preset, transcoded", Spec{Model: "qwen3-moe-mini", Quant: "q5_k_m", Layers: 1, Seed: 1}},
		{"HF f32 as bf16", Spec{Model: "../testdata/hf/qwen3_moe", DType: dt(bridge.BF16)}},
		{"GGUF f32 as bf16", Spec{Model: "../testdata/gguf/mixtral-f32.gguf", DType: dt(bridge.BF16)}},
		{"GGUF q5_k, transcoded", Spec{Model: "../testdata/gguf/qwen3_moe-q5_k_m.gguf"}},
		{"mlx mxfp4, transcoded", Spec{Model: "../testdata/mlx/qwen3_moe-mxfp4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var packed [3]bool
			parts := func(flat bool) (*Config, [][][3][]byte, func()) {
				cfg, src, err := Open(c.spec)
				if err != nil {
					t.Fatal(err)
				}
				if flat {
					switch s := src.(type) {
					case *Synthetic:
						s.mem.experts = 0
					case *Checkpoint:
						s.mem.experts = 0
					case *GGUFSource:
						s.mem.experts = 0
					}
				}
				run := cfg.RunOn(cpu.QuantRules{})
				l := 0
				for !run.IsMoELayer(l) {
					l++
				}
				// got[m][e]: expert e's matrix m, as values, scales, biases
				got := make([][][3][]byte, 3)
				for m, name := range expertMatrices {
					for e := 0; e < run.NumExperts; e++ {
						s, ok := specOf(run, fmt.Sprintf("%smlp.experts.%d.%s", LayerPrefix(l), e, name))
						if !ok {
							t.Fatalf("no tensor %s", name)
						}
						var b [3][]byte
						if to, ok := run.Quant.For(s.Name); ok {
							packed[m] = true
							p, _, err := PackedAs(src, s, to)
							if err != nil {
								t.Fatal(err)
							}
							b = [3][]byte{p.Data, p.Scales, p.Biases}
						} else if _, b[0], err = src.Tensor(s); err != nil {
							t.Fatal(err)
						}
						if !flat && !ownedBy(src, b[0]) {
							t.Fatalf("%s lies in the file: this case makes no copy to stack", s.Name)
						}
						got[m] = append(got[m], b)
					}
				}
				// asked again, a tensor is handed out as it was made
				s, _ := specOf(run, fmt.Sprintf("%smlp.experts.0.%s", LayerPrefix(l), expertMatrices[0]))
				again := [3][]byte{}
				if to, ok := run.Quant.For(s.Name); ok {
					p, _, _ := PackedAs(src, s, to)
					again = [3][]byte{p.Data, p.Scales, p.Biases}
				} else {
					_, again[0], _ = src.Tensor(s)
				}
				if unsafe.SliceData(again[0]) != unsafe.SliceData(got[0][0][0]) && !flat || string(again[0]) != string(got[0][0][0]) {
					t.Fatalf("%s asked again: other bytes", s.Name)
				}
				return run, got, func() { src.Close() }
			}
			run, stacked, done := parts(false)
			defer done()
			_, flat, done2 := parts(true)
			defer done2()
			E := run.NumExperts
			at := func(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
			for m := range stacked {
				for e := range stacked[m] {
					for p, b := range stacked[m][e] {
						if string(b) != string(flat[m][e][p]) {
							t.Fatalf("matrix %d, expert %d, part %d: bytes differ from the tensor made alone", m, e, p)
						}
						if b == nil {
							continue
						}
						// floats: one stack a layer; packed: one a matrix and part
						base, slot := at(stacked[0][0][p]), m*E+e
						if packed[m] {
							base, slot = at(stacked[m][0][p]), e
						}
						if at(b) != base+uintptr(slot*len(b)) {
							t.Fatalf("matrix %d, expert %d, part %d: not in its place in the stack", m, e, p)
						}
					}
				}
			}
		})
	}
}

// specOf is cfg's tensor of that name.
func specOf(cfg *Config, name string) (TensorSpec, bool) {
	for _, s := range cfg.Tensors() {
		if s.Name == name {
			return s, true
		}
	}
	return TensorSpec{}, false
}

// ownedBy reports whether b lies in memory src made (not in its files).
func ownedBy(src Source, b []byte) bool {
	switch s := src.(type) {
	case *Synthetic:
		return s.mem.contain(b)
	case *Checkpoint:
		return s.mem.contain(b)
	case *GGUFSource:
		return s.mem.contain(b)
	}
	return false
}
