package tidy

import (
	"math"
	"slices"
	"testing"

	"github.com/mtlbench/mtlbench/results"
)

// TestRawNulls: the samples json writes as null are named, and only they.
func TestRawNulls(t *testing.T) {
	s := func(rep int, v float64) results.Sample {
		return results.Sample{Rep: rep, Metric: "decode_tok_s", Value: v, Unit: "tok/s"}
	}
	for _, tc := range []struct {
		name    string
		samples []results.Sample
		want    []string
	}{
		{"all finite", []results.Sample{s(0, 1), s(1, 2)}, nil},
		{"NaN and -Inf", []results.Sample{s(0, math.NaN()), s(1, 2), s(2, math.Inf(-1))}, []string{
			"run 7: case decode: decode_tok_s repetition 0 is NaN, written as null",
			"run 7: case decode: decode_tok_s repetition 2 is -Inf, written as null",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Run{Run: &results.Run{ID: 7}, Cases: []results.Case{{ID: 1, Name: "decode"}},
				Samples: map[int64][]results.Sample{1: tc.samples}}
			if got := RawNulls([]*Run{r}); !slices.Equal(got, tc.want) {
				t.Errorf("RawNulls = %q, want %q", got, tc.want)
			}
		})
	}
}

// Each parameter has a column of its own: a name spelt like the column
// another is renamed to is renamed too, so no two share one.
func TestParamColumnOnePerName(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"batch", "batch"},
		{"n", "param_n"},
		{"median", "param_median"},
		{"param_n", "param_param_n"},
		{"param_batch", "param_param_batch"},
		{"parameter", "parameter"},
	} {
		if got := ParamColumn(tc.name); got != tc.want {
			t.Errorf("ParamColumn(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
