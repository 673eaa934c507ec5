package compare

import (
	"encoding/json"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/internal/metrics"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/results"
)

var decodeCase = results.Case{Key: "model/decode/batch=4", Name: "decode/batch=4", Kind: "model", Status: results.CaseDone}

// normal draws n values around mean with a relative standard deviation.
func normal(rng *rand.Rand, n int, mean, rel float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = mean * (1 + rel*rng.NormFloat64())
	}
	return out
}

func samples(metric, unit string, values []float64) []results.Sample {
	out := make([]results.Sample, len(values))
	for i, v := range values {
		out[i] = results.Sample{Rep: i, Metric: metric, Value: v, Unit: unit}
	}
	return out
}

// side builds a one-case side with decode and prefill throughput.
func side(label string, decode, prefill []float64) *Side {
	s := NewSide(label)
	s.AddRun(Run{ID: 1, Backend: "cpu"})
	s.Add(decodeCase, append(samples("decode_tok_s", "tok/s", decode), samples("prefill_tok_s", "tok/s", prefill)...))
	return s
}

// TestGateStatistics is the gate's contract with synthetic data: 3% noise,
// 10 samples a side, default settings (alpha 0.01, 5% threshold).
func TestGateStatistics(t *testing.T) {
	const trials, n, noise = 100, 10, 0.03
	aaPass, slowFail, fastPass, usFail := 0, 0, 0, 0
	for seed := range uint64(trials) {
		rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
		// A/A: both sides from one distribution.
		r := Gate(side("A", normal(rng, n, 1000, noise), normal(rng, n, 5000, noise)),
			side("B", normal(rng, n, 1000, noise), normal(rng, n, 5000, noise)), GateOptions{})
		if r.Status == ExitPass {
			aaPass++
		} else {
			t.Logf("A/A seed %d: %s", seed, r.Headline)
		}
		// A 10% slower candidate (throughput down by 10%).
		r = Gate(side("A", normal(rng, n, 1000, noise), normal(rng, n, 5000, noise)),
			side("B", normal(rng, n, 900, noise), normal(rng, n, 5000, noise)), GateOptions{})
		if r.Status == ExitRegression {
			slowFail++
		} else {
			t.Logf("10%% slower seed %d: %s", seed, r.Headline)
		}
		// A 10% faster candidate must never fail.
		r = Gate(side("A", normal(rng, n, 1000, noise), normal(rng, n, 5000, noise)),
			side("B", normal(rng, n, 1100, noise), normal(rng, n, 5000, noise)), GateOptions{})
		if r.Status == ExitPass {
			fastPass++
		}
		// Lower-is-better: a kernel 10% slower per call.
		kc := results.Case{Key: "kernel/matmul/m=1", Name: "matmul/m=1", Kind: "kernel", Status: results.CaseDone}
		a, b := NewSide("A"), NewSide("B")
		a.Add(kc, samples("us_per_call", "us", normal(rng, n, 50, noise)))
		b.Add(kc, samples("us_per_call", "us", normal(rng, n, 55, noise)))
		if Gate(a, b, GateOptions{}).Status == ExitRegression {
			usFail++
		}
	}
	t.Logf("A/A passed %d/%d; 10%% slowdown caught %d/%d; 10%% speed-up passed %d/%d; us_per_call +10%% caught %d/%d",
		aaPass, trials, slowFail, trials, fastPass, trials, usFail, trials)
	if aaPass < 99 {
		t.Errorf("A/A: gate passed %d of %d trials, want >= 99", aaPass, trials)
	}
	if slowFail < 95 {
		t.Errorf("10%% slowdown: gate failed %d of %d trials, want >= 95", slowFail, trials)
	}
	if fastPass != trials {
		t.Errorf("10%% speed-up: gate passed %d of %d trials, want all", fastPass, trials)
	}
	if usFail < 95 {
		t.Errorf("us_per_call +10%%: gate failed %d of %d trials, want >= 95", usFail, trials)
	}
}

func TestGateInsufficient(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	full := func(label string) *Side {
		return side(label, normal(rng, 10, 1000, 0.03), normal(rng, 10, 5000, 0.03))
	}
	emulated := full("B")
	emulated.Runs[0].Emulated = true
	failed := NewSide("B")
	failed.Add(results.Case{Key: decodeCase.Key, Name: decodeCase.Name, Kind: "model", Status: results.CaseFailed, Error: "out of memory", RunID: 7}, nil)
	truncated := NewSide("B")
	c := decodeCase
	c.LayersRun, c.LayersTotal = 2, 6
	truncated.Add(c, append(samples("decode_tok_s", "tok/s", normal(rng, 10, 1000, 0.03)), samples("prefill_tok_s", "tok/s", normal(rng, 10, 5000, 0.03))...))
	other := NewSide("B")
	other.Add(results.Case{Key: "model/other", Name: "other", Kind: "model", Status: results.CaseDone}, samples("decode_tok_s", "tok/s", normal(rng, 10, 1, 0.03)))
	kernelOnly := NewSide("B")
	kernelOnly.Add(decodeCase, samples("step_ms", "ms", normal(rng, 10, 1, 0.03)))

	for _, tc := range []struct {
		name       string
		base, cand *Side
		opts       GateOptions
		want       int
		in         string // in the headline or a reason
	}{
		{"too few samples", side("A", normal(rng, 4, 1000, 0.03), normal(rng, 4, 5000, 0.03)), full("B"), GateOptions{}, ExitInsufficient, "at least 5"},
		{"min-samples lowered", side("A", normal(rng, 4, 1000, 0.03), normal(rng, 4, 5000, 0.03)), full("B"), GateOptions{MinSamples: 4}, ExitPass, "passed"},
		{"empty baseline", NewSide("A"), full("B"), GateOptions{}, ExitInsufficient, "no baseline case matches"},
		{"different cases", full("A"), other, GateOptions{}, ExitInsufficient, "no baseline case matches"},
		{"emulated vs real", full("A"), emulated, GateOptions{}, ExitInsufficient, "emulated"},
		{"truncated vs whole", full("A"), truncated, GateOptions{}, ExitInsufficient, "truncated and whole-model"},
		{"no gated metric", full("A"), kernelOnly, GateOptions{Metrics: []string{"us_per_call"}}, ExitInsufficient, "none of the gated metrics"},
		{"regression wins over missing data", side("A", normal(rng, 10, 1000, 0.03), normal(rng, 3, 5000, 0.03)),
			side("B", normal(rng, 10, 700, 0.03), normal(rng, 10, 5000, 0.03)), GateOptions{}, ExitRegression, "could not be judged"},
		{"within a wide threshold", full("A"), side("B", normal(rng, 10, 900, 0.03), normal(rng, 10, 5000, 0.03)),
			GateOptions{Thresholds: map[string]float64{"decode_tok_s": 0.25}}, ExitPass, "within threshold"},
		// counts are words: "1 sample", "1 case", not "1 samples"
		{"one baseline sample", side("A", normal(rng, 1, 1000, 0.03), normal(rng, 1, 5000, 0.03)), full("B"), GateOptions{}, ExitInsufficient, "baseline has 1 sample and candidate 10"},
		{"one unmatched case", full("A"), other, GateOptions{}, ExitInsufficient, "any of the candidate's 1 case ("},
		{"a metric named that no case records", full("A"), full("B"),
			GateOptions{Metrics: []string{"decode_tok_s", "ttft_ms"}, Thresholds: map[string]float64{"ttft_ms": 0.03}}, ExitPass, "ttft_ms: no matched case records it, so it was not gated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Gate(tc.base, tc.cand, tc.opts)
			var text strings.Builder
			r.Explain(&text)
			if r.Status != tc.want || !strings.Contains(text.String(), tc.in) {
				t.Errorf("status %d, want %d with %q in:\n%s", r.Status, tc.want, tc.in, text.String())
			}
		})
	}
}

