package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/darwin"
	"github.com/mtlbench/mtlbench/runner/bench"
	"github.com/mtlbench/mtlbench/runner/envconfig"
	"github.com/mtlbench/mtlbench/suites"
)

// make mac-smoke (docs/metal-first-run.md) runs its mtlbench command lines
// on a Mac, where a flag renamed or a value refused breaks a first run that
// nothing here would otherwise notice. Each line is run here as far as the
// CLI's own checks reach, and no further:
//
//   - as written: it must succeed, or fail only because Metal is not here;
//   - where Metal stopped it, again past the backend: tune on metal-emu
//     with --dry-run (the checks a tune makes before timing anything; its
//     --out and a --witness-gpu, which metal refuses, are checked apart), run
//     as `suites validate --set backend=metal` (the suite's checks for that
//     backend, no weights read), generate on the CPU (the engine's checks on
//     the model, dtype, fusion and KV cache: on metal-emu one generate takes
//     5 to 15 s). selftest checks nothing past the backend but --filter,
//     --model-shapes and --timed, which the recipe does not pass, and the
//     emulator compiles every kernel anew (a minute) at each MSL version
//     the recipe asks for: it is run as written only.
func TestMacSmokeCommandsAccepted(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	mk, err := readMakefile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	if err := os.Mkdir(filepath.Join(tmp, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	// As `make BIN=...` would: the smoke's files go beside a binary in tmp.
	bin := filepath.Join(tmp, "bin", "mtlbench")
	mk.override("BIN", bin)
	steps, err := mk.smokeSteps("mac-smoke")
	if err != nil {
		t.Fatal(err)
	}
	// The recipe's paths (suites/..., ./bridge/...) are the repository's.
	t.Chdir(root)
	noMetal := ""
	if _, err := darwin.New(); err != nil {
		noMetal = err.Error()
	}
	known := map[string]bool{}
	for _, v := range envconfig.Vars {
		known[v.Name] = true
	}
	outputs := map[string]string{} // step: what its log would hold, stdout then stderr
	commands := 0
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			for _, c := range st.commands {
				if c.pkg != "" {
					if fi, err := os.Stat(c.pkg); err != nil || !fi.IsDir() {
						t.Errorf("step %s: go test %s: no such package folder", st.name, c.pkg)
					}
					continue
				}
				if c.args == nil {
					continue
				}
				commands++
				for k, v := range c.env {
					if strings.HasPrefix(k, "MTLBENCH_") && !known[k] {
						t.Errorf("step %s: %s is no variable mtlbench reads (mtlbench env lists them)", st.name, k)
					}
					t.Setenv(k, v)
				}
				out := checkSmokeCommand(t, st.name, c.args, noMetal)
				outputs[st.name] += out
				if c.grep != "" {
					checkSmokeGrep(t, root, st.name, c.grep)
				}
			}
		})
	}
	if commands < 10 {
		t.Fatalf("found %d mtlbench command lines in the mac-smoke recipe: the recipe is not read as make reads it", commands)
	}
	// The token comparison at the end reads the token line of these steps'
	// logs: each must be a step, and print one such line.
	for _, g := range mk.logGreps {
		out, ok := outputs[g.step]
		if !ok {
			t.Errorf("the recipe greps $(SMOKE)-%s.log, which no step of mac-smoke writes (with an mtlbench command)", g.step)
			continue
		}
		re, err := regexp.Compile("(?m)" + g.re)
		if err != nil {
			t.Errorf("grep -E %q: %v", g.re, err)
			continue
		}
		if n := len(re.FindAllString(out, -1)); n != 1 {
			t.Errorf("step %s: %d lines match the recipe's grep -E '%s', want one (its token ids):\n%s", g.step, n, g.re, out)
		}
	}
}

