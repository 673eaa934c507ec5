package compare

import (
	"math"

	"github.com/mtlbench/mtlbench/internal/metrics"
	"github.com/mtlbench/mtlbench/reports/table"
)

// Data is the comparison as tidy rows: one per matched case × metric with
// both sides' n, median and 95% CI, the change in percent, the U-test p
// and the verdict; a case present on one side only gets one row saying
// which. Parameters (from A's case, else B's) are columns of their own.
func (c *Comparison) Data() *table.Data {
	d := &table.Data{Columns: []string{"case", "key", "case_kind", "metric", "unit", "better",
		"a_n", "a_median", "a_ci_lo", "a_ci_hi", "b_n", "b_median", "b_ci_lo", "b_ci_hi",
		"delta_pct", "p", "significant", "verdict", "reason", "only_in"}}
	num := func(v float64, ok bool) any {
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return v
	}
	params := func(key string) map[string]string {
		if x := c.A.Case(key); x != nil {
			return x.Params
		}
		if x := c.B.Case(key); x != nil {
			return x.Params
		}
		return nil
	}
	add := func(row map[string]any, key string) {
		for k, v := range params(key) {
			col := k
			if isDataColumn(d.Columns, k) {
				col = "param_" + k
			}
			if _, set := row[col]; !set {
				row[col] = table.Typed(v)
			}
		}
		d.Add(row)
	}
	if c.NotComparable == "" {
		for _, r := range c.Rows {
			better := ""
			switch r.Direction {
			case metrics.HigherIsBetter:
				better = "higher"
			case metrics.LowerIsBetter:
				better = "lower"
			}
			row := map[string]any{"case": r.Case, "key": r.Key, "case_kind": r.Kind, "metric": r.Metric, "unit": r.Unit,
				"better": better, "a_n": int64(r.A.N), "b_n": int64(r.B.N),
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

func isDataColumn(cols []string, name string) bool {
	for _, c := range cols[:20] { // the fixed columns above
		if c == name {
			return true
		}
	}
	return false
}
