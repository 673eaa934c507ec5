package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/reports/stats"
	"github.com/mtlbench/mtlbench/results"
)

// twoCaseSuite is a two-case CPU suite small enough for a unit test.
const twoCaseSuite = `name: two
model: { preset: qwen3-moe-mini, dtype: f32, seed: 1 }
backend: cpu
repetitions: 3
warmup: 0
params: { prompt_len: 8, gen_len: 4 }
cases:
  - name: decode
    kind: model
    matrix: { batch: [1, 2] }
`

// recordTwoCases runs twoCaseSuite into a fresh database and returns its path.
func recordTwoCases(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	suite := filepath.Join(dir, "two.yaml")
	if err := os.WriteFile(suite, []byte(twoCaseSuite), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "r.db")
	if _, stderr, err := mtl(t, append([]string{"run", suite, "--db", db, "-q", "--tag", "two", "--backend", "cpu", "--threads", "1"}, args...)...); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	return db
}

// show --format csv of a two-case run is one numeric table: one header,
// every row as wide, and the statistics parse as numbers; jsonl rows carry
// numbers, not strings.
func TestShowFormatsAreData(t *testing.T) {
	db := recordTwoCases(t)
	out, _, err := mtl(t, "show", "two", "--db", db, "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("csv: %v\n%s", err, out)
	}
	head := recs[0]
	col := func(name string) int {
		i := slices.Index(head, name)
		if i < 0 {
			t.Fatalf("no column %q in %v", name, head)
		}
		return i
	}
	batches := map[string]bool{}
	decode := 0
	for _, r := range recs[1:] {
		for _, c := range []string{"median", "n", "batch", "prompt_len", "run"} {
			if _, err := strconv.ParseFloat(r[col(c)], 64); err != nil {
				t.Errorf("column %s = %q is not a number (row %v)", c, r[col(c)], r)
			}
		}
		for _, c := range []string{"ci_lo", "ci_hi"} {
			if v := r[col(c)]; v != "" { // n < 6 gives no interval: empty, not ±Inf
				if _, err := strconv.ParseFloat(v, 64); err != nil {
					t.Errorf("%s = %q", c, v)
				}
			}
		}
		if r[col("metric")] == "decode_tok_s" {
			decode++
			batches[r[col("batch")]] = true
			if r[col("unit")] != "tok/s" || r[col("better")] != "higher" || r[col("n")] != "3" || r[col("model")] != "qwen3-moe-mini" {
				t.Errorf("decode row %v", r)
			}
		}
	}
	if decode != 2 || !batches["1"] || !batches["2"] {
		t.Errorf("want one decode_tok_s row per case (batch 1 and 2), got %d %v", decode, batches)
	}

	out, _, err = mtl(t, "show", "two", "--db", db, "--format", "jsonl")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	rows := 0
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("jsonl line %q: %v", sc.Text(), err)
		}
		for _, k := range []string{"median", "n", "batch", "run"} {
			if _, ok := row[k].(float64); !ok {
				t.Errorf("jsonl %s = %#v, want a number", k, row[k])
			}
		}
		rows++
	}
	if rows != len(recs)-1 {
		t.Errorf("jsonl has %d rows, csv %d", rows, len(recs)-1)
	}

	// --raw: one row per sample, three repetitions of each metric.
	out, _, err = mtl(t, "show", "two", "--db", db, "--format", "csv", "--raw")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(raw)-1 != 3*(len(recs)-1) {
		t.Errorf("--raw has %d rows, want 3 per summary row (%d)", len(raw)-1, len(recs)-1)
	}

	// benchfmt: unit metadata and configuration lines, through x/perf.
	out, _, err = mtl(t, "show", "two", "--db", db, "--format", "benchfmt")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Unit decode-tok-s better=higher", "Unit bytes-per-step assume=exact", "model: qwen3-moe-mini", "dtype: f32", "backend: cpu", "BenchmarkDecode/gen_len=4/prompt_len=8 1 "} {
		if !strings.Contains(out, want) {
			t.Errorf("benchfmt lacks %q:\n%s", want, out)
		}
	}

	// An unknown format names the value.
	if _, _, err := mtl(t, "show", "two", "--db", db, "--format", "xml"); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("--format xml: %v", err)
	}
	// A database that does not exist is an error, not a new empty file.
	missing := filepath.Join(t.TempDir(), "typo", "typo.db")
	for _, args := range [][]string{{"runs"}, {"gate", "--baseline", "1", "--candidate", "2"}} {
		if _, _, err := mtl(t, append(args, "--db", missing)...); err == nil || !strings.Contains(err.Error(), "no results database at "+missing) {
			t.Errorf("%s on a missing database: %v", args[0], err)
		}
		if _, err := os.Stat(filepath.Dir(missing)); err == nil {
			t.Errorf("%s created the mistyped database's folder", args[0])
		}
	}
}