// checkSmokeCommand runs one mtlbench command line of step as written, and
// past Metal where Metal stopped it; it returns what the run that got
// furthest printed.
func checkSmokeCommand(t *testing.T, step string, args []string, noMetal string) string {
	t.Helper()
	line := strings.Join(args, " ")
	stdout, stderr, err := "", "", error(nil)
	stopped := noMetal == "" && usesMetal(args) // Metal is here: it would run for real
	if !stopped {
		t.Logf("mtlbench %s", line)
		stdout, stderr, err = mtl(t, args...)
		switch {
		case err == nil:
			return stdout + stderr
		case noMetal != "" && strings.Contains(err.Error(), noMetal):
			stopped = true
		default:
			t.Errorf("step %s: mtlbench %s\nfails here, and not for want of Metal: %v", step, line, err)
			return stdout + stderr
		}
	}
	if !stopped || len(args) == 0 {
		return stdout + stderr
	}
	var past []string
	switch args[0] {
	case "tune":
		backend := flagValue(args, "backend")
		if g := flagValue(args, "witness-gpu"); g != "" {
			if err := bench.OtherBackend(suites.ParamWitnessGPU, g, backend, nil); err != nil {
				t.Errorf("step %s: mtlbench %s\n--witness-gpu: %v", step, line, err)
			}
		}
		if out := flagValue(args, "out"); out != "" {
			if err := checkTunedOut(out); err != nil {
				t.Errorf("step %s: mtlbench %s\n--out: %v", step, line, err)
			}
		}
		past = append(withFlag(args, "backend", swapMetal(backend, "metal-emu")), "--dry-run")
	case "generate":
		past = withFlag(args, "backend", swapMetal(flagValue(args, "backend"), "cpu"))
		if a := flagValue(args, "against"); a != "" {
			past = withFlag(past, "against", swapMetal(a, "cpu"))
		}
	case "run":
		past = []string{"suites", "validate"}
		for i := 1; i < len(args); i++ {
			a := args[i]
			name, value, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
			switch {
			case !strings.HasPrefix(a, "-"):
				past = append(past, a)
				continue
			case !inline && i+1 < len(args) && !isBoolFlag(name):
				value = args[i+1]
				i++
			}
			switch name {
			case "backend", "timing":
				past = append(past, "--set", name+"="+value)
			case "set":
				past = append(past, "--set", value)
			}
		}
	default:
		return stdout + stderr
	}
	t.Logf("  past Metal: mtlbench %s", strings.Join(past, " "))
	stdout, stderr, err = mtl(t, past...)
	if err != nil {
		t.Errorf("step %s: mtlbench %s\nis refused (checked as mtlbench %s): %v\n%s", step, line, strings.Join(past, " "), err, stderr)
	}
	return stdout + stderr
}

// checkSmokeGrep checks the pattern a step greps mtlbench's output for is
// what mtlbench prints: the fallback step's warning, from auto passing over
// a Metal that did not open (bridge/backends), written by the warner the
// backends get (envconfig.Backends), which no machine here can trigger.
func checkSmokeGrep(t *testing.T, root, step, pattern string) {
	t.Helper()
	text, ok := strings.CutPrefix(pattern, "warning: ")
	if !ok {
		t.Errorf("step %s: greps for %q, which this test does not know mtlbench to print", step, pattern)
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	o, err := envconfig.Backends()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	o.Warn(text)
	os.Stderr = stderr
	w.Close()
	said, _ := io.ReadAll(r)
	r.Close()
	src, err := os.ReadFile(filepath.Join(root, "bridge", "backends", "backends.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(said), pattern) || !strings.Contains(string(src), text) {
		t.Errorf("step %s: greps for %q: the backends warn as %q, and bridge/backends/backends.go says %q nowhere", step, pattern, strings.TrimSpace(string(said)), text)
	}
}

// usesMetal says whether a command line asks for the metal backend.
func usesMetal(args []string) bool {
	return flagValue(args, "backend") == "metal" || flagValue(args, "against") == "metal"
}

func swapMetal(backend, with string) string {
	if backend == "metal" {
		return with
	}
	return backend
}

// isBoolFlag says whether a flag of the commands the recipe runs takes no
// value.
func isBoolFlag(name string) bool {
	return slices.Contains([]string{"quiet", "q", "dry-run", "failures", "json", "ignore-eos", "model-shapes", "timed", "lockstep", "pipelines"}, name)
}

// flagValue is the value of --name in args ("" when absent), the last one
// given.
func flagValue(args []string, name string) string {
	v := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		n, value, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if n != name {
			continue
		}
		if inline {
			v = value
		} else if i+1 < len(args) {
			v = args[i+1]
			i++
		}
	}
	return v
}

// withFlag is args with --name's value set to value.
func withFlag(args []string, name, value string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		n, _, inline := strings.Cut(strings.TrimLeft(out[i], "-"), "=")
		if !strings.HasPrefix(out[i], "-") || n != name {
			continue
		}
		if inline {
			out[i] = "--" + name + "=" + value
		} else if i+1 < len(out) {
			out[i+1] = value
		}
	}
	return out
}

