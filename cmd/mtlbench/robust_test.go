package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/results"
)

// exportLineWith is one export line of a run whose one case has the given
// roofline fraction samples.
func exportLineWith(fracs ...string) string {
	var ss []string
	for i, f := range fracs {
		ss = append(ss, fmt.Sprintf(`{"rep":%d,"metric":"decode_tok_s","value":50,"unit":"tok/s"}`, i),
			fmt.Sprintf(`{"rep":%d,"metric":"roofline_frac","value":%s,"unit":"ratio"}`, i, f))
	}
	return `{"format":"mtlbench-run/1","run":{"id":3,"suite_name":"s","started_at":"2026-01-02T03:04:05Z","machine":{"hostname":"h"}},` +
		`"cases":[{"case":{"key":"batch=1","name":"decode/batch=1","kind":"model","params":{"batch":"1"}},"samples":[` +
		strings.Join(ss, ",") + `]}]}`
}

// import refuses a value its metric cannot take, naming the file, the line
// and the metric, before anything is stored (the store is not even made).
func TestImportRefusesImpossibleValues(t *testing.T) {
	for _, tc := range []struct {
		name, value, want string
	}{
		{"a fraction of -1e308", "-1e308", "b.jsonl:2: run 3: case 0 \"decode/batch=1\" sample 3: roofline_frac rep 1: value -1e+308 is negative, and a fraction cannot be"},
		{"a fraction of -0.1", "-0.1", "b.jsonl:2: run 3: case 0 \"decode/batch=1\" sample 3: roofline_frac rep 1: value -0.1 is negative"},
		{"a fraction past JSON's range", "1e999", "b.jsonl:2: not an mtlbench export line"},
		{"a fraction of 0.4", "0.4", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data := exportLineWith("0.5") + "\n" + strings.Replace(exportLineWith("0.5", tc.value), `"id":3,"suite_name":"s"`, `"id":3,"suite_name":"t"`, 1) + "\n"
			want := tc.want
			if want != "" {
				want = dir + string(filepath.Separator) + want // the file by its path
			}
			db := importExpecting(t, dir, "b.jsonl", data, want)
			if tc.want == "" {
				return
			}
			if _, err := os.Stat(db); err == nil {
				t.Error("a refused import made the store")
			}
		})
	}
}

// storeWithRoofline records a finished run of two model cases, then sets
// their roofline fractions in SQL as a store written before import checked
// values may hold them; it returns the store's path.
func storeWithRoofline(t *testing.T, set string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	id, err := db.CreateRun(&results.Run{SuiteName: "s", Tag: "old", Backend: "cpu", Status: results.RunComplete})
	if err != nil {
		t.Fatal(err)
	}
	cases := []results.Case{
		{Name: "decode/batch=1", Kind: results.CaseModel, Params: map[string]string{"model": "qwen3-moe-mini", "batch": "1"}},
		{Name: "decode/batch=2", Kind: results.CaseModel, Params: map[string]string{"model": "qwen3-moe-mini", "batch": "2"}},
	}
	if err := db.AddCases(id, cases); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		var ss []results.Sample
		for rep := range 3 {
			ss = append(ss, results.Sample{Rep: rep, Metric: "decode_tok_s", Value: float64(40 + 10*i + rep), Unit: "tok/s"},
				results.Sample{Rep: rep, Metric: "roofline_frac", Value: 0.5 + 0.01*float64(rep), Unit: "ratio"})
		}
		if err := db.FinishCase(c.ID, ss, nil, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.SQL().Exec(`UPDATE samples SET value = ` + set + ` WHERE metric = 'roofline_frac'`); err != nil {
		t.Fatal(err)
	}
	return path
}

// show --raw writes every stored sample: one that is not finite is +Inf
// in csv, and null in json and jsonl, which name it on stderr.
func TestShowRawNotFinite(t *testing.T) {
	path := storeWithRoofline(t, "CASE WHEN case_id = 1 AND rep = 0 THEN 9e999 ELSE value END")
	for _, tc := range []struct {
		format, want, stderr string
	}{
		{"csv", ",roofline_frac,ratio,0,+Inf", ""},
		{"jsonl", `"metric":"roofline_frac","unit":"ratio","rep":0,"value":null`, "case decode/batch=1: roofline_frac repetition 0 is +Inf, written as null"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			out, stderr, err := mtl(t, "show", "old", "--db", path, "--format", tc.format, "--raw")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("show --raw --format %s does not write %q:\n%s", tc.format, tc.want, out)
			}
			if tc.stderr == "" && strings.Contains(stderr, "written as null") || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q, want %q", stderr, tc.stderr)
			}
		})
	}
}

