// Package compare compares two sets of benchmark runs, A (the baseline) and
// B (the candidate), case by case, benchstat style, and implements the
// performance gate built on that comparison.
//
// Each side may pool several runs: samples are pooled per case key (the
// canonical parameter string the suite gives every case), so three runs of
// the same commit count as one bigger sample. Cases are matched on that key;
// cases present on one side only are listed, not compared.
//
// For every matched case and metric the comparison gives both medians with
// 95% confidence intervals, the change in percent and a Mann-Whitney U
// p-value (golang.org/x/perf/benchmath, AssumeNothing: benchmark timings are
// rarely normal), and a verdict that knows which way the metric improves.
// Two things are never compared, because the numbers would mean nothing
// side by side: emulated runs with real ones (and profile timings with
// throughput timings), and cases whose layers run/total differ (a truncated
// model against the whole model). They are reported as not comparable.
//
// The core functions, Compare and Gate, work on in-memory Sides so that
// their statistics can be tested with synthetic samples; Load fills a Side
// from the results store.
package compare

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchmath"

	"github.com/mtlbench/mtlbench/internal/metrics"
	"github.com/mtlbench/mtlbench/reports/stats"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/suites"
)

// DefaultAlpha is the significance level of a plain comparison, benchstat's.
const DefaultAlpha = 0.05

// Verdicts of a row.
const (
	VerdictSame          = "~"
	VerdictFaster        = "faster"
	VerdictSlower        = "slower"
	VerdictBetter        = "better" // non-speed metrics (memory)
	VerdictWorse         = "worse"
	VerdictNotComparable = "not comparable"
	VerdictNoData        = "no data"
)

// Stat is one side's values of one metric of one case.
type Stat struct {
	N      int
	Values []float64 // sorted
	benchmath.Summary
}

func newStat(values []float64) Stat {
	if len(values) == 0 {
		return Stat{}
	}
	v := slices.Clone(values) // benchmath sorts in place
	return Stat{N: len(v), Values: v, Summary: stats.Summarize(v)}
}

// Row is one metric of one matched case.
type Row struct {
	Key, Case, Kind string
	Metric, Unit    string
	Direction       metrics.Direction
	A, B            Stat
	// Delta is B against A in percent, (B/A - 1) * 100; NaN when A's
	// median is 0 and B's is not.
	Delta float64
	// P is the Mann-Whitney U p-value; NaN when the row was not tested.
	P           float64
	Significant bool // P < alpha
	// Better tells, for a significant row, that B improved on A.
	Better  bool
	Verdict string
	Reason  string // why a row is not comparable or has no data
	// LeftOut says, per side, the samples no statistic takes (Side.Add).
	LeftOut []string
	// ErrorsA and ErrorsB are the messages of runs in which the case
	// failed or was skipped, which is usually why a side has no data.
	ErrorsA, ErrorsB []string
}

// Comparison is the outcome of Compare.
type Comparison struct {
	A, B  *Side
	Alpha float64
	// NotComparable is set when the sides as a whole must not be compared
	// (emulated against real runs, profile against throughput timings);
	// Rows is then empty.
	NotComparable string
	Rows          []*Row // by metric (see Metrics), then by A's case order
	Metrics       []string
	OnlyA, OnlyB  []*Case
	// Notes are warnings that do not stop the comparison (different
	// backends or machines).
	Notes []table.Note
}

// Options configure Compare.
type Options struct {
	Alpha float64 // significance level; 0 means DefaultAlpha
	// SameModel makes cases whose sides measured different models, weight
	// formats or seeds (IdentityParams) not comparable, as a gate needs: it
	// judges a change of build, not of model. Without it the difference
	// is a note.
	SameModel bool
}

