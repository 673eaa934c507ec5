package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// An export closes with a line counting its runs, cases and samples: one
// cut at a line's end, or damaged, is refused whole, naming the file and
// the line, and stores nothing, from a file or from standard input. A
// version 1 export, which had no closing line, imports as it did; exports
// joined end to end each close their own runs.
func TestImportOfAnExportCutShort(t *testing.T) {
	src := seedCompareDB(t)
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.jsonl")
	if _, _, err := mtl(t, "export", "--db", src, "-o", whole); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	n := len(lines) - 1 // runs; the last line closes them
	if n < 2 || !strings.Contains(lines[n], `"end":{"runs":`) {
		t.Fatalf("export of %d lines, the last %.60q...: want runs and a closing line", len(lines), lines[len(lines)-1])
	}
	join := func(ls ...[]string) string {
		var s string
		for _, l := range ls {
			for _, x := range l {
				s += strings.TrimSuffix(x, "\n") + "\n"
			}
		}
		return s
	}
	v1 := func(ls []string) []string {
		var out []string
		for _, l := range ls[:len(ls)-1] {
			out = append(out, strings.Replace(l, `"format":"mtlbench-run/2"`, `"format":"mtlbench-run/1"`, 1))
		}
		return out
	}
	// The first run's first sample (a flat object) taken out.
	at := strings.Index(lines[0], `"samples":[{`) + len(`"samples":[`)
	noSample := lines[0][:at] + lines[0][at+strings.Index(lines[0][at:], "},")+2:]
	for _, tc := range []struct {
		name, data string
		stdin      bool
		want       string // "": imported, with this many runs
		runs       int
	}{
		{"whole", join(lines), false, "", n},
		{"whole, from standard input", join(lines), true, "", n},
		{"cut mid-line", lines[0][:len(lines[0])/2], false, "x.jsonl:1: the line ends (after " + strconv.Itoa(len(lines[0])/2) + " bytes) before its run does: the export was cut short mid-line", 0},
		{"cut mid-line, from standard input", join(lines[:1]) + lines[1][:100], true, "standard input:2: the line ends (after 100 bytes) before its run does", 0},
		// One value over many lines (jq ., show --format json) is said as
		// such, not as JSON that ends at column 1.
		{"a JSON file of many lines", "{\n  \"format\": \"mtlbench-run/2\"\n}\n", false, "x.jsonl:1: a JSON value that goes on past its line (a file of --format json, or one pretty-printed by jq .), not an export line", 0},
		{"a JSON array of many lines", "[\n  {\n    \"run\": 1\n  }\n]\n", false, "x.jsonl:1: a JSON value that goes on past its line", 0},
		{"an export line pretty-printed", strings.Replace(lines[0], `{"format":`, "{\n\"format\":", 1) + join(lines[1:]), false, "x.jsonl:1: a JSON value that goes on past its line", 0},
		{"cut after its first run", join(lines[:1]), false, "x.jsonl:1: the export ends without its closing line (the count of its runs), after 1 run from line 1 on: it was cut short", 0},
		{"cut before its closing line", join(lines[:n]), false, "x.jsonl:" + strconv.Itoa(n) + ": the export ends without its closing line", 0},
		{"cut, from standard input", join(lines[:1]), true, "standard input:1: the export ends without its closing line", 0},
		{"a run left out", join(lines[1:]), false, "x.jsonl:" + strconv.Itoa(n) + ": the closing line counts " + strconv.Itoa(n) + " runs", 0},
		{"a sample left out", join([]string{noSample}, lines[1:]), false, "samples, and the export holds", 0},
		{"a closing line of a wrong type", join(lines[:n], []string{strings.Replace(lines[n], `"runs":`, `"runs":"x",`+`"r":`, 1)}), false, "x.jsonl:" + strconv.Itoa(n+1) + ": not an mtlbench export's closing line", 0},
		{"a closing line with another field", join(lines[:n], []string{strings.Replace(lines[n], `"runs":`, `"bytes":1,"runs":`, 1)}), false, "x.jsonl:" + strconv.Itoa(n+1) + ": not an mtlbench export's closing line", 0},
		{"a closing line and nothing to close", join(lines[n:]), false, "x.jsonl:1: the closing line counts " + strconv.Itoa(n) + " runs", 0},
		{"two exports joined", join(lines, lines), false, "", n},
		{"two exports joined, the second cut", join(lines, lines[:1]), false, "x.jsonl:" + strconv.Itoa(n+2) + ": the export ends without its closing line (the count of its runs), after 1 run from line " + strconv.Itoa(n+2) + " on", 0},
		{"a version 1 export", join(v1(lines)), false, "", n},
		{"a version 1 export cut short", join(v1(lines)[:1]), false, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			file, db := filepath.Join(d, "x.jsonl"), filepath.Join(d, "r.db")
			if err := os.WriteFile(file, []byte(tc.data), 0o644); err != nil {
				t.Fatal(err)
			}
			var stderr string
			var err error
			if tc.stdin {
				_, stderr, err = mtlIn(t, tc.data, "import", "--db", db, "-")
			} else {
				_, stderr, err = mtl(t, "import", "--db", db, file)
			}
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("import: %v\nwant %q", err, tc.want)
				}
				if _, err := os.Stat(db); err == nil {
					t.Errorf("a refused import made the store")
				}
				return
			}
			if err != nil {
				t.Fatalf("import: %v\n%s", err, stderr)
			}
			if want := strconv.Itoa(tc.runs) + " run"; !strings.Contains(stderr, want+" imported") && !strings.Contains(stderr, want+"s imported") {
				t.Errorf("import said %q, want %d runs imported", stderr, tc.runs)
			}
		})
	}
}

