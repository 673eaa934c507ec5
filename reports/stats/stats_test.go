package stats

import (
	"math"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/results"
)

// A run's model columns: decode tok/s, the other headline ones only where
// recorded (another engine's imported run has two of them), the serving
// ones only with a serving case (goodput only with an slo), the GPU and
// witness ones only where recorded.
func TestModelColumnsFor(t *testing.T) {
	rec := map[string]*Summary{"dispatches_per_step": {}, "witness_tok_s": {}}
	all := map[string]*Summary{}
	for _, c := range ModelColumns {
		all[c.Metric] = &Summary{}
	}
	peer := map[string]*Summary{"decode_tok_s": {}, "prefill_tok_s": {}}
	headers := func(cases []results.Case, byCase []map[string]*Summary) (string, bool) {
		cols, witness := ModelColumnsFor(cases, byCase)
		var h []string
		for _, c := range cols {
			h = append(h, c.Header)
		}
		return strings.Join(h, "|"), witness
	}
	model := func(p map[string]string) results.Case { return results.Case{Kind: results.CaseModel, Params: p} }
	const head = "decode tok/s|prefill tok/s|TTFT ms|ITL p99 ms|step ms|roofline %|peak RSS MiB"
	for _, tc := range []struct {
		name    string
		cases   []results.Case
		byCase  []map[string]*Summary
		want    string
		witness bool
	}{
		{"plain", []results.Case{model(nil)}, []map[string]*Summary{all}, head, false},
		{"nothing recorded", []results.Case{model(nil)}, []map[string]*Summary{{}}, "decode tok/s", false},
		{"another engine's figures", []results.Case{model(nil), model(nil)}, []map[string]*Summary{peer, {"ttft_ms": {}}}, "decode tok/s|prefill tok/s|TTFT ms", false},
		{"a kernel case's metrics", []results.Case{{Kind: results.CaseKernel}, model(nil)}, []map[string]*Summary{all, peer}, "decode tok/s|prefill tok/s", false},
		{"poisson", []results.Case{model(map[string]string{"arrival": "poisson:2"})}, []map[string]*Summary{all}, head + "|req/s|TTFT p99 ms|E2EL ms", false},
		{"slo", []results.Case{model(nil), model(map[string]string{"slo": "ttft:1"})}, []map[string]*Summary{all, {}}, head + "|req/s|goodput req/s|TTFT p99 ms|E2EL ms", false},
		// vllm bench serve measures its requests at any rate, inf (every
		// request at once, no arrival key) too
		{"vllm serve at rate inf", []results.Case{model(map[string]string{"peer_request_rate": "inf"})}, []map[string]*Summary{all}, head + "|req/s|TTFT p99 ms|E2EL ms", false},
		{"kernel slo", []results.Case{{Kind: results.CaseKernel, Params: map[string]string{"slo": "ttft:1"}}}, []map[string]*Summary{{}}, "decode tok/s", false},
		{"gpu and witness", []results.Case{model(nil)}, []map[string]*Summary{rec}, "decode tok/s|dispatches/step|ceiling tok/s", true},
	} {
		got, witness := headers(tc.cases, tc.byCase)
		if got != tc.want || witness != tc.witness {
			t.Errorf("%s: columns %q (witness %v), want %q (%v)", tc.name, got, witness, tc.want, tc.witness)
		}
	}
}

