package metal

import "testing"

// A norm moves float4s only where every row of every operand starts on 16
// bytes: the width a multiple of 4 and each tensor at an offset that is
// (kernels/metal/norm.h, norm_vec); else the float path runs.
func TestNormVecNeedsAlignedRows(t *testing.T) {
	at := func(off int) *tensor { return &tensor{off: off} }
	for _, c := range []struct {
		name string
		dim  int
		ts   []*tensor
		want bool
	}{
		{"aligned", 4096, []*tensor{at(0), at(256), at(16)}, true},
		{"no residual or bias", 8, []*tensor{at(0), nil, at(0), nil}, true},
		{"odd width", 4095, []*tensor{at(0), at(0)}, false},
		{"width of 6", 6, []*tensor{at(0), at(0)}, false},
		{"x at 4 bytes", 4096, []*tensor{at(0), at(4), at(0)}, false},
		{"output at 8 bytes", 64, []*tensor{at(8), at(0), at(0)}, false},
		{"residual at 20 bytes", 64, []*tensor{at(0), at(20), at(0), at(0)}, false},
	} {
		if got := normVec(c.dim, c.ts...); got != c.want {
			t.Errorf("%s: normVec(%d) = %v, want %v", c.name, c.dim, got, c.want)
		}
	}
}
