package kernels

import "math"

// MaxAbsDiff is the largest |a[i]-b[i]|, the measure every backend is held
// to the reference by. Vectors of different lengths (a run that returned
// no logits) and a NaN on either side give +Inf, so a check `d > tol`
// cannot pass on them.
func MaxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var m float64
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if d != d {
			return math.Inf(1)
		}
		m = max(m, d)
	}
	return m
}
