package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/results"
	"github.com/urfave/cli/v2"
)

// The command line is read once (tokenize), as the flag parser reads it,
// and the rewrites that follow (interspersed, joinLists) agree with it on
// which argument is whose: a flag of a value takes the next argument
// whatever it looks like, a switch takes none, "--" ends the flags.
func TestCommandLineRewrites(t *testing.T) {
	for _, tc := range []struct {
		args         []string
		interspersed string // "" when unchanged
		joined       string // "" when unchanged
	}{
		{args: []string{"run", "s.yaml", "--db", "x.db", "-q", "--tag=a"},
			interspersed: "run --db x.db -q --tag=a s.yaml"},
		// a value that looks like a flag is the flag's
		{args: []string{"run", "s.yaml", "--tag", "-q", "t.yaml"},
			interspersed: "run --tag -q s.yaml t.yaml"},
		{args: []string{"run", "s.yaml", "--tag", "--", "t.yaml"},
			interspersed: "run --tag -- s.yaml t.yaml"},
		// "--" ends the flags wherever it is: the arguments go after it
		{args: []string{"run", "s.yaml", "--", "--db", "x.db"},
			interspersed: "run -- s.yaml --db x.db"},
		{args: []string{"suites", "validate", "ci", "--set", "batch=1", "--", "-x.yaml"},
			interspersed: "suites validate --set batch=1 -- ci -x.yaml"},
		{args: []string{"suites", "validate", "--", "ci", "--set"}},
		// a switch takes its value only after =
		{args: []string{"run", "s.yaml", "-q=false", "t.yaml"},
			interspersed: "run -q=false s.yaml t.yaml"},
		{args: []string{"run", "s.yaml", "--tag=", "t.yaml"},
			interspersed: "run --tag= s.yaml t.yaml"},
		// - is an argument (standard input), not a flag
		{args: []string{"import", "-", "--db", "x.db"},
			interspersed: "import --db x.db -"},
		// the command path's own words stay put
		{args: []string{"suites", "validate", "ci", "--set", "batch=1"},
			interspersed: "suites validate --set batch=1 ci"},
		{args: []string{"tune", "show", "--format", "csv"}},
		// a flag before the subcommand that the subcommand takes is its own
		{args: []string{"tune", "--dir", "d", "show", "--format", "csv"},
			interspersed: "tune show --dir d --format csv"},
		{args: []string{"tune", "--rounds", "3", "show"}},
		// an unknown flag takes no value: the parser refuses it
		{args: []string{"runs", "--frob", "x"}},
		// list flags join wherever given, their values whatever they look like
		{args: []string{"bench", "-m", "m", "-b", "1", "-p", "8", "--batch=4", "-b", "-1"},
			joined: "bench -m m --batch 1,4,-1 --prompt 8"},
		{args: []string{"bench", "-b", "1", "--tag", "-b", "-b", "2"},
			joined: "bench --batch 1,2 --tag -b"},
		{args: []string{"bench", "-b", "1", "-b"},
			joined: "bench --batch 1 -b"},
	} {
		orig := append([]string{"mtlbench"}, tc.args...)
		same := "mtlbench " + strings.Join(tc.args, " ")
		for _, r := range []struct {
			name string
			fn   func([]string) []string
			want string
		}{
			{"interspersed", func(a []string) []string { return interspersed(newApp(nil, nil), a) }, tc.interspersed},
			{"joinLists", func(a []string) []string { return joinLists(newApp(nil, nil), a) }, tc.joined},
		} {
			want := same
			if r.want != "" {
				want = "mtlbench " + r.want
			}
			if got := strings.Join(r.fn(slices.Clone(orig)), " "); got != want {
				t.Errorf("%s(%q) = %q, want %q", r.name, tc.args, got, want)
			}
		}
	}
}

// "--" after a positional argument ends the flags as before one: it is not
// read as an argument itself.
func TestEndOfFlagsAfterArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in stdout
	}{
		{[]string{"suites", "validate", "ci", "--", "ci"}, "ci: ok"},
		{[]string{"suites", "validate", "ci", "--set", "batch=1", "--", "gpt2"}, "gpt2: ok"},
	} {
		out, stderr, err := mtl(t, tc.args...)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("%q: %v\n%s%s", tc.args, err, out, stderr)
		}
	}
}