// The layers column is shown where a model case recorded its layers.
func TestLayersColumn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cases []results.Case
		want  bool
	}{
		{"recorded", []results.Case{{Kind: results.CaseModel}, {Kind: results.CaseModel, LayersRun: 4, LayersTotal: 48}}, true},
		{"another engine's figures", []results.Case{{Kind: results.CaseModel}}, false},
		{"kernel cases", []results.Case{{Kind: results.CaseKernel, LayersTotal: 2}}, false},
	} {
		if got := LayersColumn(tc.cases); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A run's kernel columns: µs/call always, the other headline and witness
// columns only where a kernel case recorded them (a tune run times calls
// alone, and a column of dashes would read as a failed measurement).
func TestKernelColumnsFor(t *testing.T) {
	kernel := results.Case{Kind: results.CaseKernel}
	model := results.Case{Kind: results.CaseModel}
	timed := map[string]*Summary{"us_per_call": {}}
	for _, tc := range []struct {
		name    string
		cases   []results.Case
		byCase  []map[string]*Summary
		want    string
		witness bool
	}{
		{"calls timed alone (tune)", []results.Case{kernel}, []map[string]*Summary{timed}, "µs/call", false},
		{"bytes and flops", []results.Case{kernel, kernel}, []map[string]*Summary{timed, {"us_per_call": {}, "gb_s": {}, "gflop_s": {}}}, "µs/call|GB/s|GFLOP/s", false},
		{"bytes only", []results.Case{kernel}, []map[string]*Summary{{"us_per_call": {}, "gb_s": {}}}, "µs/call|GB/s", false},
		{"a model case's metrics", []results.Case{model, kernel}, []map[string]*Summary{{"gb_s": {}, "witness_us": {}}, timed}, "µs/call", false},
		{"witness", []results.Case{kernel}, []map[string]*Summary{{"us_per_call": {}, "gb_s": {}, "witness_us": {}}}, "µs/call|GB/s|floor µs", true},
		{"nothing recorded (failed)", []results.Case{kernel}, []map[string]*Summary{{}}, "µs/call", false},
	} {
		cols, witness := KernelColumnsFor(tc.cases, tc.byCase)
		var h []string
		for _, c := range cols {
			h = append(h, c.Header)
		}
		if got := strings.Join(h, "|"); got != tc.want || witness != tc.witness {
			t.Errorf("%s: columns %q (witness %v), want %q (%v)", tc.name, got, witness, tc.want, tc.witness)
		}
	}
}

// Values no metric can take are left out of a summary and counted.
func TestByMetricLeavesOutUnusableValues(t *testing.T) {
	inf := math.Inf(1)
	smp := func(metric, unit string, vs ...float64) []results.Sample {
		var out []results.Sample
		for i, v := range vs {
			out = append(out, results.Sample{Metric: metric, Unit: unit, Rep: i, Value: v})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		samples []results.Sample
		n, left int
		center  float64 // NaN: none
		cell    string
	}{
		{"all infinite", smp("decode_tok_s", "tok/s", inf, inf, inf), 0, 3, math.NaN(), "-"},
		{"one NaN", smp("decode_tok_s", "tok/s", 1, 2, math.NaN()), 2, 1, 1.5, "1.5 (n=2)"},
		{"negative rate", smp("decode_tok_s", "tok/s", -5, 4, 6, 8), 3, 1, 6, "6.0 (n=3)"},
		{"negative where a metric may be", smp("delta", "", -5, 4, 6), 3, 0, 4, "4.0 (n=3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ByMetric(tc.samples)[tc.samples[0].Metric]
			same := s.Center == tc.center || math.IsNaN(s.Center) && math.IsNaN(tc.center)
			if s.N != tc.n || s.LeftOut != tc.left || !same {
				t.Errorf("n %d, left out %d, center %v; want %d, %d, %v", s.N, s.LeftOut, s.Center, tc.n, tc.left, tc.center)
			}
			if got := (Column{Scale: 1, Digits: 1}).Cell(s); got != tc.cell {
				t.Errorf("cell %q, want %q", got, tc.cell)
			}
		})
	}
	if got := LeftOutNotes([]string{"bench/batch=1"}, []map[string]*Summary{ByMetric(smp("decode_tok_s", "tok/s", inf, 1))}); len(got) != 1 ||
		got[0].Text != "bench/batch=1: 1 of 2 decode_tok_s samples left out of the statistics: not finite, or below what the metric can be" {
		t.Errorf("notes %q", got)
	}
}

// An interval is both bounds or none: with too few values neither bound is
// finite, so no format writes half of one.
func TestSummarizeIntervalIsWholeOrNone(t *testing.T) {
	for n := 1; n <= 8; n++ {
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = float64(i + 1)
		}
		s := Summarize(vals)
		loInf, hiInf := math.IsInf(s.Lo, 0), math.IsInf(s.Hi, 0)
		if loInf != hiInf || loInf != (n < 6) {
			t.Errorf("n=%d: interval [%v, %v], want both bounds infinite exactly when n < 6", n, s.Lo, s.Hi)
		}
	}
}