// Compare matches a's and b's cases on their keys and compares every
// metric that has a direction (informational metrics are skipped).
func Compare(a, b *Side, o Options) *Comparison {
	alpha := o.Alpha
	if alpha <= 0 {
		alpha = DefaultAlpha
	}
	c := &Comparison{A: a, B: b, Alpha: alpha}
	c.NotComparable, c.Notes = sidesComparable(a, b)
	for _, k := range a.order {
		if b.cases[k] == nil {
			c.OnlyA = append(c.OnlyA, a.cases[k])
		}
	}
	for _, k := range b.order {
		if a.cases[k] == nil {
			c.OnlyB = append(c.OnlyB, b.cases[k])
		}
	}
	if c.NotComparable != "" {
		return c
	}
	byMetric := map[string][]*Row{}
	setA, setB := a.overridden(), b.overridden()
	for _, k := range a.order {
		ca, cb := a.cases[k], b.cases[k]
		if cb == nil {
			continue
		}
		reason := casesComparable(a.Label, b.Label, ca, cb, o.SameModel)
		if d := paramDiff(ca.Kind, ca.Params, cb.Params, setA, setB); d != "" {
			c.Notes = append(c.Notes, table.Notef("%s: recorded parameters differ (%s): the change may come from them", ca.DisplayName(), d))
		}
		for _, m := range caseMetrics(ca, cb) {
			r := compareMetric(ca, cb, m, alpha)
			if reason != "" {
				r.Verdict, r.Reason, r.P, r.Delta = VerdictNotComparable, reason, math.NaN(), math.NaN()
				r.Significant, r.Better = false, false
			}
			byMetric[m] = append(byMetric[m], r)
		}
	}
	for m := range byMetric {
		c.Metrics = append(c.Metrics, m)
	}
	sortMetrics(c.Metrics)
	for _, m := range c.Metrics {
		c.Rows = append(c.Rows, byMetric[m]...)
	}
	return c
}

