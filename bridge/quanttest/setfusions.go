package quanttest

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
)

// FusionSetter is a backend whose fusion table tests narrow (Metal's and
// CUDA's SetFusions, both through bridge.KeepPatterns).
type FusionSetter interface {
	bridge.Fuser
	SetFusions(names ...string)
}

// SetFusionsKeepsOnlyThoseNamed checks that SetFusions keeps exactly the
// patterns named: naming none of the table's leaves no fusion to try, not
// the whole table back. b's table must hold rope_attention and gemv_gelu.
func SetFusionsKeepsOnlyThoseNamed(t *testing.T, b FusionSetter) {
	t.Helper()
	b.SetFusions()
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
	b.SetFusions()
}

// FusionsBut is the names of b's whole table but name: what SetFusions
// takes to measure a run without that one pattern.
func FusionsBut(b FusionSetter, name string) []string {
	b.SetFusions()
	var others []string
	for _, p := range b.Fusions() {
		if p.Name != name {
			others = append(others, p.Name)
		}
	}
	return others
}