// TestCellKeepsSmallValues prints a median too small for the column's
// digits with two significant ones, never as 0 (a roofline fraction of
// 0.3% on a column of whole percents).
func TestCellKeepsSmallValues(t *testing.T) {
	six := func(v float64) []float64 { return []float64{v, v, v, v, v, v} }
	for _, tc := range []struct {
		name   string
		col    Column
		values []float64
		want   string
	}{
		{"whole percent", Column{Scale: 100, Digits: 0}, six(0.5), "50 ±0%"},
		{"a third of a percent", Column{Scale: 100, Digits: 0}, six(0.0034), "0.34 ±0%"},
		{"ms below the digits", Column{Scale: 1, Digits: 2}, []float64{0.0022, 0.0023, 0.0024, 0.0024, 0.0025, 0.0026}, "0.0024 ±8%"},
		{"ms at the digits", Column{Scale: 1, Digits: 2}, six(0.25), "0.25 ±0%"},
		{"zero", Column{Scale: 1, Digits: 1}, six(0), "0.0"},
		{"few repetitions", Column{Scale: 1, Digits: 1}, []float64{0.004}, "0.0040 (n=1)"},
		{"large", Column{Scale: 1, Digits: 1}, six(1234.56), "1234.6 ±0%"},
		{"one digit of tenths", Column{Scale: 1, Digits: 1}, six(0.053), "0.053 ±0%"},
		{"one digit of hundredths", Column{Scale: 1, Digits: 2}, six(0.0062), "0.0062 ±0%"},
		{"one whole percent", Column{Scale: 100, Digits: 0}, six(0.014), "1.4 ±0%"},
		{"tenths shown exactly", Column{Scale: 1, Digits: 1}, six(0.5), "0.5 ±0%"},
		{"a whole count", Column{Scale: 1, Digits: 0}, six(5), "5 ±0%"},
		{"two digits of tenths", Column{Scale: 1, Digits: 1}, six(1.23), "1.2 ±0%"},
		// Past six decimals the zeros outnumber the digits: 1e-300 was 300 of them.
		{"a billionth", Column{Scale: 1, Digits: 1}, six(1.1e-9), "1.1e-09 ±0%"},
		{"near the smallest float", Column{Scale: 1, Digits: 1}, six(1e-300), "1e-300 ±0%"},
		{"six decimals", Column{Scale: 1, Digits: 2}, six(0.000012), "0.000012 ±0%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ByMetric(samplesOf("m", tc.values))["m"]
			if got := tc.col.Cell(s); got != tc.want {
				t.Errorf("Cell = %q, want %q", got, tc.want)
			}
		})
	}
}

func samplesOf(metric string, vs []float64) []results.Sample {
	var out []results.Sample
	for i, v := range vs {
		out = append(out, results.Sample{Metric: metric, Rep: i, Value: v})
	}
	return out
}

// A case imported from vllm bench serve --request-rate inf says so: its
// name carries no rate.
func TestBurstRateNote(t *testing.T) {
	model := func(name string, p map[string]string) results.Case {
		return results.Case{Name: name, Kind: results.CaseModel, Params: p}
	}
	for _, tc := range []struct {
		name  string
		cases []results.Case
		want  string // "" no note, else in it
	}{
		{"rate inf", []results.Case{model("a", map[string]string{"peer_request_rate": "inf"}), model("b", nil)}, "request rate inf (a): vllm bench serve sent every request at once"},
		{"finite rate", []results.Case{model("a", map[string]string{"peer_request_rate": "4.0", "arrival": "poisson:4"})}, ""},
		{"ramp up (its file says inf)", []results.Case{model("a", map[string]string{"peer_request_rate": "inf", "ramp_up": "linear:1:8"})}, ""},
		{"mtlbench's own cases", []results.Case{model("a", map[string]string{"requests": "8"})}, ""},
	} {
		got := BurstRateNote(tc.cases)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: note %q, want %q", tc.name, got, tc.want)
		}
	}
}

// CountOnly finds exactly the cells CI writes as their count, so the note
// under a table appears where one of them does and nowhere else.
func TestCountOnlyMatchesCI(t *testing.T) {
	summary := func(n int) *Summary {
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = float64(i + 1)
		}
		return &Summary{N: n, Summary: Summarize(vals)}
	}
	for _, c := range []struct {
		name string
		s    *Summary
		want bool
	}{
		{"none", nil, false},
		{"no values", &Summary{Summary: Summarize(nil)}, false},
		{"one", summary(1), true},
		{"five", summary(5), true},
		{"six", summary(6), false},
		{"eight", summary(8), false},
	} {
		got := CountOnly(c.s)
		if got != c.want {
			t.Errorf("%s: CountOnly %v, want %v", c.name, got, c.want)
		}
		if c.s != nil && c.s.N > 0 {
			if shown := strings.HasPrefix(CI(c.s.Summary, c.s.N, ""), "(n="); shown != got {
				t.Errorf("%s: CI writes %q, CountOnly says %v", c.name, CI(c.s.Summary, c.s.N, ""), got)
			}
		}
	}
}