// A refused import or peer import leaves no new store behind: one is made
// only as the runs are stored (and taken away with its -wal and -shm where
// the batch fails, results.DB.CloseNew); a store that was there is kept.
func TestRefusedImportLeavesNoStore(t *testing.T) {
	hf, err := os.ReadFile(filepath.Join("testdata", "peer", "hf.json"))
	if err != nil {
		t.Fatal(err)
	}
	// the one case twice: refused as the run is stored
	at := strings.Index(string(hf), `{"key"`)
	twice := string(hf[:at]) + strings.Replace(string(hf[at:]), "]}]}", "]}, "+strings.TrimSuffix(strings.TrimSpace(string(hf[at:])), "]}")+"]}", 1)
	// an op timing of no component: refused as the file is read
	timing := strings.Replace(exportLineWith("0.5"), `]}]}`, `],"timings":[{"rep":0,"layer":0,"component":"bogus","op":"x","seconds":1,"calls":1}]}]}`, 1) + "\n"
	for _, tc := range []struct {
		name, file, data string
		args             []string
		existed          bool
	}{
		{"import, a new store", "x.jsonl", timing, []string{"import"}, false},
		{"import, a store there", "x.jsonl", timing, []string{"import"}, true},
		{"peer import, a new store", "p.json", twice, []string{"peer", "import"}, false},
		{"peer import, a store there", "p.json", twice, []string{"peer", "import"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file, db := filepath.Join(dir, tc.file), filepath.Join(dir, "r.db")
			if err := os.WriteFile(file, []byte(tc.data), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.existed {
				openForTest(t, db).Close()
			}
			_, _, err := mtl(t, append(tc.args, "--db", db, file)...)
			if err == nil {
				t.Fatal("import: want it refused")
			}
			for _, f := range []string{db, db + "-wal", db + "-shm"} {
				_, err := os.Stat(f)
				if kept := err == nil; kept != (tc.existed && f == db) {
					t.Errorf("%s: kept %v after a refused import", filepath.Base(f), kept)
				}
			}
		})
	}
}

// peer import checks each run as it would be stored, as import checks an
// export's, before the store is opened: a case key repeated or a name of
// two lines is refused naming the file and the case, not by the batch.
func TestPeerImportChecksEveryRunFirst(t *testing.T) {
	hf, err := os.ReadFile(filepath.Join("testdata", "peer", "hf.json"))
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(string(hf), `{"key"`)
	c := strings.TrimSuffix(strings.TrimSpace(string(hf[at:])), "]}")
	for _, tc := range []struct {
		name, data, want string
	}{
		{"a case twice", string(hf[:at]) + c + ", " + c + "]}", `p.json: transformers 5.17.0: case 1 "decode/batch=1" has no key or repeats one`},
		{"a name of two lines", strings.Replace(string(hf), `"name": "decode/batch=1"`, `"name": "decode\nx"`, 1), `p.json: transformers 5.17.0: case 0: name "decode\nx" holds the control character U+000A`},
		{"a host name holding a tab", strings.Replace(string(hf), `"hostname": "gpu1"`, `"hostname": "gpu\t1"`, 1), `p.json: transformers 5.17.0: run.machine.hostname "gpu\t1" holds the control character U+0009`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file, db := filepath.Join(dir, "p.json"), filepath.Join(dir, "r.db")
			if err := os.WriteFile(file, []byte(tc.data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := mtl(t, "peer", "import", "--db", db, file)
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, tc.want)) || strings.Contains(err.Error(), "nothing was imported") {
				t.Fatalf("peer import: %v\nwant %q, refused before the store", err, tc.want)
			}
		})
	}
}

