package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"unicode"

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
	for _, col := range stats.GPUColumns {
		for i, c := range sum.Cases {
			if c.Kind != results.CaseKernel && byCase[i][col.Metric] != nil {
				modelCols = append(modelCols[:len(modelCols):len(modelCols)], col)
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
			}
			out = append(out, t)
		}
	}
	return out, nil
}

// writeBenchfmt prints one Go benchmark line per case and repetition, so
// benchstat can read a run.
func writeBenchfmt(w io.Writer, db *results.DB, sum *bench.Summary) error {
	fmt.Fprintf(w, "goos: %s\ngoarch: %s\n", runtime.GOOS, runtime.GOARCH)
	if sum.Run != nil {
		fmt.Fprintf(w, "pkg: mtlbench/%s\ncpu: %s\nbackend: %s\n", sum.Run.SuiteName, sum.Run.Machine.CPUModel, sum.Run.Backend)
	}
	for _, c := range sum.Cases {
		samples, err := db.Samples(c.ID)
		if err != nil {
			return err
		}
		byRep := map[int][]results.Sample{}
		maxRep := -1
		for _, s := range samples {
			byRep[s.Rep] = append(byRep[s.Rep], s)
			maxRep = max(maxRep, s.Rep)
		}
		name := benchName(c)
		for r := 0; r <= maxRep; r++ {
			var b strings.Builder
			fmt.Fprintf(&b, "%s 1", name)
			for _, s := range byRep[r] {
				fmt.Fprintf(&b, " %g %s", s.Value, benchUnit(s.Metric, s.Unit))
			}
			fmt.Fprintln(w, b.String())
		}
	}
	return nil
}

// benchName is "Benchmark<Group>/k=v/...", the form benchstat splits.
func benchName(c results.Case) string {
	group, rest, _ := strings.Cut(c.Name, "/")
	var b strings.Builder
	b.WriteString("Benchmark")
	up := true
	for _, r := range group {
		if r == '-' || r == '_' || r == '.' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	if m := c.Params["model"]; m != "" {
		b.WriteString("/model=" + m)
	}
	if rest != "" {
		b.WriteString("/" + rest)
	}
	return strings.ReplaceAll(b.String(), " ", "_")
}

// benchUnit names a sample's unit for benchstat: one token per metric, so
// decode and prefill tok/s stay apart.
func benchUnit(metric, _ string) string { return strings.ReplaceAll(metric, "_", "-") }
