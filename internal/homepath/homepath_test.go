package homepath

import (
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	for _, c := range []struct{ in, want, err string }{
		{"~", "/home/u", ""},
		{"~/r.db", "/home/u/r.db", ""},
		{"~/a/b/", "/home/u/a/b/", ""},
		{"/abs/~/x", "/abs/~/x", ""},
		{"rel/x", "rel/x", ""},
		{"", "", ""},
		{"./~x", "./~x", ""},
		{"~bob/x", "", "only ~ and ~/ are read as the home folder"},
	} {
		got, err := Expand(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %q, %v; want an error saying %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	t.Setenv("HOME", "")
	if _, err := Expand("~/x"); err == nil {
		t.Error("~/x with no home folder: no error")
	}
}
