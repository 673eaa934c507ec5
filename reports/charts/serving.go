package charts

import (
	"sort"
	"strconv"

	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/suites"
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

// arrivalOf is a case's arrival on the wall clock: its rate, requests a
// second, and its burstiness.
func arrivalOf(c *CaseData) (suites.Arrival, bool) {
	a, err := suites.ParseArrival(c.Params["arrival"])
	return a, err == nil && a.Rate > 0
}

// arrivalsNote names the gaps' distribution, for a series' legend.
func arrivalsNote(a suites.Arrival) string {
	if a.Burstiness == 1 {
		return "Poisson arrivals"
	}
	return "gamma arrivals, burstiness " + strconv.FormatFloat(a.Burstiness, 'g', -1, 64)
}

// rateGroup is a set of a run's model cases that differ in their rate only.
type rateGroup struct {
	run   *RunData
	name  string // suite entry
	cases []*CaseData
}

// rateGroups picks, per run, the cases that sweep the rate: at least two
// rates, every other parameter (the burstiness too) equal.
func rateGroups(runs []RunData) []rateGroup {
	var out []rateGroup
	for ri := range runs {
		run := &runs[ri]
		byKey := map[string]*rateGroup{}
		var order []string
		for ci := range run.Cases {
			c := &run.Cases[ci]
			a, ok := arrivalOf(c)
			if !ok || !c.done() || c.Kind != results.CaseModel {
				continue
			}
			k := c.group() + "\x00" + c.paramsWithout("arrival") + "\x00" + arrivalsNote(a)
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
				a, _ := arrivalOf(c)
				rates[a.Rate] = true
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
					a, _ := arrivalOf(c)
					s.Points = append(s.Points, pointOf(a.Rate, st))
				}
			}
			if len(s.Points) == 0 {
				continue
			}
			sort.Slice(s.Points, func(i, j int) bool { return s.Points[i].X < s.Points[j].X })
			series = append(series, s)
			c0 := g.cases[0]
			a0, _ := arrivalOf(c0)
			descs = append(descs, []part{
				{"run", RunLabel(g.run.Run)}, {"backend", g.run.Run.Backend}, {"arrivals", arrivalsNote(a0)},
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
	c := newChart(d.Title, "offered load (requests a second)", d.YLabel)
	ci, err := xyPlot(c, d.Series, xBatch)
	if err != nil {
		return nil, err
	}
	ciNote(c, ci)
	return c, nil
}
