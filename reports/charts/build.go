package charts

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mtlbench/mtlbench/reports/history"
	"github.com/mtlbench/mtlbench/reports/roofline"
	"github.com/mtlbench/mtlbench/results"
)

// Chart file names (without extension), in report order.
const (
	NameThroughput = "throughput-vs-batch"
	NameBreakdown  = "component-breakdown"
	NameMoEChunk   = "moe-chunk"
	NameRoofline   = "roofline"
	NameHistory    = "history"
)

// Options tunes Build.
type Options struct {
	// History is the documented history; nil loads history.Embedded().
	History []history.Point
	// HistoryModel is the model of the history chart; "" picks one
	// (HistoryModel).
	HistoryModel string
	// ModelBytes gives the bytes a decode step of a documented model reads,
	// for the rooflines of the documented machines on the history chart;
	// nil draws none (reports do not import the runner's model configs).
	ModelBytes roofline.ModelBytes
}

// Named is a built chart with its file name and notes for the reader.
type Named struct {
	Name  string
	Chart *Chart
	Notes []string
}

// Build draws every chart the runs have data for, in report order; charts
// without data are left out. A chart whose every value is one no chart can
// draw (ErrNothingDrawable) is left out too, and leftOut says so: one
// chart must not cost the report the others.
func Build(db *results.DB, runIDs []int64, opts Options) (named []Named, leftOut []string, err error) {
	runs, err := LoadRuns(db, runIDs)
	if err != nil {
		return nil, nil, err
	}
	return BuildFrom(runs, opts)
}

// BuildFrom is Build on runs already loaded.
func BuildFrom(runs []RunData, opts Options) (named []Named, leftOut []string, err error) {
	hist := opts.History
	var histNote string
	if hist == nil {
		var err error
		// A broken history file must not cost the report its other charts.
		if hist, err = history.Embedded(); err != nil {
			histNote = fmt.Sprintf("The documented history did not load completely: %v", err)
		}
	}
	var out []Named
	add := func(name string, c *Chart, err error, notes ...string) error {
		if errors.Is(err, ErrNoData) {
			return nil
		}
		if errors.Is(err, ErrNothingDrawable) {
			leftOut = append(leftOut, fmt.Sprintf("chart %s is left out: %v", name, err))
			return nil
		}
		if err != nil {
			return fmt.Errorf("charts: %s: %w", name, err)
		}
		out = append(out, Named{Name: name, Chart: c, Notes: notes})
		return nil
	}
	c, err := ThroughputVsBatch(BatchSeries(runs))
	if err := add(NameThroughput, c, err); err != nil {
		return nil, nil, err
	}
	c, err = ComponentBreakdown(Breakdown(runs, hist))
	if err := add(NameBreakdown, c, err); err != nil {
		return nil, nil, err
	}
	c, err = MoEChunkCurve(ChunkSeries(runs, hist))
	if err := add(NameMoEChunk, c, err); err != nil {
		return nil, nil, err
	}
	c, err = ServingCurve(ServingSeries(runs, servingThroughput, "Requests served vs offered load", "requests a second"))
	if err := add(NameServing, c, err); err != nil {
		return nil, nil, err
	}
	c, err = ServingCurve(ServingSeries(runs, servingLatency, "Latency vs offered load", "latency from arrival (ms)"))
	if err := add(NameServingLatency, c, err); err != nil {
		return nil, nil, err
	}
	c, err = RooflineFraction(Roofline(runs))
	if err := add(NameRoofline, c, err,
		"Above 1.0 the working set is served from caches faster than the measured DRAM read bandwidth (small or truncated models)."); err != nil {
		return nil, nil, err
	}
	tl := Timeline(runs, hist, opts.HistoryModel)
	tl.Rooflines = roofline.Documented(hist, tl.Model, opts.ModelBytes)
	if len(tl.Rooflines) > 0 {
		tl.Notes = append(tl.Notes, rooflineNote(tl.Model, tl.Rooflines))
	}
	notes := tl.Notes
	if histNote != "" {
		notes = append(notes, histNote)
	}
	c, err = HistoryTimeline(tl)
	if err := add(NameHistory, c, err, notes...); err != nil {
		return nil, nil, err
	}
	return out, leftOut, nil
}

// WriteCharts writes every chart the runs have data for into dir as
// NAME.png and NAME.svg and returns the paths written, and the charts left
// out with why (Build). It is what `mtlbench report` and `mtlbench compare
// --out` draw.
func WriteCharts(dir string, db *results.DB, runIDs []int64, opts Options) (paths, leftOut []string, err error) {
	named, leftOut, err := Build(db, runIDs, opts)
	if err != nil {
		return nil, nil, err
	}
	for _, n := range named {
		p, err := n.Chart.SaveFiles(dir, n.Name)
		paths = append(paths, p...)
		if err != nil {
			return paths, leftOut, err
		}
	}
	return paths, leftOut, nil
}

// Names are the charts Build may make, the files a report folder holds.
var Names = []string{NameThroughput, NameBreakdown, NameMoEChunk, NameServing, NameServingLatency, NameRoofline, NameHistory}

// RemoveStale removes from dir the chart files of an earlier report that
// this one, named, did not make: a report folder written again holds only
// its report's charts. Other files are left alone.
func RemoveStale(dir string, named []Named) error {
	made := map[string]bool{}
	for _, n := range named {
		made[n.Name] = true
	}
	for _, name := range Names {
		if made[name] {
			continue
		}
		for _, ext := range []string{".png", ".svg"} {
			if err := os.Remove(filepath.Join(dir, name+ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// rooflineNote says what the history chart's roofline lines stand on.
func rooflineNote(model string, lines []roofline.Line) string {
	var parts []string
	for _, l := range lines {
		parts = append(parts, fmt.Sprintf("%s: %s GB/s over %.2f GB = %s tok/s", l.GPU.Name(),
			fmtNum(l.GPU.BandwidthGBs), float64(l.Bytes)/1e9, fmtNum(l.TokS)))
	}
	return fmt.Sprintf("Rooflines are the documented machines' memory bandwidth over the bytes a batch-1 decode step of %s reads "+
		"(weights in the documented dtype, routed experts only, KV cache not counted): %s. "+
		"Figures at batch > 1 are aggregate tok/s and may exceed them.", model, strings.Join(parts, "; "))
}
