package stats

import (
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/results"
)

// A run's kernel GB/s is held against the bandwidth measured before it,
// else the one documented for its GPU; an emulated run's against none.
func TestKernelBandwidth(t *testing.T) {
	m3max := results.Machine{GPUName: "Apple M3 Max"}
	for _, tc := range []struct {
		name   string
		run    *results.Run
		gbs    float64
		source string
	}{
		{"measured", &results.Run{Backend: "metal", ReadBandwidthGBs: 350, Machine: m3max}, 350, "measured before the run"},
		{"documented", &results.Run{Backend: "metal", Machine: m3max}, 400, "documented for the Apple M3 Max"},
		{"cpu backend, nothing measured", &results.Run{Backend: "cpu", Machine: m3max}, 0, ""},
		{"emulated", &results.Run{Backend: "metal-emu", Emulated: true, ReadBandwidthGBs: 20}, 0, ""},
		{"unknown GPU", &results.Run{Backend: "metal", Machine: results.Machine{GPUName: "unknown"}}, 0, ""},
		{"no run", nil, 0, ""},
	} {
		b := KernelBandwidth(tc.run)
		if b.GBs != tc.gbs || !strings.Contains(b.Source, tc.source) {
			t.Errorf("%s: %+v, want %g GB/s %q", tc.name, b, tc.gbs, tc.source)
		}
	}
	b := Bandwidth{100, "read bandwidth measured before the run"}
	for _, tc := range []struct {
		s    *Summary
		over bool
	}{
		{nil, false}, {&Summary{N: 3}, false}, {&Summary{N: 0}, false},
	} {
		if b.Over(tc.s) != tc.over {
			t.Errorf("Over(%+v) = %v", tc.s, !tc.over)
		}
	}
	over, under := &Summary{N: 3}, &Summary{N: 3}
	over.Center, under.Center = 120, 100
	if !b.Over(over) || b.Over(under) || (Bandwidth{}).Over(over) {
		t.Errorf("120 over 100: %v; 100 over 100: %v; 120 over none: %v", b.Over(over), b.Over(under), (Bandwidth{}).Over(over))
	}
	if n := b.Note([]string{"a", "b"}); !strings.HasPrefix(n, "†: GB/s above the 100.0 GB/s read bandwidth measured before the run (a, b): ") {
		t.Errorf("note %q", n)
	}
	if n := b.Note(nil); n != "" {
		t.Errorf("note of no case %q", n)
	}
}
