package kernels

import (
	"math"
	"testing"
)

// Argmax is the first index of the largest value, NaN and -inf never
// winning, and -1 where nothing else is (bridge.NoToken): every backend's
// ArgmaxOp follows it, so a greedy step says its logits held no number
// without their being read.
func TestArgmax(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, tc := range []struct {
		name string
		x    []float32
		want int
	}{
		{"plain", []float32{1, 3, 2}, 1},
		{"ties: the first", []float32{1, 3, 3}, 1},
		{"negative", []float32{-5, -2, -9}, 1},
		{"NaN first never wins", []float32{nan, 1, 2}, 2},
		{"NaN between", []float32{2, nan, 1}, 0},
		{"+inf wins", []float32{1, inf, 2}, 1},
		{"-inf never wins", []float32{-inf, -3}, 1},
		{"-max is a number", []float32{-inf, -math.MaxFloat32}, 1},
		{"every value NaN", []float32{nan, nan, nan}, -1},
		{"every value -inf", []float32{-inf, -inf}, -1},
		{"NaN and -inf", []float32{-inf, nan}, -1},
		{"empty", nil, -1},
	} {
		if got := Argmax(tc.x); got != tc.want {
			t.Errorf("%s: Argmax(%v) = %d, want %d", tc.name, tc.x, got, tc.want)
		}
	}
}
