package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// A word that names no command, or an argument a command takes none of,
// is refused naming it and where the help is; help as a command prints
// the help it asks for.
func TestCommandLineWords(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // the error; "" for none
		out  string // in stdout
	}{
		{args: []string{"frobnicate"}, want: `unknown command "frobnicate" (want one of generate, models, run,`},
		{args: []string{"frobnicate"}, want: "(see `mtlbench --help`)"},
		{args: []string{"suites", "lsit"}, want: "suites: unknown command \"lsit\" (want one of validate, list, show) (see `mtlbench suites --help`)"},
		{args: []string{"history", "shwo", "x"}, want: "history: unknown command \"shwo\" (want one of list, show, import)"},
		{args: []string{"peer", "imprt"}, want: `peer: unknown command "imprt" (want one of import)`},
		// A mistyped command followed by its flags is the word that is
		// wrong, not the flags: they said unknown flag --db.
		{args: []string{"shwo", "--db", "r.db", "1"}, want: `unknown command "shwo" (want one of generate, models, run,`},
		{args: []string{"compre", "a", "b", "--format", "csv"}, want: `unknown command "compre"`},
		{args: []string{"history", "shwo", "--model", "x"}, want: "history: unknown command \"shwo\" (want one of list, show, import)"},
		// tune takes a suite of its own, its flags after it.
		{args: []string{"tune", "no-such-suite.yaml", "--backend", "cpu"}, want: `no suite file or built-in suite "no-such-suite.yaml"`},
		{args: []string{"devices", "cpu"}, want: "devices: takes flags only, got the argument(s) [\"cpu\"] (see `mtlbench devices --help`)"},
		{args: []string{"env", "MTLBENCH_DB"}, want: `env: takes flags only, got the argument(s) ["MTLBENCH_DB"]`},
		{args: []string{"selftest", "--backend", "cpu", "rms_norm"}, want: `selftest: takes flags only, got the argument(s) ["rms_norm"]`},
		{args: []string{"history", "list", "x"}, want: `history list: takes flags only`},
		{args: []string{"history", "show", "Qwen3-30B-A3B"}, want: `history show: takes flags only`},
		{args: []string{"runs", "main"}, want: `runs: takes flags only`},
		{args: []string{"tune", "show", "x"}, want: `tune show: takes flags only`},
		{args: []string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "hello"}, want: `generate: takes flags only, got the argument(s) ["hello"]`},
		{args: []string{"bench", "-m", "qwen3-moe-mini", "suites/ci.yaml"}, want: `bench: takes flags only, got the argument(s) ["suites/ci.yaml"]`},
		{args: []string{"gate", "--baseline", "a", "--candidate", "b", "c"}, want: `gate: takes flags only, got the argument(s) ["c"] (see`},
		// Arguments where required flags were left out (compare's form for
		// gate) are said as those flags: gate said only that --baseline
		// and --candidate are required, as if the arguments were not there.
		{args: []string{"gate", "main", "HEAD"}, want: "gate: takes flags only, got the argument(s) [\"main\" \"HEAD\"]: give them as --baseline main --candidate HEAD (see `mtlbench gate --help`)"},
		{args: []string{"gate", "--baseline", "main", "HEAD"}, want: `gate: takes flags only, got the argument(s) ["HEAD"]: give it as --candidate HEAD (see`},
		{args: []string{"gate", "main"}, want: `gate: takes flags only, got the argument(s) ["main"] (see`},
		{args: []string{"bench", "qwen3-moe-mini"}, want: `bench: takes flags only, got the argument(s) ["qwen3-moe-mini"]: give it as --model qwen3-moe-mini (see`},
		{args: []string{"generate", "my model", "--tokens", "1"}, want: `generate: takes flags only, got the argument(s) ["my model"]: give it as --model 'my model' (see`},
		{args: []string{"suites", "list", "a", "b"}, want: "suites list takes one folder, got 2 arguments"},
		{args: []string{"help", "run"}, out: "mtlbench run - run a benchmark suite"},
		{args: []string{"help", "frobnicate"}, want: "unknown command \"frobnicate\" (want one of generate, models, run,"},
		{args: []string{"help", "suites", "lsit"}, want: "suites: unknown command \"lsit\" (want one of validate, list, show) (see `mtlbench suites --help`)"},
		{args: []string{"h", "runn"}, want: "unknown command \"runn\""},
		{args: []string{"help"}, out: "COMMANDS:"},
		{args: []string{"suites"}, out: "mtlbench suites - list, show and validate"},
	} {
		out, _, err := mtl(t, c.args...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: err %v, want %q", c.args, err, c.want)
		case !strings.Contains(out, c.out):
			t.Errorf("%q: stdout %q, want %q in it", c.args, out, c.out)
		}
	}
}

