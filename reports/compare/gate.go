package compare

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	mstats "github.com/aclements/go-moremath/stats"
	"golang.org/x/perf/benchmath"

	"github.com/mtlbench/mtlbench/internal/metrics"
	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/reports/stats"
	"github.com/mtlbench/mtlbench/reports/table"
)

// Exit statuses of the gate (and of `mtlbench gate` and `mtlbench ab`).
const (
	ExitPass       = 0 // no gated metric regressed
	ExitRegression = 1 // at least one significant regression beyond its threshold
	ExitError      = 2 // the tool failed (bad or unknown reference, unreadable database...)
	// ExitCannotTell: something could not be judged: too few samples or
	// runs, a baseline noisier than the threshold, cases not comparable.
	ExitCannotTell = 3
	// ExitInsufficient is the old name of ExitCannotTell.
	ExitInsufficient = ExitCannotTell
)

// Gate defaults. alpha is the false-discovery rate over all checks of one
// gate (Benjamini-Hochberg; docs/perf-gate.md): with no real change
// anywhere it is also the chance of any false alarm, before the threshold
// (which a false alarm must exceed too) cuts that further.
const (
	DefaultGateAlpha  = 0.05
	DefaultThreshold  = 0.05
	DefaultMinSamples = 5
)

// DefaultGateMetrics are gated when the suite names no thresholds.
var DefaultGateMetrics = []string{"decode_tok_s", "prefill_tok_s", "us_per_call"}

// GateOptions configure Gate. Zero values mean the defaults.
type GateOptions struct {
	Alpha float64
	// Threshold is the allowed worsening (a fraction: 0.05 = 5%) of gated
	// metrics that have no entry in Thresholds; 0 is the default unless
	// ThresholdSet says it was given.
	Threshold float64
	// ThresholdSet says Threshold was given, so that 0 (`--threshold 0%`:
	// any significant worsening fails) is kept rather than read as unset.
	ThresholdSet bool
	// Thresholds are per-metric allowed worsenings (a suite's thresholds:
	// section); when Metrics is empty, their metrics are the gated ones.
	Thresholds map[string]float64
	// Metrics lists the gated metrics explicitly.
	Metrics    []string
	MinSamples int
	// Paired says the sides' runs were taken in pairs, side by side, as
	// `mtlbench ab`'s rounds are: the baseline's run with ID i ran beside
	// the candidate's run with ID i, so load on the machine fell on both
	// alike. The gate then tests each pair's ratio (docs/perf-gate.md).
	Paired bool
	// MoreRuns says how to give each side more runs, in the advice of a
	// gate that had too few; "" is `mtlbench ab`, or several runs a side.
	MoreRuns string
}

