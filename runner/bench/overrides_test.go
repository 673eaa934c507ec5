package bench

import (
	"reflect"
	"testing"
)

// --set values are checked as a suite's; a name given twice is refused,
// naming it, rather than keeping the last; a control character is refused
// in a message of one line.
func TestParseOverrides(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want map[string]string
		err  string
	}{
		{"one", []string{"width=128"}, map[string]string{"width": "128"}, ""},
		{"two names", []string{"width=128", "m = 4"}, map[string]string{"width": "128", "m": "4"}, ""},
		{"no value", []string{"width"}, nil, `--set "width": want name=value`},
		{"twice", []string{"width=128", "width=256"}, nil, "--set width given twice (128, 256): give one value, or a list --set width=[128,256] to sweep both"},
		{"line break in a name", []string{"ba\ntch=1"}, nil, `--set "ba\ntch=1": holds the control character U+000A at byte 2; no parameter's name or value takes one`},
		{"line break in a value", []string{"batch=1\r\n2"}, nil, `--set "batch=1\r\n2": holds the control character U+000D at byte 7; no parameter's name or value takes one`},
		{"escape in a text value", []string{"variant=a\x1b[31m"}, nil, `--set "variant=a\x1b[31m": holds the control character U+001B at byte 9; no parameter's name or value takes one`},
		{"tab between", []string{"batch=\t4"}, map[string]string{"batch": "4"}, ""},
		{"twice the same", []string{"batch=2", " batch = 2"}, nil, "--set batch given twice (2 both times): give it once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseOverrides(tc.in)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("ParseOverrides(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseOverrides(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}
