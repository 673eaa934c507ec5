// Package tidy turns stored runs into data: one row per run × case × metric
// with the numeric median, its 95% confidence interval, n, the unit and
// every case parameter as its own column (Summaries), or one row per sample
// (Raw). The csv, json and jsonl output of every command that prints runs
// comes from here, so a script reads the same columns wherever it got them.
// docs/data.md lists the columns.
package tidy

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/internal/metrics"
	"github.com/mtlbench/mtlbench/reports/stats"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/suites"
)

// RunColumns are the columns that say which run a row belongs to.
// backend_notes (the backend's account of how the run ran, as runs lists
// it) is empty for runs stored before it was recorded.
var RunColumns = []string{"run", "started", "suite", "tag", "kind", "backend", "timing", "emulated",
	"commit", "version", "machine", "overrides", "backend_notes"}

// CaseColumns say which case a row is.
// error holds a failed case's error, so the data says why it has no figures.
var CaseColumns = []string{"case", "key", "case_kind", "status", "error", "layers_run", "layers_total"}

// StatColumns are a summary row's measured part.
var StatColumns = []string{"metric", "unit", "better", "n", "median", "ci_lo", "ci_hi", "confidence"}

// RawColumns are a raw row's measured part.
var RawColumns = []string{"metric", "unit", "rep", "value"}

// CompareColumns are compare's rows' columns before the case's parameters
// (reports/compare).
var CompareColumns = []string{"case", "key", "case_kind", "metric", "unit", "better",
	"a_n", "a_median", "a_ci_lo", "a_ci_hi", "b_n", "b_median", "b_ci_lo", "b_ci_hi",
	"delta_pct", "p", "significant", "verdict", "reason", "only_in"}

// GateColumns are gate's rows' columns before the case's parameters.
var GateColumns = []string{"case", "key", "case_kind", "metric", "unit", "better", "per",
	"baseline_n", "baseline_center", "baseline_ci_lo", "baseline_ci_hi",
	"candidate_n", "candidate_center", "candidate_ci_lo", "candidate_ci_hi",
	"delta_pct", "noise_pct", "p", "p_adj", "threshold_pct", "outcome", "reason"}

// fixed is every column name show, compare or gate writes itself; a case
// parameter of the same name (a matmul's n) becomes param_<name> in all
// of them, so one parameter has one column whichever command wrote it.
var fixed = func() map[string]bool {
	m := map[string]bool{}
	for _, cols := range [][]string{RunColumns, CaseColumns, StatColumns, RawColumns, CompareColumns, GateColumns} {
		for _, c := range cols {
			m[c] = true
		}
	}
	return m
}()

// ParamColumn is the column a case parameter is written to: one of its
// own for each name, so a parameter named param_n (an import may hold one)
// is param_param_n beside a matmul's n, not a second param_n.
func ParamColumn(name string) string {
	if fixed[name] || strings.HasPrefix(name, "param_") {
		return "param_" + name
	}
	return name
}

// Value is a parameter or label as data: a number when the text is one,
// else the text.
func Value(s string) any { return table.Typed(s) }

// Run is one stored run with its cases and samples, as the rows need it.
type Run struct {
	Run     *results.Run
	Cases   []results.Case
	Samples map[int64][]results.Sample // by case id
}

// Load reads a run's cases and samples.
func Load(db *results.DB, r *results.Run) (*Run, error) {
	cases, err := db.Cases(r.ID)
	if err != nil {
		return nil, err
	}
	samples, err := db.RunSamples(r.ID)
	if err != nil {
		return nil, err
	}
	// Keyed as compare reads them (suites.RunKeys): a run stored before a
	// keying rule changed names its cases, and benchfmt its benchmarks, as
	// a new run of them does, so its rows join and benchstat pairs them.
	results.KeyReader(suites.RunKeys).Rekey(cases)
	return &Run{Run: r, Cases: cases, Samples: samples}, nil
}

// MachineName is the GPU's name when the run had one, else the CPU's.
func MachineName(m results.Machine) string {
	if m.GPUName != "" {
		return m.GPUName
	}
	return m.CPUModel
}

// RunRow is the run part of a row.
func RunRow(r *results.Run) map[string]any {
	return map[string]any{
		"run": r.ID, "started": r.StartedAt, "suite": r.SuiteName, "tag": r.Tag, "kind": r.Kind,
		"backend": r.Backend, "timing": r.TimingMode, "emulated": r.Emulated, "commit": r.GitCommit,
		"version": r.ToolVersion, "machine": MachineName(r.Machine), "overrides": results.OverridesText(r.Overrides),
		"backend_notes": r.BackendNotes,
	}
}

func caseRow(row map[string]any, c results.Case) {
	row["case"], row["key"], row["case_kind"], row["status"] = c.Name, c.Key, c.Kind, c.Status
	row["error"], row["layers_run"], row["layers_total"] = nil, nil, nil
	if c.Error != "" {
		row["error"] = c.Error
	}
	if c.LayersTotal > 0 {
		row["layers_run"], row["layers_total"] = int64(c.LayersRun), int64(c.LayersTotal)
	}
	for k, v := range c.Params {
		row[ParamColumn(k)] = Value(v)
	}
}

