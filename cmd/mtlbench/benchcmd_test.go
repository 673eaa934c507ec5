package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/suites"
)

// A problem of the suite bench builds from its flags names the flag behind
// it, not a line of that suite, which the user never wrote: an empty model
// read "bench:3:1: model needs a preset or a path".
func TestBenchFlagErrors(t *testing.T) {
	at := regexp.MustCompile(`bench:\d+:\d+`)
	for _, tc := range []struct {
		edit func(*quickSpec)
		want string
	}{
		{func(q *quickSpec) { q.Model = "" }, "--model: model needs a preset or a path"},
		{func(q *quickSpec) { q.Backend = "nope" }, "--backend: "},
		{func(q *quickSpec) { q.Timing = "nope" }, "--timing: "},
		{func(q *quickSpec) { q.DType = "q9" }, "--dtype: "},
	} {
		q := quickSpec{Model: "qwen3-moe-mini", Backend: "cpu", Timing: "throughput", Fit: "strict", Repetitions: 1,
			Fusion: []string{"on"}, Batch: []int{1}, Prompt: []int{4}, Gen: []int{2}, Burstiness: 1}
		tc.edit(&q)
		text, err := q.yaml()
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		_, err = suites.Parse("bench", text)
		if err == nil {
			t.Errorf("%+v: no error, want %q", q, tc.want)
			continue
		}
		got := benchFlagErrors(text, err).Error()
		if !strings.Contains(got, tc.want) || at.MatchString(got) {
			t.Errorf("%+v: %q, want %q and no position in the built suite", q, got, tc.want)
		}
	}
}

// bench's description, which a printed suite and a resume line carry,
// quotes its arguments as a shell reads them back (shquote.Quote).
func TestShellQuote(t *testing.T) {
	q := quickSpec{Model: "odd dir/a: b #c.gguf", Batch: []int{1}, Prompt: []int{4}, Gen: []int{2}, Repetitions: 1, WitnessGPU: "M2 Pro"}
	if got, want := q.describe(), "-m 'odd dir/a: b #c.gguf' -b 1 -p 4 -n 2 -r 1 --witness-gpu 'M2 Pro'"; got != want {
		t.Errorf("describe: %s, want %s", got, want)
	}
}

// run and ab take one suite: none says so, several say which were given
// rather than that one is needed.
func TestOneSuiteArgument(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "run needs one suite file (see `mtlbench suites list`)"},
		{[]string{"run", "a.yaml", "b c.yaml"}, "run takes one suite, got 2: a.yaml 'b c.yaml' (run each on its own)"},
		{[]string{"ab", "--baseline-bin", "/nonexistent", "ci", "kernels", "gpt2"}, "ab takes one suite, got 3: ci kernels gpt2 (run each on its own)"},
		// Every command of one file says back the ones given.
		{[]string{"tune", "ci", "kernels"}, "tune takes one suite, got 2: ci kernels (tune each on its own)"},
		{[]string{"tune", "import", "a.json", "b.json"}, "tune import takes one file (- for standard input), got 2: a.json b.json (import each on its own)"},
		{[]string{"tune", "import"}, "tune import needs one file (- for standard input)"},
		{[]string{"tune", "export", "a.json", "b.json"}, "tune export takes one file (- for standard output), got 2: a.json b.json (export into one file)"},
		{[]string{"history", "import", "a.md", "b.md", "--model", "m"}, "history import takes one markdown file, got 2: a.md b.md (import each on its own)"},
		{[]string{"history", "import", "--model", "m"}, "history import needs one markdown file"},
	} {
		_, _, err := mtl(t, tc.args...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %s", tc.args, err, tc.want)
		}
	}
}

// bench's list flags are read by the rule a matrix reads a range by, the
// parameter's bounds included: a range past them is one error naming the
// flag, the range and its first value out of them, where each value it
// made was an error of its own (-b 1-999999*2 said three). Each flag's
// error is said, one line each.
func TestBenchListPastBounds(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-b", "1-999999*2"}, `--batch: range "1-999999*2": batch must be from 1 to 65536, got 131072`},
		{[]string{"-b", "1-4", "-b", "100000"}, `--batch: range "1-4,100000": batch must be from 1 to 65536, got 100000`},
		{[]string{"-b", "100000"}, `--batch: batch must be from 1 to 65536, got 100000`},
		{[]string{"-p", "1-99999999*4"}, `--prompt: range "1-99999999*4": prompt_len must be from 1 to 16777216, got 67108864`},
		{[]string{"-d", "0-99999999+10000000"}, `--depth: range "0-99999999+10000000": depth must be from 0 to 16777216, got 20000000`},
		{[]string{"-n", "1-999999999*8", "-p", "20000000,1"}, `--prompt: range "20000000,1": prompt_len must be from 1 to 16777216, got 20000000` + "\n" +
			`--gen: range "1-999999999*8": gen_len must be from 1 to 16777216, got 134217728`},
		// ParseIntList's own bounds, as before.
		{[]string{"-b", "1-999999"}, `--batch: range "1-999999": more than 1000 values`},
	} {
		_, stderr, err := mtl(t, append([]string{"bench", "-m", "qwen3-moe-mini", "--print-suite"}, tc.args...)...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("bench %q: %v, want exactly %q", tc.args, err, tc.want)
		}
		if stderr != "" {
			t.Errorf("bench %q wrote %q", tc.args, stderr)
		}
	}
}

