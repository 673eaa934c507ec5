package main

import (
	"strings"
	"testing"
)

// The version line gives the commit, marked when the tree was dirty, and
// where the build recorded none says every way that happens and the remedy:
// a build in a checkout with -buildvcs=false is not "outside a git checkout".
func TestBuildInfoString(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    buildInfo
		want []string
		not  []string
	}{
		{"stamped", buildInfo{Version: "devel", Commit: "c0ffee", Go: "go1.26"}, []string{"devel commit c0ffee go1.26"}, []string{"+dirty", "no commit"}},
		{"dirty", buildInfo{Version: "v1.2.3", Commit: "c0ffee", Modified: true, Go: "go1.26"}, []string{"v1.2.3 commit c0ffee+dirty go1.26"}, nil},
		{"no stamp", buildInfo{Version: "devel", Go: "go1.26"}, []string{"no commit recorded", "-buildvcs=false", "go run", "-ldflags -X main.commit", "make build"}, []string{"built outside a git checkout"}},
	} {
		got := tc.b.String()
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
