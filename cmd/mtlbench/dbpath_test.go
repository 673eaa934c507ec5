package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A --db under a file (r.db/x.db, r.db taken for a folder) says which part
// is the file, whichever command opens it, and makes nothing.
func TestDBUnderAFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "r.db")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(file, "x.db")
	for _, args := range [][]string{
		{"runs"},
		{"show", "1"},
		{"export", "-o", filepath.Join(dir, "e.jsonl")},
		{"bench", "--backend", "cpu", "-m", "qwen2-0.5b", "--layers", "1", "-p", "8", "-n", "2", "-r", "1"},
	} {
		_, _, err := mtl(t, append(args, "--db", db)...)
		if want := file + " is a file, not a folder"; err == nil || !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v\nwant it to name %s and say %q", args[0], err, db, want)
		}
	}
	if got, _ := os.ReadFile(file); string(got) != "x" {
		t.Errorf("the file in the path was changed")
	}
}

// A results database given to import in place of its export is named as
// one, with the export that imports it, and nothing is stored.
func TestImportOfAStoreSaysExportIt(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "other.db")
	openForTest(t, src).Close()
	dst := filepath.Join(dir, "r.db")
	_, _, err := mtl(t, "import", "--db", dst, src)
	want := src + " is an SQLite database (a results store?), not an export: import its runs from `mtlbench export --db " + src
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("import of a store: %v\nwant %q", err, want)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Errorf("the import made %s", dst)
	}
}

// An export of a newer format, whose fields this mtlbench may not decode,
// is refused as a newer mtlbench's, naming the file and line; an unknown
// format as not an export.
func TestImportOfANewerExport(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ line, want string }{
		{`{"format":"mtlbench-run/3","run":{"id":"seven"}}`, `e.jsonl:1: format "mtlbench-run/3" is a newer mtlbench's; this one reads "mtlbench-run/2"`},
		{`{"format":"mtlbench-run/1x","run":{}}`, `e.jsonl:1: format "mtlbench-run/1x", want "mtlbench-run/2"`},
		{`{"format":"other/9","run":{}}`, `e.jsonl:1: format "other/9", want "mtlbench-run/2"`},
	} {
		file := filepath.Join(dir, "e.jsonl")
		if err := os.WriteFile(file, []byte(c.line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := mtl(t, "import", "--db", filepath.Join(dir, "r.db"), file)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("import of %s: %v\nwant %q", c.line, err, c.want)
		}
	}
}

// A field an export line's format does not have (a misspelling, which
// encoding/json would drop) is refused, naming the file, line, run and the
// field's path, with the field it is near; nothing is stored.
func TestImportRefusesUnknownFields(t *testing.T) {
	dir := t.TempDir()
	v1 := exportLineWith("0.5")
	v2 := strings.Replace(v1, "mtlbench-run/1", "mtlbench-run/2", 1) + "\n" + `{"format":"mtlbench-run/2","end":{"runs":1,"cases":1,"samples":2}}`
	for _, c := range []struct{ name, lines, want string }{
		{"v1 run", strings.Replace(v1, `"suite_name"`, `"suite_nmae"`, 1),
			`e.jsonl:1: run 3: unknown field run.suite_nmae (did you mean "suite_name"?): an export line of format "mtlbench-run/1" has no such field; nothing was imported`},
		{"v2 sample", strings.Replace(v2, `"unit":"ratio"`, `"unti":"ratio"`, 1),
			`e.jsonl:1: run 3: unknown field cases[0].samples[1].unti (did you mean "unit"?): an export line of format "mtlbench-run/2" has no such field; nothing was imported`},
		{"v2 top level", strings.Replace(v2, `"cases":`, `"read_bytes":1,"cases":`, 1),
			`e.jsonl:1: run 3: unknown field read_bytes: an export line of format "mtlbench-run/2" has no such field; nothing was imported`},
		{"v2 whole", v2, ""},
	} {
		file, db := filepath.Join(dir, c.name+".jsonl"), filepath.Join(dir, c.name+".db")
		if err := os.WriteFile(file, []byte(c.lines+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := mtl(t, "import", "--db", db, file)
		want := strings.Replace(c.want, "e.jsonl", file, 1)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || err.Error() != want):
			t.Errorf("%s: %v\nwant %s", c.name, err, want)
		case c.want != "":
			if _, serr := os.Stat(db); serr == nil {
				t.Errorf("%s: refused, yet made %s", c.name, db)
			}
		}
	}
}