// Better is "higher", "lower" or "" (informational) for a metric.
func Better(metric string) string {
	switch metrics.Of(metric) {
	case metrics.HigherIsBetter:
		return "higher"
	case metrics.LowerIsBetter:
		return "lower"
	}
	return ""
}

// Summaries is one row per run × case × metric. A case with no samples
// (failed, pending) still gets one row, with its status and no metric, so
// nothing disappears silently.
func Summaries(runs []*Run) *table.Data {
	d := newData(StatColumns)
	for _, r := range runs {
		for _, c := range r.Cases {
			byMetric := stats.ByMetric(r.Samples[c.ID])
			names := make([]string, 0, len(byMetric))
			for m := range byMetric {
				names = append(names, m)
			}
			slices.Sort(names)
			if len(names) == 0 {
				row := RunRow(r.Run)
				caseRow(row, c)
				d.add(row)
				continue
			}
			for _, m := range names {
				s := byMetric[m]
				row := RunRow(r.Run)
				caseRow(row, c)
				row["metric"], row["unit"], row["better"], row["n"] = m, s.Unit, Better(m), int64(s.N)
				row["median"], row["ci_lo"], row["ci_hi"] = statValue(s.Center), statValue(s.Lo), statValue(s.Hi)
				if stats.HasInterval(s.Summary) {
					// a level belongs to an interval: none without one
					row["confidence"] = stats.Confidence
				}
				d.add(row)
			}
		}
	}
	return d.data()
}

// LeftOut says, per run, case and metric, how many samples Summaries and
// WriteBenchfmt leave out (stats.LeftOutNote), which only a store written
// before the checks on storing can hold: the data formats have no place
// beside their rows for it, so their commands print it on stderr.
func LeftOut(runs []*Run) []string {
	var notes []string
	for _, r := range runs {
		var names []string
		var byCase []map[string]*stats.Summary
		for _, c := range r.Cases {
			names = append(names, fmt.Sprintf("run %d: case %s", r.Run.ID, c.Name))
			byCase = append(byCase, stats.ByMetric(r.Samples[c.ID]))
		}
		notes = append(notes, table.NoteTexts(stats.LeftOutNotes(names, byCase))...)
	}
	return notes
}

// statValue is a statistic as data: one that is not finite is none (a
// median of no values kept, the ±Inf bounds of no interval), so it is
// missing, where a sample that is not finite is written as stored (Raw).
func statValue(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

// RawNulls names the samples Raw holds that are not finite: csv writes
// them as NaN, +Inf or -Inf, json and jsonl, which have no such values,
// as null, so a json reader learns from these lines which nulls they are.
func RawNulls(runs []*Run) []string {
	var notes []string
	for _, r := range runs {
		for _, c := range r.Cases {
			for _, s := range r.Samples[c.ID] {
				if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
					notes = append(notes, fmt.Sprintf("run %d: case %s: %s repetition %d is %v, written as null",
						r.Run.ID, c.Name, s.Metric, s.Rep, s.Value))
				}
			}
		}
	}
	return notes
}

// Raw is one row per run × case × metric × repetition. A case with no
// samples gets one row with its status and no metric, as in Summaries.
func Raw(runs []*Run) *table.Data {
	d := newData(RawColumns)
	for _, r := range runs {
		for _, c := range r.Cases {
			if len(r.Samples[c.ID]) == 0 {
				row := RunRow(r.Run)
				caseRow(row, c)
				d.add(row)
				continue
			}
			for _, s := range r.Samples[c.ID] {
				row := RunRow(r.Run)
				caseRow(row, c)
				row["metric"], row["unit"], row["rep"], row["value"] = s.Metric, s.Unit, int64(s.Rep), s.Value
				d.add(row)
			}
		}
	}
	return d.data()
}

// builder keeps the column order fixed: run columns, case columns, the
// parameters sorted by name, then the measured columns.
type builder struct {
	tail   []string
	params map[string]bool
	rows   []map[string]any
}

func newData(tail []string) *builder { return &builder{tail: tail, params: map[string]bool{}} }

func (b *builder) add(row map[string]any) {
	for k := range row {
		if !fixed[k] {
			b.params[k] = true
		}
	}
	b.rows = append(b.rows, row)
}

func (b *builder) data() *table.Data {
	cols := slices.Concat(RunColumns, CaseColumns)
	var ps []string
	for p := range b.params {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	cols = append(append(cols, ps...), b.tail...)
	d := &table.Data{Columns: cols}
	for _, row := range b.rows {
		r := make([]any, len(cols))
		for i, c := range cols {
			r[i] = row[c]
		}
		d.Rows = append(d.Rows, r)
	}
	return d
}
