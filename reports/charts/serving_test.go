package charts

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/reports/stats"
	"github.com/mtlbench/mtlbench/results"
)

// servingRun is a run with a rate sweep at two batch sizes (the second
// without an slo, so without goodput), a case at one rate alone, and a
// step-arrival case: only the sweeps are lines.
func servingRun() RunData {
	r := RunData{Run: results.Run{ID: 5, Backend: "cpu", TimingMode: results.TimingThroughput}}
	add := func(name string, params map[string]string, figures map[string]float64) {
		var samples []results.Sample
		for m, v := range figures {
			for rep := range 7 {
				samples = append(samples, results.Sample{Rep: rep, Metric: m, Value: v * (1 + 0.01*float64(rep-3))})
			}
		}
		params["model"] = "qwen3-moe-mini"
		r.Cases = append(r.Cases, CaseData{
			Case:  results.Case{ID: int64(len(r.Cases) + 1), RunID: 5, Name: name, Kind: results.CaseModel, Status: results.CaseDone, Params: params},
			Stats: stats.ByMetric(samples),
		})
	}
	// Written out of order, one rate spelt with a decimal point.
	for _, rate := range []string{"8", "2", "4.0"} {
		var x float64
		fmt.Sscan(rate, &x)
		add("serve/arrival=poisson:"+rate, map[string]string{"batch": "8", "arrival": "poisson:" + rate, "slo": "ttft:500"},
			map[string]float64{"request_per_s": min(x, 5), "goodput_per_s": min(x, 5) * 0.8, "ttft_p99_ms": 40 * x, "e2el_ms": 300 + 10*x})
		add("serve/arrival=poisson:"+rate, map[string]string{"batch": "1", "arrival": "poisson:" + rate},
			map[string]float64{"request_per_s": min(x, 2), "ttft_p99_ms": 90 * x, "e2el_ms": 900 + 10*x})
	}
	// A sweep of gamma arrivals is a line of its own.
	for _, a := range []string{"gamma:2:0.5", "gamma:8:0.5"} {
		add("serve/arrival="+a, map[string]string{"batch": "8", "arrival": a, "slo": "ttft:500"},
			map[string]float64{"request_per_s": 1})
	}
	add("alone", map[string]string{"batch": "8", "arrival": "poisson:3"}, map[string]float64{"request_per_s": 3})
	add("stagger", map[string]string{"batch": "8", "arrival": "stagger:2"}, map[string]float64{"request_per_s": 3})
	return r
}

func TestServingSeries(t *testing.T) {
	d := ServingSeries([]RunData{servingRun()}, servingThroughput, "Requests served vs offered load", "requests a second")
	var got []string
	for _, s := range d.Series {
		var xs []string
		for _, p := range s.Points {
			xs = append(xs, fmt.Sprintf("%g:%.2f", p.X, p.Y))
		}
		got = append(got, s.Label+" = "+strings.Join(xs, " "))
	}
	want := []string{
		"run 5, cpu, Poisson arrivals, batch 8, served = 2:2.00 4:4.00 8:5.00",
		"run 5, cpu, Poisson arrivals, batch 8, goodput = 2:1.60 4:3.20 8:4.00",
		"run 5, cpu, Poisson arrivals, batch 1, served = 2:2.00 4:2.00 8:2.00",
		"run 5, cpu, gamma arrivals, burstiness 0.5, batch 8, served = 2:1.00 8:1.00",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("series\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d.Title != "Requests served vs offered load — qwen3-moe-mini" {
		t.Errorf("title %q", d.Title)
	}
	c, err := ServingCurve(d)
	if err != nil {
		t.Fatal(err)
	}
	checkChart(t, c, "offered load (requests a second)", "requests a second", "Poisson arrivals, batch 8, goodput")
	keep(t, c, "serving")
	lat, err := ServingCurve(ServingSeries([]RunData{servingRun()}, servingLatency, "Latency vs offered load", "latency from arrival (ms)"))
	if err != nil {
		t.Fatal(err)
	}
	checkChart(t, lat, "latency from arrival (ms)", "batch 1, TTFT p99", "batch 8, E2EL median")
	// A run with no rate sweep has no serving chart.
	plain := servingRun()
	plain.Cases = plain.Cases[len(plain.Cases)-2:]
	if _, err := ServingCurve(ServingSeries([]RunData{plain}, servingThroughput, "t", "y")); !errors.Is(err, ErrNoData) {
		t.Errorf("no sweep: err = %v, want ErrNoData", err)
	}
}
