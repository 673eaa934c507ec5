package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/results"
)

// history import --date gives figures a date where the table has none and
// writes them to the user's history folder, which history show and the
// reports read beside the built-in history.
func TestHistoryImportToUserFolder(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MTLBENCH_HISTORY", filepath.Join(dir, "history"))
	md := filepath.Join(dir, "kb.md")
	os.WriteFile(md, []byte("## Decode\n\n| Batch Size | Version | TPS |\n|---|---|---|\n| 1 | Metal V2 | 7.5 |\n| 4 | Metal V2 | 21.0 |\n"), 0o644)

	// Without a date the figures cannot be saved: the error says so, with
	// the lines and the flag that gives one.
	want := md + ": 2 figures have no date (lines 5, 6): its table has no date column, or the cell is empty; give the date the figures were measured with --date YYYY-MM-DD (or --date unknown)"
	if _, _, err := mtl(t, "history", "import", md, "--model", "Qwen3-30B-A3B"); err == nil || err.Error() != want {
		t.Fatalf("import without a date: %v\nwant %s", err, want)
	}
	if _, _, err := mtl(t, "history", "import", md, "--model", "Qwen3-30B-A3B", "--date", "Dec 2026"); err == nil || !strings.Contains(err.Error(), `--date "Dec 2026"`) {
		t.Fatalf("bad --date: %v", err)
	}
	_, stderr, err := mtl(t, "history", "import", md, "--model", "Qwen3-30B-A3B", "--date", "2026-11-01", "--hardware", "Apple M4 Max")
	if err != nil || !strings.Contains(stderr, "2 figures written to "+filepath.Join(dir, "history", "kb.yaml")) {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	out, _, err := mtl(t, "history", "show", "--model", "Qwen3-30B-A3B", "--series", "Metal V2", "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	rows := csvRows(t, out)
	if len(rows) != 2 || rows[0]["date"] != "2026-11-01" || rows[1]["batch"] != "4" || rows[1]["value"] != "21" || rows[0]["hardware"] != "Apple M4 Max" {
		t.Errorf("imported figures as history show reads them: %v", rows)
	}
	// The built-in history is still there beside them.
	out, _, _ = mtl(t, "history", "show", "--model", "Qwen3-30B-A3B", "--format", "csv")
	if n := len(csvRows(t, out)); n <= 2 {
		t.Errorf("history show lists %d figures: the built-in ones are missing", n)
	}
	// history list says which file each source's figures are read from: the
	// built-in history's by name (its sources are content-hash names), the
	// imported ones by the path to edit.
	out, _, err = mtl(t, "history", "list", "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, r := range csvRows(t, out) {
		files[r["source"]] = r["file"]
	}
	if files["kb.md"] != filepath.Join(dir, "history", "kb.yaml") || files["001_42c42577c32c4287.txt"] != "built in: 001-knowledge-base.yaml" {
		t.Errorf("history list files: %v", files)
	}
	// --dry-run writes nothing.
	os.Remove(filepath.Join(dir, "history", "kb.yaml"))
	if _, _, err := mtl(t, "history", "import", md, "--model", "Qwen3-30B-A3B", "--date", "2026", "--dry-run"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "history", "kb.yaml")); err == nil {
		t.Error("--dry-run wrote a file")
	}
	// and refuses what the import would: here a missing date.
	if _, _, err := mtl(t, "history", "import", md, "--model", "Qwen3-30B-A3B", "--dry-run"); err == nil || !strings.Contains(err.Error(), "lines 5, 6") || !strings.Contains(err.Error(), "--date") {
		t.Errorf("--dry-run without a date: %v", err)
	}

	// Another page of the same name, another model's figures: kept beside
	// the first's; the same page again replaces its own.
	other := filepath.Join(dir, "other", "kb.md")
	os.MkdirAll(filepath.Dir(other), 0o755)
	os.WriteFile(other, []byte("| Batch Size | TPS |\n|---|---|\n| 1 | 40 |\n"), 0o644)
	for _, step := range []struct {
		page, model, want string
	}{
		{md, "Qwen3-30B-A3B", "2 figures written to " + filepath.Join(dir, "history", "kb.yaml") + " (0 kept from before, 0 replaced)"},
		{other, "gpt2", "1 figure written to " + filepath.Join(dir, "history", "kb.yaml") + " (2 kept from before, 0 replaced)"},
		{md, "Qwen3-30B-A3B", "(1 kept from before, 2 replaced)"},
	} {
		if _, stderr, err := mtl(t, "history", "import", step.page, "--model", step.model, "--date", "2026-11-01"); err != nil || !strings.Contains(stderr, step.want) {
			t.Errorf("import %s: %v\n%s", step.page, err, stderr)
		}
	}
	// Nothing is written over the page itself or over a file of no history.
	notes := filepath.Join(dir, "notes.md")
	os.WriteFile(notes, []byte("# notes\n\nkeep: me: please\n"), 0o644)
	for _, c := range []struct{ out, want string }{
		{md, "is the page being imported: not overwritten"},
		{notes, "exists and is not a history file, so it is not overwritten"},
	} {
		before, _ := os.ReadFile(c.out)
		if _, _, err := mtl(t, "history", "import", md, "--model", "m", "--date", "2026", "--out", c.out); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--out %s: %v, want %q", c.out, err, c.want)
		}
		if after, _ := os.ReadFile(c.out); string(after) != string(before) {
			t.Errorf("--out %s was changed", c.out)
		}
	}
}

