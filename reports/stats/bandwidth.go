package stats

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/reports/roofline"
	"github.com/mtlbench/mtlbench/results"
)

// OverMark follows a kernel case's GB/s cell when the figure is above the
// bandwidth the run's figures are held against (Bandwidth); the table's
// note says why.
const OverMark = " †"

// Bandwidth is the memory bandwidth a run's kernel GB/s figures are held
// against: the read bandwidth measured before the run, else the bandwidth
// Apple documents for the run's GPU (bridge/mtl/applegpu). GBs is 0 when
// neither is known, and for an emulated run, whose figures are the
// emulator's.
type Bandwidth struct {
	GBs    float64
	Source string // "measured before the run", "documented for the Apple M3 Max"
}

// KernelBandwidth is the bandwidth r's kernel GB/s figures are held against.
func KernelBandwidth(r *results.Run) Bandwidth {
	switch {
	case r == nil || r.Emulated:
		return Bandwidth{}
	case r.ReadBandwidthGBs > 0:
		return Bandwidth{r.ReadBandwidthGBs, "read bandwidth measured before the run"}
	}
	if g, ok := roofline.Machine(r.Machine.GPUName); ok && r.Backend != "cpu" {
		return Bandwidth{g.BandwidthGBs, "bandwidth documented for the " + g.Name()}
	}
	return Bandwidth{}
}

// Over says whether s, a GB/s figure, is above b.
func (b Bandwidth) Over(s *Summary) bool {
	return b.GBs > 0 && s != nil && s.N > 0 && s.Center > b.GBs
}

// Note explains the marked GB/s cells of the named cases: "" for none.
// A working set small enough to stay in a cache is read from it, faster
// than from memory, as cachedRooflineNotes says of model cases.
func (b Bandwidth) Note(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("†: GB/s above the %s GB/s %s (%s): a working set small enough to stay in a cache between calls is read from it, "+
		"faster than from memory, so memory bandwidth does not bound it; a working set larger than the caches measures memory",
		strconv.FormatFloat(b.GBs, 'f', 1, 64), b.Source, strings.Join(names, ", "))
}
