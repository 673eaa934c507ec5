package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// docCommandLines returns the command lines a markdown file shows: the
// lines of its fenced blocks, those of its indented blocks after a blank
// line, and its inline code spans (which may wrap across lines), each with
// the line it starts on.
func docCommandLines(doc string) (lines []string, at []int) {
	var prose strings.Builder
	fenced, indented := false, false
	blank := true
	for i, l := range strings.Split(doc, "\n") {
		if !fenced && strings.HasPrefix(l, "    ") && (indented || blank) && !regexp.MustCompile(`^\s*([-*|]|\d+\.)\s`).MatchString(l) {
			indented = true
			lines, at = append(lines, strings.TrimSpace(l)), append(at, i+1)
			prose.WriteString("\n")
			continue
		}
		indented = false
		blank = strings.TrimSpace(l) == ""
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			prose.WriteString("\n")
			continue
		}
		if fenced {
			lines, at = append(lines, l), append(at, i+1)
			prose.WriteString("\n")
			continue
		}
		prose.WriteString(l + "\n")
	}
	text := prose.String()
	for _, sp := range codeSpans(text) {
		lines = append(lines, strings.ReplaceAll(text[sp[0]:sp[1]], "\n", " "))
		at = append(at, strings.Count(text[:sp[0]], "\n")+1)
	}
	return lines, at
}

// codeSpans are the [start, end) offsets of text's inline code spans as
// CommonMark reads them: a run of backticks opens one that the next run of
// as many closes (two around one hold a backtick), and a run with no such
// closer is text; one space each side of a span that has both is cut.
func codeSpans(text string) [][2]int {
	run := func(i int) int {
		j := i
		for j < len(text) && text[j] == '`' {
			j++
		}
		return j - i
	}
	var out [][2]int
	for i := 0; i < len(text); {
		if text[i] != '`' {
			i++
			continue
		}
		n := run(i)
		start, end := i+n, -1
		for j := start; j < len(text); {
			if text[j] != '`' {
				j++
				continue
			}
			m := run(j)
			if m == n {
				end = j
				break
			}
			j += m
		}
		if end < 0 {
			i = start // no closer: the backticks are text
			continue
		}
		a, b := start, end
		if b-a >= 2 && text[a] == ' ' && text[b-1] == ' ' && strings.Trim(text[a:b], " ") != "" {
			a, b = a+1, b-1
		}
		out = append(out, [2]int{a, b})
		i = end + n
	}
	return out
}

// Inline code is read as CommonMark reads it, so a span holding a
// backtick (two backticks around it) leaves the spans after it paired as
// written.
func TestDocCommandLinesCodeSpans(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"run `mtlbench runs` and `show`", []string{"mtlbench runs", "show"}},
		{"a backslash goes before `` ` ``, `*` and `[`", []string{"`", "*", "["}},
		{"``a `b` c`` then `d`", []string{"a `b` c", "d"}},
		{"a lone ` backtick, then `code`", []string{"backtick, then"}},
		{"an unclosed ``` run and `x`", []string{"x"}},
		{"a pipe: `ssh mac mtlbench export -o - |\nmtlbench import -`", []string{"ssh mac mtlbench export -o - | mtlbench import -"}},
	} {
		if got, _ := docCommandLines(c.text); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.text, got, c.want)
		}
	}
}