// report finishes on whatever values a store holds: the roofline chart
// leaves out what it cannot draw and says so, or, with nothing it can draw,
// is itself left out, saying why, and the rest of the report is written.
// Before, a fraction of -1e307 or less never finished.
func TestReportOnImpossibleStoredValues(t *testing.T) {
	for _, tc := range []struct {
		name, set string
		noted     bool   // the chart says a value was left out
		leftOut   string // "": the roofline chart is drawn
	}{
		{"one case at -1e308", "CASE WHEN case_id = 1 THEN -1e308 ELSE value END", true, ""},
		{"one case at +Inf", "CASE WHEN case_id = 1 THEN 9e999 ELSE value END", true, ""},
		{"one case at 1e308", "CASE WHEN case_id = 1 THEN 1e308 ELSE value END", true, ""},
		// The median of three is drawn; three give no interval to leave out.
		{"one sample at -1e307", "CASE WHEN case_id = 2 AND rep = 0 THEN -1e307 ELSE value END", false, ""},
		// The statistics leave out every value: the median is NaN.
		{"every sample at -1e308", "-1e308", false, "chart roofline is left out: no value can be drawn: all 2 are negative, not finite or over 1e+300 (NaN)"},
		{"every sample at +Inf", "9e999", false, "chart roofline is left out: no value can be drawn"},
		{"every sample at 1e308", "1e308", false, "chart roofline is left out: no value can be drawn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := storeWithRoofline(t, tc.set)
			out := filepath.Join(t.TempDir(), "report")
			type result struct {
				stderr string
				err    error
			}
			done := make(chan result, 1)
			go func() {
				_, stderr, err := mtl(t, "report", "old", "--db", path, "--out", out)
				done <- result{stderr, err}
			}()
			var res result
			select {
			case res = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("report still running after 60 s")
			}
			if res.err != nil {
				t.Fatal(res.err)
			}
			page, err := os.ReadFile(filepath.Join(out, "index.html"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.leftOut != "" {
				if !strings.Contains(res.stderr, tc.leftOut) || !strings.Contains(string(page), "chart roofline is left out: no value can be drawn") {
					t.Errorf("report does not say %q:\n%s", tc.leftOut, res.stderr)
				}
				if _, err := os.Stat(filepath.Join(out, "roofline.svg")); err == nil {
					t.Error("a roofline chart with nothing drawable was written")
				}
				return
			}
			svg, err := os.ReadFile(filepath.Join(out, "roofline.svg"))
			if err != nil {
				t.Fatal(err)
			}
			if noted := strings.Contains(string(svg), "not drawn"); noted != tc.noted {
				t.Errorf("the roofline chart says a value was left out: %v, want %v", noted, tc.noted)
			}
		})
	}
}

// A database another program made is refused by every command, by path,
// and left as it was; a read-only command (runs) once gave it mtlbench's
// tables.
func TestForeignDatabaseRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stmts []string
		has   string
	}{
		{"with a runs table", []string{`CREATE TABLE runs (id INTEGER PRIMARY KEY)`, `CREATE TABLE app_data (x)`}, "app_data, runs"},
		{"without one", []string{`CREATE TABLE app_data (x)`}, "app_data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "foreign.sqlite")
			raw, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.stmts {
				if _, err := raw.Exec(s); err != nil {
					t.Fatal(err)
				}
			}
			raw.Close()
			before, _ := os.ReadFile(path)
			want := path + " is not an mtlbench results database (it has tables " + tc.has + ", but no mtlbench schema)"
			for _, args := range [][]string{{"runs"}, {"show", "latest"}, {"export"}} {
				_, _, err := mtl(t, append(args, "--db", path)...)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s: err = %v\nwant %q", args[0], err, want)
				}
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Error("the foreign file changed")
			}
		})
	}
}

