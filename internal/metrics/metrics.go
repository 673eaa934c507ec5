// Package metrics names what mtlbench measures: which way each metric
// improves, the least value each can take (results.CheckSample), and which
// names a perf gate can hold to a threshold. It depends on nothing, so the
// suite parser, below results and reports, checks a suite's thresholds with
// the rule the gate applies (docs/data.md, "Metrics").
package metrics

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/internal/suggest"
)

// Direction says which way a metric improves.
type Direction int

// Directions. Informational metrics (bytes moved per step, preemptions,
// profiling overhead) describe the workload rather than its speed, so they
// are never compared.
const (
	Informational  Direction = 0
	HigherIsBetter Direction = 1
	LowerIsBetter  Direction = -1
)

func (d Direction) String() string {
	switch d {
	case HigherIsBetter:
		return "higher is better"
	case LowerIsBetter:
		return "lower is better"
	}
	return "informational"
}

// informational metrics are listed by name so that a suffix rule of Of
// can never turn them into compared ones by accident.
var informational = map[string]bool{
	"bytes_per_step":       true,
	"preemptions":          true,
	"profile_overhead_pct": true,
}

// Of returns how metric improves. Throughputs (…tok_s, …gb_s, …gflop_s)
// and roofline_frac are higher-is-better; times (…_ms, …_us, us_per_call)
// and peak_rss_bytes are lower-is-better. Anything else is informational:
// a metric whose direction is guessed could pass a gate the wrong way
// round.
func Of(metric string) Direction {
	switch {
	case informational[metric]:
		return Informational
	case strings.HasSuffix(metric, "tok_s"), strings.HasSuffix(metric, "gb_s"),
		strings.HasSuffix(metric, "gflop_s"), strings.HasSuffix(metric, "_per_s"),
		metric == "roofline_frac", metric == "prefill_roofline_frac":
		return HigherIsBetter
	case strings.HasSuffix(metric, "_ms"), strings.HasSuffix(metric, "_us"),
		metric == "us_per_call", metric == "peak_rss_bytes":
		return LowerIsBetter
	}
	return Informational
}

// ModelCase are the metrics a suite's model cases record (runner/bench:
// the timings, profiling, and the Metal cost witness of a step), KernelCase
// those its kernel cases record (and the cost witness of a kernel call),
// and Imported those only imports read from other tools (reports/peers:
// llama-bench, mlx_lm.benchmark, vllm bench serve). A suite may hold to a
// threshold only a metric one of its cases records (suites).
var (
	ModelCase = []string{
		"decode_tok_s", "prefill_tok_s", "output_tok_s", "ttft_ms", "tpot_ms",
		"itl_p50_ms", "itl_p90_ms", "itl_p99_ms", "step_ms", "encode_ms", "encode_frac", "sample_ms",
		"device_ms", "device_frac", "bytes_per_step", "achieved_gb_s", "roofline_frac",
		"dispatches_per_step", "prefill_gflop_s", "prefill_roofline_frac", "peak_rss_bytes",
		"preemptions", "profile_overhead_pct", "request_per_s", SLOMetric,
		"ttft_p99_ms", "tpot_p99_ms", "e2el_ms", "e2el_p99_ms",
		// the Metal cost witness
		"witness_bytes_per_step", "witness_traffic_efficiency", "witness_footprint_bytes_per_step",
		"witness_footprint_efficiency", "witness_tok_s", "witness_lanes_per_load", "witness_critical_loads",
	}
	KernelCase = []string{
		"us_per_call", "gb_s", "gflop_s",
		"traffic_efficiency", "bytes_counted", "bytes_per_load", "lanes_per_load", "critical_loads", "simdgroups_per_core",
		"barriers_per_threadgroup", "footprint_efficiency", "bytes_footprint", "witness_us",
	}
	Imported = []string{"prompt_gen_tok_s", "peak_memory_bytes", "total_tok_s"}
)

// DecodeStep are the model cases' metrics of decode steps and of the gaps
// between a request's tokens: only a case whose requests generate two
// tokens or more records them, as one token is sampled by the prefill.
var DecodeStep = []string{
	"decode_tok_s", "tpot_ms", "tpot_p99_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms",
	"step_ms", "encode_ms", "encode_frac", "sample_ms", "device_ms", "device_frac",
	"bytes_per_step", "achieved_gb_s", "roofline_frac", "dispatches_per_step",
	"witness_bytes_per_step", "witness_traffic_efficiency", "witness_footprint_bytes_per_step",
	"witness_footprint_efficiency", "witness_tok_s", "witness_lanes_per_load", "witness_critical_loads",
}

// SLOMetric is the model cases' metric only a case with an slo records:
// the requests a second that meet every bound.
const SLOMetric = "goodput_per_s"

// Recorded are the metrics mtlbench's cases record and its imports read.
// Tests hold both to these lists (runner/bench, reports/peers).
var Recorded = slices.Concat(ModelCase, KernelCase, Imported)

// Gated are the Recorded metrics a gate compares: those with a direction.
func Gated() []string { return GatedOf(Recorded) }

// GatedOf are the metrics of list a gate compares, in its order.
func GatedOf(list []string) []string {
	var g []string
	for _, m := range list {
		if Of(m) != Informational {
			g = append(g, m)
		}
	}
	return g
}

