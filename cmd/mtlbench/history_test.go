package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// history import --date gives figures a date where the table has none and
// writes them to the user's history folder, which history show and the
// reports read beside the built-in history.
func TestHistoryImportToUserFolder(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MTLBENCH_HISTORY", filepath.Join(dir, "history"))
	md := filepath.Join(dir, "kb.md")
	os.WriteFile(md, []byte("## Decode\n\n| Batch Size | Version | TPS |\n|---|---|---|\n| 1 | Metal V2 | 7.5 |\n| 4 | Metal V2 | 21.0 |\n"), 0o644)

	// Without a date the figures cannot be saved: the error says so.
	if _, _, err := mtl(t, "history", "import", md, "--model", "Qwen3-30B-A3B"); err == nil || !strings.Contains(err.Error(), "date") {
		t.Fatalf("import without a date: %v", err)
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
	// --dry-run writes nothing.
	os.Remove(filepath.Join(dir, "history", "kb.yaml"))
	if _, _, err := mtl(t, "history", "import", md, "--model", "Qwen3-30B-A3B", "--date", "2026", "--dry-run"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "history", "kb.yaml")); err == nil {
		t.Error("--dry-run wrote a file")
	}
	// and refuses what the import would: here a missing date.
	if _, _, err := mtl(t, "history", "import", md, "--model", "Qwen3-30B-A3B", "--dry-run"); err == nil || !strings.Contains(err.Error(), "line 5") || !strings.Contains(err.Error(), "date") {
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
		{[]string{"--model", "qwen3-30b-a3b", "--metric", "tok/s"}, []string{`--metric "tok/s": no documented figures with --model "qwen3-30b-a3b" (their metrics: `, "tok_s"}},
		{[]string{"--model", "gpt2", "--series", "nope"}, []string{`--series "nope": no documented figures with --model "gpt2" (their series: working models)`}},
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