// A case the candidate failed where the baseline measured it is "case
// failed", with the case's error, and fails the gate (exit 1) whatever the
// other cases did: a case that no longer runs is infinitely slower, and
// one that fails part-way or in one run of several is no better, whatever
// samples it kept (unless the baseline failed it too). Its neighbours keep
// their verdicts: a case the candidate skipped, never reached (an
// interrupted run leaves it pending) or did not run at all, or one the
// baseline failed too, is not a failure of the candidate.
func TestGateCandidateCaseFailed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	other := results.Case{Key: "model/other", Name: "other", Kind: "model", Status: results.CaseDone}
	// full is a baseline (or candidate) that measured decodeCase and the
	// given cases.
	full := func(label string, cases ...results.Case) *Side {
		s := side(label, normal(rng, 10, 1000, 0.03), normal(rng, 10, 5000, 0.03))
		for _, c := range cases {
			s.Add(c, samples("decode_tok_s", "tok/s", normal(rng, 10, 500, 0.03)))
		}
		return s
	}
	// candidate is a candidate whose run 7 stored decodeCase with status
	// (and n repetitions of it), beside other's otherN repetitions around
	// otherMean (none: other not run).
	candidate := func(status string, n, otherN int, otherMean float64) *Side {
		s := NewSide("B")
		s.AddRun(Run{ID: 7, Backend: "cpu"})
		c := results.Case{Key: decodeCase.Key, Name: decodeCase.Name, Kind: "model", Status: status, RunID: 7}
		if status == results.CaseFailed || status == results.CaseSkipped {
			c.Error = "out of memory"
		}
		s.Add(c, append(samples("decode_tok_s", "tok/s", normal(rng, n, 1000, 0.03)), samples("prefill_tok_s", "tok/s", normal(rng, n, 5000, 0.03))...))
		if otherN > 0 {
			o := other
			o.RunID = 7
			s.Add(o, samples("decode_tok_s", "tok/s", normal(rng, otherN, otherMean, 0.03)))
		}
		return s
	}
	failedThenPending := candidate(results.CaseFailed, 0, 10, 500)
	failedThenPending.AddRun(Run{ID: 8, Backend: "cpu"})
	failedThenPending.Add(results.Case{Key: decodeCase.Key, Name: decodeCase.Name, Kind: "model", Status: results.CasePending, RunID: 8}, nil)
	bothFailed := NewSide("A")
	bothFailed.Add(results.Case{Key: decodeCase.Key, Name: decodeCase.Name, Kind: "model", Status: results.CaseFailed, Error: "out of memory", RunID: 1}, nil)
	bothFailedBeside := NewSide("A")
	bothFailedBeside.Add(results.Case{Key: decodeCase.Key, Name: decodeCase.Name, Kind: "model", Status: results.CaseFailed, Error: "out of memory", RunID: 1}, nil)
	bothFailedBeside.Add(other, samples("decode_tok_s", "tok/s", normal(rng, 10, 500, 0.03)))
	// A baseline that failed the case in one run and measured it in another
	// measured it.
	flakyBase := full("A", other)
	flakyBase.AddRun(Run{ID: 2, Backend: "cpu"})
	flakyBase.Add(results.Case{Key: decodeCase.Key, Name: decodeCase.Name, Kind: "model", Status: results.CaseFailed, Error: "flaky", RunID: 2}, nil)
	// flakyCand is a candidate whose run 7 failed decodeCase after n
	// repetitions and whose runs 8 and 9 measured it, as an ab round
	// that crashed once in three would store it.
	flakyCand := func(n int) *Side {
		s := candidate(results.CaseFailed, n, 10, 500)
		for _, id := range []int64{8, 9} {
			s.AddRun(Run{ID: id, Backend: "cpu"})
			c, o := decodeCase, other
			c.RunID, o.RunID = id, id
			s.Add(c, append(samples("decode_tok_s", "tok/s", normal(rng, 10, 1000, 0.03)), samples("prefill_tok_s", "tok/s", normal(rng, 10, 5000, 0.03))...))
			s.Add(o, samples("decode_tok_s", "tok/s", normal(rng, 10, 500, 0.03)))
		}
		return s
	}

	const failedOne = "perf gate FAILED: the candidate failed 1 of 2 matched cases (decode/batch=4: run 7: failed: out of memory)"
	// The reason of decode_tok_s's check of decodeCase, where a row names it.
	reasons := map[string]string{
		"failed after 2 samples":                        "the candidate's case failed (run 7: failed: out of memory), though it kept 2 samples; the baseline has 10 and failed it in none of its runs",
		"failed in 1 of 3 runs, measured in the others": "the candidate's case failed (run 7: failed: out of memory), though it kept 20 samples; the baseline has 10 and failed it in none of its runs",
	}
	for _, tc := range []struct {
		name       string
		base, cand *Side
		want       int
		outcome    Outcome // of decode_tok_s of decodeCase; "" for no check
		headline   string  // the headline, whole when exact, else a part of it
		exact      bool
		note       string // a note the gate must give
	}{
		// The candidate failed a case the baseline measured: the gate fails.
		{"every case failed", full("A"), candidate(results.CaseFailed, 0, 0, 0), ExitRegression, CaseFailed,
			"perf gate FAILED: the candidate failed every matched case (1 case), measuring none (decode/batch=4: run 7: failed: out of memory)", true, ""},
		{"one of two failed, the other passed", full("A", other), candidate(results.CaseFailed, 0, 10, 500), ExitRegression, CaseFailed, failedOne, true, ""},
		{"one failed, the other regressed", full("A", other), candidate(results.CaseFailed, 0, 10, 300), ExitRegression, CaseFailed,
			failedOne + "; 1 regression (other decode_tok_s -", false, ""},
		{"one failed, the other too few samples", full("A", other), candidate(results.CaseFailed, 0, 3, 500), ExitRegression, CaseFailed,
			failedOne + "; 1 more could not be judged", true, ""},
		{"failed in one run, not reached in the next", full("A", other), failedThenPending, ExitRegression, CaseFailed, failedOne, true, ""},
		{"the baseline failed it once but measured it", flakyBase, candidate(results.CaseFailed, 0, 10, 500), ExitRegression, CaseFailed, failedOne, true, ""},
		// Samples kept do not excuse a failure the baseline never had.
		{"failed after 2 samples", full("A", other), candidate(results.CaseFailed, 2, 10, 500), ExitRegression, CaseFailed, failedOne, true, ""},
		{"failed after 10 samples", full("A", other), candidate(results.CaseFailed, 10, 10, 500), ExitRegression, CaseFailed, failedOne, true, ""},
		{"failed in 1 of 3 runs, measured in the others", full("A", other), flakyCand(0), ExitRegression, CaseFailed, failedOne, true, ""},
		{"failed part-way in 1 of 3 runs", full("A", other), flakyCand(3), ExitRegression, CaseFailed, failedOne, true, ""},
		// The baseline failed it once too: flaky on both sides, judged
		// on the samples, with a note.
		{"failed in 1 of 3 runs, the baseline failed it once too", flakyBase, flakyCand(0), ExitPass, Pass, "perf gate passed: 3 checks", false,
			"decode/batch=4: both sides failed it in some runs, so it was judged on the samples each kept (baseline: run 2: failed: flaky; candidate: run 7: failed: out of memory)"},
		// Not a failure of the candidate's: the gate cannot tell, or passes.
		{"skipped", full("A", other), candidate(results.CaseSkipped, 0, 10, 500), ExitCannotTell, Insufficient,
			"perf gate cannot tell: 2 of 3 checks could not be judged (0 too noisy, 2 insufficient data, 0 not comparable); no regression in the rest", true, ""},
		{"never reached: an interrupted run's pending case", full("A", other), candidate(results.CasePending, 0, 10, 500), ExitCannotTell, Insufficient,
			"perf gate cannot tell: 2 of 3 checks could not be judged (0 too noisy, 2 insufficient data, 0 not comparable); no regression in the rest", true, ""},
		{"interrupted in the case", full("A", other), candidate(results.CasePending, 2, 10, 500), ExitCannotTell, Insufficient,
			"perf gate cannot tell: 2 of 3 checks could not be judged (0 too noisy, 2 insufficient data, 0 not comparable); no regression in the rest", true, ""},
		// Neither side measured it: no check to judge, but a note says so.
		{"failed on both sides, beside a measured case", bothFailedBeside, candidate(results.CaseFailed, 0, 10, 500), ExitPass, "", "perf gate passed: 1 check", false,
			"decode/batch=4: neither side measured a gated metric, so it was not gated (baseline: run 1: failed: out of memory; candidate: run 7: failed: out of memory)"},
		{"failed on both sides", bothFailed, candidate(results.CaseFailed, 0, 0, 0), ExitCannotTell, "", "perf gate inconclusive", false, ""},
		{"not run by the candidate", full("A", other), func() *Side {
			s := NewSide("B")
			s.AddRun(Run{ID: 7, Backend: "cpu"})
			s.Add(other, samples("decode_tok_s", "tok/s", normal(rng, 10, 500, 0.03)))
			return s
		}(), ExitPass, "", "perf gate passed: 1 check", false, "decode/batch=4: in the baseline only, not run by the candidate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Gate(tc.base, tc.cand, GateOptions{})
			if r.Status != tc.want || tc.exact && r.Headline != tc.headline || !strings.Contains(r.Headline, tc.headline) {
				t.Errorf("status %d, headline %q; want %d with %q", r.Status, r.Headline, tc.want, tc.headline)
			}
			var got Outcome
			for _, c := range r.Checks {
				if c.Key == decodeCase.Key && c.Metric == "decode_tok_s" {
					got = c.Outcome
					if want, ok := reasons[tc.name]; ok && c.Reason != want {
						t.Errorf("reason %q, want %q", c.Reason, want)
					}
				}
				if c.Outcome == CaseFailed && (!strings.Contains(c.Reason, "the candidate's case failed") || !strings.Contains(c.Reason, "(run 7: failed: out of memory)")) {
					t.Errorf("%s %s: case failed without its error: %s", c.Case, c.Metric, c.Reason)
				}
			}
			if got != tc.outcome {
				t.Errorf("decode_tok_s of %s: %q, want %q", decodeCase.Name, got, tc.outcome)
			}
			if tc.note != "" && !slices.Contains(table.NoteTexts(r.Notes), tc.note) {
				t.Errorf("notes %q lack %q", table.NoteTexts(r.Notes), tc.note)
			}
		})
	}
}