// The summary says why a model case's roofline fraction passed 1, and only
// then.
func TestCachedRooflineNotes(t *testing.T) {
	cases := []results.Case{{Name: "small", Kind: results.CaseModel}, {Name: "big", Kind: results.CaseModel}, {Name: "k", Kind: results.CaseKernel}}
	frac := func(v float64) map[string]*stats.Summary {
		return map[string]*stats.Summary{"roofline_frac": {Summary: stats.Summarize([]float64{v})}}
	}
	byCase := []map[string]*stats.Summary{frac(1.4), frac(0.8), frac(2)}
	notes := cachedRooflineNotes(cases, byCase)
	if len(notes) != 1 || !strings.Contains(notes[0].Text, "roofline % over 100 (small)") {
		t.Errorf("notes %q", notes)
	}
	if notes := cachedRooflineNotes(cases[1:], byCase[1:]); len(notes) != 0 {
		t.Errorf("notes %q for no case over 1", notes)
	}
}

// The data formats of runs have one schema whatever the rows: a list with
// no runs declares every column a list with runs has.
func TestRunsColumnsWithoutRows(t *testing.T) {
	full := runsTable([]results.Run{{ID: 1, Threads: "4", ReadBandwidthGBs: 1, MatmulPeakGFLOPs: 1}}).Data.Columns
	for _, c := range []struct {
		name string
		runs []results.Run
	}{{"no runs", nil}, {"a bare run", []results.Run{{ID: 2}}}} {
		if got := runsTable(c.runs).Data.Columns; !slices.Equal(got, full) {
			t.Errorf("%s: columns %q, want %q", c.name, got, full)
		}
	}
}

// A store named with a ~ the shell left alone (MTLBENCH_DB from an
// environment file, --db=~/r.db) is the one in the home folder.
func TestTildeDatabasePath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Chdir(t.TempDir())
	db, err := results.Open(filepath.Join(home, "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateRun(&results.Run{SuiteName: "at-home", Status: results.RunComplete}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, tc := range []struct {
		env  string
		args []string
	}{
		{"~/r.db", []string{"runs"}},
		{"", []string{"runs", "--db=~/r.db"}},
	} {
		t.Setenv("MTLBENCH_DB", tc.env)
		out, _, err := mtl(t, tc.args...)
		if err != nil || !strings.Contains(out, "at-home") {
			t.Errorf("MTLBENCH_DB=%q %v: %v\n%s", tc.env, tc.args, err, out)
		}
	}
}