// Whatever bytes an import reads, it refuses them with an error or reads
// runs the store would take: never a panic.
func FuzzReadExport(f *testing.F) {
	end := `{"format":"mtlbench-run/2","end":{"runs":1,"cases":1,"samples":2}}`
	v2 := strings.Replace(exportLineWith("0.5"), "mtlbench-run/1", "mtlbench-run/2", 1)
	for _, seed := range []string{
		exportLineWith("0.5") + "\n",
		v2 + "\n" + end + "\n",
		v2 + "\n",
		end + "\n" + v2,
		`{"format":"mtlbench-run/2","end":{"runs":-1,"cases":1e30}}`,
		strings.Replace(v2, `"timings"`, `"x"`, 1)[:200],
		"\uFEFF" + v2 + "\r\n" + end + "\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := readExport(bytes.NewReader(data), stdinPath)
		if err != nil {
			return
		}
		for _, r := range recs {
			if err := r.Check(); err != nil {
				t.Errorf("a run read that the store would refuse: %v", err)
			}
		}
	})
}

// export says which run import would refuse (a store written before the
// checks on import may hold a name of two lines), and still writes it.
func TestExportSaysWhatImportRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, set, warn string
	}{
		{"a run import takes", "", ""},
		{"a suite name of two lines", `UPDATE runs SET suite_name = 'a' || char(10) || 'b'`, `import refuses it as it stands: run.suite_name "a\nb" holds the control character U+000A`},
		{"a parameter holding a tab", `UPDATE case_params SET value = 'x' || char(9) || 'y' WHERE name = 'dtype'`, `params.dtype "x\ty" holds the control character U+0009`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := seedCompareDB(t)
			if tc.set != "" {
				s := openForTest(t, db)
				if _, err := s.SQL().Exec(tc.set); err != nil {
					t.Fatal(err)
				}
				if _, err := s.SQL().Exec(`UPDATE cases SET params_json = json_set(params_json, '$.dtype', (SELECT value FROM case_params p WHERE p.case_id = cases.id AND p.name = 'dtype')) WHERE EXISTS (SELECT 1 FROM case_params p WHERE p.case_id = cases.id AND p.name = 'dtype')`); err != nil {
					t.Fatal(err)
				}
				s.Close()
			}
			out := filepath.Join(t.TempDir(), "x.jsonl")
			_, stderr, err := mtl(t, "export", "--db", db, "-o", out)
			if err != nil {
				t.Fatal(err)
			}
			if tc.warn == "" && strings.Contains(stderr, "import refuses") || !strings.Contains(stderr, tc.warn) {
				t.Errorf("export said %q, want %q", stderr, tc.warn)
			}
			if _, err := os.Stat(out); err != nil {
				t.Errorf("the export was not written: %v", err)
			}
		})
	}
}

// A store holding a row edited into what mtlbench cannot read fails the
// export as the store's fault, naming the database, and leaves the output
// as it was: the error is not put on --out, which did nothing wrong.
func TestExportOfAnEditedStoreBlamesTheStore(t *testing.T) {
	for _, tc := range []struct{ name, edit string }{
		{"case parameters not JSON", `UPDATE cases SET params_json = '{bad'`},
		{"a sample not a number", `UPDATE samples SET value = 'fast'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := seedCompareDB(t)
			s := openForTest(t, db)
			if _, err := s.SQL().Exec(tc.edit); err != nil {
				t.Fatal(err)
			}
			s.Close()
			out := filepath.Join(t.TempDir(), "x.jsonl")
			_, _, err := mtl(t, "export", "--db", db, "-o", out)
			if err == nil {
				t.Fatal("export of an edited store succeeded")
			}
			msg := err.Error()
			if strings.HasPrefix(msg, "--out") || !strings.Contains(msg, "the results database "+db+" holds a value mtlbench did not write") ||
				!strings.HasSuffix(msg, "(--out "+out+" is unchanged)") {
				t.Errorf("export: %v", err)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("the export was written: %v", err)
			}
		})
	}
}
