package quantile

import (
	"math"
	"testing"
	"time"
)

func TestOf(t *testing.T) {
	ramp := make([]float64, 20)
	for i := range ramp {
		ramp[i] = float64(i + 1) // 1..20
	}
	for _, tc := range []struct {
		name string
		v    []float64
		q    float64
		want float64
	}{
		{"odd median", []float64{3, 1, 2}, 0.5, 2},
		{"even median interpolates", []float64{4, 1, 3, 2}, 0.5, 2.5},
		{"one value", []float64{7}, 0.99, 7},
		{"min", []float64{5, 9, 1}, 0, 1},
		{"max", []float64{5, 9, 1}, 1, 9},
		// Nearest rank, s[int(q*n)], would give 19; R8 interpolates.
		{"p90 of 20", ramp, 0.9, 18.633333333333333},
		{"p99 of 20 is past the last order statistic", ramp, 0.99, 20},
	} {
		got := Of(tc.v, tc.q)
		if math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: Of(%v, %g) = %v, want %v", tc.name, tc.v, tc.q, got, tc.want)
		}
	}
	if !math.IsNaN(Of(nil, 0.5)) {
		t.Error("Of(nil) is not NaN")
	}
	in := []float64{3, 1, 2}
	Median(in)
	if in[0] != 3 {
		t.Error("Of sorted its argument in place")
	}
	if got := Duration([]time.Duration{1, 2, 3, 10}, 0.5); got != 3 {
		t.Errorf("Duration median = %v, want 3ns (2.5 rounded)", got)
	}
}
