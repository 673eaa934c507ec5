// Package stats summarises recorded samples: medians with confidence
// intervals (golang.org/x/perf/benchmath, assuming nothing about the
// distribution), grouped per case and metric.
package stats

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/perf/benchmath"

	"github.com/mtlbench/mtlbench/reports/peers"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/suites"
)

// Confidence is the level of every interval mtlbench prints.
const Confidence = 0.95

// Summary is one metric of one case.
type Summary struct {
	Metric string
	Unit   string
	N      int // the values summarised, LeftOut not counted
	benchmath.Summary
	Values []float64
	// LeftOut counts the samples no statistic takes (results.CheckValue:
	// not finite, or below what the metric can be), which only a store
	// written before the checks on storing can hold. With N 0 the center
	// and bounds are NaN.
	LeftOut int
}

// Summarize returns value's median and its confidence interval. Too few
// values (n < 6) give no interval: both bounds are infinite, where
// benchmath gives an open lower bound and a finite upper one, which a table
// or a plot would read as a closed interval's half.
func Summarize(values []float64) benchmath.Summary {
	s := benchmath.AssumeNothing.Summary(benchmath.NewSample(values, &benchmath.DefaultThresholds), Confidence)
	if math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0) {
		s.Lo, s.Hi = math.Inf(-1), math.Inf(1)
	}
	return s
}

// ByMetric groups samples per metric and summarises each, metrics sorted.
func ByMetric(samples []results.Sample) map[string]*Summary {
	out := map[string]*Summary{}
	for _, s := range samples {
		m := out[s.Metric]
		if m == nil {
			m = &Summary{Metric: s.Metric, Unit: s.Unit}
			out[s.Metric] = m
		}
		if results.CheckValue(s.Metric, s.Unit, s.Value) != nil {
			m.LeftOut++
			continue
		}
		m.Values = append(m.Values, s.Value)
	}
	for _, m := range out {
		sort.Float64s(m.Values)
		m.N = len(m.Values)
		if m.N == 0 {
			m.Summary = benchmath.Summary{Center: math.NaN(), Lo: math.NaN(), Hi: math.NaN(), Confidence: Confidence}
			continue
		}
		m.Summary = Summarize(m.Values)
	}
	return out
}

// LeftOutNotes say, per case name and metric, how many samples the
// summaries left out (Summary.LeftOut) and why; byCase[i] are names[i]'s
// summaries.
func LeftOutNotes(names []string, byCase []map[string]*Summary) []table.Note {
	var notes []table.Note
	for i, m := range byCase {
		for _, metric := range slices.Sorted(maps.Keys(m)) {
			if s := m[metric]; s.LeftOut > 0 {
				notes = append(notes, leftOut(names[i], metric, s.LeftOut, s.N))
			}
		}
	}
	return notes
}

// LeftOutNote is the one wording of samples left out of a statistic.
func LeftOutNote(name, metric string, left, kept int) string {
	return leftOut(name, metric, left, kept).Text
}

func leftOut(name, metric string, left, kept int) table.Note {
	return table.Notef("%s: %d of %d %s samples left out of the statistics: not finite, or below what the metric can be",
		name, left, left+kept, metric)
}

// Column is one metric of a run's summary table, as `mtlbench show` and the
// HTML report print it.
type Column struct {
	Metric, Header string
	Scale          float64
	Digits         int
}

// ModelColumns are the headline metrics of model cases.
var ModelColumns = []Column{
	{"decode_tok_s", "decode tok/s", 1, 1},
	{"prefill_tok_s", "prefill tok/s", 1, 0},
	{"ttft_ms", "TTFT ms", 1, 1},
	{"itl_p99_ms", "ITL p99 ms", 1, 2},
	{"step_ms", "step ms", 1, 2},
	{"roofline_frac", "roofline %", 100, 0},
	{"peak_rss_bytes", "peak RSS MiB", 1.0 / (1 << 20), 0},
}

// GPUColumns are model-case metrics only GPU backends record, shown when a
// run has them.
var GPUColumns = []Column{
	{"dispatches_per_step", "dispatches/step", 1, 0},
	{"encode_ms", "encode ms", 1, 2},
	{"device_ms", "device ms", 1, 2},
}

// HostColumns are model-case metrics of the host's share that only some
// cases record, shown when a run has them: the time a sampling step's
// draw takes (docs/architecture.md, "Sampling").
var HostColumns = []Column{
	{"sample_ms", "sample ms", 1, 2},
}