// caseMetrics is the union of both cases' metrics that have a direction.
func caseMetrics(a, b *Case) []string {
	var out []string
	for _, c := range []*Case{a, b} {
		for m := range c.Samples {
			if metrics.Of(m) != metrics.Informational && !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	sortMetrics(out)
	return out
}

func compareMetric(ca, cb *Case, metric string, alpha float64) *Row {
	unit := ca.Units[metric]
	if unit == "" {
		unit = cb.Units[metric]
	}
	r := &Row{Key: ca.Key, Case: ca.DisplayName(), Kind: ca.Kind, Metric: metric, Unit: unit,
		Direction: metrics.Of(metric), A: newStat(ca.Samples[metric]), B: newStat(cb.Samples[metric]),
		Delta: math.NaN(), P: math.NaN(), ErrorsA: ca.Errors, ErrorsB: cb.Errors}
	for _, s := range []struct {
		label string
		c     *Case
		n     int
	}{{"A", ca, r.A.N}, {"B", cb, r.B.N}} {
		if k := s.c.LeftOut[metric]; k > 0 {
			r.LeftOut = append(r.LeftOut, stats.LeftOutNote(s.label, metric, k, s.n))
		}
	}
	if r.A.N == 0 || r.B.N == 0 {
		r.Verdict = VerdictNoData
		r.Reason = fmt.Sprintf("%s has no %s samples", missingSide(r, "A", "B"), metric)
		if errs := append(slices.Clone(ca.Errors), cb.Errors...); len(errs) > 0 {
			r.Reason += " (" + strings.Join(errs, "; ") + ")"
		}
		if len(r.LeftOut) > 0 {
			r.Reason += "; " + strings.Join(r.LeftOut, "; ")
		}
		return r
	}
	r.Reason = strings.Join(r.LeftOut, "; ")
	r.Delta = delta(r.A.Center, r.B.Center)
	r.P = uTestP(r.A.Values, r.B.Values, alpha)
	r.Verdict = VerdictSame
	if r.P < alpha && r.B.Center != r.A.Center {
		r.Significant = true
		r.Better = (r.B.Center > r.A.Center) == (r.Direction == metrics.HigherIsBetter)
		switch {
		case r.Better && isSpeed(metric):
			r.Verdict = VerdictFaster
		case r.Better:
			r.Verdict = VerdictBetter
		case isSpeed(metric):
			r.Verdict = VerdictSlower
		default:
			r.Verdict = VerdictWorse
		}
	}
	return r
}

func missingSide(r *Row, a, b string) string {
	switch {
	case r.A.N == 0 && r.B.N == 0:
		return "neither side"
	case r.A.N == 0:
		return a
	}
	return b
}

func delta(a, b float64) float64 {
	if a == b {
		return 0
	}
	if a == 0 {
		return math.NaN()
	}
	return (b/a - 1) * 100
}

// sidesComparable checks the runs of both sides; reason is set when they
// must not be compared at all.
func sidesComparable(a, b *Side) (reason string, notes []table.Note) {
	for _, s := range []*Side{a, b} {
		if len(s.Runs) < 2 {
			continue
		}
		for _, r := range s.Runs[1:] {
			if r.Emulated != s.Runs[0].Emulated {
				return fmt.Sprintf("%s pools emulated and real runs (%d and %d); emulated timings are never compared with real ones",
					s.Label, s.Runs[0].ID, r.ID), nil
			}
			if r.timing() != s.Runs[0].timing() {
				return fmt.Sprintf("%s pools %s and %s timings (runs %d and %d); profile timings synchronise per op and are not comparable with throughput timings",
					s.Label, s.Runs[0].timing(), r.timing(), s.Runs[0].ID, r.ID), nil
			}
		}
	}
	if len(a.Runs) == 0 || len(b.Runs) == 0 {
		return "", nil
	}
	ra, rb := a.Runs[0], b.Runs[0]
	if ra.Emulated != rb.Emulated {
		kind := func(r Run) string {
			if r.Emulated {
				return "emulated"
			}
			return "real"
		}
		return fmt.Sprintf("%s is %s and %s is %s; emulated timings are never compared with real ones",
			a.Label, kind(ra), b.Label, kind(rb)), nil
	}
	if ra.timing() != rb.timing() {
		return fmt.Sprintf("%s has %s timings and %s has %s timings; profile timings synchronise per op and are not comparable with throughput timings",
			a.Label, ra.timing(), b.Label, rb.timing()), nil
	}
	distinct := func(f func(Run) string) []string {
		var out []string
		for _, s := range []*Side{a, b} {
			for _, r := range s.Runs {
				if v := f(r); !slices.Contains(out, v) {
					out = append(out, v)
				}
			}
		}
		return out
	}
	if bs := distinct(func(r Run) string { return r.Backend }); len(bs) > 1 {
		notes = append(notes, table.Notef("the runs use different backends (%s): differences include the backend", strings.Join(bs, ", ")))
	}
	if ms := distinct(func(r Run) string { return r.Machine }); len(ms) > 1 {
		notes = append(notes, table.Notef("the runs come from different machines (%s): differences include the hardware", strings.Join(ms, ", ")))
	}
	if n := backendNotesNote(a, b); n != "" {
		notes = append(notes, table.NoteText(n))
	}
	if n := threadsNote(a, b); n != "" {
		notes = append(notes, table.NoteText(n))
	}
	return "", notes
}

// backendNotesNote says when the runs' backends ran with different notes:
// a switch such as graphs or fast math off shows only there, and the
// change may come from it rather than the build. Runs stored before the
// notes were recorded have none and say nothing.
func backendNotesNote(a, b *Side) string {
	if d := runsDiffer(a, b, func(r Run) string { return r.BackendNotes }); d != "" {
		return fmt.Sprintf("the runs' backends ran with different notes (%s): the change may come from a backend switch, not the build", d)
	}
	return ""
}

// threadsNote says when the runs were made with different --threads: a
// case without a threads parameter keeps its key whatever the run's count,
// so a run on one core pairs with one on every core (docs/data.md, runs).
// Runs stored before the count was recorded say nothing.
func threadsNote(a, b *Side) string {
	if d := runsDiffer(a, b, func(r Run) string { return r.Threads }); d != "" {
		return fmt.Sprintf("the runs were made with different --threads (%s): the change may come from the thread count, not the build", d)
	}
	return ""
}

// runsDiffer lists the runs of both sides by a value of theirs, "run 1: x;
// runs 2,3: y", where they hold more than one; runs whose value is "" (not
// recorded when they were stored) are left out.
func runsDiffer(a, b *Side, value func(Run) string) string {
	var order []string
	runs := map[string][]string{}
	for _, s := range []*Side{a, b} {
		for _, r := range s.Runs {
			v := value(r)
			if v == "" {
				continue
			}
			if _, ok := runs[v]; !ok {
				order = append(order, v)
			}
			runs[v] = append(runs[v], strconv.FormatInt(r.ID, 10))
		}
	}
	if len(order) < 2 {
		return ""
	}
	parts := make([]string, len(order))
	for i, n := range order {
		word := "runs"
		if len(runs[n]) == 1 {
			word = "run"
		}
		parts[i] = fmt.Sprintf("%s %s: %s", word, strings.Join(runs[n], ","), n)
	}
	return strings.Join(parts, "; ")
}

// FoundParams are recorded parameters that say what a run found rather
// than how it was set up: a tune candidate's calls per timing sample
// (calibrated to the sample time), its status, role and error against the
// reference. Runs of one setup differ in them, and a change cannot come from
// them, so paramDiff leaves them out, as compare leaves out a run's probes
// (read bandwidth, matmul peak).
var FoundParams = []string{"tune.iters", "tune.status", "tune.role", "tune.max_abs_err"}

// paramDiff lists the parameters two matched cases recorded differently
// (differingParams), with both values: the note compare's tables print. It
// leaves out what differs only in how the same work was chosen (sameWork),
// which the note's "the change may come from them" would misstate; the
// data keeps each side's value.
func paramDiff(kind string, a, b map[string]string, setA, setB map[string]bool) string {
	value := func(m map[string]string, k string) string {
		if v, ok := m[k]; ok {
			return v
		}
		return "(default)"
	}
	var diffs []string
	for _, k := range differingParams(a, b, setA, setB) {
		if sameWork(k, a, b) || sameKey(kind, k, a, b) {
			continue
		}
		diffs = append(diffs, fmt.Sprintf("%s %s vs %s", k, value(a, k), value(b, k)))
	}
	return strings.Join(diffs, ", ")
}

// chosenBy maps a parameter a case may leave to its default to the
// "tuned.*" parameters that record what the step ran with in its place
// (runner/bench tuned.go): MoE dispatch, tuned or not.
var chosenBy = map[string][]string{
	"moe_strategy": {"tuned.moe", "tuned.moe.prefill"},
	"moe_chunk":    {"tuned.moe", "tuned.moe.prefill"},
}

// tunedOrigin is the "(where from)" a tuned.* value gives each config:
// "grouped (default)", "chunked/16 (user cache)", "m=8,n=64,k=64: ... (shipped); others ...".
var tunedOrigin = regexp.MustCompile(` \([^()]*\)(;|$)`)

// sameWork reports whether matched cases that differ in parameter k ran
// the same work: a tuned.* value whose configs agree and whose origins
// alone differ ("grouped (default)" and "grouped (explicit)"), or a
// parameter one side left to its default where the tuned.* parameters
// recording what ran in its place agree (moe_strategy unset, tuned.moe
// "grouped (default)", against --set moe_strategy=grouped).
func sameWork(k string, a, b map[string]string) bool {
	work := func(v string) string { return tunedOrigin.ReplaceAllString(v, "$1") }
	if strings.HasPrefix(k, "tuned.") {
		va, okA := a[k]
		vb, okB := b[k]
		return okA && okB && work(va) == work(vb)
	}
	ks := chosenBy[k]
	_, okA := a[k]
	_, okB := b[k]
	if len(ks) == 0 || okA == okB {
		return false
	}
	agree := 0
	for _, t := range ks {
		va, okA := a[t]
		vb, okB := b[t]
		switch {
		case okA != okB || okA && work(va) != work(vb):
			return false
		case okA:
			agree++
		}
	}
	return agree > 0
}

// sameKey reports whether matched cases of kind that differ in suite
// parameter k differ in no more than its key does (suites.Key): one side's
// value at its default where the other left it out (a --set fusion=on, a
// --set requests of the batch), or two spellings of one value
// (range_ratio 0.0 and 0). Each side's value is keyed among a's other
// parameters, which decide a default that hangs on them (requests on the
// batch, a kernel's on its op).
func sameKey(kind, k string, a, b map[string]string) bool {
	if suites.ParamKinds(k) == nil {
		return false // not a suite's parameter: what the runner recorded
	}
	key := func(m map[string]string) string {
		vals := make(map[string]string, len(a))
		for n, v := range a {
			if n != k && suites.ParamKinds(n) != nil {
				vals[n] = suites.KeyText(n, v)
			}
		}
		if v, ok := m[k]; ok {
			vals[k] = suites.KeyText(k, v)
		}
		return suites.Key(kind, "", vals)
	}
	return key(a) == key(b)
}

// differingParams are the parameters, sorted, in which two matched cases
// differ: both recorded it with different values (the key covers the
// suite's parameters, not what the runner adds, such as the model's
// dtype), or one side's runs set it with `run --set` (setA, setB: the
// parameters they overrode), which keeps the key, and the other side's
// case does not record it, so it ran the default. FoundParams aside. The
// tables note them and the data writes each side's value
// (Comparison.Data).
func differingParams(a, b map[string]string, setA, setB map[string]bool) []string {
	if a == nil || b == nil {
		return nil
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if slices.Contains(FoundParams, k) {
			continue
		}
		if bv, ok := b[k]; ok && bv != a[k] || !ok && setA[k] {
			out = append(out, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok && setB[k] && !slices.Contains(FoundParams, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// casesComparable says why two cases with the same key must not be
// compared, or "" when they may be. sameModel also refuses sides that
// measured different models, weight formats or seeds.
func casesComparable(la, lb string, a, b *Case, sameModel bool) string {
	show := func(l string) string {
		if l == "" {
			return "all layers"
		}
		return "layers " + l
	}
	for _, s := range []struct {
		label string
		c     *Case
	}{{la, a}, {lb, b}} {
		if len(s.c.Layers) > 1 {
			return fmt.Sprintf("%s pools runs with different layer counts (%s)", s.label, strings.Join(s.c.Layers, ", "))
		}
	}
	if len(a.Layers) == 1 && len(b.Layers) == 1 && a.Layers[0] != b.Layers[0] {
		why := "truncated and whole-model figures are not comparable"
		if a.Layers[0] != "" && b.Layers[0] != "" {
			why = "figures of models truncated to different layers are not comparable"
		}
		return fmt.Sprintf("%s in %s, %s in %s: %s", show(a.Layers[0]), la, show(b.Layers[0]), lb, why)
	}
	for _, k := range IdentityParams {
		for _, s := range []struct {
			label string
			c     *Case
		}{{la, a}, {lb, b}} {
			if v := s.c.Identity[k]; len(v) > 1 {
				return fmt.Sprintf("%s pools runs of different %s (%s): name runs of one", s.label, k, strings.Join(v, ", "))
			}
		}
		va, vb := a.Identity[k], b.Identity[k]
		if sameModel && len(va) == 1 && len(vb) == 1 && !strings.EqualFold(va[0], vb[0]) {
			return fmt.Sprintf("%s %s in %s, %s in %s: a gate compares builds of one model, weight format and seed", k, va[0], la, vb[0], lb)
		}
	}
	return ""
}

// Tables renders the comparison benchstat style: one table per metric
// (case, A median ± CI, B median ± CI, delta, p, n, verdict), then a table
// of the cases found on one side only. It is nil when the sides are not
// comparable at all (see NotComparable).
func (c *Comparison) Tables() []*table.Table {
	if c.NotComparable != "" {
		return nil
	}
	var out []*table.Table
	oneSided := map[string][]string{}
	for _, m := range c.Metrics {
		rows := c.metricRows(m)
		if side := recordedBy(rows); side != "" {
			oneSided[side] = append(oneSided[side], m)
			continue
		}
		scale, unit := displayUnit(rows[0].Unit)
		title := m
		if unit != "" {
			title += " (" + unit + ", " + rows[0].Direction.String() + ")"
		} else {
			title += " (" + rows[0].Direction.String() + ")"
		}
		t := &table.Table{Title: title,
			Header: []string{"case", "A median ± CI", "B median ± CI", "delta", "p", "n A+B", "verdict"}}
		var reasons []table.Note
		for _, r := range rows {
			t.Rows = append(t.Rows, []string{r.Case, fmtStat(r.A, scale), fmtStat(r.B, scale),
				fmtDelta(r.Delta), fmtP(r.P), fmt.Sprintf("%d+%d", r.A.N, r.B.N), r.Verdict})
			if r.Reason != "" {
				reasons = append(reasons, table.Notef("%s: %s", r.Case, r.Reason))
			}
		}
		if len(out) == 0 {
			// The legend once, under the first table.
			t.Notes = append(t.Notes, c.legend()...)
		}
		t.Notes = append(t.Notes, reasons...)
		out = append(out, t)
	}
	if len(oneSided) > 0 {
		t := &table.Table{Title: "metrics one side records", Header: []string{"metric", "only in"}}
		for _, side := range []string{"A", "B"} {
			for _, m := range oneSided[side] {
				t.Rows = append(t.Rows, []string{m, side})
			}
		}
		if len(out) == 0 {
			t.Notes = append(t.Notes, c.legend()...)
		}
		out = append(out, t)
	}
	if len(c.OnlyA)+len(c.OnlyB) > 0 {
		names, keyed := c.onlyNames()
		header := []string{"case", "only in"}
		if keyed {
			header = append(header, "key")
		}
		t := &table.Table{Title: "cases on one side only", Header: header}
		for i, x := range append(slices.Clone(c.OnlyA), c.OnlyB...) {
			row := []string{names[i], "B"}
			if i < len(c.OnlyA) {
				row[1] = "A"
			}
			if keyed {
				row = append(row, x.Key)
			}
			t.Rows = append(t.Rows, row)
		}
		if len(out) == 0 {
			t.Notes = append(t.Notes, c.legend()...)
		}
		out = append(out, t)
	}
	return out
}

func (c *Comparison) legend() []table.Note {
	return append([]table.Note{table.Notef("A: %s; B: %s", c.A.Describe(), c.B.Describe()),
		table.Notef("p: Mann-Whitney U test; ~: no significant difference at alpha %g", c.Alpha)}, c.Notes...)
}

func (c *Comparison) metricRows(m string) []*Row {
	var rows []*Row
	for _, r := range c.Rows {
		if r.Metric == m {
			rows = append(rows, r)
		}
	}
	return rows
}

// recordedBy is "A" or "B" when only that side records the metric in
// every case the two share and no run failed to give it (another engine's
// figures rarely hold all of mtlbench's metrics): a table of "no data" rows
// would hide the ones that compare. It is "" for a metric to show.
func recordedBy(rows []*Row) string {
	side := ""
	for _, r := range rows {
		s := ""
		switch {
		case r.Verdict == VerdictNotComparable:
			return ""
		case r.A.N == 0 && r.B.N > 0 && len(r.ErrorsA) == 0:
			s = "B"
		case r.B.N == 0 && r.A.N > 0 && len(r.ErrorsB) == 0:
			s = "A"
		default:
			return ""
		}
		if side != "" && s != side {
			return ""
		}
		side = s
	}
	return side
}

// onlyNames are the display names of OnlyA then OnlyB; keyed says two of
// them share a name (names leave out settings such as layers and threads),
// so their keys must be shown to tell them apart.
func (c *Comparison) onlyNames() (names []string, keyed bool) {
	seen := map[string]bool{}
	for _, x := range append(slices.Clone(c.OnlyA), c.OnlyB...) {
		n := x.DisplayName()
		keyed = keyed || seen[n]
		seen[n] = true
		names = append(names, n)
	}
	return names, keyed
}

// displayUnit scales bytes to MiB, which is how people read memory.
func displayUnit(unit string) (float64, string) {
	if unit == "B" {
		return 1.0 / (1 << 20), "MiB"
	}
	return 1, unit
}

// fmtNum prints about four significant digits without an exponent for the
// magnitudes benchmarks produce.
func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 10:
		return fmt.Sprintf("%.2f", v)
	case a >= 1:
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.4g", v)
}

func fmtStat(s Stat, scale float64) string {
	if s.N == 0 {
		return "-"
	}
	v := fmtNum(s.Center * scale)
	if ci := stats.CI(s.Summary, s.N, " "); ci != "" {
		v += " " + ci
	}
	return v
}

func fmtDelta(d float64) string {
	if math.IsNaN(d) {
		return "-"
	}
	return fmt.Sprintf("%+.2f%%", d)
}

func fmtP(p float64) string {
	if math.IsNaN(p) {
		return "-"
	}
	// Three significant digits: 0.0499 must not print as 0.050 next to
	// a verdict taken at alpha 0.05.
	return strconv.FormatFloat(p, 'g', 3, 64)
}