// A parameter named like a column (a matmul's n) has one column in every
// command's rows, param_n, so show's, compare's and gate's csv join on it.
func TestParamColumnsAgree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, tag := range []string{"a", "b"} {
		id, err := db.CreateRun(&results.Run{SuiteName: "s", Tag: tag, Backend: "cpu", Status: results.RunComplete})
		if err != nil {
			t.Fatal(err)
		}
		cases := []results.Case{{Name: "mm/n=8", Key: "kernel/mm/k=4/m=1/n=8/op=matmul", Kind: results.CaseKernel,
			Params: map[string]string{"op": "matmul", "m": "1", "n": "8", "k": "4", "param_n": "x"}}}
		if err := db.AddCases(id, cases); err != nil {
			t.Fatal(err)
		}
		var ss []results.Sample
		for rep := range 6 {
			ss = append(ss, results.Sample{Rep: rep, Metric: "us_per_call", Value: float64(10 + i + rep), Unit: "us"})
		}
		if err := db.FinishCase(cases[0].ID, ss, nil, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	for _, args := range [][]string{
		{"show", "a"},
		{"compare", "a", "b"},
		{"gate", "--baseline", "a", "--candidate", "b", "--threshold", "50%"},
	} {
		t.Run(args[0], func(t *testing.T) {
			out, stderr, err := mtl(t, append(args, "--db", path, "--format", "csv")...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
			if err != nil || len(recs) < 2 {
				t.Fatalf("csv: %v\n%s", err, out)
			}
			i := slices.Index(recs[0], "param_n")
			if i < 0 || recs[1][i] != "8" {
				t.Errorf("header %q: no param_n column holding 8", recs[0])
			}
			// A parameter named param_n (an import may hold one) keeps
			// a column of its own, as n keeps its value.
			if k := slices.Index(recs[0], "param_param_n"); k < 0 || recs[1][k] != "x" {
				t.Errorf("header %q: no param_param_n column holding x", recs[0])
			}
			if j := slices.Index(recs[0], "n"); j >= 0 && recs[1][j] == "8" {
				t.Errorf("header %q: the parameter n is column n", recs[0])
			}
		})
	}
}

// suites list takes --format as the other listing commands do: csv, json
// and jsonl parse as data, cases as a number and an invalid suite's error
// in a column of its own; an unknown format is refused naming it.
func TestSuitesListFormats(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"two.yaml": twoCaseSuite, "bad.yaml": "name: bad\ncases: [\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	type row = map[string]any
	parse := map[string]func(string) ([]row, error){
		"csv": func(out string) ([]row, error) {
			recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
			if err != nil || len(recs) == 0 {
				return nil, err
			}
			var rows []row
			for _, r := range recs[1:] {
				m := row{}
				for i, c := range recs[0] {
					m[c] = r[i]
					if n, err := strconv.ParseFloat(r[i], 64); err == nil {
						m[c] = n
					}
				}
				rows = append(rows, m)
			}
			return rows, nil
		},
		"json": func(out string) ([]row, error) {
			var rows []row
			return rows, json.Unmarshal([]byte(out), &rows)
		},
		"jsonl": func(out string) ([]row, error) {
			var rows []row
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				var r row
				if err := json.Unmarshal([]byte(l), &r); err != nil {
					return nil, err
				}
				rows = append(rows, r)
			}
			return rows, nil
		},
	}
	for _, f := range []string{"table", "md", "csv", "json", "jsonl"} {
		out, stderr, err := mtl(t, "suites", "list", dir, "--format", f)
		if err != nil {
			t.Fatalf("--format %s: %v\n%s", f, err, stderr)
		}
		p := parse[f]
		if p == nil {
			if !strings.Contains(out, "two") || !strings.Contains(out, "invalid") {
				t.Errorf("--format %s: no two or invalid:\n%s", f, out)
			}
			continue
		}
		rows, err := p(out)
		if err != nil || len(rows) != 2 {
			t.Fatalf("--format %s: %d rows, %v:\n%s", f, len(rows), err, out)
		}
		bad, two := rows[0], rows[1]
		if two["suite"] != "two" || two["cases"] != float64(2) || two["error"] != "" {
			t.Errorf("--format %s: valid suite's row %v, want 2 cases and no error", f, two)
		}
		if bad["suite"] != "bad" || bad["cases"] != nil && bad["cases"] != "" || !strings.Contains(fmt.Sprint(bad["error"]), "bad.yaml:2") {
			t.Errorf("--format %s: invalid suite's row %v, want no cases and its error at bad.yaml:2", f, bad)
		}
	}
	if _, _, err := mtl(t, "suites", "list", "--format", "xml"); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("--format xml: %v, want it refused by name", err)
	}
}