// checkDocCommand checks one shell line: each mtlbench invocation in it
// names commands the CLI has and flags those commands define. It returns
// what is wrong, or "".
func checkDocCommand(app *cli.App, line string) []string {
	var bad []string
	line, _, _ = strings.Cut(line, " #")
	for _, seg := range regexp.MustCompile(`;|&&|\|\|?`).Split(line, -1) {
		words := strings.Fields(seg)
		for len(words) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(words[0]) {
			words = words[1:] // VAR=value before the command
		}
		for k := 1; k < len(words); k++ {
			if filepath.Base(words[k]) == "mtlbench" && strings.HasSuffix(words[k-1], ":") {
				words = words[k:] // a message's "resume with: mtlbench ..."
				break
			}
		}
		if len(words) == 0 || filepath.Base(words[0]) != "mtlbench" {
			continue
		}
		words = words[1:]
		var cmd *cli.Command
		flags := app.Flags
		subs := app.Commands
		for i, w := range words {
			if strings.ContainsAny(w, "<>") || w == "..." || strings.HasPrefix(w, "[") {
				break // a redirection or a placeholder: the rest is not mtlbench's
			}
			if strings.HasPrefix(w, "-") && len(w) > 1 && !strings.HasPrefix(w, "-$") {
				name := strings.TrimLeft(w, "-")
				name, _, _ = strings.Cut(name, "=")
				if name == "help" || name == "h" || hasFlag(flags, name) {
					continue
				}
				where := "mtlbench"
				if cmd != nil {
					where = "mtlbench " + strings.Join(words[:i], " ")
					where = strings.Join(strings.Fields(where)[:1+commandDepth(app, words[:i])], " ")
				}
				bad = append(bad, where+" has no flag "+w)
				continue
			}
			if len(subs) == 0 || (cmd != nil && !commandsOnly(words[:i])) {
				continue // an argument
			}
			var next *cli.Command
			for _, c := range subs {
				if c.HasName(w) {
					next = c
				}
			}
			if next == nil {
				if cmd == nil {
					bad = append(bad, "mtlbench has no command "+w)
					break
				}
				continue // an argument of a command that also has subcommands
			}
			cmd, flags, subs = next, next.Flags, next.Subcommands
		}
	}
	return bad
}

// commandsOnly says whether the words so far are commands only, so the
// next word may name a subcommand rather than be an argument.
func commandsOnly(words []string) bool {
	for _, w := range words {
		if strings.HasPrefix(w, "-") {
			return false
		}
	}
	return true
}

// commandDepth counts the leading words that are commands.
func commandDepth(app *cli.App, words []string) int {
	subs, n := app.Commands, 0
	for _, w := range words {
		var next *cli.Command
		for _, c := range subs {
			if c.HasName(w) {
				next = c
			}
		}
		if next == nil {
			break
		}
		subs, n = next.Subcommands, n+1
	}
	return n
}

func hasFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}

// A command line the README or docs/ show must run as shown: each
// mtlbench command and flag they name is one the CLI has.
func TestDocsNameRealCommandsAndFlags(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	app.Setup() // adds help, as a run does
	checked := 0
	for _, d := range readDocs(t) {
		f, doc := d.path, d.text
		lines, at := docCommandLines(string(doc))
		for i, l := range lines {
			// A span that starts with a command and a flag (`run --set`,
			// `gate --suite ci`) is mtlbench's too.
			if w := strings.Fields(l); len(w) > 1 && len(w[1]) > 1 && w[1][0] == '-' && w[1] != "->" && app.Command(w[0]) != nil && w[0] != "help" {
				l = "mtlbench " + l
			}
			if !regexp.MustCompile(`(^|[\s;|&(])(\./)?(bin/)?mtlbench\s+\S`).MatchString(l) {
				continue
			}
			checked++
			for _, b := range checkDocCommand(app, l) {
				t.Errorf("%s:%d: %s, in %q", strings.TrimPrefix(f, "../../"), at[i], b, l)
			}
		}
	}
	if checked < 50 {
		t.Errorf("found %d mtlbench command lines in README.md and docs/, fewer than expected: is the pattern still right?", checked)
	}
}

