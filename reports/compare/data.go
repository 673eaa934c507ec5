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
// which. Parameters are columns of their own (addParams): one a matched
// pair recorded differently (a run --set fusion=off keeps the key) is an
// a_ and a b_ column, each side's value.
func (c *Comparison) Data() *table.Data {
	d := &table.Data{Columns: slices.Clone(tidy.CompareColumns)}
	sided := c.sidedParams()
	add := func(row map[string]any, key string) {
		addParams(d, row, caseParams(c.A, key), caseParams(c.B, key), sided, [2]string{"a_", "b_"})
	}
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
// the outcome with its reason. The case's parameters follow as columns,
// one the sides recorded differently as a baseline_ and a candidate_
// column (addParams). With no checks it has no rows (json: []).
func (r Result) Data() *table.Data {
	d := &table.Data{Columns: slices.Clone(tidy.GateColumns)}
	var sided map[string]bool
	if r.Comparison != nil {
		sided = r.Comparison.sidedParams()
	}
	for _, c := range r.Checks {
		a, b := c.A, c.B
		if c.Per == "" { // untested: the pooled repetitions say what there is
			a, b = c.Row.A, c.Row.B
		}
		row := map[string]any{"case": c.Case, "key": c.Key, "case_kind": c.Kind, "metric": c.Metric, "unit": c.Unit,
			"better": better(c.Direction), "per": c.Per,
			"baseline_n": int64(a.N), "baseline_center": num(a.Center, a.N > 0), "baseline_ci_lo": num(a.Lo, a.N > 0), "baseline_ci_hi": num(a.Hi, a.N > 0),
			"candidate_n": int64(b.N), "candidate_center": num(b.Center, b.N > 0), "candidate_ci_lo": num(b.Lo, b.N > 0), "candidate_ci_hi": num(b.Hi, b.N > 0),
			"delta_pct": num(c.Delta, true), "noise_pct": num(100*c.Noise, true), "p": num(c.P, true), "p_adj": num(c.Q, true),
			"threshold_pct": num(100*c.Threshold, true), "outcome": string(c.Outcome), "reason": c.Reason}
		var pa, pb map[string]string
		if r.Comparison != nil {
			pa, pb = caseParams(r.Comparison.A, c.Key), caseParams(r.Comparison.B, c.Key)
		}
		addParams(d, row, pa, pb, sided, [2]string{"baseline_", "candidate_"})
	}
	return d
}

// sidedParams are the parameters some matched pair of c's cases recorded
// differently (differingParams): the data gives them a column per side in
// every row, so a column holds one side's value throughout.
func (c *Comparison) sidedParams() map[string]bool {
	sided := map[string]bool{}
	setA, setB := c.A.overridden(), c.B.overridden()
	for _, k := range c.A.order {
		if cb := c.B.cases[k]; cb != nil {
			for _, p := range differingParams(c.A.cases[k].Params, cb.Params, setA, setB) {
				sided[p] = true
			}
		}
	}
	return sided
}

// caseParams are the parameters side's case key recorded; nil when the
// side has no such case.
func caseParams(side *Side, key string) map[string]string {
	if x := side.Case(key); x != nil {
		return x.Params
	}
	return nil
}

// addParams adds row to d with the case's parameters as columns of their
// own, named as show names them (tidy.ParamColumn: a matmul's n is
// param_n). A parameter in sided is a column per side, prefix[0] or
// prefix[1] before that name (a_fusion, b_fusion), each from its side's
// case (pa, pb: nil where the side lacks the case) and empty where that
// case does not record it; any other is one column, from A's case, else
// B's.
func addParams(d *table.Data, row map[string]any, pa, pb map[string]string, sided map[string]bool, prefix [2]string) {
	// A side's column of parameter k, named apart from the row's own
	// columns: a parameter "center" is baseline_param_center beside the
	// gate's baseline_center.
	own := make(map[string]bool, len(row))
	for c := range row {
		own[c] = true
	}
	sideCol := func(p, k string) string {
		if col := p + tidy.ParamColumn(k); !own[col] {
			return col
		}
		return p + "param_" + k
	}
	for i, params := range []map[string]string{pa, pb} {
		for k, v := range params {
			col := tidy.ParamColumn(k)
			if sided[k] {
				col = sideCol(prefix[i], k)
			}
			if _, set := row[col]; !set {
				row[col] = table.Typed(v)
			}
		}
	}
	for k := range sided {
		// Both columns, whichever side records it: a reader finds each
		// side's column, empty where that side has no value.
		for _, p := range prefix {
			if _, set := row[sideCol(p, k)]; !set {
				row[sideCol(p, k)] = nil
			}
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
