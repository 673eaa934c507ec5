package engine

import (
	"strings"
	"testing"
)

// A model too large for its device says how to run what fits in each
// command's own words: bench and generate's --layers, run's --set, bench's
// --fit and a suite's key; without a layer that fits, none of them.
func TestFitErrorSaysHow(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    FitError
		want []string
		not  []string
	}{
		{"some layers fit", FitError{Model: "qwen3-30b-a3b", Weights: 61 << 30, KV: 3 << 20, Has: 23 << 30, Where: "cpu", MaxLayers: 16},
			[]string{"model qwen3-30b-a3b needs 61.0 GiB", "but cpu has 23.0 GiB available", "its first 16 layers would fit",
				"--layers 16 (bench, generate)", "--set layers=16 (run)", "--fit truncate-layers (bench)", "fit: truncate-layers (a suite)"},
			[]string{"set layers,"}},
		{"no layer fits", FitError{Model: "m", Weights: 8 << 30, Has: 1 << 30, Where: "cpu"},
			[]string{"model m needs 8.0 GiB"}, []string{"--layers", "truncate-layers"}},
	} {
		got := tc.e.Error()
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: %q holds %q", tc.name, got, n)
			}
		}
	}
}
