package kernels

import (
	"math"
	"testing"
)

func TestMaxAbsDiff(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		a, b []float32
		want float64
	}{
		{"equal", []float32{1, 2}, []float32{1, 2}, 0},
		{"largest", []float32{1, 2, 3}, []float32{1.5, 2, 1}, 2},
		{"both empty", nil, nil, 0},
		{"one empty", nil, []float32{1}, math.Inf(1)},
		{"shorter", []float32{1}, []float32{1, 2}, math.Inf(1)},
		{"NaN first", []float32{nan, 1}, []float32{0, 1}, math.Inf(1)},
		{"NaN later", []float32{0, 5}, []float32{0, nan}, math.Inf(1)},
		{"infinities", []float32{float32(math.Inf(1))}, []float32{float32(math.Inf(1))}, math.Inf(1)},
	} {
		if got := MaxAbsDiff(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
