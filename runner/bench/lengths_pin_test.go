package bench

import (
	"slices"
	"testing"
)

// TestLengthsPinned pins a few drawn lengths: recorded runs were made with
// these requests, and the suites' checks draw the same ones.
func TestLengthsPinned(t *testing.T) {
	for _, tc := range []struct {
		w           Workload
		prompt, gen []int
	}{
		{Workload{Requests: 4, PromptLen: 100, GenLen: 10}, []int{100, 100, 100, 100}, []int{10, 10, 10, 10}},
		{Workload{Requests: 6, PromptLen: 100, GenLen: 10, RangeRatio: 0.5, Seed: 1}, []int{82, 103, 90, 128, 143, 145}, []int{8, 6, 10, 10, 14, 5}},
		{Workload{Requests: 5, PromptLen: 3000, GenLen: 1, RangeRatio: 0.9, Seed: 42}, []int{577, 5505, 2563, 4937, 4980}, []int{2, 2, 1, 2, 1}},
		{Workload{Requests: 5, PromptLen: 7, GenLen: 2, RangeRatio: 0.6, Seed: 1}, []int{5, 7, 6, 10, 12}, []int{4, 1, 2, 1, 2}},
	} {
		p, g := tc.w.Lengths()
		if !slices.Equal(p, tc.prompt) || !slices.Equal(g, tc.gen) {
			t.Errorf("%+v: Lengths = %v, %v; want %v, %v", tc.w, p, g, tc.prompt, tc.gen)
		}
	}
}