func TestCheckDocCommand(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	app.Setup()
	for _, c := range []struct {
		line string
		bad  []string
	}{
		{"mtlbench run suites/ci.yaml --resume 12", nil},
		{"./bin/mtlbench selftest --backend metal 2>&1 | tee selftest.log", nil},
		{"MTL_DEBUG_LAYER=1 ./bin/mtlbench selftest --backend metal", nil},
		{"mtlbench tune show; mtlbench tune export mac.json", nil},
		{"mtlbench export -o - | mtlbench import -", nil},
		{"mtlbench bench -m gpt2 -b 1-8*2 --fusion on,off   # what fusion buys --nosuch", nil},
		{"mtlbench run ci --nosuch 1", []string{"mtlbench run has no flag --nosuch"}},
		{"mtlbench suites lsit", nil}, // suites' words past its subcommands are arguments
		{"mtlbench help run", nil},
		{"mtlbench benchh -m gpt2", []string{"mtlbench has no command benchh"}},
		{"mtlbench tune show --nosuch", []string{"mtlbench tune show has no flag --nosuch"}},
		{"mtlbench show main --format csv > main.csv --nosuch", nil},
		{"resume with: mtlbench imports --db r.db", []string{"mtlbench has no command imports"}},
		{"mtlbench reads it", []string{"mtlbench has no command reads"}},
	} {
		if got := checkDocCommand(app, c.line); !slices.Equal(got, c.bad) {
			t.Errorf("%q: got %q, want %q", c.line, got, c.bad)
		}
	}
}

// checkDocMakeAndGoTest checks one shell line's make targets against the
// Makefile's and its go test packages and -run patterns against the tree
// (root: the repository). It returns what is wrong.
func checkDocMakeAndGoTest(root string, targets map[string]bool, line string) []string {
	var bad []string
	line, _, _ = strings.Cut(line, " #")
	for _, seg := range regexp.MustCompile(`;|&&|\|\|?`).Split(line, -1) {
		words := strings.Fields(seg)
		if len(words) > 1 && words[0] == "make" {
			for _, w := range words[1:] {
				if !regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(w) {
					break // a variable, a redirection: the targets have ended
				}
				if !targets[w] {
					bad = append(bad, "the Makefile has no target "+w)
				}
			}
		}
		if len(words) < 3 || words[0] != "go" || words[1] != "test" {
			continue
		}
		var pkg, run string
		for i, w := range words[2:] {
			switch {
			case strings.HasPrefix(w, "./") && pkg == "":
				pkg = w
			case w == "-run" && i+3 < len(words):
				run = strings.Trim(words[i+3], `'"`)
			}
		}
		if pkg == "" || strings.HasSuffix(pkg, "/...") {
			continue
		}
		dir := filepath.Join(root, filepath.FromSlash(pkg))
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			bad = append(bad, "no package "+pkg)
			continue
		}
		if run == "" || run == "^$" {
			continue
		}
		re, err := regexp.Compile(strings.SplitN(run, "/", 2)[0])
		if err != nil {
			bad = append(bad, "-run "+run+": "+err.Error())
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		found := false
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, m := range regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w*)\(`).FindAllStringSubmatch(string(src), -1) {
				found = found || re.MatchString(m[1])
			}
		}
		if !found {
			bad = append(bad, "no test of "+pkg+" matches -run "+run)
		}
	}
	return bad
}

func makeTargets(t *testing.T, makefile string) map[string]bool {
	t.Helper()
	mk, err := os.ReadFile(makefile)
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z-]*):`).FindAllStringSubmatch(string(mk), -1) {
		targets[m[1]] = true
	}
	return targets
}

// The make targets and go test lines README.md and docs/ show exist: each
// target is the Makefile's, each package a folder of the tree, each -run
// pattern matches a test of that package.
func TestDocsNameRealTargetsAndTests(t *testing.T) {
	targets := makeTargets(t, "../../Makefile")
	checked := 0
	for _, d := range readDocs(t) {
		f, doc := d.path, d.text
		lines, at := docCommandLines(string(doc))
		for i, l := range lines {
			if !regexp.MustCompile(`(^|[\s;|&(])(make\s+[a-z]|go test\s)`).MatchString(l) {
				continue
			}
			checked++
			for _, b := range checkDocMakeAndGoTest("../..", targets, l) {
				t.Errorf("%s:%d: %s, in %q", strings.TrimPrefix(f, "../../"), at[i], b, l)
			}
		}
	}
	if checked < 10 {
		t.Errorf("found %d make and go test lines in README.md and docs/, fewer than expected: is the pattern still right?", checked)
	}
}

