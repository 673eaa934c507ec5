package bench

import (
	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl/applegpu"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/kbench"
)

// The step witness: on a device whose cost witness counts what each
// dispatch reads and writes (the Metal emulator, docs/msl-subset.md), a
// model case reports the bytes its decode steps' kernels moved, against the
// bytes the step had to read (stepBytes), and the decode rate those bytes
// allow at an Apple GPU's bandwidth: what the kernels of a whole step would
// cost on a Mac, without one (docs/metal-kernels.md, "A whole decode step").

// WitnessGPU is the Apple GPU a case's witness figures are read against:
// the GPU its witness_gpu parameter names (recorded with the case), or
// kbench.DefaultAppleGPU for "". False for a name the table lacks.
func WitnessGPU(name string) (applegpu.GPU, bool) {
	if name == "" {
		name = kbench.DefaultAppleGPU
	}
	return applegpu.Lookup(name)
}

// witnessSum adds up the decode steps the witness counted.
type witnessSum struct {
	steps                     int
	tokens                    int
	counted, footprint, ideal int64
	loads, simdgroupLoads     int64
	criticalLoads             int64
	// ops sums the steps' kernel arguments, in the order first seen.
	ops   []bridge.OperandBytes
	opIdx map[[2]string]int
}

func (w *witnessSum) add(res *engine.StepResult, ideal int64) {
	if res.Stats.CountedBytes <= 0 {
		return
	}
	w.steps++
	w.tokens += res.DecodeTokens
	w.counted += res.Stats.CountedBytes
	w.footprint += res.Stats.FootprintBytes
	w.loads += res.Stats.Loads
	w.simdgroupLoads += res.Stats.SimdgroupLoads
	w.criticalLoads += res.Stats.CriticalLoads
	w.ideal += ideal
	for _, o := range res.Stats.Operands {
		k := [2]string{o.Kernel, o.Operand}
		i, ok := w.opIdx[k]
		if !ok {
			if w.opIdx == nil {
				w.opIdx = map[[2]string]int{}
			}
			i = len(w.ops)
			w.opIdx[k] = i
			w.ops = append(w.ops, bridge.OperandBytes{Kernel: o.Kernel, Operand: o.Operand})
		}
		x := &w.ops[i]
		x.Read += o.Read
		x.Written += o.Written
		x.DistinctRead += o.DistinctRead
		x.DistinctWritten += o.DistinctWritten
	}
}

// operands are the kernel arguments of a decode step, the mean over the
// counted steps (rows of repetition 0; the caller sets the repetition).
func (w *witnessSum) operands() []results.OperandTraffic {
	if w.steps == 0 {
		return nil
	}
	n := int64(w.steps)
	out := make([]results.OperandTraffic, 0, len(w.ops))
	for _, o := range w.ops {
		out = append(out, results.OperandTraffic{Kernel: o.Kernel, Operand: o.Operand, Read: o.Read / n, Written: o.Written / n,
			DistinctRead: o.DistinctRead / n, DistinctWritten: o.DistinctWritten / n})
	}
	return out
}

// samples are the witness's metrics: counted bytes a step and the ideal
// bytes over them; the lanes of 32 the step's loads kept busy and the
// loads its dispatches' busiest simdgroups issued one after another; the
// footprint a step and the ideal over it; and the decode tok/s the
// footprint allows on gpu. The footprint is the
// fewest bytes the step's dispatches can move, so the rate is a ceiling
// (a GPU also waits on latency and dispatches); the counted bytes, every
// access, bound the traffic from above.
func (w *witnessSum) samples(gpu applegpu.GPU) []results.Sample {
	if w.steps == 0 || w.counted <= 0 {
		return nil
	}
	out := []results.Sample{
		{Metric: "witness_bytes_per_step", Value: float64(w.counted) / float64(w.steps), Unit: "B"},
		{Metric: "witness_traffic_efficiency", Value: float64(w.ideal) / float64(w.counted), Unit: "ratio"},
	}
	if w.simdgroupLoads > 0 {
		out = append(out, results.Sample{Metric: "witness_lanes_per_load", Value: float64(w.loads) / float64(w.simdgroupLoads), Unit: "count"})
	}
	if w.criticalLoads > 0 {
		out = append(out, results.Sample{Metric: "witness_critical_loads", Value: float64(w.criticalLoads) / float64(w.steps), Unit: "count"})
	}
	if w.footprint <= 0 {
		return out
	}
	out = append(out,
		results.Sample{Metric: "witness_footprint_bytes_per_step", Value: float64(w.footprint) / float64(w.steps), Unit: "B"},
		results.Sample{Metric: "witness_footprint_efficiency", Value: float64(w.ideal) / float64(w.footprint), Unit: "ratio"})
	if gpu.BandwidthGBs > 0 {
		out = append(out, results.Sample{Metric: "witness_tok_s",
			Value: float64(w.tokens) / gpu.SecondsFor(w.footprint), Unit: "tok/s"})
	}
	return out
}
