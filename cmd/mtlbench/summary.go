package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/reports/stats"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/bench"
	"github.com/mtlbench/mtlbench/suites"
)

func runTables(db *results.DB, sum *bench.Summary) ([]*table.Table, error) {
	var model, kernel *table.Table
	byCase := make([]map[string]*stats.Summary, len(sum.Cases))
	for i, c := range sum.Cases {
		samples, err := db.Samples(c.ID)
		if err != nil {
			return nil, err
		}
		byCase[i] = stats.ByMetric(samples)
	}
	modelCols, witness := stats.ModelColumnsFor(sum.Cases, byCase)
	kernelCols, kernelWitness := stats.KernelColumnsFor(sum.Cases, byCase)
	layers := stats.LayersColumn(sum.Cases)
	bw := stats.KernelBandwidth(sum.Run)
	var overBW []string // kernel cases whose GB/s passes bw
	// tables with a cell too few repetitions left without an interval
	countOnly := map[*table.Table]bool{}
	for i, c := range sum.Cases {
		m := byCase[i]
		cols, t := modelCols, &model
		if c.Kind == results.CaseKernel {
			cols, t = kernelCols, &kernel
		}
		if *t == nil {
			*t = &table.Table{Title: fmt.Sprintf("run %d: %s cases (median ± 95%% CI)", sum.RunID, c.Kind), Header: stats.CaseHeader(c.Kind, layers, cols)}
		}
		// An interrupted or failed case shows what its stored repetitions
		// measured, as the data formats and compare count them.
		partial := (c.Status == results.CasePending || c.Status == results.CaseFailed) && len(m) > 0
		row := []string{c.Name}
		switch {
		case partial && c.Status == results.CaseFailed:
			row[0] += " (failed)"
		case partial:
			row[0] += " (unfinished)"
		}
		if c.Kind != results.CaseKernel && layers {
			l := "-"
			if c.LayersTotal > 0 {
				l = fmt.Sprintf("%d/%d", c.LayersRun, c.LayersTotal)
			}
			row = append(row, l)
		}
		for _, col := range cols {
			// A case that measured nothing says why in its figures' place
			// (skipped too, as a row of dashes reads as no metric recorded).
			if c.Status != results.CaseDone && !partial {
				row = append(row, c.Status)
				continue
			}
			if stats.CountOnly(m[col.Metric]) {
				countOnly[*t] = true
			}
			cell := col.Cell(m[col.Metric])
			if c.Kind == results.CaseKernel && col.Metric == "gb_s" && bw.Over(m[col.Metric]) {
				cell += stats.OverMark
				overBW = append(overBW, c.Name)
			}
			row = append(row, cell)
		}
		(*t).Rows = append((*t).Rows, row)
	}
	// Values no statistic takes are said, beside the table they are missing from.
	for _, kt := range []struct {
		t    *table.Table
		kind bool
	}{{model, false}, {kernel, true}} {
		var names []string
		var sums []map[string]*stats.Summary
		for i, c := range sum.Cases {
			if (c.Kind == results.CaseKernel) == kt.kind {
				names, sums = append(names, c.Name), append(sums, byCase[i])
			}
		}
		if kt.t != nil {
			kt.t.Notes = append(kt.t.Notes, stats.LeftOutNotes(names, sums)...)
		}
	}
	var out []*table.Table
	for _, t := range []*table.Table{model, kernel} {
		if t != nil {
			if countOnly[t] {
				t.Notes = append(t.Notes, table.NoteText(stats.CountOnlyNote))
			}
			if t == model && layers {
				t.Notes = append(t.Notes, table.NoteText("layers: layers run / layers of the model; figures of truncated models are not whole-model figures"))
			}
			if t == model {
				t.Notes = append(t.Notes, stepShareNotes(sum.Cases, byCase)...)
				t.Notes = append(t.Notes, cachedRooflineNotes(sum.Cases, byCase)...)
				if n := stats.BurstRateNote(sum.Cases); n != "" {
					t.Notes = append(t.Notes, table.NoteText(n))
				}
				if witness {
					t.Notes = append(t.Notes, table.Notef("traffic eff: the bytes a decode step had to read over the bytes its kernels moved, every access as the Metal emulator counted it; "+
						"footprint eff: the same over the distinct bytes of each dispatch; lanes/load: the lanes of 32 the step's loads kept busy; "+
						"critical loads: the loads each dispatch's busiest simdgroup issued one after another, summed over the step; "+
						"ceiling: the decode tok/s the footprint allows at the bandwidth of %s (witness_gpu, docs/metal-kernels.md)", witnessGPUs(sum.Cases, byCase, results.CaseModel, "witness_tok_s")))
				}
			}
			if n := bw.Note(overBW); t == kernel && n != "" {
				t.Notes = append(t.Notes, table.NoteText(n))
			}
			if t == kernel && kernelWitness {
				t.Notes = append(t.Notes, table.Notef("traffic eff: the op's ideal bytes over the bytes its kernels moved, every access as the Metal emulator counted it; "+
					"footprint eff: the same over the distinct bytes of each dispatch; B/load: a lane's average device load (16: four floats at once); "+
					"lanes/load: the lanes of 32 a simdgroup load keeps busy; critical loads: the loads the busiest simdgroup issued one after another; "+
					"simdgroups/core: simdgroups launched per GPU core (under 2 leaves cores idle); floor µs: the footprint at the GPU's bandwidth; "+
					"GPU: %s (witness_gpu, docs/metal-kernels.md)", witnessGPUs(sum.Cases, byCase, results.CaseKernel, "witness_us")))
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
		if t := witnessByOpTable(sum.RunID, c, stats.WitnessByOp(ts)); t != nil {
			out = append(out, t)
		}
		if sum.Run == nil || !sum.Run.Emulated { // an emulator's times are its own, not a GPU's
			if t := timeByOpTable(sum.RunID, c, stats.TimeByOp(ts)); t != nil {
				out = append(out, t)
			}
		}
	}
	for _, kind := range []string{results.CaseModel, results.CaseKernel} {
		t, err := operandTable(db, sum, kind)
		if err != nil {
			return nil, err
		}
		if t != nil {
			out = append(out, t)
		}
	}
	return out, nil
}

// modelOperandRows is how many arguments of a model case's decode step the
// summary lists: those moving the most bytes beyond their distinct ones.
const modelOperandRows = 8

// operandTable shows, for the cases of a kind whose device counted their
// kernel arguments (the Metal emulator), each argument's bytes and how
// often the call or the decode step read or wrote each of its bytes: every
// argument of a kernel case, a model case's most re-read; nil without any.
func operandTable(db *results.DB, sum *bench.Summary, kind string) (*table.Table, error) {
	title, which := "kernel cases' arguments (cost witness, one call)", ""
	if kind == results.CaseModel {
		title = "a decode step's most re-read kernel arguments (cost witness, mean over the steps)"
		which = fmt.Sprintf("the %d arguments of each case moving the most bytes beyond their distinct ones, summed over a decode step's dispatches; ", modelOperandRows)
	}
	t := &table.Table{
		Title:  fmt.Sprintf("run %d: %s", sum.RunID, title),
		Header: []string{"case", "kernel", "argument", "read MB", "reads a byte", "written MB", "writes a byte"},
	}
	per := func(n, distinct int64) string {
		if distinct == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(n)/float64(distinct))
	}
	for _, c := range sum.Cases {
		if c.Kind != kind {
			continue
		}
		ops, err := db.OperandTraffic(c.ID)
		if err != nil {
			return nil, err
		}
		// Every repetition counts the same call, and the same steps: the
		// first repetition stands for them.
		n := 0
		for n < len(ops) && ops[n].Rep == ops[0].Rep {
			n++
		}
		ops = ops[:n]
		if kind == results.CaseModel {
			excess := func(o results.OperandTraffic) int64 { return o.Read + o.Written - o.DistinctRead - o.DistinctWritten }
			slices.SortStableFunc(ops, func(a, b results.OperandTraffic) int { return cmp.Compare(excess(b), excess(a)) })
			ops = ops[:min(len(ops), modelOperandRows)]
		}
		for _, o := range ops {
			t.Rows = append(t.Rows, []string{c.Name, o.Kernel, o.Operand, fmt.Sprintf("%.3f", float64(o.Read)/1e6),
				per(o.Read, o.DistinctRead), fmt.Sprintf("%.3f", float64(o.Written)/1e6), per(o.Written, o.DistinctWritten)})
		}
	}
	if len(t.Rows) == 0 {
		return nil, nil
	}
	t.Notes = append(t.Notes, table.Notef("%sreads a byte: the bytes the kernel read of the argument over its distinct bytes (1.0: each once), as the Metal emulator counted every access; "+
		"an argument read many times a byte is what a wider threadgroup, or a tile kept in threadgroup memory, would read once (docs/metal-kernels.md)", which))
	return t, nil
}

// stepShareNotes names the model cases whose decode steps the host took
// most of the time to encode (encode_frac at least stats.HostBound): their
// figures measure the host's encoding, not the device's kernels. Of the
// others, it names those whose device ran less than stats.DeviceIdle of a
// step (device_frac): it waited the rest for the host to hand steps over.
// cachedRooflineNotes names the model cases whose decode read its bytes
// faster than the measured bandwidth: weights small enough to stay in a
// cache, which the bandwidth roofline does not bound.
func cachedRooflineNotes(cases []results.Case, byCase []map[string]*stats.Summary) []table.Note {
	var over []string
	for i, c := range cases {
		if f := byCase[i]["roofline_frac"]; c.Kind != results.CaseKernel && f != nil && f.Center > 1 {
			over = append(over, c.Name)
		}
	}
	if len(over) == 0 {
		return nil
	}
	return []table.Note{table.Notef("roofline %% over 100 (%s): the decode step read its bytes faster than the bandwidth measured, "+
		"so some came from a cache (weights small enough to stay in one); the bandwidth roofline does not bound such a step", strings.Join(over, ", "))}
}

func stepShareNotes(cases []results.Case, byCase []map[string]*stats.Summary) []table.Note {
	var notes []table.Note
	for i, c := range cases {
		m := byCase[i]
		step := m["step_ms"]
		if c.Kind == results.CaseKernel || step == nil {
			continue
		}
		if f, enc := m["encode_frac"], m["encode_ms"]; f != nil && enc != nil && f.Center >= stats.HostBound {
			notes = append(notes, table.Notef("%s is host-bound: encoding a decode step took the host %.2f of its %.2f ms (%.0f%%), "+
				"so the device waited for the host (docs/architecture.md)", c.Name, enc.Center, step.Center, 100*f.Center))
			continue
		}
		if f, dev := m["device_frac"], m["device_ms"]; f != nil && dev != nil && f.Center < stats.DeviceIdle {
			notes = append(notes, table.Notef("%s left the device idle: it ran %.2f ms of a %.2f ms decode step (%.0f%%), "+
				"and waited the rest for steps to be handed to it (docs/architecture.md)", c.Name, dev.Center, step.Center, 100*f.Center))
		}
	}
	return notes
}

// witnessGPUs names the witness GPUs of the cases of a kind that recorded
// metric: "the Apple M3 Ultra (80 cores, 819 GB/s)", or each GPU with its
// cases when they differ.
func witnessGPUs(cases []results.Case, byCase []map[string]*stats.Summary, kind, metric string) string {
	var names []string
	byGPU := map[string][]string{}
	for i, c := range cases {
		if c.Kind != kind || byCase[i][metric] == nil {
			continue
		}
		g := witnessGPUName(c)
		if byGPU[g] == nil {
			names = append(names, g)
		}
		byGPU[g] = append(byGPU[g], c.Name)
	}
	if len(names) == 1 {
		return "the " + names[0]
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + " for " + strings.Join(byGPU[n], ", ")
	}
	return "each case's GPU: " + strings.Join(parts, "; ")
}

// witnessGPUName is a case's witness GPU, "Apple M3 Ultra (80 cores, 819
// GB/s)", or the recorded name where this build's table lacks it.
func witnessGPUName(c results.Case) string {
	g, ok := bench.WitnessGPU(c.Params[suites.ParamWitnessGPU])
	if !ok {
		return c.Params[suites.ParamWitnessGPU]
	}
	return fmt.Sprintf("%s (%d cores, %g GB/s)", g.Name(), g.Cores, g.BandwidthGBs)
}

// witnessByOpTable shows where a profiled decode step's bytes went on the
// Metal emulator, op by op, with the time the footprint takes at the
// case's witness GPU's bandwidth; nil without witness bytes.
// timeByOpTable shows where a profiled model case's decode step went, op
// by op; nil without timings.
func timeByOpTable(run int64, c results.Case, ts []stats.OpTime) *table.Table {
	if len(ts) == 0 {
		return nil
	}
	t := &table.Table{
		Title:  fmt.Sprintf("run %d: %s, a decode step's time by op (profile)", run, c.Name),
		Header: []string{"component", "op", "layers", "ms a step", "µs a call", "share %"},
	}
	var total float64
	for _, o := range ts {
		total += o.Seconds
	}
	for _, o := range ts {
		t.Rows = append(t.Rows, []string{o.Component, o.Op, fmt.Sprint(o.Layers), fmt.Sprintf("%.3f", o.Seconds*1e3),
			fmt.Sprintf("%.1f", o.Seconds*1e6/float64(o.Layers)), fmt.Sprintf("%.1f", 100*o.Seconds/total)})
	}
	t.Notes = append(t.Notes, table.NoteText("summed over the layers, averaged over repetitions; a fused launch counts under the first op it covers. "+
		"Profile timing times each op by itself; a CUDA run whose backend notes say \"in-place timeline\" "+
		"timed each kernel from its release to the next one's, as the steps ran (docs/architecture.md, \"Per-op time in place\")"))
	return t
}

func witnessByOpTable(run int64, c results.Case, ws []stats.OpWitness) *table.Table {
	if len(ws) == 0 {
		return nil
	}
	g, ok := bench.WitnessGPU(c.Params[suites.ParamWitnessGPU])
	gpu, gbs := g.Label(), g.BandwidthGBs
	if !ok {
		gpu = c.Params[suites.ParamWitnessGPU] + " (not in this build's GPU table)"
	}
	t := &table.Table{
		Title:  fmt.Sprintf("run %d: %s, a decode step's bytes by op (cost witness)", run, c.Name),
		Header: []string{"component", "op", "layers", "counted MB", "footprint MB", "footprint %", "µs at " + gpu, "critical loads"},
	}
	var total float64
	for _, w := range ws {
		total += w.Footprint
	}
	for _, w := range ws {
		share, us := "-", "-" // no footprint counted (emu.Options.NoFootprint)
		if total > 0 {
			share = fmt.Sprintf("%.1f", 100*w.Footprint/total)
			if gbs > 0 {
				us = fmt.Sprintf("%.1f", w.Footprint/(gbs*1e3))
			}
		}
		crit := "-" // a database of a build that did not count them
		if w.CriticalLoads > 0 {
			crit = fmt.Sprintf("%.0f", w.CriticalLoads)
		}
		t.Rows = append(t.Rows, []string{w.Component, w.Op, fmt.Sprint(w.Layers),
			fmt.Sprintf("%.2f", w.Bytes/1e6), fmt.Sprintf("%.2f", w.Footprint/1e6), share, us, crit})
	}
	t.Notes = append(t.Notes, table.Notef("summed over the layers, averaged over repetitions; µs: the footprint at the bandwidth of the %s, "+
		"a floor on the op's time there; critical loads: the loads of each dispatch's busiest simdgroup, which it issues one after another "+
		"(witness_gpu, docs/metal-kernels.md)", witnessGPUName(c)))
	return t
}
