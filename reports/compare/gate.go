package compare

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/reports/table"
)

// Exit statuses of the gate (and of `mtlbench gate`).
const (
	ExitPass         = 0 // no gated metric regressed
	ExitRegression   = 1 // at least one significant regression beyond its threshold
	ExitError        = 2 // the tool failed (bad reference, unreadable database...)
	ExitInsufficient = 3 // something could not be judged: too few samples, no baseline
)

// Gate defaults. alpha 0.01 rather than benchstat's 0.05: a gate runs on
// every pull request, and each false alarm costs someone an investigation.
const (
	DefaultGateAlpha  = 0.01
	DefaultThreshold  = 0.05
	DefaultMinSamples = 5
)

// DefaultGateMetrics are gated when the suite names no thresholds.
var DefaultGateMetrics = []string{"decode_tok_s", "prefill_tok_s", "us_per_call"}

// GateOptions configure Gate. Zero values mean the defaults.
type GateOptions struct {
	Alpha float64
	// Threshold is the allowed worsening (a fraction: 0.05 = 5%) of gated
	// metrics that have no entry in Thresholds.
	Threshold float64
	// Thresholds are per-metric allowed worsenings (a suite's thresholds:
	// section); when Metrics is empty, their metrics are the gated ones.
	Thresholds map[string]float64
	// Metrics lists the gated metrics explicitly.
	Metrics    []string
	MinSamples int
}

func (o GateOptions) alpha() float64 {
	if o.Alpha > 0 {
		return o.Alpha
	}
	return DefaultGateAlpha
}

func (o GateOptions) minSamples() int {
	if o.MinSamples > 0 {
		return o.MinSamples
	}
	return DefaultMinSamples
}

// ThresholdFor is the allowed worsening of metric.
func (o GateOptions) ThresholdFor(metric string) float64 {
	if t, ok := o.Thresholds[metric]; ok {
		return t
	}
	if o.Threshold > 0 {
		return o.Threshold
	}
	return DefaultThreshold
}

// GatedMetrics lists the metrics the gate checks, in report order.
func (o GateOptions) GatedMetrics() []string {
	ms := slices.Clone(o.Metrics)
	if len(ms) == 0 {
		ms = slices.Collect(maps.Keys(o.Thresholds))
	}
	if len(ms) == 0 {
		ms = slices.Clone(DefaultGateMetrics)
	}
	sortMetrics(ms)
	return ms
}

// Outcome is the gate's judgement of one case and metric.
type Outcome string

// Outcomes. Only Regression fails the gate; Insufficient and NotComparable
// make it inconclusive (exit 3) unless something regressed.
const (
	Pass            Outcome = "pass"             // no significant change
	Improved        Outcome = "improved"         // significantly better
	WithinThreshold Outcome = "within threshold" // significantly worse, by less than the threshold
	Regression      Outcome = "regression"       // significantly worse, by more than the threshold
	Insufficient    Outcome = "insufficient data"
	NotComparable   Outcome = "not comparable"
)

// Check is one gated case and metric.
type Check struct {
	*Row
	Threshold float64 // allowed worsening, fraction
	Outcome   Outcome
	Reason    string // one sentence: why this outcome
}

// Worse is how much worse B is than A, as a fraction (negative when B is
// better); NaN when undefined.
func (c Check) Worse() float64 {
	if c.Direction == LowerIsBetter {
		return c.Delta / 100
	}
	return -c.Delta / 100
}

// Result is the gate's verdict.
type Result struct {
	Status     int // ExitPass, ExitRegression or ExitInsufficient
	Headline   string
	Checks     []Check
	Notes      []string // what the checks do not say: skipped metrics, one-sided cases, warnings
	Baseline   string   // the sides, described
	Candidate  string
	Alpha      float64
	MinSamples int
	Comparison *Comparison
}

