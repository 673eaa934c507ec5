package mtl

import "sort"

// CostWitness is implemented by command buffers that count what each of
// their dispatches did: the emulator (bridge/mtl/emu) does, real Metal does
// not, so callers test for it:
//
//	if w, ok := cb.(mtl.CostWitness); ok { stats := w.DispatchStats() }
//
// docs/msl-subset.md says what is counted and docs/metal-kernels.md how to
// read the figures.
type CostWitness interface {
	// DispatchStats lists the command buffer's dispatches in encoding
	// order, once Wait has returned; nil before, or when counting is off.
	DispatchStats() []DispatchStats
}

// Cost is what dispatches did on the device, summed over their
// threadgroups. Loads and stores are instructions of one lane; a vector
// load (float4, half4, a packed vector) is one load of its whole size.
type Cost struct {
	BytesRead    int64 // device (and constant) memory read through pointers
	BytesWritten int64 // device memory written; atomics count as read and write
	Loads        int64 // device load instructions, summed over lanes
	Stores       int64 // device store instructions, summed over lanes
	// SimdgroupLoads counts load instructions by simdgroup: per simdgroup,
	// the most loads any of its lanes issued.
	SimdgroupLoads int64
	// CriticalLoads is the loads of each dispatch's busiest simdgroup (its
	// busiest lane's), summed over dispatches: the loads one simdgroup
	// issues one after another, which more simdgroups cannot share out.
	// Each costs an issue slot, and a memory latency where it waits on
	// the one before, so a dispatch of few simdgroups, each walking a long
	// run, takes that long however many cores stand idle.
	CriticalLoads int64
	Barriers      int64 // threadgroup barriers executed, summed over threadgroups
	Threadgroups  int64 // threadgroups launched
	Simdgroups    int64 // simdgroups launched (a partial one counts as one)
	Threads       int64 // threads launched
	// ThreadgroupMemoryLaunched is each threadgroup's memory (dynamic and
	// static) times the threadgroups launched, in bytes.
	ThreadgroupMemoryLaunched int64
	// FootprintRead and FootprintWritten are the distinct device bytes each
	// dispatch read and wrote, summed over dispatches: the traffic if a
	// dispatch's caches held every byte it touched more than once, where
	// BytesRead counts every access. The counted bytes bound a kernel's
	// traffic from above, the footprint from below.
	FootprintRead, FootprintWritten int64
}

// Bytes is the device traffic: bytes read plus bytes written.
func (c Cost) Bytes() int64 { return c.BytesRead + c.BytesWritten }

// Footprint is the distinct bytes read plus the distinct bytes written.
func (c Cost) Footprint() int64 { return c.FootprintRead + c.FootprintWritten }

// FootprintEfficiency is ideal bytes over the footprint: below 1 the
// kernels touch bytes the op does not need (padding, a second copy), not
// only read the same bytes twice. 0 when no footprint was counted.
func (c Cost) FootprintEfficiency(idealBytes int64) float64 { return ratio(idealBytes, c.Footprint()) }

// BytesPerLoad is the average size of one lane's device load, in bytes: 2
// for a lane loading one half, 16 for a float4 or eight halves at once.
func (c Cost) BytesPerLoad() float64 { return ratio(c.BytesRead, c.Loads) }

// LanesPerLoad is the lanes one simdgroup load instruction keeps busy, on
// average, of 32: the loads summed over lanes over the loads counted by
// simdgroup (each its busiest lane's). Below 32, lanes of a simdgroup sit
// out its loads (a loop some lanes leave early, rows split over too few
// lanes), and its loads take as many issue slots as if all were busy.
func (c Cost) LanesPerLoad() float64 { return ratio(c.Loads, c.SimdgroupLoads) }

// BytesPerSimdgroupLoad is the average bytes one simdgroup load
// instruction moves over all its lanes (32 lanes of 16 bytes: 512).
func (c Cost) BytesPerSimdgroupLoad() float64 { return ratio(c.BytesRead, c.SimdgroupLoads) }

// TrafficEfficiency is ideal/counted device bytes: 1 when the kernels
// moved exactly the bytes the op needs (its cost model's ideal), 0.5 when
// they moved twice as many. It is 0 when nothing was counted.
func (c Cost) TrafficEfficiency(idealBytes int64) float64 { return ratio(idealBytes, c.Bytes()) }

// BarriersPerThreadgroup is the threadgroup barriers one threadgroup
// executed, on average.
func (c Cost) BarriersPerThreadgroup() float64 { return ratio(c.Barriers, c.Threadgroups) }

// ThreadgroupMemoryPerThreadgroup is the average threadgroup memory of one
// threadgroup, in bytes.
func (c Cost) ThreadgroupMemoryPerThreadgroup() float64 {
	return ratio(c.ThreadgroupMemoryLaunched, c.Threadgroups)
}

// SimdgroupsPerCore is the simdgroups launched per GPU core of a GPU with
// cores cores (bridge/mtl/apple has them): below about 2 a dispatch leaves
// cores idle or cannot hide memory latency.
func (c Cost) SimdgroupsPerCore(cores int) float64 { return ratio(c.Simdgroups, int64(cores)) }

