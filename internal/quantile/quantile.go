// Package quantile is the one place medians and percentiles are computed:
// go-moremath's sample quantile (Hyndman and Fan's R8, interpolated), the
// same function golang.org/x/perf/benchmath takes its medians from, so a
// runner's ITL p99 and a report's median agree on what a quantile is.
package quantile

import (
	"slices"
	"time"

	"github.com/aclements/go-moremath/stats"
)

// Of returns the q-quantile (0 <= q <= 1) of values, NaN when there are none.
// values is not modified.
func Of(values []float64, q float64) float64 {
	s := slices.Clone(values)
	slices.Sort(s)
	return stats.Sample{Xs: s, Sorted: true}.Quantile(q)
}

// Median is Of(values, 0.5).
func Median(values []float64) float64 { return Of(values, 0.5) }

// Duration is Of for durations, rounded to the nanosecond; 0 when there are
// none.
func Duration(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	v := make([]float64, len(d))
	for i, x := range d {
		v[i] = float64(x)
	}
	return time.Duration(Of(v, q) + 0.5)
}