// CheckThreshold says why a threshold on metric could never act: a name no
// case records (a typo), or an informational metric, which no gate
// compares. Callers add the choices (Gated) in their own words.
func CheckThreshold(metric string) error {
	if !slices.Contains(Recorded, metric) {
		return fmt.Errorf("no case records a metric %q", metric)
	}
	if Of(metric) == Informational {
		return fmt.Errorf("%s is informational (no better or worse direction): no gate compares it", metric)
	}
	return nil
}

// CheckThresholdSize says why a threshold t (a fraction: 0.05 is 5%) on
// metric could never act: a higher-is-better metric falls by at most all
// of it (to 0), and the gate counts only a fall past the threshold
// (reports/compare), so at 100% or more no run would fail.
func CheckThresholdSize(metric string, t float64) error {
	if Of(metric) == HigherIsBetter && t >= 1 {
		return fmt.Errorf("%s falls by at most 100%% (to 0), so a threshold of %s%% would pass every run: write less than 100%%",
			metric, strconv.FormatFloat(t*100, 'g', -1, 64))
	}
	return nil
}

// ThresholdHint is what to add to CheckThreshold's error: the gated metric
// the name is probably a misspelling of, else the list of them. Suite
// files and --threshold share it, so both answer a typo alike.
func ThresholdHint(metric string) string {
	if h := suggest.DidYouMean(metric, Gated()); h != "" {
		return h
	}
	return "gated metrics: " + strings.Join(Gated(), ", ")
}

// nonNegativeUnits are the units whose quantities cannot be negative, with
// what each measures (for the error).
var nonNegativeUnits = map[string]string{
	"tok/s": "a rate", "GB/s": "a rate", "GFLOP/s": "a rate", "req/s": "a rate",
	"ms": "a time", "us": "a time", "s": "a time",
	"B": "a size", "count": "a count", "ratio": "a fraction",
}

// nonNegativeNames are the metric name endings that say the same, for a
// sample whose unit is missing or another one (a hand-edited export, a peer
// tool's file): the names mtlbench records its metrics under.
var nonNegativeNames = []struct{ suffix, what string }{
	{"tok_s", "a rate"}, {"gb_s", "a rate"}, {"gflop_s", "a rate"}, {"_per_s", "a rate"},
	{"_ms", "a time"}, {"_us", "a time"}, {"us_per_call", "a time"},
	{"_frac", "a fraction"}, {"_efficiency", "a fraction"},
	{"_bytes", "a size"}, {"bytes_per_step", "a size"}, {"bytes_per_load", "a size"},
	{"dispatches_per_step", "a count"}, {"simdgroups_per_core", "a count"}, {"lanes_per_load", "a count"},
	{"critical_loads", "a count"},
	{"preemptions", "a count"},
}

// Min is the least value metric, recorded in unit, can take: 0 for a
// rate, time, size, count or fraction (by its unit or its name), else -Inf
// (a percentage change such as profile_overhead_pct may be negative). what
// says which of those it is ("" for -Inf).
func Min(metric, unit string) (min float64, what string) {
	if w, ok := nonNegativeUnits[unit]; ok {
		return 0, w
	}
	for _, n := range nonNegativeNames {
		if strings.HasSuffix(metric, n.suffix) {
			return 0, n.what
		}
	}
	return math.Inf(-1), ""
}

// MaxValue bounds a figure's magnitude. The largest mtlbench records (a
// step's bytes, a rate in tokens or GFLOP a second) is many orders below
// it: past it, a file is broken.
const MaxValue = 1e18

// CheckValue says why v is no value of metric (in unit): not finite, below
// what the metric can be (Min), or past MaxValue. The store, exports,
// statistics and the history all hold figures to it.
func CheckValue(metric, unit string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("value %v is not finite", v)
	}
	if min, what := Min(metric, unit); v < min {
		return fmt.Errorf("value %v is negative, and %s cannot be", v, what)
	}
	if math.Abs(v) > MaxValue {
		return fmt.Errorf("value %g is past %g: no figure of a run is that large", v, MaxValue)
	}
	return nil
}

// unitsByName are the units a metric's name ending says it is recorded in.
var unitsByName = []struct{ suffix, unit string }{
	{"tok_s", "tok/s"}, {"gb_s", "GB/s"}, {"gflop_s", "GFLOP/s"}, {"_ms", "ms"}, {"_us", "us"}, {"us_per_call", "us"},
	{"_bytes", "B"}, {"_per_s", "req/s"}, {"_frac", "ratio"},
}

// CheckUnit says why unit cannot be metric's: a name that says tok/s, ms,
// us, bytes, requests a second or a fraction with a sample in another unit
// (a peak RSS in MiB, a roofline fraction in %) would be compared and gated
// as what its name says. An empty unit
// is left to the name.
func CheckUnit(metric, unit string) error {
	if unit == "" {
		return nil
	}
	for _, n := range unitsByName {
		if strings.HasSuffix(metric, n.suffix) && unit != n.unit {
			return fmt.Errorf("%s is in %s, but its unit is %q", metric, n.unit, unit)
		}
	}
	return nil
}
