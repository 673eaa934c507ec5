package model

import (
	"math"
	"testing"
)

// NonFinite finds the first NaN or infinity, by the exponent's bits, and
// nothing else: not the largest float, not a subnormal, not -0.
func TestNonFinite(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	cases := []struct {
		name string
		x    []float32
		at   int
		bad  bool
	}{
		{"empty", nil, 0, false},
		{"finite", []float32{0, float32(math.Copysign(0, -1)), 1, -1, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32}, 0, false},
		{"NaN", []float32{1, 2, nan, inf}, 2, true},
		{"+Inf", []float32{inf}, 0, true},
		{"-Inf", []float32{3, -inf}, 1, true},
		{"NaN of another payload", []float32{math.Float32frombits(0xffc00001)}, 0, true},
	}
	// A row of Qwen3's vocabulary: the first bad value wins.
	long := func(bad ...int) []float32 {
		x := make([]float32, 151936)
		for i := range x {
			x[i] = float32(i%97) - 48
		}
		for _, i := range bad {
			x[i] = nan
		}
		return x
	}
	cases = append(cases, []struct {
		name string
		x    []float32
		at   int
		bad  bool
	}{
		{"long, finite", long(), 0, false},
		{"long, first and last chunks", long(151935, 3), 3, true},
		{"long, two chunks", long(150000, 100000, 100001), 100000, true},
		{"long, at a chunk's start", long(16384*5, 16384*7), 16384 * 5, true},
	}...)
	for _, c := range cases {
		at, _, bad := NonFinite(c.x)
		if bad != c.bad || (bad && at != c.at) {
			t.Errorf("%s: NonFinite = %d, %v; want %d, %v", c.name, at, bad, c.at, c.bad)
		}
	}
}
