package results

import (
	"fmt"
	"math"
	"strings"
)

// What a sample's value can be. Every path that stores samples (a run's
// repetitions, import, peer imports) checks them with CheckSample, so the
// store never holds a value its metric cannot take: reports draw, compare
// and gate whatever the store holds.

// nonNegativeUnits are the units whose quantities cannot be negative, with
// what each measures (for the error).
var nonNegativeUnits = map[string]string{
	"tok/s": "a rate", "GB/s": "a rate", "GFLOP/s": "a rate",
	"ms": "a time", "us": "a time", "s": "a time",
	"B": "a size", "count": "a count", "ratio": "a fraction",
}

// nonNegativeNames are the metric name endings that say the same, for a
// sample whose unit is missing or another one (a hand-edited export, a peer
// tool's file): the names mtlbench records its metrics under.
var nonNegativeNames = []struct{ suffix, what string }{
	{"tok_s", "a rate"}, {"gb_s", "a rate"}, {"gflop_s", "a rate"},
	{"_ms", "a time"}, {"_us", "a time"}, {"us_per_call", "a time"},
	{"_frac", "a fraction"}, {"_efficiency", "a fraction"},
	{"_bytes", "a size"}, {"bytes_per_step", "a size"}, {"bytes_per_load", "a size"},
	{"dispatches_per_step", "a count"}, {"simdgroups_per_core", "a count"}, {"preemptions", "a count"},
}

// MetricMin is the least value metric, recorded in unit, can take: 0 for a
// rate, time, size, count or fraction (by its unit or its name), else -Inf
// (a percentage change such as profile_overhead_pct may be negative). what
// says which of those it is ("" for -Inf).
func MetricMin(metric, unit string) (min float64, what string) {
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

// CheckSample says why s cannot be stored: no metric, a negative repetition,
// a value that is not finite, or one below what its metric can be.
func CheckSample(s Sample) error {
	if s.Metric == "" || s.Rep < 0 {
		return fmt.Errorf("needs a metric and rep >= 0 (got %q, %d)", s.Metric, s.Rep)
	}
	if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
		return fmt.Errorf("%s rep %d: value %v is not finite", s.Metric, s.Rep, s.Value)
	}
	if min, what := MetricMin(s.Metric, s.Unit); s.Value < min {
		return fmt.Errorf("%s rep %d: value %v is negative, and %s cannot be", s.Metric, s.Rep, s.Value, what)
	}
	return nil
}

// Check says which sample of rec cannot be stored (CheckSample), naming its
// case, so that an import can point at it before anything is stored.
func (rec *RunRecord) Check() error {
	for i := range rec.Cases {
		c := &rec.Cases[i]
		for j, s := range c.Samples {
			if err := CheckSample(s); err != nil {
				return fmt.Errorf("case %d %q sample %d: %w", i, c.Case.Name, j, err)
			}
		}
	}
	return nil
}