// compare's tables print its notes (runs of different machines, a
// parameter the cases differ in) under them; its csv, json and jsonl keep
// stdout data alone and print the notes on stderr.
func TestCompareDataNotes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range []struct{ tag, cpu, fusion string }{{"a", "AMD EPYC", "on"}, {"b", "Apple M2 Pro", "off"}} {
		id, err := db.CreateRun(&results.Run{SuiteName: "s", Tag: m.tag, Backend: "cpu", Status: results.RunComplete,
			Machine: results.Machine{Hostname: m.tag, CPUModel: m.cpu}})
		if err != nil {
			t.Fatal(err)
		}
		cases := []results.Case{{Name: "decode", Key: "model/decode/batch=1", Kind: results.CaseModel,
			Params: map[string]string{"batch": "1", "fusion": m.fusion}}}
		if err := db.AddCases(id, cases); err != nil {
			t.Fatal(err)
		}
		var ss []results.Sample
		for rep := range 6 {
			ss = append(ss, results.Sample{Rep: rep, Metric: "decode_tok_s", Value: float64(100 + 10*i + rep), Unit: "tok/s"})
		}
		if err := db.FinishCase(cases[0].ID, ss, nil, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	notes := []string{"the runs come from different machines (AMD EPYC, Apple M2 Pro)", "recorded parameters differ (fusion on vs off)"}
	for _, f := range []string{"table", "csv", "json", "jsonl"} {
		out, stderr, err := mtl(t, "compare", "a", "b", "--db", path, "--format", f)
		if err != nil {
			t.Fatalf("--format %s: %v\n%s", f, err, stderr)
		}
		where, other := stderr, out
		if f == "table" {
			where, other = out, stderr
		}
		for _, n := range notes {
			if !strings.Contains(where, n) || strings.Contains(other, n) {
				t.Errorf("--format %s: note %q not where it belongs:\nstdout:\n%s\nstderr:\n%s", f, n, out, stderr)
			}
		}
	}
}

// suites list of a file, or of a folder without suites, says so: a file
// is refused naming it and the commands that read one; an empty folder
// lists nothing and says why on stderr.
func TestSuitesListNotASuiteFolder(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "two.yaml")
	if err := os.WriteFile(file, []byte(twoCaseSuite), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir, err, stderr string
	}{
		{file, "suites list " + file + ": a file, not a folder (suites validate " + file + " checks one suite", ""},
		// the folder and what is wrong, not Go's "open /x/nope: ..."
		{filepath.Join(dir, "nope"), "suites list: " + filepath.Join(dir, "nope") + ": no such file or directory", ""},
		{empty, "", "no suite files (*.yaml, *.yml) in " + empty},
	} {
		for _, f := range []string{"table", "json"} {
			out, stderr, err := mtl(t, "suites", "list", tc.dir, "--format", f)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("suites list %s: %v, want %q", tc.dir, err, tc.err)
			case tc.err == "" && err != nil:
				t.Errorf("suites list %s: %v", tc.dir, err)
			case tc.stderr != "" && !strings.Contains(stderr, tc.stderr):
				t.Errorf("suites list %s: stderr %q, want %q", tc.dir, stderr, tc.stderr)
			case tc.err == "" && f == "json" && strings.TrimSpace(out) != "[]":
				t.Errorf("suites list %s --format json: %q, want []", tc.dir, out)
			}
		}
	}
}

// show's data give a confidence level only to a row with an interval: a
// case of too few repetitions for one (n < 6) has neither bounds nor level.
func TestShowConfidenceOnlyWithInterval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.CreateRun(&results.Run{SuiteName: "s", Backend: "cpu", Kind: results.KindSuite})
	if err != nil {
		t.Fatal(err)
	}
	reps := map[string]int{"one": 1, "three": 3, "eight": 8}
	var cs []results.Case
	for _, name := range []string{"one", "three", "eight"} {
		cs = append(cs, results.Case{Key: "model/" + name, Name: name, Kind: results.CaseModel})
	}
	if err := db.AddCases(id, cs); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		var s []results.Sample
		for rep := range reps[c.Name] {
			s = append(s, results.Sample{Rep: rep, Metric: "decode_tok_s", Value: float64(100 + rep), Unit: "tok/s"})
		}
		if err := db.FinishCase(c.ID, s, nil, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishRun(id, results.RunComplete); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, tc := range []struct {
		name     string
		interval bool
	}{{"one", false}, {"three", false}, {"eight", true}} {
		for _, format := range []string{"csv", "json", "jsonl"} {
			t.Run(tc.name+"/"+format, func(t *testing.T) {
				out, _, err := mtl(t, "show", "1", "--db", path, "--format", format)
				if err != nil {
					t.Fatal(err)
				}
				var rows []map[string]any
				switch format {
				case "csv":
					recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range recs[1:] {
						row := map[string]any{}
						for i, h := range recs[0] {
							if r[i] != "" {
								row[h] = r[i]
							}
						}
						rows = append(rows, row)
					}
				case "json":
					if err := json.Unmarshal([]byte(out), &rows); err != nil {
						t.Fatal(err)
					}
				case "jsonl":
					for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
						var row map[string]any
						if err := json.Unmarshal([]byte(line), &row); err != nil {
							t.Fatal(err)
						}
						rows = append(rows, row)
					}
				}
				for _, row := range rows {
					if row["case"] != tc.name {
						continue
					}
					has := func(k string) bool { return row[k] != nil }
					if has("confidence") != tc.interval || has("ci_lo") != tc.interval || has("ci_hi") != tc.interval {
						t.Errorf("interval %v, but confidence %v, ci_lo %v, ci_hi %v", tc.interval, row["confidence"], row["ci_lo"], row["ci_hi"])
					}
					if tc.interval && fmt.Sprint(row["confidence"]) != "0.95" {
						t.Errorf("confidence = %v, want 0.95", row["confidence"])
					}
					return
				}
				t.Errorf("no row of case %s:\n%s", tc.name, out)
			})
		}
	}
}