// Add sums two costs.
func (c Cost) Add(o Cost) Cost {
	return Cost{
		BytesRead: c.BytesRead + o.BytesRead, BytesWritten: c.BytesWritten + o.BytesWritten,
		Loads: c.Loads + o.Loads, Stores: c.Stores + o.Stores, SimdgroupLoads: c.SimdgroupLoads + o.SimdgroupLoads,
		CriticalLoads: c.CriticalLoads + o.CriticalLoads,
		Barriers:      c.Barriers + o.Barriers, Threadgroups: c.Threadgroups + o.Threadgroups,
		Simdgroups: c.Simdgroups + o.Simdgroups, Threads: c.Threads + o.Threads,
		ThreadgroupMemoryLaunched: c.ThreadgroupMemoryLaunched + o.ThreadgroupMemoryLaunched,
		FootprintRead:             c.FootprintRead + o.FootprintRead, FootprintWritten: c.FootprintWritten + o.FootprintWritten,
	}
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// DispatchStats is one dispatch as the cost witness saw it.
type DispatchStats struct {
	Kernel          string // the pipeline's kernel name
	Grid            [3]int // threads per grid
	Groups          [3]int // threadgroups per grid
	ThreadsPerGroup [3]int // threads per threadgroup as dispatched
	// ThreadgroupMemory is one threadgroup's memory in bytes: the lengths
	// set with SetThreadgroupMemoryLength plus the kernel's threadgroup
	// variables.
	ThreadgroupMemory int
	Cost
	// Operands is what the dispatch did to each of its buffers, when the
	// footprint was counted; nil otherwise.
	Operands []Operand
}

// Operand is what a dispatch did to one buffer argument, or to several
// bound at one address: the bytes read and written with every access
// counted, and the distinct ones. Reads over distinct reads is how many
// times the dispatch read the operand: a weight matrix streamed once reads
// 1, activations every threadgroup stages read once per threadgroup.
type Operand struct {
	// Name is the kernel's parameter name ("w", "x"), names joined with
	// "+" for arguments bound at one address, or "buffer(N)".
	Name                            string
	Read, Written                   int64
	FootprintRead, FootprintWritten int64
}

// Rereads is the bytes read over the distinct bytes read: 1 when every byte
// was read once, 0 when nothing was read.
func (o Operand) Rereads() float64 { return ratio(o.Read, o.FootprintRead) }

// Rewrites is the same for the bytes written.
func (o Operand) Rewrites() float64 { return ratio(o.Written, o.FootprintWritten) }

// Excess is the bytes moved beyond the distinct ones: what a cache holding
// the operand would save.
func (o Operand) Excess() int64 { return o.Read + o.Written - o.FootprintRead - o.FootprintWritten }

// KernelOperand is one operand of one kernel, summed over its dispatches.
type KernelOperand struct {
	Kernel string
	Operand
}

// SumByOperand adds up each kernel's operands over dispatches, largest
// excess first: the operands whose re-reads add the most traffic.
func SumByOperand(ds []DispatchStats) []KernelOperand {
	type key struct{ kernel, name string }
	index := map[key]int{}
	var out []KernelOperand
	for _, d := range ds {
		for _, o := range d.Operands {
			k := key{d.Kernel, o.Name}
			i, ok := index[k]
			if !ok {
				i = len(out)
				index[k] = i
				out = append(out, KernelOperand{Kernel: d.Kernel, Operand: Operand{Name: o.Name}})
			}
			x := &out[i].Operand
			x.Read += o.Read
			x.Written += o.Written
			x.FootprintRead += o.FootprintRead
			x.FootprintWritten += o.FootprintWritten
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Excess() > out[b].Excess() })
	return out
}

// StepStats sums the dispatches of a step, or of a kernel case's
// repetitions.
type StepStats struct {
	Dispatches int
	// MaxThreadgroupMemory is the largest ThreadgroupMemory of a dispatch.
	MaxThreadgroupMemory int
	Cost
}

// Sum adds up dispatches.
func Sum(ds []DispatchStats) StepStats {
	var s StepStats
	for _, d := range ds {
		s.Dispatches++
		s.Cost = s.Cost.Add(d.Cost)
		s.MaxThreadgroupMemory = max(s.MaxThreadgroupMemory, d.ThreadgroupMemory)
	}
	return s
}

// KernelStats is the sum of one kernel's dispatches.
type KernelStats struct {
	Kernel string
	StepStats
}

// SumByKernel adds up dispatches per kernel, the kernels in order of first
// dispatch.
func SumByKernel(ds []DispatchStats) []KernelStats {
	index := map[string]int{}
	var out []KernelStats
	for _, d := range ds {
		i, ok := index[d.Kernel]
		if !ok {
			i = len(out)
			index[d.Kernel] = i
			out = append(out, KernelStats{Kernel: d.Kernel})
		}
		k := &out[i]
		k.Dispatches++
		k.Cost = k.Cost.Add(d.Cost)
		k.MaxThreadgroupMemory = max(k.MaxThreadgroupMemory, d.ThreadgroupMemory)
	}
	return out
}

// SortByBytes orders kernel sums by device traffic, largest first, so a
// report shows where a step's bytes go.
func SortByBytes(ks []KernelStats) {
	sort.SliceStable(ks, func(a, b int) bool { return ks[a].Bytes() > ks[b].Bytes() })
}
