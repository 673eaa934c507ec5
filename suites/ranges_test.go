package suites

import (
	"fmt"
	"math"
	"slices"
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

// A number of a list or range with a leading zero is refused, as in a
// suite's YAML, whichever part of an item it is.
func TestParseIntListRefuses(t *testing.T) {
	for in, want := range map[string]string{
		"010":      "010: a leading zero is not allowed (write 10)",
		"1,08":     "08: a leading zero is not allowed (write 8)",
		"01-4":     `range "01-4": 01: a leading zero is not allowed (write 1)`,
		"1-016":    `range "1-016": 016: a leading zero is not allowed (write 16)`,
		"1-16*02":  `range "1-16*02": step 02: a leading zero is not allowed (write 2)`,
		"0,10-100": "",
		// A value twice is refused, as in a matrix list.
		"1,2,2,4": "2 is given twice",
		"1-4,2-3": `range "2-3": 2 is given twice`,
		"1-4,2":   "2 is given twice",
		// A number past int is an integer out of range, not a bad range.
		"1-99999999999999999999":    `range "1-99999999999999999999": 99999999999999999999 is out of range`,
		"99999999999999999999":      "99999999999999999999 is out of range",
		"1-16*99999999999999999999": `range "1-16*99999999999999999999": step 99999999999999999999 is out of range`,
		"1-x":                       `range "1-x": want first-last, first-last+step or first-last*factor`,
		// A negative number is below the least value, not a malformed range.
		"-1":   "-1 is below 0",
		"4,-2": "-2 is below 0",
		"-1-4": `"-1-4" is not an integer or a range (first-last, first-last+step, first-last*factor)`,
		"-01":  "-01: a leading zero is not allowed (write -1)",
		// An empty item is said as every list of the command line says it
		// (internal/listarg), not "empty item in ...".
		"1,,2": `"1,,2": item 2 of 3 is empty (a comma too many, or a variable left unset?)`,
		"4,":   `"4,": item 2 of 2 is empty (a comma too many, or a variable left unset?)`,
	} {
		_, err := ParseIntList(in, 0)
		if got := fmt.Sprint(err); want == "" && err != nil || want != "" && got != want {
			t.Errorf("ParseIntList(%q): %v, want %q", in, err, want)
		}
	}
}

// A list flag of an integer parameter is checked against the parameter's
// bounds once for the whole list, as a matrix's range string is.
func TestParseParamList(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []int
		err      string
	}{
		{ParamBatch, "1-16*2", []int{1, 2, 4, 8, 16}, ""},
		{ParamBatch, "1-999999*2", nil, `range "1-999999*2": batch must be from 1 to 65536, got 131072`},
		{ParamBatch, "70000", nil, "batch must be from 1 to 65536, got 70000"},
		{ParamDepth, "0,512", []int{0, 512}, ""},
		{ParamDepth, "-1", nil, "-1 is below 0"},
		{"block_size", "8-32*2", []int{8, 16, 32}, ""},
		{"block_size", "8-24+8", nil, `range "8-24+8": block_size must be one of 8, 16, 32, got 24`},
		{"sampling", "1", nil, `"sampling" is not an integer parameter`},
	} {
		got, err := ParseParamList(tc.name, tc.in)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("ParseParamList(%s, %q) = %v, %v; want %v, %q", tc.name, tc.in, got, err, tc.want, tc.err)
		}
	}
}