func TestCheckDocMakeAndGoTest(t *testing.T) {
	targets := makeTargets(t, "../../Makefile")
	for _, c := range []struct {
		line string
		bad  []string
	}{
		{"make run SUITE=suites/ci.yaml", nil},
		{"make vet darwin clang selftest-emu", nil},
		{"make mac-smoke 2>&1 | tee smoke.log", nil},
		{"make smoke", []string{"the Makefile has no target smoke"}},
		{"go test ./reports/compare -run 'TestGate' -v", nil},
		{"go test ./reports/compare -run '^TestNoSuchGate$' -v", []string{"no test of ./reports/compare matches -run ^TestNoSuchGate$"}},
		{"go test ./reports/nosuch/", []string{"no package ./reports/nosuch/"}},
		{"go test ./...", nil},
	} {
		if got := checkDocMakeAndGoTest("../..", targets, c.line); !slices.Equal(got, c.bad) {
			t.Errorf("%q: got %q, want %q", c.line, got, c.bad)
		}
	}
}

// docPathProblem says what is wrong with a repository path a doc names in
// code (`runner/engine/forward.go`, `kernels/metal/*.metal`,
// `runner/model.Open`: a package and a name in it), or "".
func docPathProblem(root, p string) string {
	p = strings.TrimSuffix(p, "/")
	if i := strings.LastIndex(p, "/"); i >= 0 {
		if j := strings.Index(p[i:], "."); j > 0 {
			if ext := p[i+j+1:]; ext != "" && ext[0] >= 'A' && ext[0] <= 'Z' {
				p = p[:i+j] // a package and a name in it: the package
			}
		}
	}
	matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(p)))
	if err != nil {
		return p + ": " + err.Error()
	}
	if len(matches) == 0 {
		return "no " + p + " in the repository"
	}
	return ""
}

// Every path into the repository README.md and docs/ name in code (a
// package, a file, a glob of files) is there.
func TestDocsNameRealPaths(t *testing.T) {
	top := `(?:bridge|cmd|docs|internal|kernels|reports|results|runner|suites|tools)`
	re := regexp.MustCompile("`(" + top + `/[A-Za-z0-9_./*-]*)` + "`")
	checked := 0
	for _, d := range readDocs(t) {
		f, doc := d.path, d.text
		for _, m := range re.FindAllStringSubmatchIndex(string(doc), -1) {
			checked++
			if bad := docPathProblem("../..", string(doc[m[2]:m[3]])); bad != "" {
				t.Errorf("%s:%d: %s", strings.TrimPrefix(f, "../../"), 1+strings.Count(string(doc[:m[0]]), "\n"), bad)
			}
		}
	}
	if checked < 100 {
		t.Errorf("found %d repository paths in README.md and docs/, fewer than expected: is the pattern still right?", checked)
	}
}

func TestDocPathProblem(t *testing.T) {
	for _, c := range []struct{ path, bad string }{
		{"runner/engine/forward.go", ""},
		{"runner/engine/", ""},
		{"kernels/metal/*.metal", ""},
		{"runner/model.Open", ""},
		{"kernels/cuda.Units", ""},
		{"runner/engine/nosuch.go", "no runner/engine/nosuch.go in the repository"},
		{"runner/nosuch.Open", "no runner/nosuch in the repository"},
		{"kernels/metal/*.nosuch", "no kernels/metal/*.nosuch in the repository"},
	} {
		if got := docPathProblem("../..", c.path); got != c.bad {
			t.Errorf("%s: got %q, want %q", c.path, got, c.bad)
		}
	}
}