// history show's filters that leave no figures are an error naming the
// filter and what the figures the filters before it keep have, not an
// empty table.
func TestHistoryShowNamesEmptyFilter(t *testing.T) {
	t.Setenv("MTLBENCH_HISTORY", filepath.Join(t.TempDir(), "history"))
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--model", "nope"}, []string{`--model "nope": no documented figures (documented models: `, "Qwen3-30B-A3B", "GPT-2"}},
		{[]string{"--model", "qwen3-30b-a3b", "--metric", "tok/s"}, []string{`--metric "tok/s": no documented figures with --model "qwen3-30b-a3b" (did you mean "tok_s"?) (their metrics: `, "tok_s"}},
		{[]string{"--model", "gpt2", "--series", "nope"}, []string{`--series "nope": no documented figures with --model "gpt2" (their series: working models)`}},
		// a typo says what it is close to
		{[]string{"--model", "tinylama"}, []string{`--model "tinylama": no documented figures (did you mean "TinyLlama"?) (documented models: `}},
		{[]string{"--metric", "decode_toks"}, []string{`--metric "decode_toks": no documented figures (did you mean "decode_tok_s"?)`}},
	} {
		out, _, err := mtl(t, append([]string{"history", "show"}, c.args...)...)
		if err == nil {
			t.Errorf("history show %v: no error, printed %q", c.args, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("history show %v: %v, want %q in it", c.args, err, w)
			}
		}
	}
	if out, _, err := mtl(t, "history", "show", "--model", "gpt2", "--metric", "tok_s", "--format", "csv"); err != nil || len(csvRows(t, out)) == 0 {
		t.Errorf("history show of a documented figure: %v %q", err, out)
	}
}

// An imported "Decode" column is decode_tok_s, and history show --metric
// tok_s, the documented throughput filter, lists it beside the built-in
// tok_s figures; --metric decode_tok_s keeps decode only.
func TestHistoryShowTokSFindsImportedDecode(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MTLBENCH_HISTORY", filepath.Join(dir, "history"))
	md := filepath.Join(dir, "kb.md")
	os.WriteFile(md, []byte("| Batch | Version | Decode (tok/s) |\n|---|---|---|\n| 1 | Metal V9 | 9.5 |\n"), 0o644)
	if _, _, err := mtl(t, "history", "import", md, "--model", "Qwen3-30B-A3B", "--date", "2026-11-01"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		metric string
		want   []string // metrics of the listed Metal V9 rows
	}{
		{"tok_s", []string{"decode_tok_s"}},
		{"decode_tok_s", []string{"decode_tok_s"}},
	} {
		out, _, err := mtl(t, "history", "show", "--model", "Qwen3-30B-A3B", "--metric", c.metric, "--format", "csv")
		if err != nil {
			t.Errorf("--metric %s: %v", c.metric, err)
			continue
		}
		var got []string
		for _, r := range csvRows(t, out) {
			if r["series"] == "Metal V9" {
				got = append(got, r["metric"])
			}
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("--metric %s: imported rows %v, want %v", c.metric, got, c.want)
		}
	}
}

// A page with wrong cells is refused before anything is written, each
// wrong cell on its own line naming the page, and --date replaces no date
// the page spells wrong.
func TestHistoryImportRefusesWrongCells(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MTLBENCH_HISTORY", filepath.Join(dir, "history"))
	md := filepath.Join(dir, "kb.md")
	os.WriteFile(md, []byte("| Date | Batch | Decode tok/s |\n|---|---|---|\n| 2025-13-40 | 1 | 17 |\n| 2025-01-02 | 1 |\n"), 0o644)
	_, _, err := mtl(t, "history", "import", md, "--model", "m", "--date", "2024-01-01")
	want := md + `: line 3: table 1 (header at line 1), row 1, column "Date": date "2025-13-40" is no calendar date` + "\n" +
		md + ": line 4: table 1 (header at line 1), row 2: 2 cells, but its header has 3"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want\n%s", err, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "history")); err == nil {
		t.Error("a refused import created the history folder")
	}
}

