package main

import (
	"strings"
	"testing"
)

// A word that names no command is refused naming it, the commands there
// and where the help is; help as a command prints the help it asks for.
func TestCommandLineWords(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // the error; "" for none
		out  string // in stdout
	}{
		{args: []string{"frobnicate"}, want: `unknown command "frobnicate" (want one of generate, models, run,`},
		{args: []string{"frobnicate"}, want: "(see `mtlbench --help`)"},
		{args: []string{"suites", "lsit"}, want: "suites: unknown command \"lsit\" (want one of validate, list, show) (see `mtlbench suites --help`)"},
		{args: []string{"history", "shwo", "x"}, want: "history: unknown command \"shwo\" (want one of list, show, import)"},
		{args: []string{"peer", "imprt"}, want: `peer: unknown command "imprt" (want one of import)`},
		{args: []string{"help", "run"}, out: "mtlbench run - run a benchmark suite"},
		{args: []string{"help"}, out: "COMMANDS:"},
		{args: []string{"suites"}, out: "mtlbench suites - list, show and validate"},
	} {
		out, _, err := mtl(t, c.args...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: err %v, want %q", c.args, err, c.want)
		case !strings.Contains(out, c.out):
			t.Errorf("%q: stdout %q, want %q in it", c.args, out, c.out)
		}
	}
}
