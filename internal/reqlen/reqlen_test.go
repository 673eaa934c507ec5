package reqlen

import (
	"slices"
	"testing"
)

// Each draws what Draw draws, in order, and stops where f says.
func TestEachIsDraw(t *testing.T) {
	for _, tc := range []struct {
		requests, prompt, gen int
		r                     float64
		stop                  int // requests f takes before it returns false
	}{
		{5, 8, 4, 0, 5},
		{100, 64, 16, 0.5, 100},
		{100, 64, 16, 0.5, 7},
		{3, 1, 1, 0.9, 1},
	} {
		wantP, wantG := Draw(tc.requests, tc.prompt, tc.gen, tc.r, 1)
		var gotP, gotG []int
		Each(tc.requests, tc.prompt, tc.gen, tc.r, 1, func(p, g int) bool {
			gotP, gotG = append(gotP, p), append(gotG, g)
			return len(gotP) < tc.stop
		})
		if !slices.Equal(gotP, wantP[:tc.stop]) || !slices.Equal(gotG, wantG[:tc.stop]) {
			t.Errorf("%+v: Each %v %v, Draw %v %v", tc, gotP, gotG, wantP[:tc.stop], wantG[:tc.stop])
		}
	}
}