// Every command that reads the history takes a broken entry of the user's
// files alike: it warns, naming the file and line, and goes on with the
// figures that load, those of the same file included.
func TestHistoryBrokenEntryWarns(t *testing.T) {
	dir := t.TempDir()
	hist := filepath.Join(dir, "history")
	t.Setenv("MTLBENCH_HISTORY", hist)
	os.MkdirAll(hist, 0o755)
	page := `- source: mine
  date: "2026-01-02"
  hardware: Apple M4 Max
  model: Qwen3-30B-A3B
  series: mine good
  metric: tok_s
  value: 12.5
  unit: tok/s
- source: mine
  date: "2026-01-03"
  hardware: Apple M4 Max
  model: Qwen3-30B-A3B
  series: mine bad
  metric: tok_s
  value: fast
  unit: tok/s
`
	if err := os.WriteFile(filepath.Join(hist, "mine.yaml"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "r.db")
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.CreateRun(&results.Run{SuiteName: "s", Backend: "cpu", Kind: results.KindSuite})
	if err != nil {
		t.Fatal(err)
	}
	cs := []results.Case{{Key: "model/c/batch=1", Name: "c", Kind: results.CaseModel, Params: map[string]string{"batch": "1", "model": "qwen3-30b-a3b"}}}
	if err := db.AddCases(id, cs); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishCase(cs[0].ID, []results.Sample{{Metric: "decode_tok_s", Value: 10, Unit: "tok/s"}}, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishRun(id, results.RunComplete); err != nil {
		t.Fatal(err)
	}
	db.Close()
	warning := "mtlbench: warning: history: " + filepath.Join(hist, "mine.yaml") + ":15: "
	for _, tc := range []struct {
		name string
		args []string
		want string // on stdout: a figure of the broken file that loads
	}{
		{"history show", []string{"history", "show", "--model", "Qwen3-30B-A3B", "--format", "csv"}, "mine good"},
		{"history list", []string{"history", "list", "--format", "csv"}, "mine"},
		{"report", []string{"report", "1", "--db", path, "--out", filepath.Join(dir, "report")}, "index.html"},
		{"compare --out", []string{"compare", "1", "1", "--db", path, "--out", filepath.Join(dir, "cmp")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := mtl(t, tc.args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			if !strings.Contains(errOut, warning) || !strings.Contains(errOut, "(left out; the other figures are read)") {
				t.Errorf("stderr lacks the warning %q:\n%s", warning, errOut)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("stdout lacks %q:\n%s", tc.want, out)
			}
		})
	}
}

// A cell history import skips is said with the page it is on, as its
// errors and every other command's warnings name their file.
func TestHistoryImportWarningNamesThePage(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MTLBENCH_HISTORY", filepath.Join(dir, "history"))
	md := filepath.Join(dir, "kb.md")
	page := "| Batch | Decode tok/s |\n|---|---|\n| 1 | 30 |\n| 4 | NaN |\n"
	if err := os.WriteFile(md, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{md}, "mtlbench: warning: " + md + `: line 4: column "Decode tok/s": "NaN" holds no figure, skipped` + "\n"},
		{[]string{"-", "--source", "kb.md"}, `mtlbench: warning: standard input: line 4: column "Decode tok/s"`},
	} {
		args := append([]string{"history", "import"}, tc.args...)
		args = append(args, "--model", "m", "--date", "2026-11-01", "--dry-run")
		var stderr string
		var err error
		if tc.args[0] == "-" {
			_, stderr, err = mtlIn(t, page, args...)
		} else {
			_, stderr, err = mtl(t, args...)
		}
		if err != nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: %v\n%s\nwant %q", tc.args, err, stderr, tc.want)
		}
	}
}

// history import --dtype takes the dtypes bench --dtype does, a near miss
// named, and refuses another before the page is read or anything written.
func TestHistoryImportDtypeFlag(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MTLBENCH_HISTORY", filepath.Join(dir, "history"))
	md := filepath.Join(dir, "kb.md")
	if err := os.WriteFile(md, []byte("| Date | Batch | Decode tok/s |\n|---|---|---|\n| 2025-01-02 | 1 | 17 |\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const all = "want f32, f16, bf16, q2, q3, q4, q5, q6, q8, nvfp4, mxfp8, q4_k_m, q5_k_m, q8_0, iq2_xxs or iq3_xxs"
	for _, tc := range []struct {
		dtype string
		want  string // "" for an import that goes through
	}{
		{"bf16", ""},
		{"q4_k_m", ""},
		{"bf61", `--dtype "bf61": ` + all + ` (did you mean "bf16"?)`},
		{"whatever", `--dtype "whatever": ` + all},
	} {
		_, _, err := mtl(t, "history", "import", md, "--model", "m", "--dtype", tc.dtype, "--dry-run")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("--dtype %s: %v", tc.dtype, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want || exitCode(err) != 2):
			t.Errorf("--dtype %s: exit %d, %v; want 2 and %q", tc.dtype, exitCode(err), err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "history")); err == nil {
		t.Error("a --dry-run or refused import created the history folder")
	}
}
