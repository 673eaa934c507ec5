package stats

import (
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/results"
)

// A run's model columns: the serving ones only with a serving case (goodput
// only with an slo), the GPU and witness ones only where recorded.
func TestModelColumnsFor(t *testing.T) {
	rec := map[string]*Summary{"dispatches_per_step": {}, "witness_tok_s": {}}
	headers := func(cases []results.Case, byCase []map[string]*Summary) (string, bool) {
		cols, witness := ModelColumnsFor(cases, byCase)
		var h []string
		for _, c := range cols[len(ModelColumns):] {
			h = append(h, c.Header)
		}
		return strings.Join(h, "|"), witness
	}
	model := func(p map[string]string) results.Case { return results.Case{Kind: results.CaseModel, Params: p} }
	for _, tc := range []struct {
		name    string
		cases   []results.Case
		byCase  []map[string]*Summary
		want    string
		witness bool
	}{
		{"plain", []results.Case{model(nil)}, []map[string]*Summary{{}}, "", false},
		{"poisson", []results.Case{model(map[string]string{"arrival": "poisson:2"})}, []map[string]*Summary{{}}, "req/s|TTFT p99 ms|E2EL ms", false},
		{"slo", []results.Case{model(nil), model(map[string]string{"slo": "ttft:1"})}, []map[string]*Summary{{}, {}}, "req/s|goodput req/s|TTFT p99 ms|E2EL ms", false},
		{"kernel slo", []results.Case{{Kind: results.CaseKernel, Params: map[string]string{"slo": "ttft:1"}}}, []map[string]*Summary{{}}, "", false},
		{"gpu and witness", []results.Case{model(nil)}, []map[string]*Summary{rec}, "dispatches/step|ceiling tok/s", true},
	} {
		got, witness := headers(tc.cases, tc.byCase)
		if got != tc.want || witness != tc.witness {
			t.Errorf("%s: columns %q (witness %v), want %q (%v)", tc.name, got, witness, tc.want, tc.witness)
		}
	}
}