// A command's flag given before its subcommand (tune --dir d show) was
// parsed as the command's and dropped: the subcommand reads its own. It is
// the subcommand's when that takes it, checked as its own (given twice, an
// empty path), and refused when not.
func TestFlagBeforeSubcommand(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string // the error; "" for none
		out  string // in stdout
	}{
		{args: []string{"tune", "--dir", dir, "show"}, out: "user cache: " + dir + " (0 entries)"},
		{args: []string{"tune", "--dir", dir, "show", "--dir", dir}, want: "tune show: --dir given twice"},
		{args: []string{"tune", "--dir", "", "show"}, want: `tune show: --dir "": an empty path`},
		{args: []string{"tune", "--rounds", "3", "show"},
			want: "tune show: --rounds 3 is a flag of `mtlbench tune`, not of `mtlbench tune show`: it would be dropped (see `mtlbench tune show --help`)"},
		{args: []string{"tune", "--dry-run", "show"}, want: "--dry-run is a flag of `mtlbench tune`"},
	} {
		out, _, err := mtl(t, tc.args...)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: err %v, want %q", tc.args, err, tc.want)
		case !strings.Contains(out, tc.out):
			t.Errorf("%q: stdout %q, want %q in it", tc.args, out, tc.out)
		}
	}
}

// checkFlagArgs reads each argument as the parser will: a value that looks
// like a flag is the flag's, a switch takes none, what follows "--" is no
// flag, and a flag of one value is counted once per giving, whatever its
// spelling.
func TestCheckFlagArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the error; "" for none
	}{
		{[]string{"runs", "--limit", "-1", "--limit", "2"}, "runs: --limit given twice (--limit -1, --limit 2)"},
		{[]string{"runs", "--format", "--limit", "--limit", "2"}, ""},
		{[]string{"runs", "--limit=3", "--", "--limit", "4"}, ""},
		{[]string{"runs", "--db=", "--limit", "2"}, `runs: --db "": an empty path`},
		{[]string{"run", "s.yaml", "-q", "-q=false", "--quiet"}, ""},
		{[]string{"run", "s.yaml", "--tag", "a", "t.yaml", "--tag=b"}, "run: --tag given twice (--tag a, --tag=b)"},
		{[]string{"suites", "validate", "--set", "a=1", "ci", "--set", "b=2"}, ""},
		{[]string{"tune", "show", "--dir", "a", "--dir=b"}, "tune show: --dir given twice (--dir a, --dir=b)"},
		{[]string{"bench", "-r", "2", "--tag", "-r", "-r", "3"}, "bench: --repetitions given twice (-r 2, -r 3)"},
	} {
		err := checkFlagArgs(newApp(nil, nil), append([]string{"mtlbench"}, tc.args...))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// A path flag (pathFlag) given one of its command's flags as its value
// (export -o --help, compare --out -h) is refused, naming the flag and how
// to name such a file, rather than write a file of that name; "-", a name
// with a path (./--help) and a dash word the command has no flag for are
// its value as before. Every command of the app with a path flag is
// covered, each flag of it as a value.
func TestPathFlagGivenAFlag(t *testing.T) {
	type tc struct {
		args []string
		want string // the error; "" for none
	}
	var cases []tc
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := append(slices.Clone(path), c.Name)
			spelt := []string{"-h", "--help"}
			for _, f := range c.Flags {
				for _, n := range f.Names() {
					if len(n) == 1 {
						spelt = append(spelt, "-"+n)
					} else {
						spelt = append(spelt, "--"+n)
					}
				}
			}
			for _, f := range c.Flags {
				if !pathFlag(f) {
					continue
				}
				flag := "--" + f.Names()[0]
				// as the parser reads a flag too: one dash, a value after =
				for _, v := range append(spelt, "-"+f.Names()[0], flag+"=x") {
					cases = append(cases, tc{append(slices.Clone(p), flag, v),
						fmt.Sprintf("%s: %s %s: %s is a flag of this command, so %s was given no path (a file or folder so named is ./%s)", strings.Join(p, " "), flag, v, v, flag, v)})
				}
				cases = append(cases, tc{append(slices.Clone(p), flag+"="+"--help"), "is a flag of this command"})
				for _, v := range []string{"-", "./--help", "--no-such-flag", "x.out"} {
					cases = append(cases, tc{append(slices.Clone(p), flag, v), ""})
				}
			}
			walk(p, c.Subcommands)
		}
	}
	walk(nil, newApp(nil, nil).Commands)
	if len(cases) < 100 {
		t.Fatalf("only %d cases: the app's path flags were not found", len(cases))
	}
	for _, tc := range cases {
		err := checkFlagArgs(newApp(nil, nil), append([]string{"mtlbench"}, tc.args...))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}

	// Through the whole command: nothing is written.
	dir := t.TempDir()
	t.Chdir(dir)
	db := seedCompareDB(t)
	for _, args := range [][]string{
		{"export", "--db", db, "-o", "--help"},
		{"export", "--db", db, "--out", "-h"},
		{"compare", "a", "b", "--db", db, "--out", "-h"},
		{"report", "--db", db, "-o", "--db"},
	} {
		if _, _, err := mtl(t, args...); err == nil || !strings.Contains(err.Error(), "is a flag of this command") {
			t.Errorf("%q: %v", args, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files written: %v", ents)
	}
}

// Every path flag (pathFlag) of every command reads a leading ~ or ~/ as
// the home folder, given after = too, where no shell expands it
// (bench -m=~/x, generate --model=~/x): it named a folder called ~. ~user
// is refused, naming the flag.
func TestPathFlagsReadHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	type tc struct {
		args []string
		want string // the value the command reads; "" for an error
		long string // the flag's name the error gives
	}
	var cases []tc
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := append(slices.Clone(path), c.Name)
			for _, f := range c.Flags {
				if !pathFlag(f) {
					continue
				}
				long := "--" + f.Names()[0]
				for _, n := range f.Names() {
					flag := "--" + n
					if len(n) == 1 {
						flag = "-" + n
					}
					cases = append(cases,
						tc{append(slices.Clone(p), flag+"=~/x"), flag + "=" + home + "/x", long},
						tc{append(slices.Clone(p), flag+"=~"), flag + "=" + home, long},
						tc{append(slices.Clone(p), flag, "~/x"), home + "/x", long},
						tc{append(slices.Clone(p), flag+"=./~/x"), flag + "=./~/x", long},
						tc{append(slices.Clone(p), flag+"=~bob/x"), "", long})
				}
			}
			walk(p, c.Subcommands)
		}
	}
	walk(nil, newApp(nil, nil).Commands)
	if len(cases) < 100 {
		t.Fatalf("only %d cases: the app's path flags were not found", len(cases))
	}
	for _, tc := range cases {
		got, err := expandHome(newApp(nil, nil), append([]string{"mtlbench"}, tc.args...))
		switch {
		case tc.want == "":
			if err == nil || !strings.Contains(err.Error(), tc.long+" ~bob/x: only ~ and ~/") {
				t.Errorf("%q: %q, %v; want an error naming the flag", tc.args, got, err)
			}
		case err != nil || got[len(got)-1] != tc.want:
			t.Errorf("%q: %q, %v; want the last argument %q", tc.args, got, err, tc.want)
		}
	}

	// and the command reads it so: export writes into the home folder
	t.Chdir(t.TempDir())
	store := filepath.Join(t.TempDir(), "r.db")
	db, err := results.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateRun(&results.Run{SuiteName: "s", Status: results.RunComplete}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, stderr, err := mtl(t, "export", "--db", store, "--out=~/runs.jsonl"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(home, "runs.jsonl")); err != nil {
		t.Errorf("export --out=~/runs.jsonl: %v", err)
	}
	if _, err := os.Stat("~"); err == nil {
		t.Error("export --out=~/runs.jsonl made a folder named ~")
	}
}