// Gate compares candidate with baseline and fails a case and metric only
// when the change is significant (p < alpha) and worse than the metric's
// threshold. Status is ExitRegression if anything failed, else
// ExitInsufficient if any gated metric had fewer than MinSamples on a side,
// a case was not comparable, or nothing matched, else ExitPass.
func Gate(baseline, candidate *Side, o GateOptions) Result {
	alpha, minN := o.alpha(), o.minSamples()
	res := Result{Baseline: baseline.Describe(), Candidate: candidate.Describe(), Alpha: alpha, MinSamples: minN}
	cmp := Compare(baseline, candidate, Options{Alpha: alpha})
	res.Comparison = cmp
	res.Notes = append(res.Notes, cmp.Notes...)
	if cmp.NotComparable != "" {
		res.Status = ExitInsufficient
		res.Headline = "perf gate inconclusive: the runs are not comparable: " + cmp.NotComparable
		return res
	}
	matched := 0
	for _, k := range baseline.order {
		if candidate.cases[k] != nil {
			matched++
		}
	}
	if matched == 0 {
		res.Status = ExitInsufficient
		res.Headline = fmt.Sprintf("perf gate inconclusive: no baseline case matches any of the candidate's %d cases (different suite or parameters?)",
			len(candidate.order))
		return res
	}
	for _, x := range cmp.OnlyB {
		res.Notes = append(res.Notes, fmt.Sprintf("%s: new in the candidate, no baseline to compare with", x.DisplayName()))
	}
	for _, x := range cmp.OnlyA {
		res.Notes = append(res.Notes, fmt.Sprintf("%s: in the baseline only, not run by the candidate", x.DisplayName()))
	}

	rows := map[[2]string]*Row{}
	for _, r := range cmp.Rows {
		rows[[2]string{r.Key, r.Metric}] = r
	}
	var gated []string
	for _, m := range o.GatedMetrics() {
		if MetricDirection(m) == Informational {
			res.Notes = append(res.Notes, fmt.Sprintf("%s is informational (no better or worse direction); not gated", m))
			continue
		}
		gated = append(gated, m)
	}
	for _, m := range gated {
		for _, k := range baseline.order {
			if candidate.cases[k] == nil {
				continue
			}
			r := rows[[2]string{k, m}]
			if r == nil {
				continue // neither side records this metric for this case (a kernel metric of a model case)
			}
			res.Checks = append(res.Checks, judge(r, o.ThresholdFor(m), alpha, minN))
		}
	}
	if len(res.Checks) == 0 {
		res.Status = ExitInsufficient
		res.Headline = fmt.Sprintf("perf gate inconclusive: none of the gated metrics (%s) was recorded in the %d matched cases",
			strings.Join(gated, ", "), matched)
		return res
	}
	count := map[Outcome]int{}
	var regressed []string
	for _, c := range res.Checks {
		count[c.Outcome]++
		if c.Outcome == Regression {
			regressed = append(regressed, fmt.Sprintf("%s %s %+.1f%%", c.Case, c.Metric, c.Delta))
		}
	}
	unjudged := count[Insufficient] + count[NotComparable]
	switch {
	case count[Regression] > 0:
		res.Status = ExitRegression
		if len(regressed) > 3 {
			regressed = append(regressed[:3], "...")
		}
		res.Headline = fmt.Sprintf("perf gate FAILED: %s (%s)", plural(count[Regression], "regression"), strings.Join(regressed, ", "))
		if unjudged > 0 {
			res.Headline += fmt.Sprintf("; %d more could not be judged", unjudged)
		}
	case unjudged > 0:
		res.Status = ExitInsufficient
		res.Headline = fmt.Sprintf("perf gate inconclusive: %d of %s could not be judged (%d insufficient data, %d not comparable); no regression in the rest",
			unjudged, plural(len(res.Checks), "check"), count[Insufficient], count[NotComparable])
	default:
		res.Status = ExitPass
		res.Headline = fmt.Sprintf("perf gate passed: %s, no significant regression beyond its threshold", plural(len(res.Checks), "check"))
		var extra []string
		if n := count[Improved]; n > 0 {
			extra = append(extra, fmt.Sprintf("%d improved", n))
		}
		if n := count[WithinThreshold]; n > 0 {
			extra = append(extra, fmt.Sprintf("%d slightly worse but within threshold", n))
		}
		if len(extra) > 0 {
			res.Headline += " (" + strings.Join(extra, ", ") + ")"
		}
	}
	return res
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// judge decides one case and metric.
func judge(r *Row, threshold, alpha float64, minN int) Check {
	c := Check{Row: r, Threshold: threshold}
	switch {
	case r.Verdict == VerdictNotComparable:
		c.Outcome, c.Reason = NotComparable, r.Reason
		return c
	case r.A.N < minN || r.B.N < minN:
		c.Outcome = Insufficient
		c.Reason = fmt.Sprintf("baseline has %d samples and candidate %d; the gate needs at least %d on each side", r.A.N, r.B.N, minN)
		for _, e := range r.ErrorsA {
			c.Reason += "; baseline " + e
		}
		for _, e := range r.ErrorsB {
			c.Reason += "; candidate " + e
		}
		return c
	}
	scale, unit := displayUnit(r.Unit)
	if unit != "" {
		unit = " " + unit
	}
	change := fmt.Sprintf("%s -> %s%s (%+.2f%%, p=%s)", fmtNum(r.A.Center*scale), fmtNum(r.B.Center*scale), unit, r.Delta, fmtP(r.P))
	worse := c.Worse()
	switch {
	case !r.Significant:
		c.Outcome = Pass
		c.Reason = fmt.Sprintf("%s: no significant change at alpha %g", change, alpha)
		if minP := minUTestP(r.A.N, r.B.N); minP >= alpha {
			c.Reason += fmt.Sprintf(" (with %d+%d samples no difference can reach p < %g: add repetitions)", r.A.N, r.B.N, alpha)
		}
	case r.Better:
		c.Outcome = Improved
		c.Reason = change + ": significantly better"
	case worse > threshold:
		c.Outcome = Regression
		c.Reason = fmt.Sprintf("%s: significantly worse, by more than the %s threshold", change, fmtPct(threshold))
	default:
		c.Outcome = WithinThreshold
		c.Reason = fmt.Sprintf("%s: significantly worse, but within the %s threshold", change, fmtPct(threshold))
	}
	return c
}

// minUTestP is the smallest two-sided p-value a Mann-Whitney U test can give
// with n1 and n2 samples (complete separation): 2 / C(n1+n2, n1).
func minUTestP(n1, n2 int) float64 {
	lc, _ := math.Lgamma(float64(n1 + n2 + 1))
	l1, _ := math.Lgamma(float64(n1 + 1))
	l2, _ := math.Lgamma(float64(n2 + 1))
	return math.Min(1, 2/math.Exp(lc-l1-l2))
}

func fmtPct(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", f*100), "0"), ".") + "%"
}

// Explain writes one line per check (outcome, case, metric, reason), the
// notes, and the headline last, where a CI log reader looks first.
func (r Result) Explain(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "baseline:  %s\ncandidate: %s\n", r.Baseline, r.Candidate)
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "%-17s %s %s: %s\n", strings.ToUpper(string(c.Outcome)), c.Case, c.Metric, c.Reason)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	fmt.Fprintln(&b, r.Headline)
	_, err := io.WriteString(w, b.String())
	return err
}

