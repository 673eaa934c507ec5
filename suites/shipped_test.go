package suites

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/shipped-keys.txt")

// docs/suites.md documents every parameter a suite may set.
func TestDocsListEveryParameter(t *testing.T) {
	doc, err := os.ReadFile("../docs/suites.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range params {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/suites.md does not document parameter %q", name)
		}
	}
}

// Every shipped suite is built in and parses.
func TestShippedSuitesParse(t *testing.T) {
	names := ShippedNames()
	if len(names) == 0 {
		t.Fatal("no suite is built in")
	}
	for _, n := range names {
		s, err := Resolve(n)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if s.File != ShippedPrefix+n+".yaml" {
			t.Errorf("%s: File = %q", n, s.File)
		}
		if _, err := Load(s.File); err != nil {
			t.Errorf("Load(%q): %v", s.File, err)
		}
		// The name its errors give it names it again.
		if r, err := Resolve(s.File); err != nil || r.File != s.File {
			t.Errorf("Resolve(%q): %v", s.File, err)
		}
	}
	if _, err := Resolve("no-such-suite"); err == nil || !strings.Contains(err.Error(), "ci") {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := Resolve("../suites/ci.yaml"); err != nil {
		t.Errorf("a path: %v", err)
	}
	// A folder here named like a built-in suite (the repository's kernels/)
	// is no suite; the name is the built-in one. A path to it is a folder.
	t.Chdir(t.TempDir())
	os.Mkdir("kernels", 0o755)
	if s, err := Resolve("kernels"); err != nil || s.File != ShippedPrefix+"kernels.yaml" {
		t.Errorf("kernels beside a folder of that name: %v", err)
	}
	os.Mkdir("many", 0o755)
	os.Mkdir("many/sub.yaml", 0o755) // a folder so named is no suite
	for _, f := range []string{"a.yaml", "b.yml", "notes.txt"} {
		os.WriteFile("many/"+f, []byte("name: x\n"), 0o644)
	}
	os.Symlink("moved/gone.yaml", "gone.yaml")
	os.Symlink("moved/ci.yaml", "ci")
	// Errors say what is wrong with the path, in the user's words; a suite
	// that is not there is an fs.ErrNotExist, as a missing file is, which
	// the command line exits 2 for, not an invalid suite's 1.
	for arg, want := range map[string]struct {
		msg     string
		missing bool
	}{
		"./kernels": {"./kernels: a folder, not a suite", false},
		// A folder of suites is said as one, with how to name them.
		"./many":             {"./many: a folder, not a suite; it holds 2 suite files (`mtlbench suites list ./many` lists them): name one, such as many/a.yaml", false},
		"./many/":            {"./many/: a folder, not a suite; it holds 2 suite files", false},
		"kernels/":           {"kernels/: a folder, not a suite", false},
		"./none.yaml":        {"./none.yaml: no such file (built-in suites: ", true},
		"none":               {`no suite file or built-in suite "none"`, true},
		"shipped:none.yaml":  {`no suite file or built-in suite "none.yaml"`, true},
		"shipped:../ci.yaml": {"shipped:../ci.yaml: no such file (built-in suites: ", true},
		"kernels/x/ci.yaml":  {"kernels/x/ci.yaml: no such file (built-in suites: ", true},
		// a link to nowhere is the file meant, not a built-in suite's name
		"gone.yaml": {"gone.yaml: a link to moved/gone.yaml, which is not there", true},
		"ci":        {"ci: a link to moved/ci.yaml, which is not there", true},
	} {
		_, err := Resolve(arg)
		if err == nil || !strings.Contains(err.Error(), want.msg) || strings.Contains(err.Error(), "stat ") || strings.Contains(err.Error(), "open ") {
			t.Errorf("Resolve(%q): %v, want %q", arg, err, want.msg)
		}
		if errors.Is(err, fs.ErrNotExist) != want.missing {
			t.Errorf("Resolve(%q): %v is fs.ErrNotExist: %v, want %v", arg, err, !want.missing, want.missing)
		}
	}
}

// The case keys of every shipped suite are what compare and gate pair a
// new run with its baseline by: a change to how suites key their cases
// must not move them, or runs stored before would pair with nothing.
// go test ./suites/ -run ShippedSuiteKeys -update rewrites the list.
func TestShippedSuiteKeys(t *testing.T) {
	var b strings.Builder
	for _, n := range ShippedNames() {
		s, err := Resolve(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		for _, c := range s.Cases {
			b.WriteString(n + ".yaml " + c.Key + "\n")
		}
	}
	const golden = "testdata/shipped-keys.txt"
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	got, wantLines := strings.Split(b.String(), "\n"), strings.Split(string(want), "\n")
	for _, l := range wantLines {
		if !slices.Contains(got, l) {
			t.Errorf("key gone: %s", l)
		}
	}
	for _, l := range got {
		if !slices.Contains(wantLines, l) {
			t.Errorf("key new: %s", l)
		}
	}
}

// A matrix takes an integer range as bench's flags do.
func TestMatrixRange(t *testing.T) {
	s, err := Parse("r.yaml", []byte("name: r\nmodel: {preset: qwen3-moe-mini}\ncases:\n  - name: d\n    kind: model\n    matrix: {batch: 1-16*2, prompt_len: \"16,32\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range s.Cases {
		names = append(names, c.Name)
	}
	if len(s.Cases) != 10 || s.Cases[8].Model.Batch != 16 || s.Cases[0].Name != "d/batch=1/prompt_len=16" {
		t.Errorf("cases %v", names)
	}

	// Ranges as items of a list, each value at its range's position.
	head := "name: r\nmodel: {preset: qwen3-moe-mini}\ncases:\n  - name: d\n    kind: model\n    matrix: "
	s, err = Parse("r.yaml", []byte(head+"{batch: [1-4, 16, 32-64*2], gen_len: [8]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var batches []int
	for _, c := range s.Cases {
		batches = append(batches, c.Model.Batch)
	}
	if !slices.Equal(batches, []int{1, 2, 3, 4, 16, 32, 64}) {
		t.Errorf("batch: [1-4, 16, 32-64*2] ran %v", batches)
	}
	for _, c := range []struct{ matrix, want string }{
		{"{batch: [1-4, 2]}", `r.yaml:6:27: duplicate value 2 in matrix batch (first at line 6, col 22)`},
		{"{batch: [16, 8-1]}", `r.yaml:6:26: matrix batch: range "8-1" ends before it starts (` + "a range is first-last"},
		{"{batch: [0-3]}", `r.yaml:6:22: matrix batch: range "0-3": 0 is below 1`},
	} {
		if _, err := Parse("r.yaml", []byte(head+c.matrix+"\n")); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("matrix %s: %v, want %q", c.matrix, err, c.want)
		}
	}
}

// A name that is no file and no built-in suite says which built-in suite it
// is close to, as a mistyped key does; a path gets no guess.
func TestUnknownSuiteSuggestsShipped(t *testing.T) {
	t.Chdir(t.TempDir())
	for arg, want := range map[string]string{
		"kernals":         `(did you mean "kernels"?)`,
		"qwen3moe.yaml":   `(did you mean "qwen3-moe"?)`,
		"shipped:servng":  `(did you mean "serving"?)`,
		"nothing-like-it": "",
		"./kernals":       "",
	} {
		_, err := Resolve(arg)
		if err == nil {
			t.Fatalf("Resolve(%q) found a suite", arg)
		}
		if got := strings.Contains(err.Error(), "did you mean"); got != (want != "") || !strings.Contains(err.Error(), want) {
			t.Errorf("Resolve(%q): %v, want %q", arg, err, want)
		}
	}
}

// docs/suites.md's table of top-level keys holds every key a suite may
// write at the top, the ignored x- keys among them.
func TestDocsListEveryTopLevelKey(t *testing.T) {
	doc, err := os.ReadFile("../docs/suites.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range append(slices.Clone(topKeys), "x-") {
		if !strings.Contains(string(doc), "\n| `"+key) {
			t.Errorf("docs/suites.md's top-level keys do not list %q", key)
		}
	}
}
