package suites

import (
	"math"
	"testing"
)

// Ranges up to the largest int end there instead of wrapping past it into
// negative values.
func TestParseIntListDoesNotWrap(t *testing.T) {
	got, err := ParseIntList("1-9223372036854775807*2", 1)
	if err != nil || len(got) != 63 || got[62] != 1<<62 {
		t.Errorf("doubling to the largest int: %d values (last %v), %v; want 1 to 2^62", len(got), got[len(got)-1:], err)
	}
	got, err = ParseIntList("9223372036854775800-9223372036854775807+3", 1)
	if err != nil || len(got) != 3 || got[2] != math.MaxInt-1 {
		t.Errorf("stepping to the largest int: %v, %v; want 3 values ending at 2^63-2", got, err)
	}
}