// makefile is what the test reads of the Makefile: its variables and its
// rules' recipes.
type makefile struct {
	vars     map[string]string // unexpanded values
	fixed    map[string]bool   // set as on make's command line
	memo     map[string]string
	rules    map[string][]string // target: recipe lines, continuations joined
	logGreps []logGrep
}

// logGrep is a `grep -E 'RE' $(SMOKE)-STEP.log` of a recipe.
type logGrep struct{ re, step string }

var (
	makeAssign = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*(\?=|::=|:=|\+=|=)\s*(.*)$`)
	makeRule   = regexp.MustCompile(`^([A-Za-z0-9_.-]+)\s*:([^=].*)?$`)
	makeLog    = regexp.MustCompile(`grep -E '([^']*)' \$\(SMOKE\)-([A-Za-z0-9._-]+)\.log`)
)

func readMakefile(path string) (*makefile, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := &makefile{vars: map[string]string{}, fixed: map[string]bool{}, memo: map[string]string{}, rules: map[string][]string{}}
	lines := strings.Split(strings.ReplaceAll(string(src), "\\\n", " "), "\n")
	rule, define := "", false
	for _, l := range lines {
		switch {
		case define:
			define = strings.TrimSpace(l) != "endef"
		case strings.HasPrefix(l, "define "):
			define = true
		case strings.HasPrefix(l, "\t"):
			if rule != "" {
				m.rules[rule] = append(m.rules[rule], strings.TrimLeft(l, "\t@-+"))
			}
		case strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#"):
		case makeAssign.MatchString(l):
			rule = ""
			s := makeAssign.FindStringSubmatch(l)
			name, op, value := s[1], s[2], strings.TrimSpace(s[3])
			switch {
			case m.fixed[name]:
			case op == "?=" && m.defined(name):
			case op == "+=":
				m.vars[name] = strings.TrimSpace(m.vars[name] + " " + value)
			default:
				m.vars[name] = value
			}
		case makeRule.MatchString(l):
			rule = makeRule.FindStringSubmatch(l)[1]
		default:
			rule = ""
		}
	}
	return m, nil
}

func (m *makefile) defined(name string) bool {
	_, ok := m.vars[name]
	return ok
}

// override sets a variable as `make NAME=VALUE` does.
func (m *makefile) override(name, value string) {
	m.vars[name], m.fixed[name] = value, true
	clear(m.memo)
}