// A failed case is named, with its error, in every form of the verdict:
// the markdown summary marks it failed (not unjudged), and the data rows
// carry the outcome and the reason.
func TestGateCaseFailedOutputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	other := results.Case{Key: "model/other", Name: "other", Kind: "model", Status: results.CaseDone}
	base := side("A", normal(rng, 10, 1000, 0.03), normal(rng, 10, 5000, 0.03))
	base.Add(other, samples("decode_tok_s", "tok/s", normal(rng, 10, 500, 0.03)))
	cand := NewSide("B")
	cand.AddRun(Run{ID: 7, Backend: "cpu"})
	cand.Add(results.Case{Key: decodeCase.Key, Name: decodeCase.Name, Kind: "model", Status: results.CaseFailed, Error: "kernel: bad launch", RunID: 7}, nil)
	cand.Add(results.Case{Key: other.Key, Name: other.Name, Kind: "model", Status: results.CaseDone, RunID: 7}, samples("decode_tok_s", "tok/s", normal(rng, 10, 500, 0.03)))
	r := Gate(base, cand, GateOptions{})
	if r.Status != ExitRegression {
		t.Fatalf("status %d, want %d: %s", r.Status, ExitRegression, r.Headline)
	}
	md := r.Markdown()
	for _, want := range []string{
		"## ❌ perf gate FAILED: the candidate failed 1 of 2 matched cases (decode/batch=4: run 7: failed: kernel: bad launch)\n",
		"| ❌ case failed |",
		"- ❌ **decode/batch=4** decode_tok_s: the candidate's case failed, with no sample (run 7: failed: kernel: bad launch); the baseline has 10\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "❔ case failed") {
		t.Errorf("markdown marks a failed case unjudged:\n%s", md)
	}
	var text strings.Builder
	r.Explain(&text)
	if !strings.Contains(text.String(), "CASE FAILED       decode/batch=4 decode_tok_s: the candidate's case failed, with no sample (run 7: failed: kernel: bad launch)") {
		t.Errorf("explanation lacks the failed case:\n%s", text.String())
	}
	var js strings.Builder
	if err := r.Data().Render(&js, table.FormatJSON); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(js.String()), &rows); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, row := range rows {
		if row["case"] == "decode/batch=4" {
			n++
			if reason, _ := row["reason"].(string); row["outcome"] != "case failed" || !strings.Contains(reason, "kernel: bad launch") {
				t.Errorf("json row %v", row)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d data rows of the failed case, want 2 (decode and prefill)", n)
	}
}

func TestGateOptions(t *testing.T) {
	o := GateOptions{Thresholds: map[string]float64{"ttft_ms": 0.1, "decode_tok_s": 0.02}, Threshold: 0.07}
	if got := o.GatedMetrics(); strings.Join(got, ",") != "decode_tok_s,ttft_ms" {
		t.Errorf("gated metrics %v", got)
	}
	if o.ThresholdFor("ttft_ms") != 0.1 || o.ThresholdFor("step_ms") != 0.07 || (GateOptions{}).ThresholdFor("x") != DefaultThreshold {
		t.Error("ThresholdFor")
	}
	if got := (GateOptions{ThresholdSet: true}).ThresholdFor("decode_tok_s"); got != 0 {
		t.Errorf("a threshold of 0 given: ThresholdFor = %v, want 0", got)
	}
	if got := (GateOptions{}).GatedMetrics(); strings.Join(got, ",") != "decode_tok_s,prefill_tok_s,us_per_call" {
		t.Errorf("default gated metrics %v", got)
	}
	if p := minUTestP(5, 5); p < 0.0079 || p > 0.008 {
		t.Errorf("minUTestP(5,5) = %v", p)
	}
}

// runsSide builds a side of several runs of decodeCase, each run's values
// shifted by its own drift (relative sd runDrift) around mean.
func runsSide(rng *rand.Rand, label string, runs, reps int, mean, runDrift, noise float64) *Side {
	s := NewSide(label)
	for r := range runs {
		s.AddRun(Run{ID: int64(r + 1), Backend: "cpu"})
		c := decodeCase
		c.RunID = int64(r + 1)
		m := mean * (1 + runDrift*rng.NormFloat64())
		s.Add(c, samples("decode_tok_s", "tok/s", normal(rng, reps, m, noise)))
	}
	return s
}

// TestGateRunUnit: runs drift (each run 4% off at random, 1% noise within
// a run). Pooling repetitions calls most A/A pairs of single runs changed;
// with several runs a side the run is the unit and the gate does not.
func TestGateRunUnit(t *testing.T) {
	const trials = 100
	pooledAlarms, runAlarms, caught := 0, 0, 0
	for seed := range uint64(trials) {
		rng := rand.New(rand.NewPCG(seed, 7))
		// One run a side: repetitions are the unit and drift looks like change.
		r := Gate(runsSide(rng, "A", 1, 25, 1000, 0.04, 0.01), runsSide(rng, "B", 1, 25, 1000, 0.04, 0.01), GateOptions{})
		if r.Status == ExitRegression {
			pooledAlarms++
		}
		a, b := runsSide(rng, "A", 6, 5, 1000, 0.04, 0.01), runsSide(rng, "B", 6, 5, 1000, 0.04, 0.01)
		r = Gate(a, b, GateOptions{})
		if r.Status == ExitRegression {
			runAlarms++
			t.Logf("A/A seed %d: %s", seed, r.Headline)
		}
		if r.Checks[0].Per != UnitRun || r.Checks[0].A.N != 6 {
			t.Fatalf("unit %q with %d values, want 6 run medians", r.Checks[0].Per, r.Checks[0].A.N)
		}
		if Gate(runsSide(rng, "A", 6, 5, 1000, 0.02, 0.01), runsSide(rng, "B", 6, 5, 800, 0.02, 0.01), GateOptions{}).Status == ExitRegression {
			caught++
		}
	}
	t.Logf("single runs: %d/%d A/A false alarms; 6 runs a side: %d/%d; 20%% slowdown caught %d/%d", pooledAlarms, trials, runAlarms, trials, caught, trials)
	if pooledAlarms < 10 {
		t.Errorf("pooling drifting runs gave only %d/%d false alarms: the test's drift is too small to show anything", pooledAlarms, trials)
	}
	if runAlarms > 2 {
		t.Errorf("run unit: %d/%d A/A false alarms, want <= 2", runAlarms, trials)
	}
	if caught < 95 {
		t.Errorf("run unit: 20%% slowdown caught %d/%d, want >= 95", caught, trials)
	}
}

func TestAdjustBH(t *testing.T) {
	ps := []float64{0.01, 0.04, 0.03, 0.005, math.NaN()}
	checks := make([]Check, len(ps))
	for i, p := range ps {
		checks[i].P, checks[i].Q = p, math.NaN()
	}
	adjustBH(checks)
	// Sorted: 0.005 0.01 0.03 0.04 (m=4): q = min over ranks >= i of p*m/rank
	// = 0.02, 0.02, 0.04, 0.04.
	want := []float64{0.02, 0.04, 0.04, 0.02}
	for i, w := range want {
		if math.Abs(checks[i].Q-w) > 1e-12 {
			t.Errorf("check %d (p=%g): q=%g, want %g", i, ps[i], checks[i].Q, w)
		}
	}
	if !math.IsNaN(checks[4].Q) {
		t.Errorf("an untested check got q=%g", checks[4].Q)
	}
}

// A baseline whose runs scatter more than the threshold cannot pass: a
// regression could hide in it (exit 3, "cannot tell"), and too few runs to
// ever reach significance say so too.
func TestGateCannotTell(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	r := Gate(runsSide(rng, "A", 6, 5, 1000, 0.3, 0.01), runsSide(rng, "B", 6, 5, 1000, 0.3, 0.01), GateOptions{})
	if r.Status != ExitCannotTell || r.Checks[0].Outcome != CannotTell || !strings.Contains(r.Checks[0].Reason, "could hide") {
		t.Errorf("noisy baseline: status %d, %s: %s", r.Status, r.Checks[0].Outcome, r.Checks[0].Reason)
	}
	r = Gate(runsSide(rng, "A", 2, 5, 1000, 0.01, 0.01), runsSide(rng, "B", 2, 5, 700, 0.01, 0.01), GateOptions{})
	if r.Status != ExitCannotTell || r.Checks[0].Outcome != Insufficient || !strings.Contains(r.Checks[0].Reason, "2+2 runs") {
		t.Errorf("2 runs a side: status %d, %s: %s", r.Status, r.Checks[0].Outcome, r.Checks[0].Reason)
	}
}

// pairedSides builds a baseline and a candidate of rounds runs of
// decodeCase taken side by side: each round's load scales both runs of the
// round alike (relative sd load), on top of noise within the runs; the
// candidate's speed is the baseline's times ratio.
func pairedSides(rng *rand.Rand, rounds, reps int, load, noise, ratio float64) (a, b *Side) {
	a, b = NewSide("A"), NewSide("B")
	for r := range rounds {
		f := math.Max(0.2, 1+load*rng.NormFloat64())
		for _, s := range []struct {
			side  *Side
			speed float64
		}{{a, 1000 * f}, {b, 1000 * f * ratio}} {
			s.side.AddRun(Run{ID: int64(r + 1), Backend: "cpu"})
			c := decodeCase
			c.RunID = int64(r + 1)
			s.side.Add(c, samples("decode_tok_s", "tok/s", normal(rng, reps, s.speed, noise)))
		}
	}
	return a, b
}

// TestGatePairedRounds: the rounds of `ab` run both sides side by side, so
// load that changes from round to round (here ±30%) falls on both runs of
// a round. Compared unpaired, run medians that scatter so much hide a 10%
// slowdown; the pairs' ratios do not.
func TestGatePairedRounds(t *testing.T) {
	const trials = 100
	alarms, aaPass, caught, unpairedCaught := 0, 0, 0, 0
	for seed := range uint64(trials) {
		rng := rand.New(rand.NewPCG(seed, 11))
		a, b := pairedSides(rng, 5, 5, 0.3, 0.02, 1)
		r := Gate(a, b, GateOptions{Paired: true})
		if r.Checks[0].Per != UnitPair || r.Checks[0].A.N != 5 {
			t.Fatalf("unit %q with %d values, want 5 pairs of runs", r.Checks[0].Per, r.Checks[0].A.N)
		}
		switch r.Status {
		case ExitRegression:
			alarms++
			t.Logf("A/A seed %d: %s", seed, r.Headline)
		case ExitPass:
			aaPass++
		}
		a, b = pairedSides(rng, 5, 5, 0.3, 0.02, 1/1.1)
		if Gate(a, b, GateOptions{Paired: true}).Status == ExitRegression {
			caught++
		}
		if Gate(a, b, GateOptions{}).Status == ExitRegression {
			unpairedCaught++
		}
	}
	t.Logf("paired rounds: %d/%d A/A false alarms, %d/%d passed; 10%% slowdown caught %d/%d (unpaired run medians: %d/%d)",
		alarms, trials, aaPass, trials, caught, trials, unpairedCaught, trials)
	if alarms > 1 {
		t.Errorf("paired: %d/%d A/A false alarms, want <= 1", alarms, trials)
	}
	if aaPass < 90 {
		t.Errorf("paired: only %d/%d A/A trials passed: the ratios' noise is 2%%, the threshold 5%%", aaPass, trials)
	}
	if caught < 95 {
		t.Errorf("paired: 10%% slowdown caught %d/%d, want >= 95", caught, trials)
	}
	if unpairedCaught > 50 {
		t.Errorf("unpaired run medians caught %d/%d: the test's load is too small to show anything", unpairedCaught, trials)
	}
}

// Pairs need matching runs: too few shared run IDs fall back to the
// unpaired comparison, and a side's runs pair by ID, not by order.
func TestGatePairing(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	a, b := pairedSides(rng, 2, 5, 0.01, 0.01, 1)
	if r := Gate(a, b, GateOptions{Paired: true}); r.Checks[0].Per != UnitRun {
		t.Errorf("2 pairs: unit %q, want the unpaired %q", r.Checks[0].Per, UnitRun)
	}
	// Slow candidate runs 1-4 with load growing round by round: pairing
	// by ID catches it; adding the candidate's runs in reverse order must
	// not change that.
	a, b = NewSide("A"), NewSide("B")
	for r := range 4 {
		f := 1 + 0.5*float64(r)
		a.AddRun(Run{ID: int64(r + 1), Backend: "cpu"})
		c := decodeCase
		c.RunID = int64(r + 1)
		a.Add(c, samples("decode_tok_s", "tok/s", normal(rng, 5, 1000*f, 0.005)))
	}
	for r := 3; r >= 0; r-- {
		f := 1 + 0.5*float64(r)
		b.AddRun(Run{ID: int64(r + 1), Backend: "cpu"})
		c := decodeCase
		c.RunID = int64(r + 1)
		b.Add(c, samples("decode_tok_s", "tok/s", normal(rng, 5, 800*f, 0.005)))
	}
	r := Gate(a, b, GateOptions{Paired: true})
	if c := r.Checks[0]; c.Per != UnitPair || c.Outcome != Regression || math.Abs(c.Delta+20) > 1 {
		t.Errorf("pairs by ID: %s per %q, %+.1f%%: %s", c.Outcome, c.Per, c.Delta, c.Reason)
	}
}

func TestRunValue(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		dir  metrics.Direction
		want float64
	}{
		{[]float64{10}, metrics.HigherIsBetter, 10},
		{[]float64{10, 4}, metrics.HigherIsBetter, 7},
		{[]float64{3, 9, 1}, metrics.HigherIsBetter, 6},
		{[]float64{3, 9, 1}, metrics.LowerIsBetter, 2},
		{[]float64{5, 100, 4, 6, 90}, metrics.LowerIsBetter, 5},
		{[]float64{500, 800, 820, 300, 840}, metrics.HigherIsBetter, 820},
	} {
		if got := runValue(tc.v, tc.dir); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("runValue(%v, %v) = %g, want %g", tc.v, tc.dir, got, tc.want)
		}
	}
}

