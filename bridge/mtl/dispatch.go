package mtl

import (
	"fmt"
	"math"
)

// maxGrid bounds each dimension of a dispatch, in threads and in
// threadgroups: Metal's sizes are NSUIntegers, but its grids are 32-bit.
const maxGrid = 1<<32 - 1

// Dispatch is a checked dispatch: Groups threadgroups of PerGroup threads,
// Grid threads in all (Groups×PerGroup for DispatchThreadgroups, the
// threads asked for by DispatchThreads, whose edge groups are smaller).
type Dispatch struct {
	Groups, PerGroup, Grid [3]int
	// Empty: some dimension has no threadgroup, so there is nothing to run;
	// Metal refuses empty dispatches, and devices drop them.
	Empty bool
}

// CheckThreadgroups checks DispatchThreadgroups(groups, perGroup) of kernel
// against its pipeline's maxTotalThreadsPerThreadgroup, as Metal's API
// validation would: a GPU given a bad size faults or hangs instead. Every
// size is bounded before it is multiplied, so a huge one is refused rather
// than wrapping around into one that passes.
func CheckThreadgroups(kernel string, groups, perGroup [3]int, maxTotal int) (Dispatch, error) {
	d := Dispatch{Groups: groups, PerGroup: perGroup}
	for i := range 3 {
		if perGroup[i] <= 0 || perGroup[i] > maxGrid || groups[i] < 0 || groups[i] > maxGrid/perGroup[i] {
			return d, fmt.Errorf("kernel %s: bad dispatch size: %v threadgroups of %v threads", kernel, groups, perGroup)
		}
		d.Grid[i] = groups[i] * perGroup[i]
	}
	return d, d.check(kernel, maxTotal)
}

// CheckThreads is CheckThreadgroups for DispatchThreads(threads, perGroup).
func CheckThreads(kernel string, threads, perGroup [3]int, maxTotal int) (Dispatch, error) {
	d := Dispatch{Grid: threads, PerGroup: perGroup}
	for i := range 3 {
		if perGroup[i] <= 0 || perGroup[i] > maxGrid || threads[i] < 0 || threads[i] > maxGrid {
			return d, fmt.Errorf("kernel %s: bad dispatch size: %v threads in threadgroups of %v", kernel, threads, perGroup)
		}
		d.Groups[i] = (threads[i] + perGroup[i] - 1) / perGroup[i]
	}
	return d, d.check(kernel, maxTotal)
}

// check marks an empty dispatch and refuses threadgroups larger than the
// pipeline's limit.
func (d *Dispatch) check(kernel string, maxTotal int) error {
	if d.Groups[0] == 0 || d.Groups[1] == 0 || d.Groups[2] == 0 {
		d.Empty = true
		return nil
	}
	n := 1
	for _, t := range d.PerGroup {
		if n > math.MaxInt/t {
			return fmt.Errorf("kernel %s: %v threads per threadgroup exceed the pipeline's %d", kernel, d.PerGroup, maxTotal)
		}
		n *= t
	}
	if n > maxTotal {
		return fmt.Errorf("kernel %s: %d threads per threadgroup exceed the pipeline's %d", kernel, n, maxTotal)
	}
	return nil
}
