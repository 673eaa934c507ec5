package kbench

import (
	"cmp"
	"fmt"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/applegpu"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/suites"
)

// The cost witness (docs/msl-subset.md): on a device that counts what each
// dispatch reads and writes (the Metal emulator), a kernel case reports how
// its traffic compares with its op's ideal bytes, how wide its device loads
// are and how many simdgroups it launches per core of an Apple GPU, so a
// kernel's cost shows without a Mac.

// DefaultAppleGPU is the GPU simdgroups per core are counted against: the
// M3 Ultra of the documented history. A case that names it is keyed as one
// that names none (suites.DefaultWitnessGPU).
const DefaultAppleGPU = suites.DefaultWitnessGPU

// witness is implemented by backends whose device counts dispatch costs
// (bridge/metal on the emulator).
type witness interface {
	LastStepCost() ([]mtl.DispatchStats, bool)
}

// Witness is one call of the op as the cost witness counted it.
type Witness struct {
	mtl.StepStats
	// Ideal is the op's ideal bytes (its cost model), Efficiency Ideal over
	// the bytes counted (StepStats.FootprintEfficiency gives it over the
	// distinct bytes).
	Ideal      int64
	Efficiency float64
	// GPU is the Apple GPU SimdgroupsPerCore is counted against, named so
	// that applegpu.Lookup finds that bin again (applegpu.GPU.Label), and
	// FloorSeconds the time the call's footprint takes at its bandwidth: a
	// floor on the call's time there, as witness_tok_s caps a model's rate.
	GPU               string
	SimdgroupsPerCore float64
	FloorSeconds      float64
	Kernels           []mtl.KernelStats
	// Operands are the kernels' buffer arguments, the most bytes moved
	// beyond their distinct bytes first (empty without a footprint).
	Operands []mtl.KernelOperand
}

// SetAppleGPU chooses the Apple GPU (applegpu's table) simdgroups per core
// are counted against; "" means DefaultAppleGPU.
func (b *Bench) SetAppleGPU(name string) error {
	if err := CheckAppleGPU(name); err != nil {
		return err
	}
	b.gpu, b.wit = cmp.Or(name, DefaultAppleGPU), nil
	return nil
}

// CheckAppleGPU refuses a GPU name SetAppleGPU would refuse ("": the
// default), so a case is checked before its data is made.
func CheckAppleGPU(name string) error {
	if _, ok := applegpu.Lookup(cmp.Or(name, DefaultAppleGPU)); !ok {
		return fmt.Errorf("no Apple GPU %q in the table (bridge/mtl/applegpu)", name)
	}
	return nil
}

// Rewitness forgets the call the witness counted and counts a new one: for
// a backend whose launch configuration changed since (the tuner's
// candidates).
func (b *Bench) Rewitness() (*Witness, bool, error) {
	b.wit, b.noWit = nil, false
	return b.Witness()
}

// Witness runs the op once and returns what the cost witness counted, or
// false when the backend's device counts nothing. Either answer is kept:
// later calls return it without running the op.
func (b *Bench) Witness() (*Witness, bool, error) {
	if b.wit != nil {
		return b.wit, true, nil
	}
	if b.noWit {
		return nil, false, nil
	}
	w, ok := b.be.(witness)
	if !ok {
		b.noWit = true
		return nil, false, nil
	}
	if err := b.once(); err != nil {
		return nil, false, fmt.Errorf("%s: %w", b.desc, err)
	}
	ds, ok := w.LastStepCost()
	if !ok {
		b.noWit = true
		return nil, false, nil
	}
	name := b.gpu
	if name == "" {
		name = DefaultAppleGPU
	}
	gpu, found := applegpu.Lookup(name)
	if !found {
		return nil, false, fmt.Errorf("no Apple GPU %q in the table (bridge/mtl/applegpu)", name)
	}
	st := mtl.Sum(ds)
	b.wit = &Witness{StepStats: st, Ideal: b.bytes, Efficiency: st.TrafficEfficiency(b.bytes), GPU: gpu.Label(),
		SimdgroupsPerCore: st.SimdgroupsPerCore(gpu.Cores), Kernels: mtl.SumByKernel(ds), Operands: mtl.SumByOperand(ds),
		FloorSeconds: gpu.SecondsFor(st.Footprint())}
	return b.wit, true, nil
}

// Samples are the witness's metrics of one call.
func (w *Witness) Samples() []Sample {
	out := []Sample{
		{"traffic_efficiency", w.Efficiency, "ratio"},
		{"bytes_counted", float64(w.Bytes()), "B"},
		{"bytes_per_load", w.BytesPerLoad(), "B"},
		{"lanes_per_load", w.LanesPerLoad(), "count"},
		{"critical_loads", float64(w.CriticalLoads), "count"},
		{"simdgroups_per_core", w.SimdgroupsPerCore, "count"},
		{"barriers_per_threadgroup", w.BarriersPerThreadgroup(), "count"},
	}
	if fp := w.Footprint(); fp > 0 {
		out = append(out, Sample{"footprint_efficiency", w.FootprintEfficiency(w.Ideal), "ratio"},
			Sample{"bytes_footprint", float64(fp), "B"},
			Sample{"witness_us", w.FloorSeconds * 1e6, "us"})
	}
	return out
}

// OperandTraffic is the call's kernel arguments as the results store keeps
// them (docs/data.md), for repetition rep.
func (w *Witness) OperandTraffic(rep int) []results.OperandTraffic {
	out := make([]results.OperandTraffic, 0, len(w.Operands))
	for _, o := range w.Operands {
		out = append(out, results.OperandTraffic{Rep: rep, Kernel: o.Kernel, Operand: o.Name, Read: o.Read, Written: o.Written,
			DistinctRead: o.FootprintRead, DistinctWritten: o.FootprintWritten})
	}
	return out
}