// TestGateUnderInterference: other work on the machine slows a random
// 20% of the repetitions by 1.2x to 3x, as a busy 2-core machine does
// (every repetition's interference its own). A run's better half keeps
// the pairs' ratios steady enough to catch most 10% slowdowns in 5 rounds
// with no false alarm (the runs' medians catch about half).
func TestGateUnderInterference(t *testing.T) {
	const trials = 100
	disturbed := func(rng *rand.Rand, n int, mean float64) []float64 {
		v := normal(rng, n, mean, 0.01)
		for i := range v {
			if rng.Float64() < 0.2 {
				v[i] /= 1.2 + 1.8*rng.Float64()
			}
		}
		return v
	}
	sides := func(rng *rand.Rand, ratio float64) (a, b *Side) {
		a, b = NewSide("A"), NewSide("B")
		for r := range 5 {
			for _, s := range []struct {
				side  *Side
				speed float64
			}{{a, 1000}, {b, 1000 * ratio}} {
				s.side.AddRun(Run{ID: int64(r + 1), Backend: "cpu"})
				c := decodeCase
				c.RunID = int64(r + 1)
				s.side.Add(c, samples("decode_tok_s", "tok/s", disturbed(rng, 5, s.speed)))
			}
		}
		return a, b
	}
	alarms, caught := 0, 0
	for seed := range uint64(trials) {
		rng := rand.New(rand.NewPCG(seed, 13))
		if a, b := sides(rng, 1); Gate(a, b, GateOptions{Paired: true}).Status == ExitRegression {
			alarms++
		}
		if a, b := sides(rng, 1/1.1); Gate(a, b, GateOptions{Paired: true}).Status == ExitRegression {
			caught++
		}
	}
	t.Logf("interference on 20%% of repetitions: %d/%d A/A false alarms, 10%% slowdown caught %d/%d", alarms, trials, caught, trials)
	if alarms > 1 || caught < 75 {
		t.Errorf("%d/%d A/A false alarms (want <= 1), 10%% slowdown caught %d/%d (want >= 75)", alarms, trials, caught, trials)
	}
}

