package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/runner/tune"
)

// An output path of "-" is standard output where the output can go there
// (export -o, tune export), and refused before any work where it cannot;
// no command writes a file named "-".
func TestOutputDashIsStdout(t *testing.T) {
	tmp := isolate(t)
	t.Chdir(tmp)
	dir := filepath.Join(tmp, "tuned")
	e := tune.Entry{Device: "Test CPU", Backend: "cpu", Kernel: "moe", DType: "bf16",
		Shape:  tune.Shape{"tokens": 2, "experts": 32, "top_k": 4, "hidden": 512, "intermediate": 256, "threads": 2},
		Config: tune.Config{"strategy": "loop"}, Default: tune.Config{"strategy": "grouped"}, Speedup: 1.1, P: 0.001, Samples: 20,
		ToolVersion: "test", TunedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	if err := (&tune.File{Entries: []tune.Entry{e}}).Write(filepath.Join(dir, tune.FileName(e.Device, e.Backend))); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := mtlTune(t, "tune", "export", "-", "--dir", dir)
	if err != nil {
		t.Fatalf("tune export -: %v\n%s", err, stderr)
	}
	var f tune.File
	if err := json.Unmarshal([]byte(out), &f); err != nil || len(f.Entries) != 1 {
		t.Errorf("tune export - printed %d entries (%v):\n%s", len(f.Entries), err, out)
	}
	if !strings.Contains(stderr, "to standard output") {
		t.Errorf("tune export -: %q does not say where it wrote", stderr)
	}
	// tune import - takes what another machine's tune export - prints.
	var o, e2 bytes.Buffer
	app := newApp(&o, &e2)
	app.Reader = strings.NewReader(out)
	other := filepath.Join(tmp, "other")
	if err := app.Run([]string{"mtlbench", "tune", "import", "--dir", other, "-"}); err != nil {
		t.Fatalf("tune import -: %v\n%s", err, e2.String())
	}
	if got, err := tune.ReadFile(filepath.Join(other, tune.FileName(e.Device, e.Backend))); err != nil || len(got.Entries) != 1 {
		t.Errorf("tune import - wrote %v (%v)", got, err)
	}
	app = newApp(&o, &e2)
	app.Reader = strings.NewReader("{not json")
	if err := app.Run([]string{"mtlbench", "tune", "import", "--dir", other, "-"}); err == nil || !strings.Contains(err.Error(), "standard input: not a tuned-config file") {
		t.Errorf("tune import - of bad input: %v, want it named standard input", err)
	}

	db := seedCompareDB(t)
	out, stderr, err = mtl(t, "export", "--db", db, "-o", "-")
	if err != nil {
		t.Fatalf("export -o -: %v\n%s", err, stderr)
	}
	sc, lines := bufio.NewScanner(strings.NewReader(out)), 0
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l exportLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Format != exportFormat {
			t.Fatalf("export -o -: line %d: %v", lines+1, err)
		}
		lines++
	}
	if lines == 0 {
		t.Errorf("export -o - printed no run")
	}

	md := filepath.Join(tmp, "page.md")
	if err := os.WriteFile(md, []byte("| Batch | Decode tok/s |\n| --- | --- |\n| 1 | 10 |\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gate", "--baseline", "a", "--candidate", "b", "--db", db, "--summary", "-"}, "--summary -: standard output carries the checks (--format md writes the summary there)"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--backend", "cpu", "--db", filepath.Join(tmp, "b.db"), "--steps", "-"}, "--steps -: standard output carries the run's summary"},
		{[]string{"report", "--db", db, "--out", "-"}, "--out -: the report is a folder of files"},
		{[]string{"compare", "a", "b", "--db", db, "--out", "-"}, "--out -: the comparison's page is a folder of files"},
		{[]string{"history", "import", md, "--model", "m", "--out", "-"}, "--out -: the figures are merged into those the history file holds"},
		{[]string{"tune", "--kernel", "moe", "--out", "-"}, "--out -: the winners are merged into the tuned configs a file holds"},
	} {
		_, _, err := mtlTune(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"-" (standard output) cannot be it`) {
			t.Errorf("%s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if _, err := os.Lstat(filepath.Join(tmp, "-")); err == nil {
		t.Errorf("a file named - was written")
	}
}

// A file named where a folder is written (compare --out, report --out), or
// a folder where a file is (--steps, gate --summary), is said alike by
// every flag, before any work, without Go's "open" or "mkdir".
func TestOutputPathOfTheWrongKind(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := seedCompareDB(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"compare", "base", "cand", "--db", db, "--out", file}, "--out " + file + ": a file, not a folder"},
		{[]string{"report", "base", "--db", db, "--out", file}, "--out " + file + ": a file, not a folder"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-p", "4", "-n", "2", "-r", "1", "--backend", "cpu", "--threads", "1", "--db", filepath.Join(dir, "r.db"), "--steps", dir},
			"--steps " + dir + ": a folder, not a file"},
		{[]string{"gate", "--baseline", "base", "--candidate", "cand", "--db", db, "--summary", dir}, "--summary " + dir + ": a folder, not a file"},
	} {
		_, _, err := mtl(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.args[0], err, tc.want)
		}
	}
}

// import - reads the export from standard input, as export -o - writes it
// there: a pipe from another machine's store. Its errors name standard
// input and the line; - given twice is refused, as it is read once.
func TestImportStandardInput(t *testing.T) {
	export, _, err := mtl(t, "export", "--db", seedCompareDB(t), "-o", "-")
	if err != nil {
		t.Fatal(err)
	}
	help, _, err := mtl(t, "import", "--help")
	if err != nil || !strings.Contains(help, "- reads standard input") {
		t.Errorf("import --help does not say - reads standard input (%v):\n%s", err, help)
	}
	for _, tc := range []struct {
		args  []string
		stdin string
		want  string // the error; "" for none
		said  string // in stderr
	}{
		{args: []string{"-"}, stdin: export, said: "imported run 1 of"},
		{args: []string{"-", "--db"}, stdin: export, said: "imported run 1 of"},
		{args: []string{"-"}, stdin: "{not json\n", want: "standard input:1: not an mtlbench export line"},
		{args: []string{"-"}, stdin: "", want: "standard input: no runs"},
		{args: []string{"-", "-"}, stdin: export, want: "import: - (standard input) given 2 times: it is read once"},
	} {
		args := append([]string{"mtlbench", "import"}, tc.args...)
		if args[len(args)-1] == "--db" {
			args = append(args, filepath.Join(t.TempDir(), "flag.db"))
		} else {
			args = append(args, "--db", filepath.Join(t.TempDir(), "r.db"))
		}
		var o, e bytes.Buffer
		err := run(args, strings.NewReader(tc.stdin), &o, &e)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v\n%s", tc.args, err, e.String())
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		case !strings.Contains(e.String(), tc.said):
			t.Errorf("%q: stderr %q, want %q in it", tc.args, e.String(), tc.said)
		}
	}
}
