package darwin

import (
	"math"
	"strings"
	"testing"
)

// GPU timestamps are in the GPU's own ticks: the two clock readings around
// the command buffer give their rate, whatever it is, and readings that
// give none are refused rather than taken as a nanosecond a tick.
func TestGPUClock(t *testing.T) {
	type at struct {
		gpu  uint64
		want float64 // seconds of host time
	}
	for _, tc := range []struct {
		name string
		cal  [2]timestampPair
		at   []at
		err  string
	}{
		{name: "1 ns ticks", cal: [2]timestampPair{{cpu: 5_000_000_000, gpu: 7_000_000_000}, {cpu: 5_002_000_000, gpu: 7_002_000_000}},
			at: []at{{7_001_000_000, 5.001}, {7_000_000_000, 5}, {6_999_999_900, 5 - 100e-9}, {7_002_000_000, 5.002}}},
		// A 24 MHz clock (Mach absolute time's rate on Apple silicon): a
		// tick is 41.7 ns, so 2400 ticks are 100 µs, not 2.4 µs.
		{name: "24 MHz ticks", cal: [2]timestampPair{{cpu: 1_000_000_000_000, gpu: 24_000_000_000}, {cpu: 1_001_000_000_000, gpu: 24_024_000_000}},
			at: []at{{24_012_000_000, 1000.5}, {24_000_002_400, 1000.0001}, {24_000_000_024, 1000.000001}}},
		{name: "half the CPU's rate, offset", cal: [2]timestampPair{{cpu: 1_000_000_000, gpu: 500}, {cpu: 1_000_002_000, gpu: 1500}},
			at: []at{{1000, 1.000001}, {400, 1 - 200e-9}}},
		{name: "GPU clock did not advance", cal: [2]timestampPair{{cpu: 2_000_000_000, gpu: 10}, {cpu: 2_000_050_000, gpu: 10}},
			err: "give no GPU tick rate (GPU 10 to 10, CPU 2000000000 to 2000050000 ns)"},
		{name: "GPU clock reads 0", cal: [2]timestampPair{{cpu: 2_000_000_000}, {cpu: 2_000_050_000}}, err: "give no GPU tick rate"},
		{name: "GPU clock went back", cal: [2]timestampPair{{cpu: 2_000_000_000, gpu: 900}, {cpu: 2_000_050_000, gpu: 100}}, err: "give no GPU tick rate"},
		{name: "CPU clock did not advance", cal: [2]timestampPair{{cpu: 2_000_000_000, gpu: 100}, {cpu: 2_000_000_000, gpu: 900}}, err: "give no GPU tick rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := calibrate(tc.cal)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("calibrate: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range tc.at {
				if got := c.seconds(a.gpu); math.Abs(got-a.want) > 1e-9 {
					t.Errorf("seconds(%d) = %.12f, want %.12f", a.gpu, got, a.want)
				}
			}
		})
	}
}

// A reused counter sample buffer keeps the last command buffer's samples:
// a pass the GPU did not sample this time must not pass with them.
func TestPassSampled(t *testing.T) {
	cal := [2]timestampPair{{cpu: 5000, gpu: 1000}, {cpu: 9000, gpu: 2000}}
	for _, tc := range []struct {
		name string
		s, e uint64
		want bool
	}{
		{"inside the command buffer", 1200, 1500, true},
		{"not taken", 0, 1500, false},
		{"error value", 1200, counterErrorValue, false},
		{"end before start", 1500, 1200, false},
		{"stale: from an earlier command buffer", 400, 600, false},
		{"after completion", 1900, 2500, false},
	} {
		if got := passSampled(cal, tc.s, tc.e); got != tc.want {
			t.Errorf("%s: passSampled(%d, %d) = %v, want %v", tc.name, tc.s, tc.e, got, tc.want)
		}
	}
}