// The markdown summary names the test its checks were judged with, which
// depends on how the runs were taken.
func TestGateMarkdownNamesTheTest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	pa, pb := pairedSides(rng, 3, 5, 0.1, 0.01, 1)
	for _, tc := range []struct {
		name      string
		a, b      *Side
		opts      GateOptions
		want, not string
	}{
		{"ab rounds", pa, pb, GateOptions{Paired: true}, "Student's t on the log ratios of the pairs of runs", "Mann-Whitney"},
		{"several runs a side", runsSide(rng, "A", 6, 5, 1000, 0.02, 0.01), runsSide(rng, "B", 6, 5, 1000, 0.02, 0.01), GateOptions{},
			"Mann-Whitney U on each run's mean of its better half of repetitions", "Student"},
		{"one run a side", runsSide(rng, "A", 1, 25, 1000, 0.02, 0.01), runsSide(rng, "B", 1, 25, 1000, 0.02, 0.01), GateOptions{},
			"Mann-Whitney U on the repetitions, where a side has one run", "Student"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := Gate(tc.a, tc.b, tc.opts).Markdown()
			if !strings.Contains(md, tc.want) || strings.Contains(md, tc.not) {
				t.Errorf("summary does not name %q (or names %q):\n%s", tc.want, tc.not, md)
			}
		})
	}
}

