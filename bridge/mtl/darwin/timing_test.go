package darwin

import "testing"

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
