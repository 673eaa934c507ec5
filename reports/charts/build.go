package charts

import (
	"errors"
	"fmt"

	"github.com/mtlbench/mtlbench/reports/history"
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
}

// Named is a built chart with its file name and notes for the reader.
type Named struct {
	Name  string
	Chart *Chart
	Notes []string
}

// Build draws every chart the runs have data for, in report order; charts
// without data are left out.
func Build(db *results.DB, runIDs []int64, opts Options) ([]Named, error) {
	runs, err := LoadRuns(db, runIDs)
	if err != nil {
		return nil, err
	}
	return BuildFrom(runs, opts)
}

// BuildFrom is Build on runs already loaded.
func BuildFrom(runs []RunData, opts Options) ([]Named, error) {
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
		if err != nil {
			return fmt.Errorf("charts: %s: %w", name, err)
		}
		out = append(out, Named{Name: name, Chart: c, Notes: notes})
		return nil
	}
	c, err := ThroughputVsBatch(BatchSeries(runs))
	if err := add(NameThroughput, c, err); err != nil {
		return nil, err
	}
	c, err = ComponentBreakdown(Breakdown(runs, hist))
	if err := add(NameBreakdown, c, err); err != nil {
		return nil, err
	}
	c, err = MoEChunkCurve(ChunkSeries(runs, hist))
	if err := add(NameMoEChunk, c, err); err != nil {
		return nil, err
	}
	c, err = RooflineFraction(Roofline(runs))
	if err := add(NameRoofline, c, err,
		"Above 1.0 the working set is served from caches faster than the measured DRAM read bandwidth (small or truncated models)."); err != nil {
		return nil, err
	}
	tl := Timeline(runs, hist, opts.HistoryModel)
	notes := tl.Notes
	if histNote != "" {
		notes = append(notes, histNote)
	}
	c, err = HistoryTimeline(tl)
	if err := add(NameHistory, c, err, notes...); err != nil {
		return nil, err
	}
	return out, nil
}

// WriteCharts writes every chart the runs have data for into dir as
// NAME.png and NAME.svg and returns the paths written. It is what
// `mtlbench report` and `mtlbench compare --out` draw.
func WriteCharts(dir string, db *results.DB, runIDs []int64) ([]string, error) {
	named, err := Build(db, runIDs, Options{})
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, n := range named {
		p, err := n.Chart.SaveFiles(dir, n.Name)
		paths = append(paths, p...)
		if err != nil {
			return paths, err
		}
	}
	return paths, nil
}