// A significant worsening exactly at the threshold is within it, whatever
// the float rounding of the ratio: 100 -> 95 at 5% as 100 -> 90 at 10%.
func TestGateExactlyAtThreshold(t *testing.T) {
	for _, c := range []struct {
		b, threshold float64
		want         Outcome
	}{
		{95, 0.05, WithinThreshold},
		{90, 0.10, WithinThreshold},
		{94.9, 0.05, Regression},
		{89.9, 0.10, Regression},
	} {
		ck := Check{Row: &Row{Metric: "decode_tok_s", Direction: metrics.HigherIsBetter}, Per: UnitRun,
			A: newStat([]float64{100, 100, 100}), B: newStat([]float64{c.b, c.b, c.b}),
			Delta: (c.b/100 - 1) * 100, P: 0.001, Q: 0.001, Noise: 0, Threshold: c.threshold}
		decide(&ck, 0.05)
		if ck.Outcome != c.want {
			t.Errorf("100 -> %v at %v: %s (%s), want %s", c.b, c.threshold, ck.Outcome, ck.Reason, c.want)
		}
	}
}

// A gate with too few runs says how to get more, in its caller's words:
// `ab` names its --rounds, which is what gives it more pairs.
func TestGateAdviceNamesMoreRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		rounds int
		more   string
		want   string
	}{
		{1, "", "to make the run the unit: `mtlbench ab`, or several runs a side"},
		{1, "ab --rounds 3 or more", "to make the run the unit: ab --rounds 3 or more"},
		{2, "", "add runs (`mtlbench ab`, or several runs a side)"},
		{2, "ab --rounds 3 or more", "add runs (ab --rounds 3 or more)"},
	} {
		a, b := pairedSides(rng, tc.rounds, 5, 0.01, 0.01, 1)
		r := Gate(a, b, GateOptions{Paired: true, MoreRuns: tc.more})
		text := strings.Join(table.NoteTexts(r.Notes), "\n") + "\n" + r.Checks[0].Reason
		if !strings.Contains(text, tc.want) {
			t.Errorf("%d rounds, MoreRuns %q: no %q in\n%s", tc.rounds, tc.more, tc.want, text)
		}
	}
}