// bench --help names the case its defaults make, and its key, as bench
// names and keys it: a reader matching the help against `show` or a
// peer import finds the same strings.
func TestBenchHelpNamesItsCase(t *testing.T) {
	text, _, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "--print-suite")
	if err != nil {
		t.Fatal(err)
	}
	s, err := suites.Parse("bench", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Cases) != 1 {
		t.Fatalf("bench's defaults make %d cases, want 1", len(s.Cases))
	}
	help := strings.Join(strings.Fields(benchCommand().Description), " ")
	c := s.Cases[0]
	if want := "(" + c.Name + ", keyed " + c.Key + ")"; !strings.Contains(help, want) {
		t.Errorf("bench --help does not name the default case as bench does, %q:\n%s", want, help)
	}
}

// bench -m given a folder without config.json says what it holds that is
// close to what -m takes (runner/model TestFolderWithoutConfigNamed has
// every kind): a folder named like a suite, its suites, its safetensors.
func TestBenchModelFolderNamed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		want  string // after "--model: model folder DIR has no config.json"
	}{
		{"dir.yaml", nil, "; it is named like a suite file (.yaml), but is a folder, and a suite is a file (`mtlbench run FILE`)"},
		{"suites", []string{"ci.yaml"}, "; it holds the suite ci.yaml: run it with `mtlbench run DIR/ci.yaml`"},
		{"weights", []string{"model.safetensors"}, "; it holds model.safetensors, but not the config.json that says what model its tensors make"},
	} {
		dir := filepath.Join(t.TempDir(), tc.name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range tc.files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, _, err := mtl(t, "bench", "-m", dir, "--backend", "cpu", "--db", filepath.Join(t.TempDir(), "r.db"))
		want := "--model: model folder " + dir + " has no config.json" + strings.ReplaceAll(tc.want, "DIR", dir)
		if err == nil || !strings.HasPrefix(err.Error(), want) || exitCode(err) != 2 {
			t.Errorf("%s: %v (exit %d), want %q, exit 2", tc.name, err, exitCode(err), want)
		}
	}
}

// A hint of bench's runner says the lengths to lower as bench's flags, the
// words its user gave, where it said the suite keys (prompt_len) behind
// them; its figures and anything else it says stay as they are.
func TestBenchHintSaysFlags(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		want, not *regexp.Regexp
	}{
		{[]string{"-b", "65536", "-p", "1000"}, regexp.MustCompile(`^--model: .* needs .* \(hint: (any one of )?--batch \d+ or less \(from 65536\)`), regexp.MustCompile(`[^-]batch \d`)},
		{[]string{"-b", "64", "-p", "4000", "-n", "200"}, regexp.MustCompile(`^--prompt: .* \(hint: lower --prompt or --gen\)`), regexp.MustCompile(`prompt_len or`)},
	} {
		_, _, err := mtl(t, append([]string{"bench", "--backend", "cpu", "-m", "qwen3-moe-mini", "-r", "1", "--warmup", "0"}, tc.args...)...)
		if err == nil || !tc.want.MatchString(err.Error()) || tc.not.MatchString(err.Error()) {
			t.Errorf("bench %v: %v\nwant %v", tc.args, err, tc.want)
		}
	}
}

// A memory hint may name a key no flag of bench sets (prefill_budget,
// kv_dtype): it said it as the suite's with no word of where a bench user
// sets it; it now says to set it in the suite --print-suite prints, and
// still says the flags for the keys that have them.
func TestBenchHintNamesSuiteOnlyKeys(t *testing.T) {
	const pre = "case c: model m needs 39.4 GiB but cpu has 22.8 GiB available (hint: "
	for _, tc := range []struct{ hint, want string }{
		{"batch 147 or less (from 256) would fit)", "--batch 147 or less (from 256) would fit)"},
		{"any one of batch 147 or less (from 256) or prefill_budget 256 to 513549 (from none) would fit)",
			"any one of --batch 147 or less (from 256) or prefill_budget 256 to 513549 (from none) would fit; bench has no flag for prefill_budget: save the suite --print-suite prints and set it there)"},
		{"any one of prefill_budget 256 to 1000 (from none) or kv_dtype f16 (from auto: f32) would fit)",
			"any one of prefill_budget 256 to 1000 (from none) or kv_dtype f16 (from auto: f32) would fit; bench has no flag for prefill_budget or kv_dtype: save the suite --print-suite prints and set them there)"},
	} {
		if got := benchHint(pre + tc.hint); got != pre+tc.want {
			t.Errorf("benchHint(%q)\n = %q\nwant %q", tc.hint, got, pre+tc.want)
		}
	}
}