// Every test README.md and docs/ cite in code (`TestFixtures`, the proof of
// what they say) is one the repository has.
func TestDocsNameRealTests(t *testing.T) {
	have := map[string]bool{}
	funcs := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w*)\(`)
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "../.." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, "_test.go") {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range funcs.FindAllStringSubmatch(string(src), -1) {
				have[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := regexp.MustCompile("`[^`]*`")
	name := regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z]\w*)`)
	checked := 0
	for _, d := range readDocs(t) {
		f, doc := d.path, d.text
		for _, span := range cited.FindAllStringIndex(string(doc), -1) {
			if strings.Contains(string(doc[span[0]:span[1]]), "-run ") {
				continue // a pattern, held by TestDocsNameRealTargetsAndTests
			}
			for _, m := range name.FindAllStringSubmatch(string(doc[span[0]:span[1]]), -1) {
				checked++
				if !have[m[1]] {
					t.Errorf("%s:%d: %s is no test of the repository", strings.TrimPrefix(f, "../../"), 1+strings.Count(string(doc[:span[0]]), "\n"), m[1])
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("found %d tests cited in README.md and docs/, fewer than expected: is the pattern still right?", checked)
	}
}

// docFile is README.md or a file of docs/, as the checks above read it.
type docFile struct {
	path string // from this package's folder: ../../docs/x.md
	text []byte
}

// readDocs reads the files whose claims these tests hold to the tree.
func readDocs(t *testing.T) []docFile {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []docFile
	for _, f := range append(files, "../../README.md") {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, docFile{f, text})
	}
	return out
}

// mtlbenchSegments are the mtlbench invocations of a shell line, its
// comment cut and its spaces made one: `a | mtlbench x > f && mtlbench y`
// gives "mtlbench x > f" and "mtlbench y".
func mtlbenchSegments(line string) []string {
	line, _, _ = strings.Cut(line, " #")
	var out []string
	for _, seg := range regexp.MustCompile(`;|&&|\|\|?`).Split(line, -1) {
		words := strings.Fields(seg)
		for len(words) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(words[0]) {
			words = words[1:]
		}
		if len(words) > 0 && filepath.Base(words[0]) == "mtlbench" {
			words[0] = "mtlbench"
			out = append(out, strings.Join(words, " "))
		}
	}
	return out
}

func TestMtlbenchSegments(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
	}{
		{"mtlbench run ci --tag main   # a comment", []string{"mtlbench run ci --tag main"}},
		{"mtlbench suites show ci > my.yaml && mtlbench run my.yaml", []string{"mtlbench suites show ci > my.yaml", "mtlbench run my.yaml"}},
		{"llama-bench -m m.gguf -o jsonl | mtlbench peer import - --model x", []string{"mtlbench peer import - --model x"}},
		{"MTL_DEBUG_LAYER=1 ./bin/mtlbench  selftest --backend metal 2>&1 | tee log", []string{"mtlbench selftest --backend metal 2>&1"}},
		{"make build && cp bin/mtlbench /tmp/base", nil},
	} {
		if got := mtlbenchSegments(c.line); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.line, got, c.want)
		}
	}
}

// The examples a command's help shows (its description's indented
// lines) are command lines README.md or docs/ show too, and name only
// commands and flags the CLI has: the help and the docs give one command
// for one task, and a change to either is made to both.
func TestHelpExamplesAreInTheDocs(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	app.Setup()
	documented := map[string]bool{}
	for _, d := range readDocs(t) {
		lines, _ := docCommandLines(string(d.text))
		for _, l := range lines {
			for _, s := range mtlbenchSegments(l) {
				documented[s] = true
			}
		}
	}
	examples := 0
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := strings.TrimSpace(path + " " + c.Name)
			for _, l := range strings.Split(c.Description, "\n") {
				if !strings.HasPrefix(l, " ") {
					continue // prose; examples are indented
				}
				for _, s := range mtlbenchSegments(l) {
					examples++
					if !documented[s] {
						t.Errorf("mtlbench %s --help shows %q, which no command line of README.md or docs/ shows", name, s)
					}
					for _, b := range checkDocCommand(app, s) {
						t.Errorf("mtlbench %s --help: %s, in %q", name, b, s)
					}
				}
			}
			walk(name, c.Subcommands)
		}
	}
	walk("", app.Commands)
	if examples < 20 {
		t.Errorf("found %d examples in the commands' help, fewer than expected: is the pattern still right?", examples)
	}
}
