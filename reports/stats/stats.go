// Package stats summarises recorded samples: medians with confidence
// intervals (golang.org/x/perf/benchmath, assuming nothing about the
// distribution), grouped per case and metric.
package stats

import (
	"sort"

	"golang.org/x/perf/benchmath"

	"github.com/mtlbench/mtlbench/results"
)

// Confidence is the level of every interval mtlbench prints.
const Confidence = 0.95

// Summary is one metric of one case.
type Summary struct {
	Metric string
	Unit   string
	N      int
	benchmath.Summary
	Values []float64
}

// Summarize returns value's median and its confidence interval.
func Summarize(values []float64) benchmath.Summary {
	return benchmath.AssumeNothing.Summary(benchmath.NewSample(values, &benchmath.DefaultThresholds), Confidence)
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
		m.Values = append(m.Values, s.Value)
	}
	for _, m := range out {
		sort.Float64s(m.Values)
		m.N = len(m.Values)
		m.Summary = Summarize(m.Values)
	}
	return out
}