// Table lists the checks: case, metric, both medians, change, p, n,
// threshold and outcome.
func (r Result) Table() *table.Table {
	t := &table.Table{Header: []string{"case", "metric", "baseline", "candidate", "change", "p", "n", "threshold", "verdict"}}
	for _, c := range r.Checks {
		scale, unit := displayUnit(c.Unit)
		metric := c.Metric
		if unit != "" {
			metric += " (" + unit + ")"
		}
		t.Rows = append(t.Rows, []string{c.Case, metric, fmtStat(c.A, scale), fmtStat(c.B, scale), fmtDelta(c.Delta), fmtP(c.P),
			fmt.Sprintf("%d+%d", c.A.N, c.B.N), fmtPct(c.Threshold), string(c.Outcome)})
	}
	return t
}

var outcomeMark = map[Outcome]string{
	Pass:            "✅",
	Improved:        "🚀",
	WithinThreshold: "⚠️",
	Regression:      "❌",
	Insufficient:    "❔",
	NotComparable:   "❔",
}

// Markdown is the summary for a pull-request comment or
// $GITHUB_STEP_SUMMARY: a headline, what was compared, a table of the
// gated metrics with verdicts, and the notes.
func (r Result) Markdown() string {
	var b strings.Builder
	mark := map[int]string{ExitPass: "✅", ExitRegression: "❌", ExitInsufficient: "❔"}[r.Status]
	fmt.Fprintf(&b, "## %s %s\n\n", mark, r.Headline)
	fmt.Fprintf(&b, "- baseline: %s\n- candidate: %s\n", r.Baseline, r.Candidate)
	fmt.Fprintf(&b, "- a check fails when the change is significant (Mann-Whitney U, p < %g) and worse than its threshold; at least %d samples a side\n",
		r.Alpha, r.MinSamples)
	if len(r.Checks) > 0 {
		t := r.Table()
		for i, c := range r.Checks {
			t.Rows[i][len(t.Rows[i])-1] = outcomeMark[c.Outcome] + " " + string(c.Outcome)
		}
		b.WriteString("\n")
		t.Render(&b, table.FormatMarkdown) // a strings.Builder does not fail
		var why []string
		for _, c := range r.Checks {
			if c.Outcome == Regression || c.Outcome == Insufficient || c.Outcome == NotComparable {
				why = append(why, fmt.Sprintf("- %s **%s** %s: %s", outcomeMark[c.Outcome], c.Case, c.Metric, c.Reason))
			}
		}
		if len(why) > 0 {
			b.WriteString("\n" + strings.Join(why, "\n") + "\n")
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- note: %s\n", n)
		}
	}
	return b.String()
}
