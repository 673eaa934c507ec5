package main

import (
	"fmt"
	"slices"

	"github.com/mtlbench/mtlbench/reports/stats"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/bench"
)

func runTables(db *results.DB, sum *bench.Summary) ([]*table.Table, error) {
	var model, kernel *table.Table
	byCase := make([]map[string]*stats.Summary, len(sum.Cases))
	modelCols := stats.ModelColumns
	for i, c := range sum.Cases {
		samples, err := db.Samples(c.ID)
		if err != nil {
			return nil, err
		}
		byCase[i] = stats.ByMetric(samples)
	}
	witness := false
	for _, col := range append(stats.GPUColumns[:len(stats.GPUColumns):len(stats.GPUColumns)], stats.WitnessColumns...) {
		for i, c := range sum.Cases {
			if c.Kind != results.CaseKernel && byCase[i][col.Metric] != nil {
				modelCols = append(modelCols[:len(modelCols):len(modelCols)], col)
				witness = witness || slices.Contains(stats.WitnessColumns, col)
				break
			}
		}
	}
	for i, c := range sum.Cases {
		m := byCase[i]
		cols, t := modelCols, &model
		if c.Kind == results.CaseKernel {
			cols, t = stats.KernelColumns, &kernel
		}
		if *t == nil {
			h := []string{"case"}
			if c.Kind != results.CaseKernel {
				h = append(h, "layers")
			}
			for _, col := range cols {
				h = append(h, col.Header)
			}
			*t = &table.Table{Title: fmt.Sprintf("run %d: %s cases (median ± 95%% CI)", sum.RunID, c.Kind), Header: h}
		}
		row := []string{c.Name}
		if c.Kind != results.CaseKernel {
			l := "-"
			if c.LayersTotal > 0 {
				l = fmt.Sprintf("%d/%d", c.LayersRun, c.LayersTotal)
			}
			row = append(row, l)
		}
		for _, col := range cols {
			if c.Status == results.CaseFailed || c.Status == results.CasePending {
				row = append(row, c.Status)
				continue
			}
			row = append(row, col.Cell(m[col.Metric]))
		}
		(*t).Rows = append((*t).Rows, row)
	}
	var out []*table.Table
	for _, t := range []*table.Table{model, kernel} {
		if t != nil {
			if t == model {
				t.Notes = append(t.Notes, "layers: layers run / layers of the model; figures of truncated models are not whole-model figures")
				t.Notes = append(t.Notes, hostBoundNotes(sum.Cases, byCase)...)
				if witness {
					gpu, gbs := bench.WitnessGPU()
					t.Notes = append(t.Notes, "traffic eff: the bytes a decode step had to read over the bytes its kernels moved, every access as the Metal emulator counted it; "+
						"footprint eff: the same over the distinct bytes of each dispatch; "+
						fmt.Sprintf("ceiling: the decode tok/s the footprint allows at the %s's %.0f GB/s (docs/metal-kernels.md)", gpu, gbs))
				}
			}
			out = append(out, t)
		}
	}
	for _, c := range sum.Cases {
		if c.Kind == results.CaseKernel {
			continue
		}
		ts, err := db.OpTimings(c.ID)
		if err != nil {
			return nil, err
		}
		if t := witnessByOpTable(sum.RunID, c.Name, stats.WitnessByOp(ts)); t != nil {
			out = append(out, t)
		}
	}
	return out, nil
}

// hostBoundNotes names the model cases whose decode steps the host took
// most of the time to encode (encode_frac at least stats.HostBound): their
// figures measure the host's encoding, not the device's kernels.
func hostBoundNotes(cases []results.Case, byCase []map[string]*stats.Summary) []string {
	var notes []string
	for i, c := range cases {
		f, enc, step := byCase[i]["encode_frac"], byCase[i]["encode_ms"], byCase[i]["step_ms"]
		if c.Kind == results.CaseKernel || f == nil || enc == nil || step == nil || f.Center < stats.HostBound {
			continue
		}
		notes = append(notes, fmt.Sprintf("%s is host-bound: encoding a decode step took the host %.2f of its %.2f ms (%.0f%%), "+
			"so the device waited for the host (docs/architecture.md)", c.Name, enc.Center, step.Center, 100*f.Center))
	}
	return notes
}

// witnessByOpTable shows where a profiled decode step's bytes went on the
// Metal emulator, op by op, with the time the footprint takes at the
// witness GPU's bandwidth; nil without witness bytes.
func witnessByOpTable(run int64, name string, ws []stats.OpWitness) *table.Table {
	if len(ws) == 0 {
		return nil
	}
	gpu, gbs := bench.WitnessGPU()
	t := &table.Table{
		Title:  fmt.Sprintf("run %d: %s, a decode step's bytes by op (cost witness)", run, name),
		Header: []string{"component", "op", "layers", "counted MB", "footprint MB", "footprint %", "µs at " + gpu},
	}
	var total float64
	for _, w := range ws {
		total += w.Footprint
	}
	for _, w := range ws {
		share, us := "-", "-" // no footprint counted (emu.Options.NoFootprint)
		if total > 0 {
			share, us = fmt.Sprintf("%.1f", 100*w.Footprint/total), fmt.Sprintf("%.1f", w.Footprint/(gbs*1e3))
		}
		t.Rows = append(t.Rows, []string{w.Component, w.Op, fmt.Sprint(w.Layers),
			fmt.Sprintf("%.2f", w.Bytes/1e6), fmt.Sprintf("%.2f", w.Footprint/1e6), share, us})
	}
	t.Notes = append(t.Notes, fmt.Sprintf("summed over the layers, averaged over repetitions; µs: the footprint at the %s's %.0f GB/s, "+
		"a floor on the op's time there (docs/metal-kernels.md)", gpu, gbs))
	return t
}