// expand expands s as make expands a recipe: variables, $(shell ...) and
// $$. A variable the Makefile does not define is an error, where make
// would make it empty.
func (m *makefile) expand(s string, depth int) (string, error) {
	if depth > 20 {
		return "", fmt.Errorf("%q: variables nest too deep", s)
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", fmt.Errorf("%q ends in a lone $", s)
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(', '{':
			end := closing(s, i+1)
			if end < 0 {
				return "", fmt.Errorf("%q: unclosed %c", s, s[i+1])
			}
			v, err := m.ref(s[i+2:end], depth)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			i = end
		default:
			return "", fmt.Errorf("%q: $%c is not a variable this test expands", s, s[i+1])
		}
	}
	return b.String(), nil
}

func (m *makefile) ref(ref string, depth int) (string, error) {
	if cmd, ok := strings.CutPrefix(ref, "shell "); ok {
		cmd, err := m.expand(cmd, depth+1)
		if err != nil {
			return "", err
		}
		out, err := exec.Command("sh", "-c", cmd).Output()
		if err != nil {
			return "", fmt.Errorf("$(shell %s): %v", cmd, err)
		}
		return strings.ReplaceAll(strings.TrimRight(string(out), "\n"), "\n", " "), nil
	}
	if strings.ContainsAny(ref, " ,:$") {
		return "", fmt.Errorf("$(%s): a function this test does not expand", ref)
	}
	if v, ok := m.memo[ref]; ok {
		return v, nil
	}
	raw, ok := m.vars[ref]
	if !ok {
		return "", fmt.Errorf("$(%s): the Makefile defines no such variable (make expands it to nothing)", ref)
	}
	v, err := m.expand(raw, depth+1)
	if err != nil {
		return "", err
	}
	m.memo[ref] = v
	return v, nil
}

// closing is the index of the parenthesis or brace closing s[open].
func closing(s string, open int) int {
	o := s[open]
	c := byte(')')
	if o == '{' {
		c = '}'
	}
	n := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case o:
			n++
		case c:
			n--
			if n == 0 {
				return i
			}
		}
	}
	return -1
}

// smokeStep is one $(call smoke_step,NAME,COMMAND) of the recipe.
type smokeStep struct {
	name     string
	commands []smokeCommand
}

// smokeCommand is one simple command of a step's shell line.
type smokeCommand struct {
	env  map[string]string // VAR=value before it, or after env
	args []string          // mtlbench's arguments, nil for another program
	pkg  string            // the package of a `go test`
	grep string            // the pattern of a grep -q its output is piped to
}