// ab's help names the value its paired test compares: each run's mean of
// its better half of repetitions (compare.runValue), not its median.
func TestABHelpNamesTheRunValue(t *testing.T) {
	out, _, err := mtl(t, "ab", "--help")
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(out), " ")
	if !strings.Contains(flat, "each run's mean of its better half of repetitions") || strings.Contains(flat, "runs' medians") {
		t.Errorf("ab --help does not name the better half as a run's value:\n%s", out)
	}
}

// The main commands' help ends with examples of their own command lines.
func TestMainCommandsHaveExamples(t *testing.T) {
	for _, cmd := range []string{"generate", "models", "run", "bench", "compare", "gate", "ab", "show", "tune", "export"} {
		out, _, err := mtl(t, cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		examples := 0
		for _, line := range strings.Split(out, "\n") {
			line = strings.TrimSpace(line)
			// NAME and USAGE name the command too; an example is a command line.
			if strings.HasPrefix(line, "mtlbench "+cmd+" ") && !strings.HasPrefix(line, "mtlbench "+cmd+" - ") && !strings.Contains(line, "[command options]") {
				examples++
			}
		}
		if examples == 0 {
			t.Errorf("mtlbench %s --help gives no example of its command line:\n%s", cmd, out)
		}
	}
}

// generate's help names every field its --json output can hold.
func TestGenerateHelpNamesJSONFields(t *testing.T) {
	out, _, err := mtl(t, "generate", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"tokens"`, `"logits_last"`, `"text"`, `"prompt"`} {
		if !strings.Contains(out, field) {
			t.Errorf("generate --help does not name the --json field %s:\n%s", field, out)
		}
	}
}

// Every command that takes run references says they may be "latest", as
// the store resolves them for all of them.
func TestRunReferencesNameLatest(t *testing.T) {
	for _, cmd := range []string{"compare", "gate", "report", "show", "export"} {
		out, _, err := mtl(t, cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, `tag, "latest"`) && !strings.Contains(out, "tag, latest") {
			t.Errorf("mtlbench %s --help does not name latest among the run references:\n%s", cmd, out)
		}
	}
}

// models' help, which says how each packed preset format is counted, names
// every format --dtype takes.
func TestModelsHelpNamesEveryPackedFormat(t *testing.T) {
	out, _, err := mtl(t, "models", "--help")
	if err != nil {
		t.Fatal(err)
	}
	desc, _, _ := strings.Cut(out, "OPTIONS:")
	for _, f := range []string{"q2", "q8", "nvfp4", "mxfp8", "q4_k_m", "q5_k_m", "q8_0", "IQ types"} {
		if !strings.Contains(desc, f) {
			t.Errorf("models --help's description does not name the packed format %s:\n%s", f, desc)
		}
	}
}

// Flags whose default is computed, not a value urfave prints, say it.
func TestComputedDefaultsStated(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"report", "--help"}, "--title value"},
		{[]string{"peer", "import", "--help"}, "--model value"},
	} {
		out, _, err := mtl(t, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), c.flag) {
				line = l
			}
		}
		if !strings.Contains(line, "(default: ") {
			t.Errorf("%q: %s states no default: %q", c.args, c.flag, line)
		}
	}
}

// A flag of one value given twice (-b 1-3 -b 4) would keep the last and
// drop the other without a word, as a --set given twice would: it is
// refused, naming both, before any work. The flags that collect values
// (--set, --threshold) and switches (-q) may repeat.
func TestFlagGivenTwice(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "-m", "qwen3-moe-mini", "-m", "gpt2", "-p", "4", "-n", "2", "-r", "1", "--backend", "cpu", "--threads", "1", "--db", db},
			"bench: --model given twice (-m qwen3-moe-mini, -m gpt2): give it once (see `mtlbench bench --help`)"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-r", "2", "-b", "4", "--repetitions=3", "-p", "4", "-n", "2", "--backend", "cpu", "--threads", "1", "--db", db},
			"bench: --repetitions given twice (-r 2, --repetitions=3)"},
		{[]string{"runs", "--limit", "3", "--db", db, "--limit=4"},
			"runs: --limit given twice (--limit 3, --limit=4)"},
		{[]string{"runs", "--format", "csv", "--db", db, "--format", "json"},
			"runs: --format given twice (--format csv, --format json)"},
		{[]string{"suites", "validate", "ci", "--set", "prompt_len=16", "--set", "gen_len=4"}, ""},
		{[]string{"suites", "validate", "--", "--set", "--set"}, "2 of 2 suites not found"},
		{[]string{"suites", "validate", "ci", "--", "--set"}, "1 of 2 suites not found"},
		{[]string{"suites", "validate", "no-such-suite"}, "1 of 1 suite not found"},
	} {
		_, _, err := mtl(t, tc.args...)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// bench's list flags given more than once join, as llama-bench reads a
// repeated flag: -b 1 -b 4 sweeps both, wherever each was given.
func TestBenchListFlagsJoin(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // lines of the printed suite
	}{
		{[]string{"-b", "1-3", "-b", "8"}, []string{"batch: [1, 2, 3, 8]"}},
		{[]string{"--batch=2", "-p", "16", "-b", "4", "-p", "32"}, []string{"batch: [2, 4]", "prompt_len: [16, 32]"}},
		{[]string{"-n", "4", "--gen", "8", "-d", "0", "-d", "64"}, []string{"gen_len: [4, 8]", "depth: [0, 64]"}},
		{[]string{"--fusion", "on", "--fusion", "off"}, []string{`fusion: ["on", "off"]`}},
	} {
		args := append([]string{"bench", "--print-suite", "-m", "qwen3-moe-mini"}, tc.args...)
		out, _, err := mtl(t, args...)
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: the suite has no %q:\n%s", tc.args, w, out)
			}
		}
	}
}

// bench --print-suite prints the suite and runs nothing, so the flags of a
// run it would not make (--resume, --steps, --tag, --db, a --format of the
// summary) are refused rather than dropped without a word; the suite's own
// flags print as before.
func TestPrintSuiteRefusesRunFlags(t *testing.T) {
	dir := t.TempDir()
	base := []string{"bench", "-m", "qwen3-moe-mini", "-p", "4", "-n", "2", "--print-suite"}
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--resume", "3"}, "--print-suite runs nothing, so --resume would be dropped"},
		{[]string{"--steps", filepath.Join(dir, "s.jsonl")}, "--print-suite runs nothing, so --steps would be dropped"},
		{[]string{"--tag", "x"}, "--print-suite runs nothing, so --tag would be dropped"},
		{[]string{"--db", filepath.Join(dir, "r.db")}, "--print-suite runs nothing, so --db would be dropped"},
		{[]string{"--format", "csv"}, "--print-suite runs nothing, so --format would be dropped"},
		{[]string{"-b", "1,2", "--backend", "cpu", "-q"}, ""},
	} {
		out, _, err := mtl(t, append(base, tc.extra...)...)
		switch {
		case tc.want == "" && (err != nil || !strings.Contains(out, "name: bench")):
			t.Errorf("%v: %v\n%s", tc.extra, err, out)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want %q", tc.extra, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "s.jsonl")); err == nil {
		t.Error("--print-suite wrote the --steps file")
	}
}

// A path flag given an empty value (--db "$DB" with DB unset) is refused:
// read as left out, --db "" recorded into the default store and --steps ""
// wrote no log, without a word.
func TestEmptyPathFlag(t *testing.T) {
	def := filepath.Join(t.TempDir(), "default.db")
	t.Setenv("MTLBENCH_DB", def)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "--db", ""}, `runs: --db "": an empty path (leave --db out for the default)`},
		{[]string{"runs", "--db="}, `runs: --db "": an empty path`},
		{[]string{"export", "-o", ""}, `export: --out "": an empty path`},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-p", "4", "-n", "2", "-r", "1", "--backend", "cpu", "--threads", "1", "--steps", ""}, `bench: --steps "": an empty path`},
		{[]string{"gate", "--baseline", "a", "--candidate", "b", "--summary", ""}, `gate: --summary "": an empty path`},
		{[]string{"ab", "--resume", ""}, `ab: --resume "": an empty path`},
	} {
		_, _, err := mtl(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(def); err == nil {
		t.Error("a command with an empty path wrote the default store")
	}
}

// A flag whose value names a thing (a backend, dtype, model, kernel, suite,
// format) given an empty value is refused, naming the flag: read as left
// out, run ci --backend "" ran the suite's backend without a word. A flag
// where "" means something (--tag "") is not refused for it.
func TestEmptyNameFlag(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	for _, tc := range []struct {
		args    []string
		want    string
		refused bool
	}{
		{[]string{"run", "ci", "--backend", "", "--db", db}, `run: --backend "": an empty value (name one, or leave --backend out for the default)`, true},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--dtype", ""}, `bench: --dtype "": an empty value`, true},
		// A required flag has no default to leave it out for: it was told
		// "leave --model out for the default", which refuses it anew.
		{[]string{"bench", "-m", ""}, `bench: --model "": an empty value (--model is required: model preset (mtlbench models), checkpoint folder (HF or mlx-lm) or .gguf file) (see`, true},
		{[]string{"gate", "--baseline", "", "--candidate", "b"}, `gate: --baseline "": an empty value (--baseline is required: baseline runs: run id, tag`, true},
		{[]string{"history", "import", "kb.md", "--model", ""}, `history import: --model "": an empty value (--model is required: model of the figures`, true},
		{[]string{"bench", "--model=", "-p", "4"}, `bench: --model "": an empty value`, true},
		{[]string{"tune", "--kernel", "", "--dry-run"}, `tune: --kernel "": an empty value`, true},
		{[]string{"runs", "--suite", "", "--db", db}, `runs: --suite "": an empty value`, true},
		{[]string{"runs", "--format", "", "--db", db}, `runs: --format "": an empty value`, true},
		{[]string{"generate", "-m", "qwen3-moe-mini", "--against", ""}, `generate: --against "": an empty value`, true},
		{[]string{"ab", "ci", "--baseline-bin", ""}, `ab: --baseline-bin "": an empty value (--baseline-bin is required: the baseline mtlbench binary (built from the base commit)) (see`, true},
		{[]string{"ab", "ci", "--baseline-bin", "x", "--candidate-bin", ""}, `ab: --candidate-bin "": an empty path (leave --candidate-bin out for the default)`, true},
		{[]string{"tune", "--kernel", "matmul", "--shape", "", "--dry-run"}, `tune: --shape "": an empty value`, true},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--slo", "", "--print-suite"}, `bench: --slo "": an empty value`, true},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--requests", "8", "--request-rate", "", "--print-suite"}, `bench: --request-rate "": an empty value`, true},
		{[]string{"history", "import", "kb.md", "--model", "m", "--date", ""}, `history import: --date "": an empty value`, true},
		{[]string{"history", "import", "kb.md", "--model", "m", "--source="}, `history import: --source "": an empty value`, true},
		{[]string{"runs", "--tag", "", "--db", db}, "an empty value", false},
	} {
		_, _, err := mtl(t, tc.args...)
		got := err != nil && strings.Contains(err.Error(), tc.want)
		if got != tc.refused {
			t.Errorf("%q: %v, want refused %v with %q", tc.args, err, tc.refused, tc.want)
		}
	}
}

// A path flag naming nothing says the path and what is wrong with it, as
// every path error does, without Go's "stat": --baseline-bin, --tokenizer
// and --summary read "stat PATH: no such file or directory".
func TestMissingPathFlag(t *testing.T) {
	dir := t.TempDir()
	none := filepath.Join(dir, "none")
	db := filepath.Join(dir, "r.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ab", "ci", "--baseline-bin", none}, "--baseline-bin: " + none + ": no such file or directory"},
		{[]string{"generate", "-m", "qwen3-moe-mini", "--prompt", "hi", "--tokenizer", none}, "--tokenizer: " + none + ": no such file or directory"},
		{[]string{"gate", "--baseline", "a", "--candidate", "b", "--db", db, "--summary", filepath.Join(none, "s.md")},
			"--summary " + filepath.Join(none, "s.md") + ": its folder cannot be used: " + none + ": no such file or directory"},
		{[]string{"ab", "ci", "--baseline-bin", os.Args[0], "--summary", filepath.Join(none, "s.md")},
			"--summary " + filepath.Join(none, "s.md") + ": its folder cannot be used: " + none + ": no such file or directory"},
	} {
		_, _, err := mtl(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "stat ") {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// A folder given for either binary of ab is said to be a folder, and a file
// that cannot run to be no executable file, each naming the flag.
func TestABBinaryFlags(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "r.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--baseline-bin", dir}, "--baseline-bin: " + dir + ": a folder, not an executable file"},
		{[]string{"--baseline-bin", os.Args[0], "--candidate-bin", dir}, "--candidate-bin: " + dir + ": a folder, not an executable file"},
		{[]string{"--baseline-bin", plain}, "--baseline-bin " + plain + ": not an executable file"},
	} {
		_, _, err := mtl(t, append([]string{"ab", "ci", "--backend", "cpu", "--db", db}, tc.args...)...)
		if err == nil || err.Error() != tc.want || exitCode(err) != 2 {
			t.Errorf("%q: exit %d, %v; want 2 and %q", tc.args, exitCode(err), err, tc.want)
		}
	}
}

// ab and gate --suite take a built-in suite's name as run does (`ab ci`,
// `gate --suite ci`), not only a path or its shipped: name.
func TestBuiltInSuiteNameEverywhere(t *testing.T) {
	t.Chdir(t.TempDir())
	db := seedCompareDB(t)
	_, _, err := mtl(t, "gate", "--baseline", "base", "--candidate", "cand", "--db", db, "--suite", "ci")
	if err != nil && strings.Contains(err.Error(), "--suite") {
		t.Errorf("gate --suite ci: %v", err)
	}
	_, _, err = mtl(t, "ab", "ci", "--baseline-bin", os.Args[0], "--set", "bach=1")
	if err == nil || !strings.Contains(err.Error(), `unknown parameter or setting "bach"`) {
		t.Errorf("ab ci --set bach=1: %v, want the --set refused, not the suite", err)
	}
	_, _, err = mtl(t, "ab", "kernals", "--baseline-bin", os.Args[0])
	if err == nil || !strings.Contains(err.Error(), `did you mean "kernels"?`) {
		t.Errorf("ab kernals: %v, want the built-in suite it is close to", err)
	}
}

// An input that is not there (a missing suite or file) is a usage error,
// exit 2, for every command: suites validate said 1 for it, the code of a
// suite it read and found invalid, where run said 2.
func TestMissingInputExitCode(t *testing.T) {
	dir := t.TempDir()
	invalid := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(invalid, []byte("name: bad\nfrobs: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "none.yaml")
	db := filepath.Join(dir, "r.db")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"suites", "validate", missing}, 2},
		{[]string{"suites", "validate", "ci", missing}, 2},
		{[]string{"suites", "validate", invalid, missing}, 2},
		{[]string{"suites", "validate", "no-such-suite"}, 2},
		{[]string{"suites", "validate", invalid}, 1},
		{[]string{"suites", "validate", "ci", invalid}, 1},
		// A folder where a suite is wanted is an input error, as a missing file.
		{[]string{"suites", "validate", dir}, 2},
		{[]string{"suites", "validate", invalid, dir}, 2},
		{[]string{"run", dir, "--db", db}, 2},
		{[]string{"suites", "show", missing}, 2},
		{[]string{"suites", "list", filepath.Join(dir, "none")}, 2},
		{[]string{"run", missing, "--db", db}, 2},
		{[]string{"run", "no-such-suite", "--db", db}, 2},
		{[]string{"ab", missing, "--baseline-bin", os.Args[0]}, 2},
		{[]string{"import", missing, "--db", db}, 2},
		{[]string{"peer", "import", missing, "--db", db}, 2},
		{[]string{"tune", "import", missing, "--dir", dir}, 2},
		{[]string{"runs", "--db", db}, 2},
	} {
		_, _, err := mtl(t, tc.args...)
		if err == nil || exitCode(err) != tc.code {
			t.Errorf("%q: exit %d (%v), want %d", tc.args, exitCode(err), err, tc.code)
		}
	}
}

// No flag's help states its default twice: a usage that says a computed
// default ("all cores") on a flag urfave also prints one for reads
// "(default: all cores) ... (default: 0)". Every command's help is read,
// subcommands included.
func TestHelpStatesOneDefault(t *testing.T) {
	statedDefaultRE := regexp.MustCompile(`\bdefault(:| its )`)
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Name == "help" {
				continue
			}
			args := append(append([]string(nil), path...), c.Name)
			out, _, err := mtl(t, append(args, "--help")...)
			if err != nil {
				t.Errorf("%q --help: %v", args, err)
			}
			for _, line := range strings.Split(out, "\n") {
				// "default: the batch" or "default its 8" in a usage is a
				// default too, beside urfave's "(default: 0)"
				if strings.HasPrefix(strings.TrimSpace(line), "-") && len(statedDefaultRE.FindAllString(line, -1)) > 1 {
					t.Errorf("%q: a flag states two defaults: %q", args, strings.TrimSpace(line))
				}
			}
			walk(args, c.Subcommands)
		}
	}
	walk(nil, newApp(io.Discard, io.Discard).Commands)
}

// A required flag left out is named, with its alias and what it takes,
// and the help pointed to; the whole help is not printed before a
// library's `Required flag "model" not set`.
func TestRequiredFlagMissing(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "-b", "2"}, "bench: --model/-m is required: model preset (mtlbench models), checkpoint folder (HF or mlx-lm) or .gguf file (see `mtlbench bench --help`)"},
		{[]string{"generate"}, "generate: --model/-m is required: preset name"},
		{[]string{"gate"}, "gate: --baseline is required: baseline runs: run id, tag, latest or git commit (comma-separated to pool); --candidate is required: "},
		{[]string{"gate", "--baseline", "main"}, "gate: --candidate is required: candidate runs"},
		{[]string{"ab", "--rounds", "2"}, "ab: --baseline-bin is required: the baseline mtlbench binary"},
		{[]string{"history", "import", "kb.md"}, "history import: --model is required: model of the figures"},
	} {
		stdout, stderr, err := mtl(t, tc.args...)
		if exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "Required flag") {
			t.Errorf("%v: exit %d, %v; want 2 and %q", tc.args, exitCode(err), err, tc.want)
		}
		if stdout != "" || stderr != "" {
			t.Errorf("%v: wrote more than the error:\n%s%s", tc.args, stdout, stderr)
		}
	}
}

// A flag value of the wrong type says what the flag takes, not the flag
// package's `invalid value "x" for flag -limit: parse error`.
func TestFlagValueOfWrongType(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "--limit", "x", "--db", db}, "runs: --limit \"x\": want a whole number (see `mtlbench runs --help`)"},
		{[]string{"runs", "--limit", "99999999999999999999", "--db", db}, `runs: --limit "99999999999999999999": out of range, want a whole number that fits`},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-r", "two"}, `bench: -r "two": want a whole number`},
		{[]string{"generate", "-m", "qwen3-moe-mini", "--tokens", "1", "--seed", "-1"}, `generate: --seed "-1": want a whole number of 0 or more`},
		{[]string{"tune", "--kernel", "matmul", "--seed", "-3", "--dry-run"}, `tune: --seed "-3": want a whole number of 0 or more`},
		// A percentage where a fraction is taken is said as the fraction.
		{[]string{"compare", "a", "b", "--alpha", "1%", "--db", db}, "compare: --alpha \"1%\": want a number, a fraction: 0.01 for 1% (see"},
		{[]string{"tune", "--kernel", "matmul", "--min-gain", "5%", "--dry-run"}, `tune: --min-gain "5%": want a number, a fraction: 0.05 for 5%`},
		{[]string{"compare", "a", "b", "--alpha", "x%", "--db", db}, "compare: --alpha \"x%\": want a number (see"},
		{[]string{"tune", "--kernel", "matmul", "--sample-time", "abc", "--dry-run"}, `tune: --sample-time "abc": want a duration such as 500ms, 2s or 1m30s`},
		{[]string{"selftest", "--timed=maybe"}, `selftest: --timed "maybe": want true or false`},
	} {
		_, _, err := mtl(t, tc.args...)
		if exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "parse error") {
			t.Errorf("%v: exit %d, %v; want 2 and %q", tc.args, exitCode(err), err, tc.want)
		}
	}
}

// An unknown --backend is named with the flag, the near miss and every
// backend as a list, not as Go prints a slice ([auto cpu ...]), whatever
// the command, and before the command prints anything (run's suite header).
func TestUnknownBackendFlag(t *testing.T) {
	const all = "want auto, cpu, metal, metal-emu or cuda"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"selftest", "--backend", "vulkan"}, `--backend "vulkan": ` + all},
		{[]string{"generate", "-m", "qwen3-moe-mini", "--tokens", "1", "--backend", "mtal"}, `--backend "mtal": ` + all + ` (did you mean "metal"?)`},
		{[]string{"tune", "--kernel", "matmul", "--shape", "m=1,n=64,k=64", "--backend", "cpuu", "--dry-run"}, `--backend "cpuu": ` + all + ` (did you mean "cpu"?)`},
		{[]string{"run", "kernels", "--backend", "cpuu", "--db", filepath.Join(t.TempDir(), "r.db")}, `--backend "cpuu": ` + all + ` (did you mean "cpu"?)`},
		{[]string{"run", "ci", "--backend", "nosuch", "--db", filepath.Join(t.TempDir(), "r.db")}, `--backend "nosuch": ` + all},
		{[]string{"bench", "-m", "gpt2", "--backend", "nosuch", "--db", filepath.Join(t.TempDir(), "r.db")}, `--backend "nosuch": ` + all},
	} {
		stdout, stderr, err := mtl(t, tc.args...)
		if exitCode(err) != 2 || err.Error() != tc.want {
			t.Errorf("%v: exit %d, %v; want 2 and %q", tc.args, exitCode(err), err, tc.want)
		}
		if stdout != "" || stderr != "" {
			t.Errorf("%v: printed before refusing --backend:\nstdout: %q\nstderr: %q", tc.args, stdout, stderr)
		}
	}
}

// A dtype written in a model case's params says where a model's dtype goes.
func TestSuiteDtypeInModelCase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.yaml")
	yaml := "name: t\nbackend: cpu\nmodel: { preset: qwen2-0.5b }\nrepetitions: 1\ncases:\n  - name: c\n    params: { prompt_len: 4, gen_len: 2, dtype: f16 }\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := mtl(t, "suites", "validate", path)
	want := path + ":7:42: dtype is a kernel-case parameter, not allowed in a model case (only kind: kernel cases take it; a model case's weights take the suite's model: { dtype: ... })"
	if exitCode(err) != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d (%v), stderr lacks %q:\n%s", exitCode(err), err, want, stderr)
	}
}

// A line that breaks a list (a key at the items' indentation) is named at
// that line, not at the line that opens the list, where yaml.v3 puts it.
func TestSuiteYAMLListBreakLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.yaml")
	yaml := "name: t\nbackend: cpu\nmodel: { preset: qwen2-0.5b }\ncases:\n  - name: c\n    params: { prompt_len: 4, gen_len: 2 }\n  # a comment\n  name: d\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"suites", "validate", path}, {"run", path, "--db", filepath.Join(t.TempDir(), "r.db")}} {
		_, stderr, err := mtl(t, args...)
		want := path + ":8:3: YAML: this line is in the list above but not an item of it"
		if exitCode(err) == 0 || !strings.Contains(stderr+err.Error(), want) {
			t.Errorf("%v: exit %d (%v), want %q in:\n%s", args[:2], exitCode(err), err, want, stderr)
		}
	}
}

// An empty suite file says what a suite holds and where to copy one from.
func TestEmptySuiteSaysWhatOneHolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte("# to do\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := mtl(t, "run", path, "--db", filepath.Join(t.TempDir(), "r.db"))
	want := path + ":1:1: empty suite (a suite holds at least name: and cases: (and model: for model cases); mtlbench suites show ci prints one to copy"
	if exitCode(err) != 2 || !strings.Contains(err.Error(), want) {
		t.Errorf("exit %d, %v; want 2 and %q", exitCode(err), err, want)
	}
}

// A max_seqs past the one request of the default batch counts it in words.
func TestMaxSeqsPastOneRequest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.yaml")
	yaml := "name: t\nbackend: cpu\nmodel: { preset: qwen2-0.5b }\ncases:\n  - name: c\n    params: { prompt_len: 4, gen_len: 2, max_seqs: 4 }\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := mtl(t, "suites", "validate", path)
	if want := `max_seqs 4 is more than the 1 request (requests defaults to the batch)`; exitCode(err) != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d (%v), stderr lacks %q:\n%s", exitCode(err), err, want, stderr)
	}
}