// A reference names the same runs for show as for compare: every run of a
// tag (compare pools them), and --latest N keeps the newest N of each
// reference, as compare --latest does; a tag does not mean its newest run
// alone. show prints the runs oldest first, whatever order named them.
func TestShowNamesEveryRunOfAReference(t *testing.T) {
	db := recordTwoCases(t)
	suite := filepath.Join(t.TempDir(), "two.yaml")
	if err := os.WriteFile(suite, []byte(twoCaseSuite), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"two", "three"} {
		if _, stderr, err := mtl(t, "run", suite, "--db", db, "-q", "--tag", tag, "--backend", "cpu", "--threads", "1"); err != nil {
			t.Fatalf("run: %v\n%s", err, stderr)
		}
	}
	// Runs 1 and 2 are tagged two, run 3 three.
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"two"}, []string{"1", "2"}},
		{[]string{"two", "--latest", "1"}, []string{"2"}},
		{[]string{"two,three", "--latest", "1"}, []string{"2", "3"}},
		{[]string{"three", "two", "--latest", "1"}, []string{"2", "3"}},
		{[]string{"3,1"}, []string{"1", "3"}},
		{[]string{"1", "3"}, []string{"1", "3"}},
	} {
		out, _, err := mtl(t, append([]string{"show", "--db", db, "--format", "csv"}, c.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var runs []string
		for _, r := range csvRows(t, out) {
			if !slices.Contains(runs, r["run"]) {
				runs = append(runs, r["run"])
			}
		}
		if !slices.Equal(runs, c.want) {
			t.Errorf("show %v: runs %v, want %v", c.args, runs, c.want)
		}
	}
}

// sweptSuite sweeps moe_chunk, as suites/ci.yaml's moe-chunk case does.
const sweptSuite = `name: swept
model: { preset: qwen3-moe-mini, dtype: f32, seed: 1 }
backend: cpu
repetitions: 2
warmup: 0
params: { prompt_len: 8, gen_len: 4 }
cases:
  - name: moe-chunk
    kind: model
    params: { batch: 1, layers: 1, moe_strategy: chunked }
    matrix: { moe_chunk: [1, 64] }
`

// A --set of a parameter a case's matrix sweeps runs every case of the
// sweep at the value set, each under its own key: its label keeps the
// value its name (and key) carries and says what the --set changed, so
// show's rows stay two, in every format, and the progress names them as
// show does.
func TestOverrideOfSweptParameterLabels(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "swept.yaml")
	if err := os.WriteFile(suite, []byte(sweptSuite), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "r.db")
	_, stderr, err := mtl(t, "run", suite, "--db", db, "--backend", "cpu", "--threads", "1", "--set", "moe_chunk=1")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	var got strings.Builder
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "[") && strings.Contains(line, " rep 1:") {
			head, _, _ := strings.Cut(line, ":")
			fmt.Fprintf(&got, "progress: %s\n", head)
		}
	}
	for _, format := range []string{"table", "md", "csv", "json"} {
		out, _, err := mtl(t, "show", "1", "--db", db, "--format", format)
		if err != nil {
			t.Fatalf("show --format %s: %v", format, err)
		}
		var labels []string
		switch format {
		case "table", "md":
			sep := "│"
			if format == "md" {
				sep = "|"
			}
			for _, line := range strings.Split(out, "\n") {
				if cells := strings.Split(line, sep); len(cells) > 2 && strings.Contains(cells[1], "moe-chunk") {
					labels = append(labels, strings.TrimSpace(cells[1]))
				}
			}
		case "csv":
			for _, r := range csvRows(t, out) {
				if r["metric"] == "decode_tok_s" {
					labels = append(labels, r["case"]+"  key "+r["key"]+"  moe_chunk "+r["moe_chunk"])
				}
			}
		case "json":
			var rows []map[string]any
			if err := json.Unmarshal([]byte(out), &rows); err != nil {
				t.Fatalf("show --format json: %v\n%s", err, out)
			}
			for _, r := range rows {
				if r["metric"] == "decode_tok_s" {
					labels = append(labels, fmt.Sprint(r["case"]))
				}
			}
		}
		if len(labels) != 2 || labels[0] == labels[1] {
			t.Errorf("show --format %s: case labels %q, want two different ones:\n%s", format, labels, out)
		}
		for _, l := range labels {
			fmt.Fprintf(&got, "%s: %s\n", format, l)
		}
	}
	golden(t, "override-swept-labels", got.String())
}