// smokeSteps reads target's recipe: each smoke_step call, its command
// expanded and split as sh would split it. A line the test does not
// understand is an error, not a step left out.
func (m *makefile) smokeSteps(target string) ([]smokeStep, error) {
	recipe, ok := m.rules[target]
	if !ok {
		return nil, fmt.Errorf("the Makefile has no %s target", target)
	}
	bin, err := m.ref("BIN", 0)
	if err != nil {
		return nil, err
	}
	var steps []smokeStep
	for _, line := range recipe {
		for _, g := range makeLog.FindAllStringSubmatch(line, -1) {
			m.logGreps = append(m.logGreps, logGrep{re: strings.ReplaceAll(g[1], "$$", "$"), step: g[2]})
		}
		call, ok := strings.CutPrefix(line, "$(call smoke_step,")
		if !ok {
			if strings.Contains(line, "$(BIN)") {
				return nil, fmt.Errorf("recipe line %q runs $(BIN) outside a smoke_step: its output is kept in no log", line)
			}
			continue
		}
		end := closing("("+call, 0)
		if end < 0 {
			return nil, fmt.Errorf("%q: unclosed $(call", line)
		}
		args := splitCallArgs(call[:end-1])
		if len(args) != 2 {
			return nil, fmt.Errorf("%q: smoke_step takes NAME,COMMAND; this gives %d arguments (a comma in the command splits it: put it in a variable)", line, len(args))
		}
		cmd, err := m.expand(args[1], 0)
		if err != nil {
			return nil, fmt.Errorf("step %s: %v", args[0], err)
		}
		st := smokeStep{name: args[0]}
		if st.commands, err = shellCommands(cmd, bin); err != nil {
			return nil, fmt.Errorf("step %s: %v", args[0], err)
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// splitCallArgs splits $(call)'s arguments at the commas outside
// parentheses, as make does.
func splitCallArgs(s string) []string {
	var args []string
	n, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '{':
			n++
		case ')', '}':
			n--
		case ',':
			if n == 0 {
				args = append(args, s[start:i])
				start = i + 1
			}
		}
	}
	return append(args, s[start:])
}

// shellCommands splits a shell line into its simple commands, going into
// `sh -c '...'`, and says which run bin.
func shellCommands(line, bin string) ([]smokeCommand, error) {
	words, err := shellWords(line)
	if err != nil {
		return nil, err
	}
	var cmds []smokeCommand
	var cur []string
	flush := func(pipedInto bool) error {
		defer func() { cur = nil }()
		c := smokeCommand{env: map[string]string{}}
		w := cur
		for len(w) > 0 {
			if assignment.MatchString(w[0]) {
				k, v, _ := strings.Cut(w[0], "=")
				c.env[k] = v
				w = w[1:]
				continue
			}
			if w[0] == "env" {
				w = w[1:]
				continue
			}
			break
		}
		switch {
		case len(w) == 0:
			return nil
		case w[0] == "sh" && len(w) == 3 && w[1] == "-c":
			inner, err := shellCommands(w[2], bin)
			if err != nil {
				return err
			}
			cmds = append(cmds, inner...)
			return nil
		case w[0] == bin:
			c.args = w[1:]
		case strings.HasSuffix(w[0], "mtlbench"):
			return fmt.Errorf("%q runs mtlbench as %s, not $(BIN)", line, w[0])
		case w[0] == "grep" && pipedInto && len(cmds) > 0:
			if len(w) == 3 && w[1] == "-q" {
				for i := len(cmds) - 1; i >= 0; i-- {
					if cmds[i].args != nil {
						cmds[i].grep = w[2]
						break
					}
				}
			}
		case len(w) >= 2 && w[1] == "test" && (w[0] == "go" || strings.HasSuffix(w[0], "/go")):
			for _, a := range w[2:] {
				if strings.HasPrefix(a, "./") {
					c.pkg = a
				}
			}
		}
		cmds = append(cmds, c)
		return nil
	}
	piped := false
	for _, w := range words {
		switch w.op {
		case "":
			cur = append(cur, w.text)
		case "|":
			if err := flush(piped); err != nil {
				return nil, err
			}
			piped = true
		default: // ; && ||
			if err := flush(piped); err != nil {
				return nil, err
			}
			piped = false
		}
	}
	if err := flush(piped); err != nil {
		return nil, err
	}
	return cmds, nil
}

// shellWord is a word of a shell line, or an operator (op).
type shellWord struct{ text, op string }

var (
	errShell    = errors.New("unclosed quote")
	redirection = regexp.MustCompile(`^[0-9]*(?:>>?|<)&?(.*)$`)
	assignment  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// shellWords splits a line as sh does: quotes, backslashes, the operators
// | ; && || and redirections (dropped).
func shellWords(line string) ([]shellWord, error) {
	var words []shellWord
	var b strings.Builder
	inWord := false
	end := func() {
		if inWord {
			switch r := redirection.FindStringSubmatch(b.String()); {
			case r == nil:
				words = append(words, shellWord{text: b.String()})
			case r[1] == "": // its target is the next word
				words = append(words, shellWord{op: "redirect"})
			}
		}
		b.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			end()
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("%q: %w", line, errShell)
			}
			b.WriteString(line[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0 {
					i++
				}
				b.WriteByte(line[i])
			}
			if i == len(line) {
				return nil, fmt.Errorf("%q: %w", line, errShell)
			}
			inWord = true
		case c == '\\' && i+1 < len(line):
			b.WriteByte(line[i+1])
			inWord, i = true, i+1
		case c == '|' || c == ';' || c == '&' && i+1 < len(line) && line[i+1] == '&':
			end()
			op := string(c)
			if i+1 < len(line) && line[i+1] == c && c != ';' {
				op += string(c)
				i++
			}
			words = append(words, shellWord{op: op})
		default:
			b.WriteByte(c)
			inWord = true
		}
	}
	end()
	// A redirection's target follows it: drop both.
	var out []shellWord
	for i := 0; i < len(words); i++ {
		if words[i].op == "redirect" {
			i++
			continue
		}
		out = append(out, words[i])
	}
	return out, nil
}

// macSmokeSteps reads the repository's Makefile and its mac-smoke steps.
func macSmokeSteps(t *testing.T) (*makefile, []smokeStep) {
	t.Helper()
	mk, err := readMakefile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := mk.smokeSteps("mac-smoke")
	if err != nil {
		t.Fatal(err)
	}
	return mk, steps
}

// docs/metal-first-run.md lists the files make mac-smoke leaves, each step's
// log among them, and the report it sends back: every step's log is
// listed, every file listed is one the recipe writes, and each is in the
// report.
func TestMacSmokeDocNamesItsFiles(t *testing.T) {
	mk, steps := macSmokeSteps(t)
	smoke, err := mk.ref("SMOKE", 0)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/metal-first-run.md")
	if err != nil {
		t.Fatal(err)
	}
	// The doc names a file by its path (bin/mtlbench.smoke-STEP.log) or, in
	// a row naming several, by the rest of it (`-STEP.log`).
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(regexp.QuoteMeta(smoke)+`([-.][A-Za-z0-9._-]*[A-Za-z0-9])|`+"`"+`(-[A-Za-z0-9._-]+\.log)`+"`").FindAllStringSubmatch(string(doc), -1) {
		listed[m[1]+m[2]] = true
	}
	if len(listed) < len(steps) {
		t.Fatalf("found %d of make mac-smoke's files named in docs/metal-first-run.md, fewer than its %d steps: are they named as %s-STEP.log?", len(listed), len(steps), smoke)
	}
	written := map[string]bool{}
	for _, st := range steps {
		written["-"+st.name+".log"] = true
		if !listed["-"+st.name+".log"] {
			t.Errorf("step %s: docs/metal-first-run.md does not list %s-%s.log", st.name, smoke, st.name)
		}
	}
	var report []string
	for _, l := range mk.rules["mac-smoke"] {
		files := regexp.MustCompile(`\$\(SMOKE\)([-.][A-Za-z0-9._*-]*[A-Za-z0-9*])`).FindAllStringSubmatch(l, -1)
		for _, f := range files {
			written[f[1]] = true
		}
		if strings.Contains(l, "tar czf $(SMOKE)-report.tar.gz") {
			for _, f := range files[1:] {
				report = append(report, f[1])
			}
		}
	}
	if len(report) == 0 {
		t.Fatal("the mac-smoke recipe writes no $(SMOKE)-report.tar.gz")
	}
	for f := range listed {
		if !written[f] {
			t.Errorf("docs/metal-first-run.md lists %s%s, which make mac-smoke does not write", smoke, f)
			continue
		}
		in := f == "-report.tar.gz"
		for _, r := range report {
			ok, _ := filepath.Match(r, f)
			in = in || ok
		}
		if !in {
			t.Errorf("docs/metal-first-run.md lists %s%s, which is not in %s-report.tar.gz", smoke, f, smoke)
		}
	}
}

// make mac-smoke runs the Metal self-test once as the kernels ship and once
// under each setting that changes how they compile or run, so a failure on a
// Mac arrives with the run that tells its cause apart (docs/metal-first-run.md):
// macOS 13's MSL, serial passes, and fast math off (kernel or fast math).
func TestMacSmokeSelftestVariants(t *testing.T) {
	_, steps := macSmokeSteps(t)
	cases := []struct {
		name string
		env  map[string]string
	}{
		{"as shipped", map[string]string{}},
		{"MSL 3.0", map[string]string{"MTLBENCH_METAL_MSL": "3.0"}},
		{"serial passes", map[string]string{"MTLBENCH_METAL_SERIAL": "1"}},
		{"fast math off", map[string]string{"MTLBENCH_METAL_FAST_MATH": "0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, st := range steps {
				for _, cmd := range st.commands {
					if len(cmd.args) > 0 && cmd.args[0] == "selftest" && flagValue(cmd.args, "backend") == "metal" && maps.Equal(cmd.env, c.env) {
						return
					}
				}
			}
			t.Errorf("no step of mac-smoke runs `selftest --backend metal` with exactly the environment %v", c.env)
		})
	}
}
