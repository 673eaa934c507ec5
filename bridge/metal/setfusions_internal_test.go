package metal

import "testing"

// SetFusions keeps exactly the patterns named: naming none of the table's
// leaves no fusion to try, not the whole table back.
func TestSetFusionsKeepsOnlyThoseNamed(t *testing.T) {
	b := &Backend{}
	all := len(b.Fusions())
	for _, tc := range []struct {
		names []string
		want  int
	}{
		{nil, all},
		{[]string{"rope_attention"}, 1},
		{[]string{"rope_attention", "gemv_gelu"}, 2},
		{[]string{"no_such_pattern"}, 0},
		{[]string{"gemv_gelu", "no_such_pattern"}, 1},
	} {
		b.SetFusions(tc.names...)
		if got := len(b.Fusions()); got != tc.want {
			t.Errorf("SetFusions(%q): %d patterns, want %d", tc.names, got, tc.want)
		}
	}
}