// show's tidy rows carry the run's backend_notes (runs lists them too), as
// a run column after overrides, in the summaries and the raw rows alike.
func TestShowBackendNotesColumn(t *testing.T) {
	db := recordTwoCases(t)
	out, _, err := mtl(t, "runs", "--db", db, "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	runs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs csv: %v\n%s", err, out)
	}
	notes := runs[1][slices.Index(runs[0], "backend_notes")]
	if notes == "" {
		t.Fatalf("the cpu run recorded no backend notes:\n%s", out)
	}
	for _, args := range [][]string{{"--format", "csv"}, {"--format", "csv", "--raw"}} {
		out, _, err := mtl(t, append([]string{"show", "two", "--db", db}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		i := slices.Index(recs[0], "backend_notes")
		if i < 0 || recs[0][i-1] != "overrides" {
			t.Fatalf("%v: want backend_notes after overrides, got %v", args, recs[0])
		}
		for _, r := range recs[1:] {
			if r[i] != notes {
				t.Errorf("%v: backend_notes = %q, want %q", args, r[i], notes)
			}
		}
	}
	out, _, err = mtl(t, "show", "two", "--db", db, "--format", "jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var row map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &row); err != nil {
		t.Fatal(err)
	}
	if row["backend_notes"] != notes {
		t.Errorf("jsonl backend_notes = %#v, want %q", row["backend_notes"], notes)
	}
}

// The results database or a model given where a suite is wanted is named
// for what it is, with the commands that read it, as an input error (exit
// 2), by every command that takes a suite.
func TestSuiteArgumentOfAnotherKind(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "results.db")
	d, err := results.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	model := filepath.Join(dir, "tiny.gguf")
	if err := os.WriteFile(model, []byte("GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	dbHint := db + ": an SQLite database, not a suite (mtlbench keeps its results in one: list its runs with `mtlbench runs --db " + db + "`, or report them with `mtlbench report --db " + db + "`)"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", db, "--db", filepath.Join(dir, "store.db")}, dbHint},
		{[]string{"suites", "validate", db}, dbHint},
		{[]string{"suites", "show", model}, model + ": a GGUF model file, not a suite (benchmark it with `mtlbench bench -m " + model + "`"},
		{[]string{"run", model, "--db", filepath.Join(dir, "store.db")}, "run it with `mtlbench generate --model " + model + "`"},
	} {
		_, stderr, err := mtl(t, tc.args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error()+stderr, tc.want) {
			t.Errorf("%v: exit %d, %v\n%s\nwant exit 2 and %q", tc.args, exitCode(err), err, stderr, tc.want)
		}
	}
}