// TestGateZeroBaseline: a metric whose baseline is 0 in every repetition
// (no request within the SLO: goodput 0) has no relative change; the gate
// judges it by which way it moved, prints no NaN or Inf, and passes two
// sides that are both exactly 0 (no spread: MAD 0).
func TestGateZeroBaseline(t *testing.T) {
	ttft := results.Case{Key: "model/serve", Name: "serve", Kind: "model", Status: results.CaseDone}
	gate := func(metric, unit string, a, b []float64) Check {
		t.Helper()
		sa, sb := NewSide("A"), NewSide("B")
		sa.AddRun(Run{ID: 1, Backend: "cpu"})
		sb.AddRun(Run{ID: 2, Backend: "cpu"})
		sa.Add(ttft, samples(metric, unit, a))
		sb.Add(ttft, samples(metric, unit, b))
		r := Gate(sa, sb, GateOptions{Thresholds: map[string]float64{metric: 0.05}})
		if len(r.Checks) != 1 {
			t.Fatalf("%s: %d checks: %s", metric, len(r.Checks), r.Headline)
		}
		c := r.Checks[0]
		if strings.Contains(c.Reason, "NaN") || strings.Contains(c.Reason, "Inf") {
			t.Errorf("%s %v -> %v: reason leaks a non-number: %s", metric, a, b, c.Reason)
		}
		return c
	}
	zeros, fives := make([]float64, 6), []float64{5, 5, 5, 5, 5, 5}
	if c := gate("goodput_per_s", "req/s", zeros, zeros); c.Outcome != Pass {
		t.Errorf("0 -> 0 goodput: %s: %s", c.Outcome, c.Reason)
	}
	if c := gate("ttft_ms", "ms", zeros, fives); c.Outcome != Regression {
		t.Errorf("0 -> 5 ms TTFT: %s: %s", c.Outcome, c.Reason)
	}
	if c := gate("goodput_per_s", "req/s", zeros, fives); c.Outcome != Improved {
		t.Errorf("0 -> 5 goodput: %s: %s", c.Outcome, c.Reason)
	}
	if c := gate("goodput_per_s", "req/s", []float64{0, 0, 0, 0, 2, 3}, []float64{0, 0, 0, 0, 2, 3}); c.Outcome != Pass {
		t.Errorf("goodput mostly 0: %s: %s", c.Outcome, c.Reason)
	}
}

// TestGateDataNoiseOfSteadyBaseline: a baseline whose repetitions do not
// spread has a noise of 0, a known value its data row gives as 0, not as
// missing; an untested check has none.
func TestGateDataNoiseOfSteadyBaseline(t *testing.T) {
	steady := []float64{5, 5, 5, 5, 5, 5}
	for _, tc := range []struct {
		name string
		a    []float64
		want any
	}{
		{"steady", steady, 0.0},
		{"too few", steady[:2], nil},
	} {
		r := Gate(side("A", tc.a, tc.a), side("B", steady, steady), GateOptions{})
		d := r.Data()
		col := slices.Index(d.Columns, "noise_pct")
		if col < 0 || len(d.Rows) == 0 {
			t.Fatalf("%s: no noise_pct column or rows: %v", tc.name, d.Columns)
		}
		if got := d.Rows[0][col]; got != tc.want {
			t.Errorf("%s: noise_pct %v (%s), want %v", tc.name, got, r.Checks[0].Reason, tc.want)
		}
	}
}

// TestGateCheckCountsPairs: a check judged on one pair of runs says so in
// words, not "1 pairs of runs".
func TestGateCheckCountsPairs(t *testing.T) {
	for _, tc := range []struct {
		per  string
		a, b int
		want string
	}{
		{UnitPair, 1, 1, ", 1 pair of runs)"},
		{UnitPair, 5, 5, ", 5 pairs of runs)"},
		{UnitRun, 3, 4, ", 3+4 runs)"},
	} {
		c := Check{Row: &Row{Metric: "decode_tok_s", Unit: "tok/s"}, Per: tc.per, P: 0.5, Q: 0.5, Threshold: 0.05}
		c.A.N, c.B.N = tc.a, tc.b
		c.A.Center, c.B.Center = 100, 100
		decide(&c, 0.01)
		if !strings.Contains(c.Reason, tc.want) {
			t.Errorf("%s %d+%d: reason %q, want %q in it", tc.per, tc.a, tc.b, c.Reason, tc.want)
		}
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// pairedRuns is a paired side of one case: run i (ID i+1) holds reps[i].
func pairedRuns(label string, c results.Case, metric, unit string, reps [][]float64) *Side {
	s := NewSide(label)
	for i, v := range reps {
		s.AddRun(Run{ID: int64(i + 1), Backend: "cpu"})
		rc := c
		rc.RunID = int64(i + 1)
		s.Add(rc, samples(metric, unit, v))
	}
	return s
}

// TestGatePairedFiguresAreTheChanges: for ab's pairs each side's figure is
// the geometric mean of its runs' values, whose quotient is the change (the
// mean log ratio). The sides' medians of run values are not: with one wild
// pair among three they went 1986 -> 1359 us beside a change of +106%.
func TestGatePairedFiguresAreTheChanges(t *testing.T) {
	kc := results.Case{Key: "kernel/matmul/m=1", Name: "matmul/m=1", Kind: "kernel", Status: results.CaseDone}
	for _, tc := range []struct {
		name, metric, unit string
		c                  results.Case
		a, b               [][]float64
		want               string // the check's figures and change, as its reason says them
	}{
		{"one wild pair of three", "us_per_call", "us", kc,
			[][]float64{{1909, 1950, 2100, 2500, 3000}, {2400, 2600, 2500, 2700, 2900}, {150, 160, 170, 400, 900}},
			[][]float64{{1327, 1350, 1400, 1500, 1900}, {1200, 1250, 1300, 1700, 1800}, {4000, 4200, 4100, 4500, 5000}},
			"926.2 -> 1910 us (+106.19%"},
		{"load that moves round by round", "decode_tok_s", "tok/s", decodeCase,
			[][]float64{{1000, 990, 1010, 700, 800}, {500, 510, 490, 300, 505}, {2000, 1990, 2010, 1000, 2005}},
			[][]float64{{900, 890, 910, 600, 500}, {460, 470, 450, 200, 100}, {1800, 1790, 1810, 1000, 1805}},
			"1004 -> 907.5 tok/s (-9.63%"}, // medians 1000 -> 900
		{"steady", "us_per_call", "us", kc,
			[][]float64{{50, 50, 50, 60, 70}, {50, 50, 50, 55, 80}, {50, 50, 50, 90, 51}},
			[][]float64{{55, 55, 55, 60, 70}, {55, 55, 55, 99, 80}, {55, 55, 55, 90, 60}},
			"50.00 -> 55.00 us (+10.00%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Gate(pairedRuns("A", tc.c, tc.metric, tc.unit, tc.a), pairedRuns("B", tc.c, tc.metric, tc.unit, tc.b),
				GateOptions{Paired: true, Metrics: []string{tc.metric}})
			c := r.Checks[0]
			if c.Per != UnitPair {
				t.Fatalf("unit %q, want %q: %s", c.Per, UnitPair, c.Reason)
			}
			if q := (c.B.Center/c.A.Center - 1) * 100; math.Abs(q-c.Delta) > 1e-9*math.Abs(c.Delta)+1e-9 {
				t.Errorf("figures %.6g -> %.6g (%+.4f%%) are not the change %+.4f%%", c.A.Center, c.B.Center, q, c.Delta)
			}
			if !strings.Contains(c.Reason, tc.want) {
				t.Errorf("reason %q, want %q in it", c.Reason, tc.want)
			}
			// The table shows the same figures (and their intervals) as the reason.
			row := r.Table().Rows[0]
			want := strings.Fields(tc.want) // A -> B unit (change
			if !strings.HasPrefix(row[2], want[0]+" ") || !strings.HasPrefix(row[3], want[2]+" ") || "("+row[4] != want[4] {
				t.Errorf("table row %q, %q, %q disagrees with %q", row[2], row[3], row[4], tc.want)
			}
		})
	}
}

