package compare

import (
	"slices"
	"strings"
)

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