// ServingColumns are the serving figures of model cases whose requests
// arrive on the wall clock or that set an slo (docs/suites.md, "Serving
// load"): requests a second served, and within the slo, and the latencies
// a request sees from its arrival.
var ServingColumns = []Column{
	{"request_per_s", "req/s", 1, 2},
	{"goodput_per_s", "goodput req/s", 1, 2},
	{"ttft_p99_ms", "TTFT p99 ms", 1, 1},
	{"e2el_ms", "E2EL ms", 1, 1},
}

// Serving says whether c is a serving case (docs/suites.md, "Serving
// load"): a model case whose requests arrive on the wall clock, or that
// bounds their latencies, or an import of `vllm bench serve`, which
// measures its requests whatever its rate (inf too: every request at once).
func Serving(c results.Case) bool {
	return c.Kind != results.CaseKernel &&
		(arrivesOnClock(c.Params[suites.ParamArrival]) || c.Params[suites.ParamSLO] != "" || c.Params[peers.ParamRequestRate] != "")
}

// BurstRateNote says which serving cases were imported from `vllm bench
// serve --request-rate inf`, whose rate the case's name does not carry: ""
// when none was.
func BurstRateNote(cases []results.Case) string {
	var names []string
	for _, c := range cases {
		if c.Kind != results.CaseKernel && c.Params[peers.ParamRequestRate] == "inf" && c.Params["ramp_up"] == "" {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("request rate inf (%s): vllm bench serve sent every request at once, so req/s is how fast the burst was served, not an offered load",
		strings.Join(names, ", "))
}

func arrivesOnClock(arrival string) bool {
	a, err := suites.ParseArrival(arrival)
	return err == nil && a.Rate > 0
}

// ModelColumnsFor are the columns of a run's model-case summary: decode
// tok/s and the other headline ones some model case records (another
// engine's imported run has two or three of them, not a row of dashes);
// the serving ones when a case is a serving one (goodput when a case sets
// an slo); then the GPU and witness ones any model case records (byCase[i]
// are cases[i]'s summaries by metric). witness says whether witness
// columns are among them.
func ModelColumnsFor(cases []results.Case, byCase []map[string]*Summary) (cols []Column, witness bool) {
	recorded := func(metric string) bool {
		for i, c := range cases {
			if c.Kind != results.CaseKernel && byCase[i][metric] != nil {
				return true
			}
		}
		return false
	}
	cols = ModelColumns[:1:1]
	for _, col := range ModelColumns[1:] {
		if recorded(col.Metric) {
			cols = append(cols, col)
		}
	}
	if slices.ContainsFunc(cases, Serving) {
		slo := slices.ContainsFunc(cases, func(c results.Case) bool { return c.Kind != results.CaseKernel && c.Params[suites.ParamSLO] != "" })
		for _, col := range ServingColumns {
			if col.Metric != "goodput_per_s" || slo {
				cols = append(cols, col)
			}
		}
	}
	for _, col := range slices.Concat(GPUColumns, HostColumns, WitnessColumns) {
		if recorded(col.Metric) {
			cols = append(cols, col)
			witness = witness || slices.Contains(WitnessColumns, col)
		}
	}
	return cols, witness
}

// LayersColumn tells whether a summary of these cases shows the layers
// column (layers run / layers of the model): only where some model case
// recorded its layers, which another engine's imported figures do not.
func LayersColumn(cases []results.Case) bool {
	return slices.ContainsFunc(cases, func(c results.Case) bool { return c.Kind != results.CaseKernel && c.LayersTotal > 0 })
}

// CaseHeader is the head of a summary's table of one kind of case, the
// same in every report: the case, the layers column where shown (model
// cases only, LayersColumn), then the columns cols.
func CaseHeader(kind string, layers bool, cols []Column) []string {
	h := []string{"case"}
	if kind != results.CaseKernel && layers {
		h = append(h, "layers")
	}
	for _, col := range cols {
		h = append(h, col.Header)
	}
	return h
}

// HostBound is the share of a decode step the host spends encoding it
// (encode_frac) from which the step is host-bound: with steps overlapped,
// the device then waits for the host rather than the other way round.
const HostBound = 0.9

// DeviceIdle is the share of a decode step the device spends running it
// (device_frac) under which the step left the device idle: it waited for
// the host's hand-off, not for kernels.
const DeviceIdle = 0.9

// WitnessColumns are the step witness's model-case metrics (the Metal
// emulator: runner/bench witness.go), shown when a run has them.
var WitnessColumns = []Column{
	{"witness_traffic_efficiency", "traffic eff %", 100, 0},
	{"witness_footprint_efficiency", "footprint eff %", 100, 0},
	{"witness_lanes_per_load", "lanes/load", 1, 1},
	{"witness_critical_loads", "critical loads", 1, 0},
	{"witness_tok_s", "ceiling tok/s", 1, 1},
}

// KernelWitnessColumns are the cost witness's kernel-case metrics (the Metal
// emulator: runner/kbench witness.go), shown when a run has them.
var KernelWitnessColumns = []Column{
	{"traffic_efficiency", "traffic eff %", 100, 0},
	{"footprint_efficiency", "footprint eff %", 100, 0},
	{"bytes_per_load", "B/load", 1, 1},
	{"lanes_per_load", "lanes/load", 1, 1},
	{"critical_loads", "critical loads", 1, 0},
	{"simdgroups_per_core", "simdgroups/core", 1, 1},
	{"witness_us", "floor µs", 1, 2},
}

// KernelColumns are the headline metrics of kernel cases.
var KernelColumns = []Column{
	{"us_per_call", "µs/call", 1, 2},
	{"gb_s", "GB/s", 1, 1},
	{"gflop_s", "GFLOP/s", 1, 1},
}

// KernelColumnsFor are the columns of a run's kernel-case summary: µs/call,
// then the other headline and the witness columns that some kernel case
// recorded (byCase[i] are cases[i]'s summaries by metric), so that a run
// timing calls alone (a tune run) has no column of dashes. witness says
// whether witness columns are among them.
func KernelColumnsFor(cases []results.Case, byCase []map[string]*Summary) (cols []Column, witness bool) {
	cols = slices.Clone(KernelColumns[:1])
	for _, col := range slices.Concat(KernelColumns[1:], KernelWitnessColumns) {
		for i, c := range cases {
			if c.Kind == results.CaseKernel && byCase[i][col.Metric] != nil {
				cols = append(cols, col)
				witness = witness || slices.Contains(KernelWitnessColumns, col)
				break
			}
		}
	}
	return cols, witness
}

// maxDecimals is the most decimals Cell writes: a smaller median is
// written with an exponent (1.1e-09).
const maxDecimals = 6

// Cell prints a median scaled for c with its 95% CI as ± percent, or the
// sample count where too few repetitions (n < 6) give no interval. A median
// the column's digits would show with fewer than two significant digits
// gets two, unless they show it exactly: 0.053 GFLOP/s on a column of
// tenths is 0.053, not 0.1, and 0.0034 of whole percents 0.34, not 0;
// past maxDecimals, with an exponent.
func (c Column) Cell(s *Summary) string {
	if s == nil || s.N == 0 {
		return "-"
	}
	digits, x := c.Digits, s.Center*c.Scale
	if m := math.Abs(x); m > 0 && m < math.Pow(10, 1-float64(digits)) {
		if shown, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', digits, 64), 64); shown != x {
			digits = int(-math.Floor(math.Log10(m))) + 1
		}
	}
	v := strconv.FormatFloat(x, 'f', digits, 64)
	if digits > maxDecimals {
		// Its zeros would outnumber its digits (1e-300: 300 of them).
		v = strconv.FormatFloat(x, 'g', 2, 64)
	}
	if ci := CI(s.Summary, s.N, ""); ci != "" {
		v += " " + ci
	}
	return v
}

// HasInterval reports whether s holds a confidence interval: both bounds
// finite. Too few values (Summarize: infinite bounds) or none (NaN) give
// none, and then neither bounds nor a confidence level may be written.
func HasInterval(s benchmath.Summary) bool {
	return !math.IsInf(s.Lo, 0) && !math.IsInf(s.Hi, 0) && !math.IsNaN(s.Lo) && !math.IsNaN(s.Hi)
}

// CountOnly reports whether CI writes s as its count, "(n=5)": too few
// values for an interval.
func CountOnly(s *Summary) bool {
	return s != nil && s.N > 0 && (math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0))
}

// CountOnlyNote is the one wording, under a table, of the cells CountOnly
// finds: a title that promises a 95% interval then explains their count.
const CountOnlyNote = "(n=N): N repetitions, too few for a 95% confidence interval of the median (6 or more give one)"

// CI is how every table shows a median's 95% interval: ± percent of the
// median (sep between the sign and the figure), or the count where too
// few values (n < 6) give no interval; "" where a zero median leaves no
// percentage.
func CI(s benchmath.Summary, n int, sep string) string {
	switch {
	case math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0):
		return fmt.Sprintf("(n=%d)", n)
	case n > 1 && s.Center != 0:
		return "±" + sep + s.PctRangeString()
	}
	return ""
}

// NoCases says that run r stored no case, and, where its status tells,
// why: show and report say so where the run's table would be.
func NoCases(r *results.Run) string {
	s := fmt.Sprintf("run %d recorded no cases", r.ID)
	switch r.Status {
	case results.RunInterrupted:
		s += ": it was interrupted before it stored any"
	case results.RunFailed:
		s += ": it failed before it stored any"
	case results.RunRunning:
		s += " yet: it is still running"
	}
	return s
}
