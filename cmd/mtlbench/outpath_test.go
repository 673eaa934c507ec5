package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
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
	e := writeTunedEntry(t, dir)
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
// a folder where a file is (--steps, gate --summary), or a missing folder
// or a file above either (history import --out, $MTLBENCH_HISTORY), is said
// alike by every flag, before any work, without Go's "open", "mkdir" or
// "stat".
func TestOutputPathOfTheWrongKind(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(dir, "page.md")
	if err := os.WriteFile(md, []byte("| Batch | Decode tok/s |\n| --- | --- |\n| 1 | 10 |\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	tuned := filepath.Join(dir, "tuned")
	writeTunedEntry(t, tuned)
	// A folder no system can make: a name past every file system's limit.
	long := filepath.Join(dir, strings.Repeat("n", 300))
	db := seedCompareDB(t)
	for _, tc := range []struct {
		args    []string
		history string // $MTLBENCH_HISTORY
		want    string
	}{
		{[]string{"compare", "base", "cand", "--db", db, "--out", file}, "", "--out " + file + ": a file, not a folder"},
		{[]string{"report", "base", "--db", db, "--out", file}, "", "--out " + file + ": a file, not a folder"},
		{[]string{"compare", "base", "cand", "--db", db, "--out", filepath.Join(file, "a", "b")}, "",
			"--out " + filepath.Join(file, "a", "b") + ": " + file + " is a file, not a folder"},
		{[]string{"report", "base", "--db", db, "--out", filepath.Join(file, "a")}, "", "--out " + filepath.Join(file, "a") + ": " + file + " is a file, not a folder"},
		// A folder to be made under a file's name made report.html/index.html.
		{[]string{"report", "base", "--db", db, "--out", filepath.Join(missing, "report.html")}, "", "--out " + filepath.Join(missing, "report.html") +
			": named as a file, but the report is a folder of files (index.html and its charts); name the folder (--out " + filepath.Join(missing, "report") + "), or make it first to use this name"},
		{[]string{"compare", "base", "cand", "--db", db, "--out", filepath.Join(missing, "c.HTML")}, "", "--out " + filepath.Join(missing, "c.HTML") + ": named as a file, but compare writes a folder"},
		{[]string{"ab", "kernels", "--baseline-bin", "/bin/true", "--candidate-bin", "/bin/true", "--keep", filepath.Join(missing, "rounds.db")}, "", "--keep " + filepath.Join(missing, "rounds.db") + ": named as a file, but ab keeps its rounds' databases in a folder"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-p", "4", "-n", "2", "-r", "1", "--backend", "cpu", "--threads", "1", "--db", filepath.Join(dir, "r.db"), "--steps", dir}, "",
			"--steps " + dir + ": a folder, not a file"},
		{[]string{"gate", "--baseline", "base", "--candidate", "cand", "--db", db, "--summary", dir}, "", "--summary " + dir + ": a folder, not a file"},
		{[]string{"history", "import", md, "--model", "m", "--date", "2026", "--out", filepath.Join(missing, "h.yaml")}, "",
			"--out " + filepath.Join(missing, "h.yaml") + ": its folder cannot be used: " + missing + ": no such file or directory"},
		{[]string{"history", "import", md, "--model", "m", "--date", "2026", "--out", filepath.Join(file, "h.yaml")}, "",
			"--out " + filepath.Join(file, "h.yaml") + ": " + file + " is not a folder"},
		{[]string{"history", "import", md, "--model", "m", "--date", "2026"}, file, "history folder " + file + ": a file, not a folder"},
		{[]string{"history", "import", md, "--model", "m", "--date", "2026"}, filepath.Join(file, "h"),
			"history folder " + filepath.Join(file, "h") + ": " + file + " is a file, not a folder"},
		{[]string{"compare", "base", "cand", "--db", db, "--out", filepath.Join(long, "c")}, "",
			"--out " + filepath.Join(long, "c") + ": the folder cannot be made: " + long + ": file name too long"},
		{[]string{"report", "base", "--db", db, "--out", filepath.Join(long, "r")}, "",
			"--out " + filepath.Join(long, "r") + ": the folder cannot be made: " + long + ": file name too long"},
		{[]string{"history", "import", md, "--model", "m", "--date", "2026"}, filepath.Join(long, "h"),
			"history folder " + filepath.Join(long, "h") + ": the folder cannot be made: " + long + ": file name too long"},
		// tune export and tune --out made the missing folder.
		{[]string{"tune", "export", filepath.Join(missing, "t.json"), "--dir", tuned}, "",
			"tune export " + filepath.Join(missing, "t.json") + ": its folder cannot be used: " + missing + ": no such file or directory"},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--backend", "cpu", "--rounds", "1", "--db", filepath.Join(dir, "t.db"), "--out", filepath.Join(missing, "t.json")}, "",
			"--out " + filepath.Join(missing, "t.json") + ": its folder cannot be used: " + missing + ": no such file or directory"},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			t.Setenv("MTLBENCH_HISTORY", tc.history)
			_, _, err := mtl(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
			}
			for _, op := range []string{"open ", "mkdir ", "stat "} {
				if err != nil && strings.Contains(err.Error(), op) {
					t.Errorf("%s: %v: Go's %q", strings.Join(tc.args, " "), err, op)
				}
			}
		})
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("history import --out, tune export, tune --out, or a folder named as a file made the missing folder %s", missing)
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

// mtlIn runs a command with stdin as its standard input.
func mtlIn(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	err = run(append([]string{"mtlbench"}, args...), strings.NewReader(stdin), &o, &e)
	return o.String(), e.String(), err
}

// peer import - reads standard input, as import - does, through the one
// rule (readInput): a pipe from the tool itself. A pipe has no
// modification time to date a result that records none, so a peer run is
// keyed on the bytes it was read from as well as its start: the same input
// again, from the pipe, from a file or from a copy of that file dated
// otherwise, is stored once; other bytes of the same start are a run of
// their own.
func TestPeerImportStandardInput(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	db := filepath.Join(dir, "r.db")
	help, _, err := mtl(t, "peer", "import", "--help")
	if err != nil || !strings.Contains(help, "- reads standard input") {
		t.Errorf("peer import --help does not say - reads standard input (%v):\n%s", err, help)
	}
	mlx := "Timing with prompt_tokens=128, generation_tokens=64, batch_size=1.\nTrial 1:  prompt_tps=500.000, generation_tps=40.000, peak_memory=1.000\n"
	_, stderr, err := mtlIn(t, mlx, "peer", "import", "-", "--db", db)
	if err != nil || !strings.Contains(stderr, "imported mlx_lm.benchmark as run 1") {
		t.Fatalf("peer import - of mlx_lm.benchmark's output: %v\n%s", err, stderr)
	}
	out, _, err := mtl(t, "runs", "--db", db, "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	rows := csvRows(t, out)
	if len(rows) != 1 || rows[0]["suite_hash"] != fmt.Sprintf("%x", sha256.Sum256([]byte(mlx))) || !strings.HasPrefix(rows[0]["notes"], "imported from standard input") {
		t.Errorf("the stored run: %v", rows)
	}
	_, stderr, err = mtlIn(t, mlx, "peer", "import", "-", "--db", db)
	if err != nil || !strings.Contains(stderr, "(standard input) is already here as run 1") {
		t.Errorf("the same input again: %v\n%s", err, stderr)
	}
	file := filepath.Join(dir, "mlx.txt")
	if err := os.WriteFile(file, []byte(mlx), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, when := range []time.Time{time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)} {
		os.Chtimes(file, when, when)
		_, stderr, err = mtl(t, "peer", "import", file, "--db", db)
		if err != nil || !strings.Contains(stderr, "is already here as run 1") {
			t.Errorf("the same bytes from a file dated %d: %v\n%s", i, err, stderr)
		}
	}
	other := strings.Replace(mlx, "500.000", "501.000", 1)
	_, stderr, err = mtlIn(t, other, "peer", "import", "-", "--db", db)
	if err != nil || !strings.Contains(stderr, "as run 2") {
		t.Errorf("other figures: %v\n%s", err, stderr)
	}
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{mlx, []string{"-", "-"}, "peer import: - (standard input) given 2 times: it is read once"},
		{`{"hello": 1}`, []string{"-"}, "standard input: "},
		{"", []string{"-"}, "standard input: "},
	} {
		_, _, err := mtlIn(t, tc.stdin, append(append([]string{"peer", "import"}, tc.args...), "--db", db)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("peer import %q of %q: %v, want %q", tc.args, tc.stdin, err, tc.want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "-")); err == nil {
		t.Errorf("a file named - was written")
	}
}

// history import - reads the page from standard input; with no file name
// to be the figures' source, --source names it.
func TestHistoryImportStandardInput(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("MTLBENCH_HISTORY", filepath.Join(dir, "history"))
	help, _, err := mtl(t, "history", "import", "--help")
	if err != nil || !strings.Contains(help, "- reads standard input") {
		t.Errorf("history import --help does not say - reads standard input (%v):\n%s", err, help)
	}
	page := "| Batch | Decode tok/s |\n| --- | --- |\n| 1 | 10 |\n| 4 | 30 |\n"
	args := []string{"history", "import", "-", "--model", "Qwen3-30B-A3B", "--date", "2026-11-01"}
	if _, _, err := mtlIn(t, page, args...); err == nil || !strings.Contains(err.Error(), "--source") {
		t.Errorf("history import - without --source: %v", err)
	}
	_, stderr, err := mtlIn(t, page, append(args, "--source", "kb.md")...)
	if err != nil || !strings.Contains(stderr, "2 figures written to "+filepath.Join(dir, "history", "kb.yaml")) {
		t.Fatalf("history import -: %v\n%s", err, stderr)
	}
	out, _, err := mtl(t, "history", "list", "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range csvRows(t, out) {
		found = found || r["source"] == "kb.md" && r["figures"] == "2"
	}
	if !found {
		t.Errorf("history list after history import -:\n%s", out)
	}
	if _, _, err := mtlIn(t, "| Batch | Decode tok/s |\n| --- | --- |\n| 1 | -3 |\n", append(args, "--source", "kb.md")...); err == nil || !strings.HasPrefix(err.Error(), "standard input: ") {
		t.Errorf("a wrong cell from standard input: %v, want it named standard input", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "-")); err == nil {
		t.Errorf("a file named - was written")
	}
}

// writeTunedEntry writes one tuned config of the CPU's moe kernel into dir,
// the file tune export and tune show read, and returns it.
func writeTunedEntry(t *testing.T, dir string) tune.Entry {
	t.Helper()
	e := tune.Entry{Device: "Test CPU", Backend: "cpu", Kernel: "moe", DType: "bf16",
		Shape:  tune.Shape{"tokens": 2, "experts": 32, "top_k": 4, "hidden": 512, "intermediate": 256, "threads": 2},
		Config: tune.Config{"strategy": "loop"}, Default: tune.Config{"strategy": "grouped"}, Speedup: 1.1, P: 0.001, Samples: 20,
		ToolVersion: "test", TunedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	if err := (&tune.File{Entries: []tune.Entry{e}}).Write(filepath.Join(dir, tune.FileName(e.Device, e.Backend))); err != nil {
		t.Fatal(err)
	}
	return e
}
