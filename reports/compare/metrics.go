package compare

import (
	"slices"
	"strings"
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

// informational metrics are listed by name so that a new suffix rule
// below can never turn them into compared ones by accident.
var informational = map[string]bool{
	"bytes_per_step":       true,
	"preemptions":          true,
	"profile_overhead_pct": true,
}

// MetricDirection returns how metric improves. Throughputs (…tok_s, …gb_s,
// …gflop_s) and roofline_frac are higher-is-better; times (…_ms, …_us,
// us_per_call) and peak_rss_bytes are lower-is-better. Anything else is
// informational: a metric whose direction is guessed could pass a gate the
// wrong way round.
func MetricDirection(metric string) Direction {
	switch {
	case informational[metric]:
		return Informational
	case strings.HasSuffix(metric, "tok_s"), strings.HasSuffix(metric, "gb_s"),
		strings.HasSuffix(metric, "gflop_s"), metric == "roofline_frac", metric == "prefill_roofline_frac":
		return HigherIsBetter
	case strings.HasSuffix(metric, "_ms"), strings.HasSuffix(metric, "_us"),
		metric == "us_per_call", metric == "peak_rss_bytes":
		return LowerIsBetter
	}
	return Informational
}

// isSpeed tells whether a metric measures speed, so that its verdicts read
// "faster"/"slower"; the others (memory) read "better"/"worse".
func isSpeed(metric string) bool { return metric != "peak_rss_bytes" }

// metricOrder is the order tables appear in: headline throughputs first,
// then latencies, then kernels; unknown metrics follow alphabetically.
var metricOrder = []string{
	"decode_tok_s", "prefill_tok_s", "output_tok_s", "ttft_ms", "tpot_ms",
	"itl_p50_ms", "itl_p90_ms", "itl_p99_ms", "step_ms", "achieved_gb_s",
	"roofline_frac", "peak_rss_bytes", "us_per_call", "gb_s", "gflop_s",
}

func sortMetrics(ms []string) {
	rank := func(m string) int {
		if i := slices.Index(metricOrder, m); i >= 0 {
			return i
		}
		return len(metricOrder)
	}
	slices.SortFunc(ms, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
}