func (o GateOptions) moreRuns() string {
	if o.MoreRuns != "" {
		return o.MoreRuns
	}
	return "`mtlbench ab`, or several runs a side"
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
	if o.Threshold > 0 || o.ThresholdSet {
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

// Outcomes. Regression and CaseFailed fail the gate (exit 1), whatever the
// other checks say; Insufficient, NotComparable and CannotTell make it
// inconclusive (exit 3) unless something failed.
const (
	Pass            Outcome = "pass"             // no significant change
	Improved        Outcome = "improved"         // significantly better
	WithinThreshold Outcome = "within threshold" // significantly worse, by less than the threshold
	Regression      Outcome = "regression"       // significantly worse, by more than the threshold
	// CaseFailed: the candidate's case failed (stored as failed, with its
	// error) where the baseline measured it, and either the candidate
	// kept no value of the metric or the baseline failed it in none of
	// its runs: not too few samples, which more repetitions would mend,
	// but a case that no longer runs (or runs only some of the time),
	// which fails the gate. A case the candidate skipped or never reached
	// (an interrupted run's pending cases) keeps its verdict.
	CaseFailed    Outcome = "case failed"
	Insufficient  Outcome = "insufficient data"
	NotComparable Outcome = "not comparable"
	// CannotTell: no significant change, but the noise (or the change seen)
	// is larger than the threshold, so a regression could hide in it.
	CannotTell Outcome = "cannot tell"
)

// Units of a check: what one value of its test stands for.
const (
	// UnitPair: the ratio of the values (runValue) of two runs taken side by side
	// (ab's rounds): drift between rounds falls on both runs of a pair and
	// cancels in its ratio.
	UnitPair       = "pair of runs"
	UnitRun        = "run"        // each run's value (runValue): drift between runs is noise, not change
	UnitRepetition = "repetition" // every repetition: only when a side has a single run
)

// MinPairs is the fewest pairs of runs the paired test uses; with fewer,
// the sides' runs are compared unpaired.
const MinPairs = 3

// Check is one gated case and metric. Its A, B, Delta and P are those of
// the values it tested (per pair of runs, run or repetition, see Per): for
// pairs, A and B are the geometric means of each side's runs' values, whose
// quotient is Delta; else their medians. The Row's own are the pooled
// repetitions'.
type Check struct {
	*Row
	Per   string // UnitPair, UnitRun or UnitRepetition: what one tested value is; "" when nothing was tested
	A, B  Stat
	Delta float64
	// P is the p-value of the tested values: a paired t-test of the pairs'
	// log ratios (UnitPair), else Mann-Whitney U; NaN when not tested.
	P float64
	// Noise is how uncertain the change is, a fraction: the half-width of
	// the 95% interval of the mean log ratio for pairs, else of the
	// baseline's center (1.96·1.4826·MAD/√n).
	Noise float64
	// Q is P adjusted for every check of the gate (Benjamini-Hochberg):
	// the check is significant when Q < alpha.
	Q         float64
	Threshold float64 // allowed worsening, fraction
	Outcome   Outcome
	Reason    string // one sentence: why this outcome
}

// Worse is how much worse B is than A, as a fraction (negative when B is
// better). From a center of 0 there is no ratio, but the change still has
// a direction: ±Inf, so that 0 -> 5 ms is worse and 0 -> 5 tok/s better.
func (c Check) Worse() float64 {
	d := c.Delta
	if math.IsNaN(d) && c.A.Center == 0 && c.B.Center != c.A.Center {
		d = math.Copysign(math.Inf(1), c.B.Center-c.A.Center)
	}
	if c.Direction == metrics.LowerIsBetter {
		return d / 100
	}
	return -d / 100
}

// fmtChange is a change for the gate's sentences: a percent, or, from a
// center of 0, which has no ratio, the words saying so.
func fmtChange(d float64, prec int) string {
	if math.IsNaN(d) {
		return "from 0: no ratio"
	}
	return fmt.Sprintf("%+.*f%%", prec, d)
}

// Result is the gate's verdict.
type Result struct {
	Status     int // ExitPass, ExitRegression or ExitCannotTell
	Headline   string
	Checks     []Check
	Notes      []table.Note // what the checks do not say: skipped metrics, one-sided cases, warnings
	Baseline   string       // the sides, described
	Candidate  string
	Alpha      float64
	MinSamples int
	Comparison *Comparison
}

// Gate compares candidate with baseline and fails a case and metric only
// when the change is significant (p < alpha) and worse than the metric's
// threshold. Status is ExitRegression if anything regressed or the
// candidate failed a case the baseline measured (CaseFailed), else
// ExitCannotTell if any gated metric had fewer than MinSamples on a side,
// was too noisy to judge, a case was not comparable, or nothing matched,
// else ExitPass.
func Gate(baseline, candidate *Side, o GateOptions) Result {
	alpha, minN := o.alpha(), o.minSamples()
	res := Result{Baseline: baseline.Describe(), Candidate: candidate.Describe(), Alpha: alpha, MinSamples: minN}
	cmp := Compare(baseline, candidate, Options{Alpha: alpha, SameModel: true})
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
		res.Headline = fmt.Sprintf("perf gate inconclusive: no baseline case matches any of the candidate's %s (different suite or parameters?)",
			plural.Of(len(candidate.order), "case"))
		return res
	}
	for _, x := range cmp.OnlyB {
		res.Notes = append(res.Notes, table.Notef("%s: new in the candidate, no baseline to compare with", x.DisplayName()))
	}
	for _, x := range cmp.OnlyA {
		res.Notes = append(res.Notes, table.Notef("%s: in the baseline only, not run by the candidate", x.DisplayName()))
	}

	rows := map[[2]string]*Row{}
	for _, r := range cmp.Rows {
		rows[[2]string{r.Key, r.Metric}] = r
	}
	var gated []string
	for _, m := range o.GatedMetrics() {
		if metrics.Of(m) == metrics.Informational {
			res.Notes = append(res.Notes, table.Notef("%s is informational (no better or worse direction); not gated", m))
			continue
		}
		gated = append(gated, m)
	}
	single := 0
	for _, m := range gated {
		before := len(res.Checks)
		for _, k := range baseline.order {
			cb := candidate.cases[k]
			if cb == nil {
				continue
			}
			r := rows[[2]string{k, m}]
			if r == nil {
				continue // neither side records this metric for this case (a kernel metric of a model case)
			}
			c := prepareCheck(r, baseline.cases[k], cb, o.ThresholdFor(m), alpha, minN, o.Paired)
			if c.Outcome == Insufficient && c.Per == UnitRun {
				c.Reason += " (" + o.moreRuns() + ")"
			}
			if c.Per == UnitRepetition {
				single++
			}
			res.Checks = append(res.Checks, c)
		}
		// A metric asked for by name that no matched case records was
		// not gated: say so, as the pass would otherwise claim it.
		if _, named := o.Thresholds[m]; named && len(res.Checks) == before {
			res.Notes = append(res.Notes, table.Notef("%s: no matched case records it, so it was not gated", m))
		}
	}
	// A matched case with no check that a side failed (both, say) stored
	// no gated metric on either side: not judged, which a pass would
	// otherwise leave unsaid; nor would it say that both sides failed a
	// case they measured. (One both skipped is a backend's choice.)
	checked, caseFailed := map[string]bool{}, map[string]bool{}
	for _, c := range res.Checks {
		checked[c.Key] = true
		caseFailed[c.Key] = caseFailed[c.Key] || c.Outcome == CaseFailed
	}
	for _, k := range baseline.order {
		ca, cb := baseline.cases[k], candidate.cases[k]
		if cb == nil || len(ca.Failures)+len(cb.Failures) == 0 {
			continue
		}
		why := []string{"baseline: " + orNone(ca.Errors), "candidate: " + orNone(cb.Errors)}
		switch {
		case !checked[k]:
			res.Notes = append(res.Notes, table.Notef("%s: neither side measured a gated metric, so it was not gated (%s)", cb.DisplayName(), strings.Join(why, "; ")))
		case len(ca.Failures) > 0 && len(cb.Failures) > 0 && !caseFailed[k]:
			// Failing on both sides is no change the gate can pin on
			// the candidate, but a pass must not hide it.
			res.Notes = append(res.Notes, table.Notef("%s: both sides failed it in some runs, so it was judged on the samples each kept (%s)", cb.DisplayName(), strings.Join(why, "; ")))
		}
	}
	adjustBH(res.Checks)
	for i := range res.Checks {
		c := &res.Checks[i]
		decide(c, alpha)
		if len(c.Row.LeftOut) > 0 && c.Outcome != NotComparable {
			c.Reason += "; " + strings.Join(c.Row.LeftOut, "; ")
		}
	}
	if single > 0 {
		// The advice is mtlbench's own markdown (`mtlbench ab`): part of the
		// format, so md keeps it as written.
		advice := strings.ReplaceAll(o.moreRuns(), "%", "%%")
		res.Notes = append(res.Notes, table.Notef("%s compared repetition by repetition because a side has a single run of the case: "+
			"drift between the runs (load, clocks) counts as change; to make the run the unit: "+advice, plural.Of(single, "check")))
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
			regressed = append(regressed, fmt.Sprintf("%s %s %s", c.Case, c.Metric, fmtChange(c.Delta, 1)))
		}
	}
	unjudged := count[Insufficient] + count[NotComparable] + count[CannotTell]
	var failures []string
	if failed := failedCases(baseline, candidate, res.Checks); len(failed) > 0 {
		// A case that no longer runs is infinitely slower: the gate fails
		// whatever the other cases measured.
		if every := failedEveryCase(baseline, candidate); every != nil {
			failures = append(failures, fmt.Sprintf("the candidate failed every matched case (%s), measuring none (%s)",
				plural.Of(matched, "case"), firstFew(every, "; ")))
		} else {
			failures = append(failures, fmt.Sprintf("the candidate failed %d of %s (%s)",
				len(failed), plural.Of(matched, "matched case"), firstFew(failed, "; ")))
		}
	}
	if n := count[Regression]; n > 0 {
		failures = append(failures, fmt.Sprintf("%s (%s)", plural.Of(n, "regression"), firstFew(regressed, ", ")))
	}
	switch {
	case len(failures) > 0:
		res.Status = ExitRegression
		res.Headline = "perf gate FAILED: " + strings.Join(failures, "; ")
		if unjudged > 0 {
			res.Headline += fmt.Sprintf("; %d more could not be judged", unjudged)
		}
	case unjudged > 0:
		res.Status = ExitCannotTell
		res.Headline = fmt.Sprintf("perf gate cannot tell: %d of %s could not be judged (%d too noisy, %d insufficient data, %d not comparable); no regression in the rest",
			unjudged, plural.Of(len(res.Checks), "check"), count[CannotTell], count[Insufficient], count[NotComparable])
	default:
		res.Status = ExitPass
		res.Headline = fmt.Sprintf("perf gate passed: %s, no significant regression beyond its threshold", plural.Of(len(res.Checks), "check"))
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

// orNone joins a side's errors of a case, or says it had none.
func orNone(errs []string) string {
	if len(errs) == 0 {
		return "no error"
	}
	return strings.Join(errs, "; ")
}

// firstFew joins the first three of list with sep, and "..." for the rest.
func firstFew(list []string, sep string) string {
	if len(list) > 3 {
		list = append(list[:3:3], "...")
	}
	return strings.Join(list, sep)
}

// failedCases lists, as "case: why" in the baseline's order, each case
// with a CaseFailed check: the candidate failed it where the baseline
// measured it.
func failedCases(baseline, candidate *Side, checks []Check) []string {
	keys := map[string]bool{}
	for _, c := range checks {
		if c.Outcome == CaseFailed {
			keys[c.Key] = true
		}
	}
	var failed []string
	for _, k := range baseline.order {
		if cb := candidate.cases[k]; keys[k] && cb != nil {
			failed = append(failed, cb.DisplayName()+": "+cb.Failures[0])
		}
	}
	return failed
}

// failedEveryCase lists, as "case: why", the candidate's cases that match
// the baseline's when every one of them failed without a sample; nil when
// the candidate measured any.
func failedEveryCase(baseline, candidate *Side) []string {
	var failed []string
	for _, k := range baseline.order {
		cb := candidate.cases[k]
		if cb == nil {
			continue
		}
		if len(cb.Failures) == 0 || len(cb.Samples) > 0 {
			return nil
		}
		failed = append(failed, cb.DisplayName()+": "+cb.Failures[0])
	}
	return failed
}

// prepareCheck tests one case and metric: on the ratios of paired runs
// when the sides' runs were taken in pairs, else on each run's median when
// both sides have at least two runs of the case (so drift between runs is
// noise, not change), else on every repetition. The verdict waits for
// every check's p-value (adjustBH, then decide).
func prepareCheck(r *Row, ca, cb *Case, threshold, alpha float64, minN int, paired bool) Check {
	c := Check{Row: r, Threshold: threshold, Delta: math.NaN(), P: math.NaN(), Q: math.NaN(), Noise: math.NaN()}
	switch {
	case r.Verdict == VerdictNotComparable:
		c.Outcome, c.Reason = NotComparable, r.Reason
		return c
	case r.A.N > 0 && len(cb.Failures) > 0 && r.B.N == 0:
		c.Outcome = CaseFailed
		c.Reason = fmt.Sprintf("the candidate's case failed, with no sample (%s); the baseline has %d",
			strings.Join(cb.Failures, "; "), r.A.N)
		return c
	case r.A.N > 0 && len(cb.Failures) > 0 && len(ca.Failures) == 0:
		// A case that crashes part-way, or in one round of several, fails
		// as surely as one that never runs; the samples it kept do not
		// excuse it, unless the baseline is as flaky.
		c.Outcome = CaseFailed
		c.Reason = fmt.Sprintf("the candidate's case failed (%s), though it kept %s; the baseline has %d and failed it in none of its runs",
			strings.Join(cb.Failures, "; "), plural.Of(r.B.N, "sample"), r.A.N)
		return c
	case r.A.N < minN || r.B.N < minN:
		c.Outcome = Insufficient
		c.Reason = fmt.Sprintf("baseline has %s and candidate %d; the gate needs at least %d on each side", plural.Of(r.A.N, "sample"), r.B.N, minN)
		for _, e := range r.ErrorsA {
			c.Reason += "; baseline " + e
		}
		for _, e := range r.ErrorsB {
			c.Reason += "; candidate " + e
		}
		return c
	}
	if paired {
		if la, lb := pairedLogValues(ca, cb, r.Metric, r.Direction); len(la) >= MinPairs {
			testPairs(&c, la, lb)
			return c
		}
	}
	ua, ub := runValues(ca, r.Metric, r.Direction), runValues(cb, r.Metric, r.Direction)
	c.Per = UnitRun
	if len(ua) < 2 || len(ub) < 2 {
		c.Per, ua, ub = UnitRepetition, r.A.Values, r.B.Values
	}
	c.A, c.B = newStat(ua), newStat(ub)
	c.Delta = delta(c.A.Center, c.B.Center)
	if minP := minUTestP(c.A.N, c.B.N); minP >= alpha {
		c.Outcome = Insufficient
		c.Reason = fmt.Sprintf("with %d+%d %ss no difference can reach p < %g: add %ss", c.A.N, c.B.N, c.Per, alpha, c.Per)
		return c
	}
	c.P = uTestP(ua, ub, alpha)
	c.Noise = 1.96 * relSpread(c.A.Values) / math.Sqrt(float64(c.A.N))
	return c
}

// pairedLogValues is the log of each run's value of metric (runValue), for
// the runs (by ID) that recorded it on both sides, in ID order.
func pairedLogValues(ca, cb *Case, metric string, dir metrics.Direction) (la, lb []float64) {
	bs := map[int64][]float64{}
	for _, rv := range cb.ByRun[metric] {
		bs[rv.Run] = rv.Values
	}
	ra := slices.Clone(ca.ByRun[metric])
	slices.SortFunc(ra, func(x, y RunValues) int { return cmpFloat(float64(x.Run), float64(y.Run)) })
	for _, rv := range ra {
		vb := bs[rv.Run]
		if len(rv.Values) == 0 || len(vb) == 0 {
			continue
		}
		ma, mb := runValue(rv.Values, dir), runValue(vb, dir)
		if !(ma > 0) || !(mb > 0) || math.IsInf(ma, 0) || math.IsInf(mb, 0) {
			return nil, nil // a ratio needs positive finite medians: compare unpaired
		}
		la, lb = append(la, math.Log(ma)), append(lb, math.Log(mb))
	}
	return la, lb
}

// testPairs is the paired test: Student's t on the pairs' log ratios (each
// pair's ratio is a run's value over that of the run beside it, both means
// of several repetitions, so close to log-normal), the change their geometric mean, its uncertainty
// the 95% interval's half-width. Each side's figure is the geometric mean
// of its runs' values (geoStat): the mean log ratio is the difference of
// the sides' mean logs, so the change is the quotient of the figures shown,
// where the sides' medians could even disagree with its sign.
func testPairs(c *Check, la, lb []float64) {
	n := len(la)
	c.Per = UnitPair
	d := make([]float64, n)
	for i := range la {
		d[i] = lb[i] - la[i]
	}
	c.A, c.B = geoStat(la), geoStat(lb)
	mean, sd := mstats.Mean(d), mstats.StdDev(d)
	c.Delta = (math.Exp(mean) - 1) * 100
	if sd == 0 {
		// Identical ratios in every pair: exactly no change, or a change
		// with no noise at all.
		c.P, c.Noise = 1, 0
		if mean != 0 {
			c.P = 0
		}
		return
	}
	t := mean * math.Sqrt(float64(n)) / sd
	dist := mstats.TDist{V: float64(n - 1)}
	c.P = probability(2 * (1 - dist.CDF(math.Abs(t))))
	c.Noise = math.Expm1(mstats.InvCDF(dist)(0.975) * sd / math.Sqrt(float64(n)))
}

// geoStat is one side's runs of a paired check, from the logs of their
// values: the geometric mean, with its 95% interval from Student's t on the
// logs (the paired test's own model of a run's value).
func geoStat(logs []float64) Stat {
	n := len(logs)
	v := make([]float64, n)
	for i, l := range logs {
		v[i] = math.Exp(l)
	}
	slices.Sort(v)
	m := mstats.Mean(logs)
	s := Stat{N: n, Values: v, Summary: benchmath.Summary{Center: math.Exp(m), Lo: math.Inf(-1), Hi: math.Inf(1), Confidence: stats.Confidence}}
	if n >= 2 {
		h := mstats.InvCDF(mstats.TDist{V: float64(n - 1)})(0.975) * mstats.StdDev(logs) / math.Sqrt(float64(n))
		s.Lo, s.Hi = math.Exp(m-h), math.Exp(m+h)
	}
	return s
}

// runValues is each run's value of metric (runValue), for runs that
// recorded it.
func runValues(c *Case, metric string, dir metrics.Direction) []float64 {
	var out []float64
	for _, rv := range c.ByRun[metric] {
		if len(rv.Values) > 0 {
			out = append(out, runValue(rv.Values, dir))
		}
	}
	return out
}

// runValue is what one run says of a metric: the mean of its better half
// of repetitions (the faster, for times and throughputs), one more than
// half of them. Interference from other work on the machine only ever
// slows a repetition, so the slower ones say more about the machine than
// about the code; the better half keeps the estimate steady under load
// and still averages over more than one repetition (docs/perf-gate.md).
func runValue(v []float64, dir metrics.Direction) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if dir == metrics.HigherIsBetter {
		slices.Reverse(s)
	}
	s = s[:len(s)/2+1]
	var sum float64
	for _, x := range s {
		sum += x
	}
	return sum / float64(len(s))
}

// adjustBH sets Q on every tested check: Benjamini-Hochberg's adjusted
// p-values over all tested checks of the gate, so that alpha bounds the
// expected share of false alarms among the flagged checks (and, when
// nothing changed at all, the chance of any false alarm).
func adjustBH(checks []Check) {
	var idx []int
	for i, c := range checks {
		if !math.IsNaN(c.P) {
			idx = append(idx, i)
		}
	}
	m := len(idx)
	slices.SortStableFunc(idx, func(a, b int) int { return cmpFloat(checks[a].P, checks[b].P) })
	q := 1.0
	for rank := m; rank >= 1; rank-- {
		i := idx[rank-1]
		q = math.Min(q, checks[i].P*float64(m)/float64(rank))
		checks[i].Q = q
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// decide gives a tested check its outcome: a regression needs both an
// adjusted p below alpha and a change worse than the threshold; no
// significant change is a pass only when the baseline is steadier than the
// threshold and the change seen is within it.
func decide(c *Check, alpha float64) {
	if c.Outcome != "" || math.IsNaN(c.P) {
		return
	}
	scale, unit := displayUnit(c.Unit)
	if unit != "" {
		unit = " " + unit
	}
	per := ""
	switch c.Per {
	case UnitRun:
		per = fmt.Sprintf(", %d+%d runs", c.A.N, c.B.N)
	case UnitPair:
		per = ", " + plural.Of(c.A.N, "pair") + " of runs"
	}
	change := fmt.Sprintf("%s -> %s%s (%s, p=%s, adjusted %s%s)", fmtNum(c.A.Center*scale), fmtNum(c.B.Center*scale), unit,
		fmtChange(c.Delta, 2), fmtP(c.P), fmtP(c.Q), per)
	worse := c.Worse()
	changed := c.B.Center != c.A.Center
	if c.Per == UnitPair {
		changed = c.Delta != 0
	}
	significant := c.Q < alpha && changed
	noise := c.Noise
	switch {
	case significant && !(worse > 0):
		c.Outcome = Improved
		c.Reason = change + ": significantly better"
	case significant && past(worse, c.Threshold):
		c.Outcome = Regression
		c.Reason = fmt.Sprintf("%s: significantly worse, by more than the %s threshold", change, fmtPct(c.Threshold))
	case significant:
		c.Outcome = WithinThreshold
		c.Reason = fmt.Sprintf("%s: significantly worse, but within the %s threshold", change, fmtPct(c.Threshold))
	case past(noise, c.Threshold) && c.Per == UnitPair:
		c.Outcome = CannotTell
		c.Reason = fmt.Sprintf("%s: no significant change, but the pairs' ratios leave the change uncertain by ±%s (95%% interval), more than the %s threshold: a regression could hide in that noise",
			change, fmtPct(noise), fmtPct(c.Threshold))
	case past(noise, c.Threshold):
		c.Outcome = CannotTell
		c.Reason = fmt.Sprintf("%s: no significant change, but the baseline's %ss leave its center uncertain by ±%s (1.96·1.4826·MAD/√n), more than the %s threshold: a regression could hide in that noise",
			change, c.Per, fmtPct(noise), fmtPct(c.Threshold))
	case past(worse, c.Threshold):
		c.Outcome = CannotTell
		c.Reason = fmt.Sprintf("%s: worse by more than the %s threshold, but not significantly: too noisy to tell", change, fmtPct(c.Threshold))
	default:
		c.Outcome = Pass
		c.Reason = fmt.Sprintf("%s: no significant change at alpha %g", change, alpha)
	}
}

// relSpread is the values' spread relative to their median: the median
// absolute deviation scaled by 1.4826 (a standard deviation for normal
// data, but robust to the odd disturbed run). A MAD of 0 is no spread
// whatever the median, 0 included (a goodput of 0 in every repetition);
// a spread around a zero median is +Inf.
func relSpread(v []float64) float64 {
	if len(v) == 0 {
		return math.Inf(1)
	}
	med := stats.Summarize(slices.Clone(v)).Center
	dev := make([]float64, len(v))
	for i, x := range v {
		dev[i] = math.Abs(x - med)
	}
	mad := stats.Summarize(dev).Center
	switch {
	case mad == 0:
		return 0
	case med == 0:
		return math.Inf(1)
	}
	return 1.4826 * mad / math.Abs(med)
}

// minUTestP is the smallest two-sided p-value a Mann-Whitney U test can give
// with n1 and n2 samples (complete separation): 2 / C(n1+n2, n1).
// uTestP is the Mann-Whitney U p-value of a against b. With ties the
// normal approximation's continuity correction can give more than 1 (1.33
// for 1 against 1, 2): a probability is clamped to [0, 1].
func uTestP(a, b []float64, alpha float64) float64 {
	th := &benchmath.Thresholds{CompareAlpha: alpha}
	return probability(benchmath.AssumeNothing.Compare(benchmath.NewSample(a, th), benchmath.NewSample(b, th)).P)
}

// probability clamps a computed p-value to [0, 1], keeping NaN (no test).
func probability(p float64) float64 {
	return math.Max(0, math.Min(1, p)) // Max and Min keep NaN
}

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
		fmt.Fprintf(&b, "note: %s\n", n.Text)
	}
	fmt.Fprintln(&b, r.Headline)
	_, err := io.WriteString(w, b.String())
	return err
}

// Table lists the checks: case, metric, both sides' figures (the
// medians, or for pairs the geometric means), change, p, n, threshold and
// outcome.
func (r Result) Table() *table.Table {
	t := &table.Table{Header: []string{"case", "metric", "baseline", "candidate", "change", "p", "p adj.", "n", "threshold", "verdict"}}
	for _, c := range r.Checks {
		scale, unit := displayUnit(c.Unit)
		metric := c.Metric
		if unit != "" {
			metric += " (" + unit + ")"
		}
		a, b := c.A, c.B
		if c.Per == "" { // untested: the pooled repetitions say what there is
			a, b = c.Row.A, c.Row.B
		}
		// n counts what was tested: a pair is one value of the test, not
		// one sample of each side (which --min-samples counts).
		n := fmt.Sprintf("%d+%d", a.N, b.N)
		switch c.Per {
		case UnitRun:
			n += " runs"
		case UnitPair:
			n = plural.Of(a.N, "pair")
		}
		t.Rows = append(t.Rows, []string{c.Case, metric, fmtStat(a, scale), fmtStat(b, scale), fmtDelta(c.Delta), fmtP(c.P), fmtP(c.Q),
			n, fmtPct(c.Threshold), string(c.Outcome)})
	}
	return t
}

var outcomeMark = map[Outcome]string{
	Pass:            "✅",
	Improved:        "🚀",
	WithinThreshold: "⚠️",
	Regression:      "❌",
	CaseFailed:      "❌",
	Insufficient:    "❔",
	NotComparable:   "❔",
	CannotTell:      "❔",
}

// testTexts name the test each unit of a check is tested with.
var testTexts = []struct{ per, text string }{
	{UnitPair, "Student's t on the log ratios of the pairs of runs, each run's mean of its better half of repetitions, each side shown as the geometric mean of its runs"},
	{UnitRun, "Mann-Whitney U on each run's mean of its better half of repetitions"},
	{UnitRepetition, "Mann-Whitney U on the repetitions, where a side has one run"},
}

// testsUsed names the tests the checks were judged with, in the one
// order, each once, followed by "; "; "" when none was tested. A summary
// must name the test a check used, which depends on how the runs were
// taken (ab's pairs, several runs a side, or one).
func testsUsed(checks []Check) string {
	var used []string
	for _, t := range testTexts {
		if slices.ContainsFunc(checks, func(c Check) bool { return c.Per == t.per }) {
			used = append(used, t.text)
		}
	}
	if len(used) == 0 {
		return ""
	}
	return strings.Join(used, "; ") + "; "
}

// Markdown is the summary for a pull-request comment or
// $GITHUB_STEP_SUMMARY: a headline, what was compared, a table of the
// gated metrics with verdicts, and the notes.
func (r Result) Markdown() string {
	var b strings.Builder
	mark := map[int]string{ExitPass: "✅", ExitRegression: "❌", ExitCannotTell: "❔"}[r.Status]
	// Case names and labels are the user's text: escaped, so a* or <br> in
	// one is read as written, not as formatting. A note escapes the user's
	// text in it and keeps mtlbench's own markdown (table.Note).
	md := table.MarkdownText
	fmt.Fprintf(&b, "## %s %s\n\n", mark, md(r.Headline))
	fmt.Fprintf(&b, "- baseline: %s\n- candidate: %s\n", md(r.Baseline), md(r.Candidate))
	fmt.Fprintf(&b, "- a check fails when the change is significant (%sp adjusted over %s by Benjamini-Hochberg, below %g) "+
		"and worse than its threshold; at least %s a side\n",
		testsUsed(r.Checks), plural.Of(len(r.Checks), "check"), r.Alpha, plural.Of(r.MinSamples, "sample"))
	if len(r.Checks) > 0 {
		t := r.Table()
		for i, c := range r.Checks {
			t.Rows[i][len(t.Rows[i])-1] = outcomeMark[c.Outcome] + " " + string(c.Outcome)
		}
		b.WriteString("\n")
		t.Render(&b, table.FormatMarkdown) // a strings.Builder does not fail
		var why []string
		for _, c := range r.Checks {
			if c.Outcome == Regression || c.Outcome == CaseFailed || c.Outcome == Insufficient || c.Outcome == NotComparable || c.Outcome == CannotTell {
				why = append(why, fmt.Sprintf("- %s **%s** %s: %s", outcomeMark[c.Outcome], md(c.Case), md(c.Metric), md(c.Reason)))
			}
		}
		if len(why) > 0 {
			b.WriteString("\n" + strings.Join(why, "\n") + "\n")
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- note: %s\n", strings.ReplaceAll(n.Markdown, "\n", " "))
		}
	}
	return b.String()
}

// past reports whether a worsening (a fraction) is beyond the threshold: one
// exactly at it is within, as docs/perf-gate.md says, whatever the float
// rounding of the ratio (95/100 - 1 is -0.050000000000000044).
func past(v, threshold float64) bool { return v > threshold*(1+1e-9)+1e-12 }
