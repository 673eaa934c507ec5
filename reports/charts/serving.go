package charts

import (
	"sort"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/results"
)

// Serving chart names: a serving sweep's requests a second and latencies
// against the offered request rate (docs/suites.md, "Serving load").
const (
	NameServing        = "serving-throughput"
	NameServingLatency = "serving-latency"
)

// RateData is ServingCurve's input: figures against the offered request
// rate of poisson arrivals, in requests a second.
type RateData struct {
	Title, YLabel string
	Series        []Series
}

// servingMetric is one figure a serving chart draws, with its legend word.
type servingMetric struct{ metric, label string }

var (
	servingThroughput = []servingMetric{{"request_per_s", "served"}, {"goodput_per_s", "goodput"}}
	servingLatency    = []servingMetric{{"ttft_p99_ms", "TTFT p99"}, {"e2el_ms", "E2EL median"}}
)

// rateOf is a case's poisson arrival rate, requests a second.
func rateOf(c *CaseData) (float64, bool) {
	rest, ok := strings.CutPrefix(c.Params["arrival"], "poisson:")
	if !ok {
		return 0, false
	}
	r, err := strconv.ParseFloat(rest, 64)
	return r, err == nil && r > 0
}

// rateGroup is a set of a run's model cases that differ in their rate only.
type rateGroup struct {
	run   *RunData
	name  string // suite entry
	cases []*CaseData
}

// rateGroups picks, per run, the cases that sweep the poisson rate: at
// least two rates, every other parameter equal.
func rateGroups(runs []RunData) []rateGroup {
	var out []rateGroup
	for ri := range runs {
		run := &runs[ri]
		byKey := map[string]*rateGroup{}
		var order []string
		for ci := range run.Cases {
			c := &run.Cases[ci]
			if _, ok := rateOf(c); !ok || !c.done() || c.Kind != results.CaseModel {
				continue
			}
			k := c.group() + "\x00" + c.paramsWithout("arrival")
			if byKey[k] == nil {
				byKey[k] = &rateGroup{run: run, name: c.group()}
				order = append(order, k)
			}
			byKey[k].cases = append(byKey[k].cases, c)
		}
		for _, k := range order {
			g := byKey[k]
			rates := map[float64]bool{}
			for _, c := range g.cases {
				r, _ := rateOf(c)
				rates[r] = true
			}
			if len(rates) >= 2 {
				out = append(out, *g)
			}
		}
	}
	return out
}

// ServingSeries extracts the serving sweeps' figures against the offered
// rate: for each run and suite entry sweeping the rate, one series per
// metric of ms that its cases record.
func ServingSeries(runs []RunData, ms []servingMetric, title, ylabel string) RateData {
	var (
		descs  [][]part
		series []Series
	)
	for _, g := range rateGroups(runs) {
		for _, m := range ms {
			s := Series{}
			for _, c := range g.cases {
				if st := c.Stats[m.metric]; st != nil {
					r, _ := rateOf(c)
					s.Points = append(s.Points, pointOf(r, st))
				}
			}
			if len(s.Points) == 0 {
				continue
			}
			sort.Slice(s.Points, func(i, j int) bool { return s.Points[i].X < s.Points[j].X })
			series = append(series, s)
			c0 := g.cases[0]
			descs = append(descs, []part{
				{"run", RunLabel(g.run.Run)}, {"backend", g.run.Run.Backend},
				{"model", c0.Params["model"]}, {"entry", g.name}, {"batch", "batch " + c0.Params["batch"]},
				{"layers", c0.layersNote()}, {"metric", m.label},
			})
		}
	}
	ls := labels(descs, "run", "backend", "layers", "metric")
	for i := range series {
		series[i].Label = ls[i]
	}
	return RateData{Title: titleWith(title, descs), YLabel: ylabel, Series: series}
}

// ServingCurve draws figures against the offered request rate, one line
// per series, with 95% CI error bars; the x axis is log2 when the rates
// span a factor of 4 or more, with ticks at the rates.
func ServingCurve(d RateData) (*Chart, error) {
	c := newChart(d.Title, "offered load (requests a second, Poisson arrivals)", d.YLabel)
	ci, err := xyPlot(c, d.Series, xBatch)
	if err != nil {
		return nil, err
	}
	ciNote(c, ci)
	return c, nil
}