// TestGatePairedReportGolden is what a paired gate prints: the table, the
// lines of stderr and the markdown summary, the noisy pairs of
// TestGatePairedFiguresAreTheChanges.
func TestGatePairedReportGolden(t *testing.T) {
	kc := results.Case{Key: "kernel/matmul/m=1", Name: "matmul/m=1", Kind: "kernel", Status: results.CaseDone}
	a := pairedRuns("baseline", kc, "us_per_call", "us",
		[][]float64{{1909, 1950, 2100, 2500, 3000}, {2400, 2600, 2500, 2700, 2900}, {150, 160, 170, 400, 900}})
	b := pairedRuns("candidate", kc, "us_per_call", "us",
		[][]float64{{1327, 1350, 1400, 1500, 1900}, {1200, 1250, 1300, 1700, 1800}, {4000, 4200, 4100, 4500, 5000}})
	r := Gate(a, b, GateOptions{Paired: true, Metrics: []string{"us_per_call"}})
	var out strings.Builder
	if err := r.Table().Render(&out, table.FormatTable); err != nil {
		t.Fatal(err)
	}
	out.WriteString("\n")
	if err := r.Explain(&out); err != nil {
		t.Fatal(err)
	}
	out.WriteString("\n" + r.Markdown())
	path := filepath.Join("testdata", "gate_paired.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if out.String() != string(want) {
		t.Errorf("%s mismatch\n--- got\n%s\n--- want\n%s", path, out.String(), want)
	}
}

// TestGateTableCountsWhatWasTested: the table's n says what the test's
// values were: 3 pairs of runs are three values, not 3+3 samples, which
// would read as fewer than --min-samples.
func TestGateTableCountsWhatWasTested(t *testing.T) {
	for _, tc := range []struct {
		per  string
		a, b int
		want string
	}{
		{UnitPair, 3, 3, "3 pairs"},
		{UnitPair, 1, 1, "1 pair"},
		{UnitRun, 3, 4, "3+4 runs"},
		{UnitRepetition, 8, 8, "8+8"},
		{"", 8, 0, "8+0"}, // untested: the pooled repetitions
	} {
		row := &Row{Case: "matmul/m=1", Metric: "us_per_call", Unit: "us"}
		row.A.N, row.B.N = tc.a, tc.b
		c := Check{Row: row, Per: tc.per, Delta: math.NaN(), P: math.NaN(), Q: math.NaN(), Threshold: 0.05}
		if tc.per != "" {
			c.A.N, c.B.N = tc.a, tc.b
		}
		if got := (Result{Checks: []Check{c}}).Table().Rows[0][7]; got != tc.want {
			t.Errorf("%q %d+%d: n %q, want %q", tc.per, tc.a, tc.b, got, tc.want)
		}
	}
}

// The summary counts its checks and samples in words: "over all 1 checks",
// "at least 1 samples a side" read as a typo in a pull request's comment.
func TestMarkdownCountsInWords(t *testing.T) {
	kc := results.Case{Key: "kernel/matmul/m=1", Name: "matmul/m=1", Kind: "kernel", Status: results.CaseDone}
	for _, tc := range []struct {
		metrics []string
		min     int
		want    []string
	}{
		{[]string{"us_per_call"}, 1, []string{"p adjusted over 1 check by", "at least 1 sample a side"}},
		{[]string{"us_per_call", "gb_s"}, 5, []string{"p adjusted over 2 checks by", "at least 5 samples a side"}},
	} {
		a, b := NewSide("A"), NewSide("B")
		a.AddRun(Run{ID: 1, Backend: "cpu"})
		b.AddRun(Run{ID: 2, Backend: "cpu"})
		a.Add(kc, append(samples("us_per_call", "us", []float64{50, 51, 49, 50, 52}), samples("gb_s", "GB/s", []float64{9, 9, 9, 9, 9})...))
		b.Add(kc, append(samples("us_per_call", "us", []float64{50, 51, 49, 50, 52}), samples("gb_s", "GB/s", []float64{9, 9, 9, 9, 9})...))
		md := Gate(a, b, GateOptions{Metrics: tc.metrics, MinSamples: tc.min}).Markdown()
		for _, w := range tc.want {
			if !strings.Contains(md, w) {
				t.Errorf("%v, %d samples: the summary does not say %q:\n%s", tc.metrics, tc.min, w, md)
			}
		}
	}
}
