package compare

import (
	"math"
	"slices"

	"github.com/mtlbench/mtlbench/internal/metrics"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/reports/tidy"
)

// Data is the comparison as tidy rows: one per matched case × metric with
// both sides' n, median and 95% CI, the change in percent, the U-test p
// and the verdict; a case present on one side only gets one row saying
// which. Parameters (from A's case, else B's) are columns of their own.
func (c *Comparison) Data() *table.Data {
	d := &table.Data{Columns: slices.Clone(tidy.CompareColumns)}
	params := func(key string) map[string]string {
		if x := c.A.Case(key); x != nil {
			return x.Params
		}
		if x := c.B.Case(key); x != nil {
			return x.Params
		}
		return nil
	}
	add := func(row map[string]any, key string) { addParams(d, row, params(key)) }
	if c.NotComparable == "" {
		for _, r := range c.Rows {
			row := map[string]any{"case": r.Case, "key": r.Key, "case_kind": r.Kind, "metric": r.Metric, "unit": r.Unit,
				"better": better(r.Direction), "a_n": int64(r.A.N), "b_n": int64(r.B.N),
				"a_median": num(r.A.Center, r.A.N > 0), "a_ci_lo": num(r.A.Lo, r.A.N > 0), "a_ci_hi": num(r.A.Hi, r.A.N > 0),
				"b_median": num(r.B.Center, r.B.N > 0), "b_ci_lo": num(r.B.Lo, r.B.N > 0), "b_ci_hi": num(r.B.Hi, r.B.N > 0),
				"delta_pct": num(r.Delta, true), "p": num(r.P, true), "significant": r.Significant, "verdict": r.Verdict,
				"reason": r.Reason, "only_in": ""}
			add(row, r.Key)
		}
	}
	for _, x := range c.OnlyA {
		add(map[string]any{"case": x.DisplayName(), "key": x.Key, "case_kind": x.Kind, "only_in": "A"}, x.Key)
	}
	for _, x := range c.OnlyB {
		add(map[string]any{"case": x.DisplayName(), "key": x.Key, "case_kind": x.Kind, "only_in": "B"}, x.Key)
	}
	return d
}

// Data is the gate's checks as tidy rows, one per gated case × metric:
// what one tested value stands for (per: a pair of runs, a run or a
// repetition), both sides' n, center and 95% CI of the tested values, the
// change and the noise in percent, p and its adjusted q, the threshold and
// the outcome with its reason. The case's parameters follow as columns.
// With no checks it has no rows (json: []).
func (r Result) Data() *table.Data {
	d := &table.Data{Columns: slices.Clone(tidy.GateColumns)}
	for _, c := range r.Checks {
		a, b := c.A, c.B
		if c.Per == "" { // untested: the pooled repetitions say what there is
			a, b = c.Row.A, c.Row.B
		}
		row := map[string]any{"case": c.Case, "key": c.Key, "case_kind": c.Kind, "metric": c.Metric, "unit": c.Unit,
			"better": better(c.Direction), "per": c.Per,
			"baseline_n": int64(a.N), "baseline_center": num(a.Center, a.N > 0), "baseline_ci_lo": num(a.Lo, a.N > 0), "baseline_ci_hi": num(a.Hi, a.N > 0),
			"candidate_n": int64(b.N), "candidate_center": num(b.Center, b.N > 0), "candidate_ci_lo": num(b.Lo, b.N > 0), "candidate_ci_hi": num(b.Hi, b.N > 0),
			"delta_pct": num(c.Delta, true), "noise_pct": num(100*c.Noise, c.Noise > 0), "p": num(c.P, true), "p_adj": num(c.Q, true),
			"threshold_pct": num(100*c.Threshold, true), "outcome": string(c.Outcome), "reason": c.Reason}
		var params map[string]string
		if r.Comparison != nil {
			for _, s := range []*Side{r.Comparison.A, r.Comparison.B} {
				if x := s.Case(c.Key); x != nil && params == nil {
					params = x.Params
				}
			}
		}
		addParams(d, row, params)
	}
	return d
}

// addParams adds row to d with the case's parameters as columns of their
// own, named as show names them (tidy.ParamColumn: a matmul's n is param_n).
func addParams(d *table.Data, row map[string]any, params map[string]string) {
	for k, v := range params {
		col := tidy.ParamColumn(k)
		if _, set := row[col]; !set {
			row[col] = table.Typed(v)
		}
	}
	d.Add(row)
}

func num(v float64, ok bool) any {
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

func better(d metrics.Direction) string {
	switch d {
	case metrics.HigherIsBetter:
		return "higher"
	case metrics.LowerIsBetter:
		return "lower"
	}
	return ""
}
