package layers

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mtlbench/mtlbench"

// mustNotImport lists, for each top-level directory, the top-level
// directories its packages must not import (their own is always allowed).
var mustNotImport = map[string][]string{
	"kernels":  {"bridge", "suites", "results", "runner", "reports", "cmd", "tools"},
	"bridge":   {"suites", "results", "runner", "reports", "cmd", "tools"},
	"suites":   {"results", "runner", "reports", "cmd", "tools"},
	"results":  {"runner", "reports", "cmd", "tools"},
	"runner":   {"reports", "cmd", "tools"},
	"reports":  {"runner", "cmd", "tools"},
	"internal": {"cmd"},
	"tools":    {"cmd"},
}

// testMustNotImport is what the tests of the lowest layers must not import
// either: they may drive the engine, never a command or a report.
var testMustNotImport = map[string][]string{
	"kernels": {"reports", "cmd"},
	"bridge":  {"reports", "cmd"},
}

type pkg struct {
	path        string // relative to the module: "bridge/cuda"
	imports     []string
	testImports []string
}

// list runs go list over the module for one target (env adds GOOS and
// GOARCH), keeping the module's own imports, relative to the module.
func list(t *testing.T, env ...string) []pkg {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-e", "-f",
		"{{.ImportPath}}|{{join .Imports \" \"}}|{{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	own := func(s string) []string {
		var r []string
		for _, f := range strings.Fields(s) {
			if rel, ok := strings.CutPrefix(f, module+"/"); ok {
				r = append(r, rel)
			}
		}
		return r
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), "|", 3)
		if len(parts) != 3 {
			continue
		}
		path := strings.TrimPrefix(strings.TrimPrefix(parts[0], module), "/")
		pkgs = append(pkgs, pkg{path: path, imports: own(parts[1]), testImports: own(parts[2])})
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages:\n%s", len(pkgs), out)
	}
	return pkgs
}

func top(path string) string { return strings.SplitN(path, "/", 2)[0] }

// violations returns one line per import that runs up the layers.
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		for _, imp := range p.imports {
			if slices.Contains(mustNotImport[top(p.path)], top(imp)) {
				out = append(out, fmt.Sprintf("%s imports %s: %s must not import %s", p.path, imp, top(p.path), top(imp)))
			}
		}
		for _, imp := range p.testImports {
			if slices.Contains(testMustNotImport[top(p.path)], top(imp)) {
				out = append(out, fmt.Sprintf("%s (tests) import %s: %s tests must not import %s", p.path, imp, top(p.path), top(imp)))
			}
		}
	}
	return append(out, runnerCycles(pkgs)...)
}

// subtree is runner/X for a package under runner/X, else "".
func subtree(path string) string {
	parts := strings.SplitN(path, "/", 3)
	if len(parts) < 2 || parts[0] != "runner" {
		return ""
	}
	return parts[0] + "/" + parts[1]
}

// runnerCycles finds cycles among runner's subtrees, following non-test
// imports: runner/engine importing runner/tune while runner/tune/tuner
// imports runner/engine is one.
func runnerCycles(pkgs []pkg) []string {
	edges := map[string]map[string]string{} // subtree -> subtree -> "pkg imports imp"
	for _, p := range pkgs {
		from := subtree(p.path)
		for _, imp := range p.imports {
			to := subtree(imp)
			if from == "" || to == "" || from == to {
				continue
			}
			if edges[from] == nil {
				edges[from] = map[string]string{}
			}
			if _, ok := edges[from][to]; !ok {
				edges[from][to] = p.path + " imports " + imp
			}
		}
	}
	var out []string
	seen := map[string]bool{}
	// A path from to back to from closes a cycle through the edge from -> to.
	var path func(at, goal string, visited map[string]bool) []string
	path = func(at, goal string, visited map[string]bool) []string {
		if at == goal {
			return []string{}
		}
		visited[at] = true
		for _, next := range sortedKeys(edges[at]) {
			if visited[next] {
				continue
			}
			if rest := path(next, goal, visited); rest != nil {
				return append([]string{edges[at][next]}, rest...)
			}
		}
		return nil
	}
	for _, from := range sortedKeys(edges) {
		for _, to := range sortedKeys(edges[from]) {
			back := path(to, from, map[string]bool{})
			if back == nil {
				continue
			}
			cycle := append([]string{edges[from][to]}, back...)
			key := strings.Join(sortedCopy(cycle), ";")
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, "cycle among runner's subtrees: "+strings.Join(cycle, ", "))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// Every import runs down the layers, on the host and on macOS (whose
// files differ by build tags).
func TestImportsRunDown(t *testing.T) {
	if testing.Short() {
		t.Skip("lists every package of the module")
	}
	for _, target := range [][]string{nil, {"GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0"}} {
		name := "host"
		if target != nil {
			name = "darwin/arm64"
		}
		t.Run(name, func(t *testing.T) {
			for _, v := range violations(list(t, target...)) {
				t.Error(v)
			}
		})
	}
}

// The checks catch what they are meant to.
func TestViolations(t *testing.T) {
	pkgs := []pkg{
		{path: "bridge/cuda", imports: []string{"bridge", "runner/kbench", "suites"}},
		{path: "bridge/metal", testImports: []string{"runner/engine", "reports/table"}},
		{path: "runner/selftest", imports: []string{"reports/table"}},
		{path: "results", imports: []string{"runner/bench"}},
		{path: "runner/engine", imports: []string{"runner/tune", "runner/model"}},
		{path: "runner/tune/tuner", imports: []string{"runner/engine", "runner/tune"}},
		{path: "runner/bench", imports: []string{"runner/engine", "runner/tune", "results", "suites", "bridge"}},
		{path: "reports/compare", imports: []string{"results", "bridge"}},
		{path: "cmd/mtlbench", imports: []string{"runner/bench", "reports/compare"}},
	}
	got := violations(pkgs)
	want := []string{
		"bridge/cuda imports runner/kbench: bridge must not import runner",
		"bridge/cuda imports suites: bridge must not import suites",
		"bridge/metal (tests) import reports/table: bridge tests must not import reports",
		"runner/selftest imports reports/table: runner must not import reports",
		"results imports runner/bench: results must not import runner",
		"cycle among runner's subtrees: runner/engine imports runner/tune, runner/tune/tuner imports runner/engine",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
