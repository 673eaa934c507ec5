package suites

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/internal/readfile"
)

// What counts as a suite file is one rule wherever a suite is listed or
// named (Source: run, validate, show): a regular file or a link resolving
// to one is a suite; a folder named *.yaml is none, nor a link to one, and
// List passes over both alike (it listed the link as an invalid suite
// while passing over the folder); a link to nothing or round a loop is the
// file meant, listed with why, and named alone an input error (a loop read
// as an invalid suite, exit 1, where run said exit 2).
func TestSuiteFileRule(t *testing.T) {
	dir := t.TempDir()
	good := "name: s\nmodel: {preset: qwen3-moe-mini}\ncases:\n  - name: decode\n"
	if err := os.WriteFile(filepath.Join(dir, "good.yaml"), []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "folder.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"link.yaml":       "good.yaml",
		"linkfolder.yaml": "folder.yaml",
		"dangling.yaml":   "moved.yaml",
		"loop.yaml":       "loop.yaml",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Skip("no symbolic links here:", err)
		}
	}
	infos, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]Info{}
	for _, in := range infos {
		listed[filepath.Base(in.Path)] = in
	}
	for _, tc := range []struct {
		file string
		// listed: "ok", "error" (listed, with why), "" (passed over)
		listed string
		// named: how Source takes it: nil, or the error it must be
		named error
		says  string
	}{
		{"good.yaml", "ok", nil, ""},
		{"link.yaml", "ok", nil, ""},
		{"folder.yaml", "", readfile.ErrNotAFile, "a folder, not a suite"},
		{"linkfolder.yaml", "", readfile.ErrNotAFile, "a folder, not a suite"},
		{"dangling.yaml", "error", fs.ErrNotExist, "a link to moved.yaml, which is not there"},
		{"loop.yaml", "error", readfile.ErrNotAFile, "a link to loop.yaml, in a loop of links"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in, ok := listed[tc.file]
			switch {
			case tc.listed == "" && ok:
				t.Errorf("List: listed %+v, want it passed over", in)
			case tc.listed != "" && !ok:
				t.Errorf("List: passed over, want it listed")
			case tc.listed == "ok" && (in.Err != nil || in.Cases != 1):
				t.Errorf("List: %d cases, %v; want the suite", in.Cases, in.Err)
			case tc.listed == "error" && (in.Err == nil || !strings.Contains(in.Err.Error(), tc.says)):
				t.Errorf("List: %v, want an error saying %q", in.Err, tc.says)
			}
			path := filepath.Join(dir, tc.file)
			_, _, err := Source(path)
			switch {
			case tc.named == nil && err != nil:
				t.Errorf("Source: %v", err)
			case tc.named != nil && (!errors.Is(err, tc.named) || !strings.Contains(errText(err), path+": "+tc.says)):
				t.Errorf("Source: %v, want %v saying %q", err, tc.named, path+": "+tc.says)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A byte-order mark is taken at a suite's start alone: one further on,
// which yaml.v3 passed over at a line's start while counting it as a
// column, read two at the start as keys each missing their first letter
// ("odel"); it is refused where it stands.
func TestStrayByteOrderMark(t *testing.T) {
	const bom = "\uFEFF"
	body := "name: s\nmodel: {preset: qwen3-moe-mini}\ncases:\n  - name: decode\n"
	for _, tc := range []struct {
		name, src string
		at        string // "": parses
	}{
		{"one at the start", bom + body, ""},
		{"two at the start", bom + bom + body, "t.yaml:1:1: a byte-order mark (U+FEFF) inside the file"},
		{"one starting a later line", bom + strings.Replace(body, "cases:", bom+"cases:", 1), "t.yaml:3:1: a byte-order mark"},
		{"one inside a value", strings.Replace(body, "name: s", "name: s"+bom, 1), "t.yaml:1:8: a byte-order mark"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.src))
			switch {
			case tc.at == "" && err != nil:
				t.Errorf("Parse: %v", err)
			case tc.at != "" && !strings.HasPrefix(errText(err), tc.at):
				t.Errorf("Parse: %v\nwant %s...", err, tc.at)
			}
		})
	}
}

// A built-in suite is named with or without a suite file's extension, by
// the rule that lists a folder's suites (.yaml or .yml, in any case):
// `run ci.yml` said there was no suite "ci.yml", not even near one, where
// a folder's ci.yml is listed as a suite.
func TestBuiltInNameWithSuiteExtension(t *testing.T) {
	t.Chdir(t.TempDir()) // no file of these names here: the built-in ones
	for _, tc := range []struct {
		name, file, err string
	}{
		{"ci", "shipped:ci.yaml", ""},
		{"ci.yaml", "shipped:ci.yaml", ""},
		{"ci.yml", "shipped:ci.yaml", ""},
		{"ci.YAML", "shipped:ci.yaml", ""},
		{"shipped:ci.yml", "shipped:ci.yaml", ""},
		{"ci.json", "", `no suite file or built-in suite "ci.json"`},
		{"kernel.yml", "", `(did you mean "kernels"?)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file, data, err := Source(tc.name)
			switch {
			case tc.err == "" && (err != nil || file != tc.file || len(data) == 0):
				t.Errorf("Source: %q, %d bytes, %v; want %s", file, len(data), err, tc.file)
			case tc.err != "" && !strings.Contains(errText(err), tc.err):
				t.Errorf("Source: %v, want an error saying %s", err, tc.err)
			}
		})
	}
	if ShippedSuiteHint("ci.yml") == "" {
		t.Error(`ShippedSuiteHint("ci.yml") names no built-in suite`)
	}
}