// export leaves out the values a store written before the checks on
// storing may hold, which import would refuse (results.CheckValue), and
// names each on stderr, so that what it writes imports; a file it could
// not finish is never left in place of the one it was to replace.
func TestExportLeavesOutImpossibleValues(t *testing.T) {
	for _, tc := range []struct {
		name, set string
		warn      string // "": no sample left out
		samples   int    // roofline_frac samples exported
	}{
		{"one sample at +Inf", "CASE WHEN case_id = 1 AND rep = 0 THEN 9e999 ELSE value END",
			`run 1 (s): case "decode/batch=1": roofline_frac rep 0 left out: value +Inf is not finite`, 5},
		{"one sample at -0.5", "CASE WHEN case_id = 2 AND rep = 2 THEN -0.5 ELSE value END",
			`run 1 (s): case "decode/batch=2": roofline_frac rep 2 left out: value -0.5 is negative`, 5},
		{"every sample fine", "value", "", 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := storeWithRoofline(t, tc.set)
			dir := t.TempDir()
			file := filepath.Join(dir, "old.jsonl")
			if err := os.WriteFile(file, []byte("the export before\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, stderr, err := mtl(t, "export", "old", "--db", path, "-o", file)
			if err != nil {
				t.Fatalf("export: %v\n%s", err, stderr)
			}
			if tc.warn == "" && strings.Contains(stderr, "left out") || !strings.Contains(stderr, tc.warn) {
				t.Errorf("stderr = %q\nwant %q", stderr, tc.warn)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(string(data), `"metric":"roofline_frac"`); got != tc.samples {
				t.Errorf("%d roofline_frac samples exported, want %d", got, tc.samples)
			}
			if _, stderr, err := mtl(t, "import", file, "--db", filepath.Join(dir, "new.db")); err != nil {
				t.Fatalf("import of the export: %v\n%s", err, stderr)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 2 {
				t.Errorf("the folder holds %d files, want the export and the store: a temporary file was left", len(entries))
			}
		})
	}
}

// show, report and export take a comma-separated list of references as
// compare does (a tag never holds a comma), the same as naming each apart.
func TestReferenceListsWithCommas(t *testing.T) {
	dir := t.TempDir()
	file, path := filepath.Join(dir, "two.jsonl"), filepath.Join(dir, "r.db")
	second := strings.NewReplacer(`"id":3,"suite_name":"s"`, `"id":4,"suite_name":"t"`, "03:04:05Z", "04:04:05Z").Replace(exportLineWith("0.5"))
	data := strings.Replace(exportLineWith("0.5"), `"suite_name":"s"`, `"suite_name":"s","tag":"x"`, 1) + "\n" +
		strings.Replace(second, `"suite_name":"t"`, `"suite_name":"t","tag":"y"`, 1) + "\n"
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := mtl(t, "import", file, "--db", path); err != nil {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	for _, args := range [][]string{{"show", "--format", "csv"}, {"export"}} {
		apart, _, err := mtl(t, append(args, "x", "y", "--db", path)...)
		if err != nil {
			t.Fatal(err)
		}
		for _, list := range []string{"x,y", "x, y"} {
			got, _, err := mtl(t, append(args, list, "--db", path)...)
			if err != nil {
				t.Errorf("%s %q: %v", args[0], list, err)
				continue
			}
			if got != apart {
				t.Errorf("%s %q differs from %s x y:\n%s\nwant:\n%s", args[0], list, args[0], got, apart)
			}
		}
	}
	out := filepath.Join(dir, "report")
	if _, stderr, err := mtl(t, "report", "x,y", "--db", path, "-o", out); err != nil {
		t.Fatalf("report x,y: %v\n%s", err, stderr)
	}
	page, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "runs 1, 2") {
		t.Errorf("report x,y does not report runs 1 and 2")
	}
	// A reference naming no run is refused as given, by each command that
	// takes one.
	for _, args := range [][]string{{"show", ","}, {"compare", " ", "x"}, {"gate", "--baseline", "x", "--candidate", ","}, {"report", ","}} {
		if _, _, err := mtl(t, append(args, "--db", path)...); err == nil || !regexp.MustCompile(`empty run reference "[ ,]": give a run id`).MatchString(err.Error()) {
			t.Errorf("%s: err = %v, want an empty reference named", args, err)
		}
	}
	// An empty item among others ("x,$B" with B unset) is refused, naming
	// the list and the item, as every other list of the command line
	// refuses one: it was skipped, so fewer runs than named were read.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "x,y,"}, `run references "x,y,": item 3 of 3 is empty`},
		{[]string{"show", "x", ""}, `empty run reference ""`},
		{[]string{"export", ",x"}, `run references ",x": item 1 of 2 is empty`},
		{[]string{"report", "x,,y", "-o", filepath.Join(dir, "never")}, `run references "x,,y": item 2 of 3 is empty`},
		{[]string{"compare", "x,", "y"}, `A: run references "x,": item 2 of 2 is empty`},
		{[]string{"gate", "--baseline", "x", "--candidate", "y, "}, `candidate: run references "y, ": item 2 of 2 is empty`},
		{[]string{"runs", "--tag", "x,,y"}, `--tag "x,,y": item 2 of 3 is empty`},
	} {
		if _, _, err := mtl(t, append(tc.args, "--db", path)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.args, err, tc.want)
		}
	}
	// gate reads both sides before refusing either, so two unknown
	// references are named at once.
	_, _, err = mtl(t, "gate", "--baseline", "nope-a", "--candidate", "nope-b", "--db", path)
	for _, want := range []string{"baseline: ", `"nope-a"`, "candidate: ", `"nope-b"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("gate with two unknown references: err = %v, want %s in it", err, want)
		}
	}
}

// import checks every run of every file for what the store would refuse (a
// repetition recorded twice, a case key repeated, an unknown status) before
// storing any: a file whose second run is wrong stores nothing, and the
// error names the file, the line and the case.
func TestImportChecksEveryRunFirst(t *testing.T) {
	sample := `{"rep":0,"metric":"decode_tok_s","value":50,"unit":"tok/s"}`
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"a repetition recorded twice", sample, sample + "," + strings.Replace(sample, "50", "51", 1),
			`b.jsonl:2: run 3: case 0 "decode/batch=1" sample 1: decode_tok_s rep 0 recorded twice`},
		{"a case key repeated", `]}]}`, `]},{"case":{"key":"batch=1","name":"again","kind":"model","params":{"batch":"1"}},"samples":[]}]}`,
			`b.jsonl:2: run 3: case 1 "again" has no key or repeats one`},
		{"a case status unknown", `"kind":"model","params"`, `"kind":"model","status":"great","params"`,
			`b.jsonl:2: run 3: case 0 "decode/batch=1": results: invalid case status "great"`},
		{"an op timing of no component", `]}]}`, `],"timings":[{"rep":0,"layer":0,"component":"bogus","op":"x","seconds":1,"calls":1}]}]}`,
			`b.jsonl:2: run 3: case 0 "decode/batch=1" timing 0: results: invalid op component "bogus"`},
		{"an op timing of negative seconds", `]}]}`, `],"timings":[{"rep":0,"layer":0,"component":"mlp","op":"x","seconds":-1,"calls":1}]}]}`,
			`b.jsonl:2: run 3: case 0 "decode/batch=1" timing 0: op "x": seconds -1 is no value it can take`},
		{"an op timing of negative calls", `]}]}`, `],"timings":[{"rep":0,"layer":0,"component":"mlp","op":"x","seconds":1,"calls":-3}]}]}`,
			`b.jsonl:2: run 3: case 0 "decode/batch=1" timing 0: op "x": calls -3 is no value it can take`},
		{"operand traffic of more distinct bytes than bytes", `]}]}`, `],"operands":[{"rep":0,"kernel":"k","operand":"a","read":1,"distinct_read":5}]}]}`,
			`b.jsonl:2: run 3: case 0 "decode/batch=1" operand traffic 0 ("k"'s "a"): 5 distinct bytes read of 1 read`},
		{"a suite name of two lines", `"suite_name":"t"`, `"suite_name":"t\nu"`,
			`b.jsonl:2: run 3: run.suite_name "t\nu" holds the control character U+000A`},
		{"a host name holding a NUL", `"hostname":"h"`, `"hostname":"h\u0000"`,
			`b.jsonl:2: run 3: run.machine.hostname "h\x00" holds the control character U+0000`},
		{"a negative core count", `"hostname":"h"`, `"hostname":"h","cpu_cores":-5`,
			`b.jsonl:2: run 3: run.machine.cpu_cores -5 is negative`},
		{"a parameter name of two lines", `"params":{"batch":"1"}`, `"params":{"batch":"1","a\nb":"2"}`,
			`b.jsonl:2: run 3: case 0 "decode/batch=1": params name "a\nb" holds the control character U+000A`},
		{"a parameter value holding a tab", `"params":{"batch":"1"}`, `"params":{"batch":"1","dtype":"a\tb"}`,
			`b.jsonl:2: run 3: case 0 "decode/batch=1": params.dtype "a\tb" holds the control character U+0009`},
		{"an override of two lines", `"suite_name":"t"`, `"suite_name":"t","overrides":{"x":"1\n2"}`,
			`b.jsonl:2: run 3: run.overrides.x "1\n2" holds the control character U+000A`},
		{"a sample's value null", `"value":50`, `"value":null`,
			`b.jsonl:2: run 3: case 0 "decode/batch=1" sample 0 has null for its value (cases.samples.value)`},
		{"a sample's value missing", `"value":50,`, ``,
			`b.jsonl:2: run 3: case 0 "decode/batch=1" sample 0 has no value (cases.samples.value)`},
		{"a sample's rep missing", `{"rep":0,"metric":"decode_tok_s"`, `{"metric":"decode_tok_s"`,
			`b.jsonl:2: run 3: case 0 "decode/batch=1" sample 0 has no rep (cases.samples.rep)`},
		{"a start that is no time", `"started_at":"2026-01-02T03:04:05Z"`, `"started_at":"yesterday"`,
			`b.jsonl:2: not an mtlbench export line: run.started_at is "yesterday": want a time as RFC 3339 writes it`},
		{"a start that is a number", `"started_at":"2026-01-02T03:04:05Z"`, `"started_at":5`,
			`b.jsonl:2: not an mtlbench export line: run.started_at is 5: want a time`},
		{"a case's end that is no time", `"kind":"model","params"`, `"kind":"model","ended_at":"2026-13-01T00:00:00Z","params"`,
			`b.jsonl:2: not an mtlbench export line: case 0: cases.case.ended_at is "2026-13-01T00:00:00Z": want a time`},
		{"a negative bandwidth", `"suite_name":"t"`, `"suite_name":"t","read_bandwidth_gb_s":-5`,
			`b.jsonl:2: run 3: run.read_bandwidth_gb_s: value -5 is negative`},
		{"a bandwidth past any machine's", `"suite_name":"t"`, `"suite_name":"t","read_bandwidth_gb_s":1e300`,
			`b.jsonl:2: run 3: run.read_bandwidth_gb_s: value 1e+300`},
		{"a negative matmul peak", `"suite_name":"t"`, `"suite_name":"t","matmul_peak_gflop_s":-1`,
			`b.jsonl:2: run 3: run.matmul_peak_gflop_s: value -1 is negative`},
		{"operand traffic recorded twice", `]}]}`, `],"operands":[{"rep":0,"kernel":"k","operand":"a","read":1},{"rep":0,"kernel":"k","operand":"a","read":1}]}]}`,
			`b.jsonl:2: run 3: case 0 "decode/batch=1" operand traffic 1: k's a rep 0 recorded twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file, db := filepath.Join(dir, "b.jsonl"), filepath.Join(dir, "r.db")
			second := strings.Replace(exportLineWith("0.5"), `"id":3,"suite_name":"s"`, `"id":3,"suite_name":"t"`, 1)
			if !strings.Contains(second, tc.old) {
				t.Fatalf("the line lacks %q", tc.old)
			}
			if tc.old == `]}]}` {
				second = strings.TrimSuffix(second, tc.old) + tc.new
			} else {
				second = strings.Replace(second, tc.old, tc.new, 1)
			}
			if err := os.WriteFile(file, []byte(exportLineWith("0.5")+"\n"+second+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, stderr, err := mtl(t, "import", file, "--db", db)
			if err == nil || !strings.Contains(err.Error(), dir+string(filepath.Separator)+tc.want) {
				t.Fatalf("import: err = %v\nwant %q\n%s", err, tc.want, stderr)
			}
			if _, err := os.Stat(db); err == nil {
				t.Error("a refused import made the store")
			}
		})
	}
}

// runs says on stderr when its list is cut at --limit, and when no run is
// listed, so that neither reads as all the store holds; stdout keeps the
// table alone.
func TestRunsSaysWhatItLeftOut(t *testing.T) {
	dir := t.TempDir()
	file, path := filepath.Join(dir, "three.jsonl"), filepath.Join(dir, "r.db")
	var lines []string
	for i, h := range []string{"03", "04", "05"} {
		lines = append(lines, strings.NewReplacer(`"id":3,"suite_name":"s"`, fmt.Sprintf(`"id":%d,"suite_name":"s%d"`, i+3, i),
			"03:04:05Z", h+":04:05Z").Replace(exportLineWith("0.5")))
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := mtl(t, "import", file, "--db", path); err != nil {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	for _, tc := range []struct {
		args   []string
		rows   int
		stderr string
	}{
		{[]string{"--limit", "2"}, 2, "listed the newest 2 runs; more match (--limit 0 lists all)\n"},
		{[]string{"--limit", "3"}, 3, ""},
		{nil, 3, ""},
		{[]string{"--tag", "nope"}, 0, "no run in " + path + " matches the filters\n"},
		// A typo of a suite the store holds is named, not read as a store
		// without its runs.
		{[]string{"--suite", "s11"}, 0, "no run in " + path + " matches the filters (--suite \"s11\": did you mean \"s1\"?)\n"},
		{[]string{"--suite", "s1", "--kind", "tune"}, 0, "no run in " + path + " matches the filters\n"},
		{[]string{"--format", "csv", "--limit", "1"}, 1, "listed the newest 1 run; more match (--limit 0 lists all)\n"},
	} {
		stdout, stderr, err := mtl(t, append([]string{"runs", "--db", path}, tc.args...)...)
		if err != nil {
			t.Fatalf("runs %v: %v", tc.args, err)
		}
		if stderr != tc.stderr {
			t.Errorf("runs %v: stderr %q, want %q", tc.args, stderr, tc.stderr)
		}
		if got := len(regexp.MustCompile(`(?m)^(│ +)?\d+( │|,)`).FindAllString(stdout, -1)); got != tc.rows {
			t.Errorf("runs %v: %d rows, want %d:\n%s", tc.args, got, tc.rows, stdout)
		}
	}
}

// show's data formats and benchfmt leave out the values a store written
// before the checks on storing may hold, as its table does, and name them
// on stderr, where the table puts a note beside itself; benchfmt, which
// benchstat computes its own statistics from, writes none of them.
func TestShowDataNamesLeftOutValues(t *testing.T) {
	path := storeWithRoofline(t, "CASE WHEN case_id = 1 AND rep = 0 THEN -0.5 ELSE value END")
	const note = "mtlbench: warning: run 1: case decode/batch=1: 1 of 3 roofline_frac samples left out of the statistics"
	for _, tc := range []struct {
		format string
		absent string // what stdout must not hold: the value left out
	}{
		{"csv", ""},
		{"json", ""},
		{"jsonl", ""},
		{"benchfmt", " -0.5 roofline-frac"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			out, stderr, err := mtl(t, "show", "old", "--db", path, "--format", tc.format)
			if err != nil {
				t.Fatalf("show: %v\n%s", err, stderr)
			}
			if !strings.Contains(stderr, note) || strings.Count(stderr, "left out") != 1 {
				t.Errorf("stderr = %q\nwant %q once", stderr, note)
			}
			if tc.absent != "" && strings.Contains(out, tc.absent) {
				t.Errorf("stdout holds %q:\n%s", tc.absent, out)
			}
		})
	}
}

// A sample in another unit than its metric's name says (a peak RSS in MiB)
// would be compared and gated as that unit: import refuses it, naming the
// file, line and metric.
func TestImportRefusesAMetricInAnotherUnit(t *testing.T) {
	for _, tc := range []struct {
		metric, unit, want string
	}{
		{"peak_rss_bytes", "MiB", `u.jsonl:1: run 3: case 0 "decode/batch=1" sample 0: peak_rss_bytes rep 0: peak_rss_bytes is in B, but its unit is "MiB"`},
		{"request_per_s", "tok/s", `u.jsonl:1: run 3: case 0 "decode/batch=1" sample 0: request_per_s rep 0: request_per_s is in req/s, but its unit is "tok/s"`},
		{"roofline_frac", "%", `u.jsonl:1: run 3: case 0 "decode/batch=1" sample 0: roofline_frac rep 0: roofline_frac is in ratio, but its unit is "%"`},
		{"peak_rss_bytes", "B", ""},
		{"request_per_s", "req/s", ""},
	} {
		t.Run(tc.metric+" in "+tc.unit, func(t *testing.T) {
			line := strings.Replace(exportLineWith(), `"samples":[]`,
				fmt.Sprintf(`"samples":[{"rep":0,"metric":%q,"value":130,"unit":%q}]`, tc.metric, tc.unit), 1)
			importExpecting(t, t.TempDir(), "u.jsonl", line+"\n", tc.want)
		})
	}
}

// importExpecting imports data, written to dir/name, into dir/r.db, which
// it returns: the import succeeds when want is "", else fails with an
// error holding want.
func importExpecting(t *testing.T, dir, name, data, want string) string {
	t.Helper()
	file, db := filepath.Join(dir, name), filepath.Join(dir, "r.db")
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := mtl(t, "import", file, "--db", db)
	if want == "" {
		if err != nil {
			t.Fatalf("import: %v\n%s", err, stderr)
		}
	} else if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("import: err = %v\nwant %q", err, want)
	}
	return db
}

// A results file of 0 bytes (touched, or truncated) holds no runs: the
// commands that only read it say so, naming it, and leave it as it is, as
// they do for a path that holds no file, rather than making it a store.
func TestReadCommandsLeaveAnEmptyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "results.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"runs"}, {"show", "1"}, {"compare", "1", "2"}, {"gate", "--baseline", "1", "--candidate", "2"},
		{"report", "-o", filepath.Join(dir, "rep")}, {"export", "1", "-o", filepath.Join(dir, "x.jsonl")},
		{"run", "ci", "--backend", "cpu", "--resume", "1"},
	} {
		_, _, err := mtl(t, append(args, "--db", path)...)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "empty") {
			t.Errorf("%s on an empty file: %v", args[0], err)
		}
		ents, _ := os.ReadDir(dir)
		if st, err := os.Stat(path); err != nil || st.Size() != 0 || len(ents) != 1 {
			t.Fatalf("%s changed the empty file or wrote beside it: %v, %d entries", args[0], err, len(ents))
		}
	}
}

// An export file saved by a Windows editor starts with a UTF-8 byte-order
// mark: import reads it as the file without one, as peer import and a
// suite do, and a mark anywhere else is still no export line.
func TestImportSkipsAByteOrderMark(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"a mark at the start", "\uFEFF" + exportLineWith("0.5") + "\n", ""},
		{"a mark at the start of a second line", exportLineWith("0.5") + "\n\uFEFF" + exportLineWith("0.5") + "\n", "b.jsonl:2: not an mtlbench export line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file, db := filepath.Join(dir, "b.jsonl"), filepath.Join(dir, "r.db")
			if err := os.WriteFile(file, []byte(tc.data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := mtl(t, "import", "--db", db, file)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if out, _, err := mtl(t, "runs", "--db", db, "--format", "csv"); err != nil || strings.Count(out, "\n") != 2 {
					t.Errorf("runs after the import: %v\n%s", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// import names a file it cannot read as every reader of a user's file
// does (internal/readfile): a folder is no export, and a missing file is
// said without Go's "open".
func TestImportOfAFolderOrAMissingFile(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	for arg, want := range map[string]string{
		dir:                              dir + ": a folder, not an export file",
		filepath.Join(dir, "none.jsonl"): filepath.Join(dir, "none.jsonl") + ": no such file or directory",
	} {
		_, _, err := mtl(t, "import", "--db", db, arg)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("import %s: %v, want %q", arg, err, want)
		}
	}
}

// A run whose machine recorded no hostname (a peer import's) is said as
// such by import, not as "run 3 of  (s, ...)".
func TestImportOfARunWithoutHostname(t *testing.T) {
	dir := t.TempDir()
	file, db := filepath.Join(dir, "b.jsonl"), filepath.Join(dir, "r.db")
	line := strings.Replace(exportLineWith("0.5"), `"machine":{"hostname":"h"}`, `"machine":{"hostname":""}`, 1)
	if err := os.WriteFile(file, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, stderr, err := mtl(t, "import", "--db", db, file)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(stderr, "of  (") || !strings.Contains(stderr, "run 3 of an unnamed machine (s") {
			t.Errorf("import said:\n%s", stderr)
		}
	}
}

// A store that holds no run (made, then emptied, or its runs deleted):
// the commands that look a run up say it holds none and how to record one,
// not to list its runs, which shows nothing.
func TestStoreWithoutRunsSaysHowToRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.db")
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, args := range [][]string{
		{"show", "latest"}, {"show", "7"}, {"compare", "main", "pr"}, {"gate", "--baseline", "main", "--candidate", "latest"},
		{"report", "pr"}, {"export", "latest"},
	} {
		_, _, err := mtl(t, append(args, "--db", path)...)
		if want := path + " holds no runs yet (record one with mtlbench run ci or mtlbench bench"; exitCode(err) != 2 || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: exit %d, %v; want 2 and %q", args, exitCode(err), err, want)
		}
	}
}

// An export line of the wrong shape is refused in the line's terms: the
// key and the JSON value found, not Go's struct fields and types.
func TestImportNamesTheBadField(t *testing.T) {
	for _, tc := range []struct {
		name, line, want string
	}{
		{"an id as a string", strings.Replace(exportLineWith("0.5"), `"id":3`, `"id":"x"`, 1), `b.jsonl:1: not an mtlbench export line: run.id is a JSON string ("x"), want a whole number`},
		{"a value past JSON's range", exportLineWith("1e999"), "b.jsonl:1: not an mtlbench export line: cases.samples.value is 1e999, beyond a 64-bit float's range"},
		{"a value of NaN", exportLineWith("NaN"), "b.jsonl:1: not an mtlbench export line: cases[0].samples[1].value is NaN (column "},
		{"a value of -Infinity", exportLineWith("-Infinity"), "b.jsonl:1: not an mtlbench export line: cases[0].samples[1].value is -Infinity (column "},
		{"cut short", `{"format":"mtlbench-run/1",`, "b.jsonl:1: the line ends (after 27 bytes) before its run does: the export was cut short mid-line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			importExpecting(t, dir, "b.jsonl", tc.line+"\n", filepath.Join(dir, tc.want))
		})
	}
}

// A --db that is no SQLite file at all (a suite, notes) is named as such,
// not by SQLite's "file is not a database (26)" alone, and left as it was.
func TestDBThatIsNoSQLiteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.yaml")
	const text = "name: k\nbackend: cpu\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"runs"}, {"show", "1"}, {"compare", "1", "2"},
		{"bench", "-m", "qwen3-moe-mini", "-p", "4", "-n", "2", "-r", "1", "--backend", "cpu"},
	} {
		_, _, err := mtl(t, append(args, "--db", path)...)
		want := "results: " + path + " is not an SQLite database: check that --db or MTLBENCH_DB names a results database"
		if exitCode(err) != 2 || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: exit %d, %v; want 2 and %q", args, exitCode(err), err, want)
		}
		if got, _ := os.ReadFile(path); string(got) != text {
			t.Fatalf("%v changed the file: %q", args, got)
		}
	}
}
