package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The progress bar is drawn on a terminal only: /dev/null is a character
// device, as a terminal is, and gets the plain lines a log does.
func TestProgressBarOnlyOnATerminal(t *testing.T) {
	t.Setenv("CI", "")
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer null.Close()
	if newProgress(null, false).tty {
		t.Errorf("%s taken for a terminal", os.DevNull)
	}
}

// run says how many cases it will make, a --set sweep counted, before any
// work: the first progress line comes only after a first case ran.
func TestRunSaysCaseCount(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "k.yaml")
	if err := os.WriteFile(suite, []byte("name: k\nbackend: cpu\nrepetitions: 1\nwarmup: 0\ncases:\n"+
		"  - name: a\n    kind: kernel\n    op: matmul\n    params: { m: 1, n: 32, k: 32, dtype: f32 }\n"+
		"  - name: b\n    kind: kernel\n    op: matmul\n    params: { m: 2, n: 32, k: 32, dtype: f32 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string // stderr's first line; "" for none
	}{
		{[]string{"--set", "k=[32,64]"}, "suite k: 4 cases, 1 repetition each"},
		{nil, "suite k: 2 cases, 1 repetition each"},
		{[]string{"-q"}, ""},
	} {
		args := append([]string{"run", suite, "--backend", "cpu", "--threads", "1", "--db", filepath.Join(t.TempDir(), "r.db")}, tc.args...)
		_, stderr, err := mtl(t, args...)
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.args, err, stderr)
		}
		first, _, _ := strings.Cut(stderr, "\n")
		if tc.want == "" && strings.Contains(stderr, "suite k:") || tc.want != "" && first != tc.want {
			t.Errorf("%q: stderr begins %q, want %q\n%s", tc.args, first, tc.want, stderr)
		}
	}
}
