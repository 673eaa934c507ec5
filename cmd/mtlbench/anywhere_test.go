package main

import (
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/suites"
)

func TestParseIntList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		min  int
		want []int
		err  string
	}{
		{"1,2,4", 1, []int{1, 2, 4}, ""},
		{"1-4", 1, []int{1, 2, 3, 4}, ""},
		{"1-16*2", 1, []int{1, 2, 4, 8, 16}, ""},
		{"1-20*2", 1, []int{1, 2, 4, 8, 16}, ""},
		{"16-64+16", 1, []int{16, 32, 48, 64}, ""},
		{"1,1-2,2", 1, nil, `range "1-2": 1 is given twice`},
		{"0", 0, []int{0}, ""},
		{"0", 1, nil, "0 is below 1"},
		{"4-1", 1, nil, "ends before it starts"},
		{"1-8*1", 1, nil, "factor must be at least 2"},
		{"0-8*2", 0, nil, "factor must be at least 2"},
		{"1-8+0", 1, nil, "step must be at least 1"},
		{"x", 1, nil, `"x" is not an integer`},
		{"1,,2", 1, nil, `"1,,2": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
		{"1-100000", 1, nil, "more than 1000 values"},
	} {
		got, err := suites.ParseIntList(tc.in, tc.min)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseIntList(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseIntList(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// Lists whose combinations pass the suites' case limit are refused naming
// the flags, not a line of the suite bench builds.
func TestBenchTooManyCases(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-b", "1-1000", "-p", "1-1000", "-n", "1-10"}, "--batch 1000 x --prompt 1000 x --gen 10 make 10000000 cases, over the limit of 10000: shorten the lists"},
		{[]string{"-b", "1-101", "-d", "0-99", "--fusion", "on,off"}, "--batch 101 x --depth 100 x --fusion 2 make 20200 cases, over the limit of 10000: shorten the lists"},
	} {
		_, _, err := mtl(t, append([]string{"bench", "-m", "qwen3-moe-mini", "--print-suite"}, tc.args...)...)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("bench %s: %v, want %s", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if _, _, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "--print-suite", "-b", "1-100", "-p", "1-100"); err != nil {
		t.Errorf("bench of 10000 cases: %v", err)
	}
}

// bench builds a suite from flags and runs it through the runner and store.
func TestBenchCommand(t *testing.T) {
	dir := t.TempDir()
	db, steps := filepath.Join(dir, "r.db"), filepath.Join(dir, "steps.jsonl")
	_, stderr, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "-b", "1,2", "-p", "16", "-n", "8", "-r", "2", "--warmup", "0",
		"--backend", "cpu", "--dtype", "f32", "--threads", "1", "--db", db, "-q", "--tag", "quick", "--steps", steps)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	// 2 cases of 2 repetitions, each a prefill step and 7 decode steps.
	if log, err := os.ReadFile(steps); err != nil || strings.Count(string(log), "\n") != 32 ||
		!strings.HasPrefix(string(log), `{"case":"bench/batch=1/prompt_len=16/gen_len=8","rep":0,"step":0,"kind":"prefill","tokens":16,"seqs":1,"ms":`) {
		t.Errorf("--steps wrote %v:\n%s", err, log)
	}
	out, _, err := mtl(t, "show", "quick", "--db", db, "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	ki, ni := slices.Index(recs[0], "key"), slices.Index(recs[0], "n")
	for _, r := range recs[1:] {
		if !slices.Contains(keys, r[ki]) {
			keys = append(keys, r[ki])
		}
		if r[ni] != "2" {
			t.Errorf("n = %s, want 2 repetitions: %v", r[ni], r)
		}
	}
	// -d is the suites' depth: context before each prompt, as llama-bench's.
	if out, _, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "-d", "0,512", "-p", "16", "--print-suite"); err != nil || !strings.Contains(out, "depth: [0, 512]") {
		t.Errorf("bench -d 0,512 --print-suite: %v\n%s", err, out)
	}
	if out, _, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "--witness-gpu", "M2 Pro", "--print-suite"); err != nil ||
		!strings.Contains(out, "params:\n      witness_gpu: M2 Pro\n") || !strings.Contains(out, `--witness-gpu 'M2 Pro'`) {
		t.Errorf("bench --witness-gpu --print-suite: %v\n%s", err, out)
	}
	// --layers is the suites' layers: the first N layers run, and the run
	// says so.
	if out, _, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "--layers", "2", "--print-suite"); err != nil ||
		!strings.Contains(out, "params:\n      layers: 2\n") || !strings.Contains(out, "--layers 2") {
		t.Errorf("bench --layers 2 --print-suite: %v\n%s", err, out)
	}
	if out, _, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "--layers", "1", "-p", "4", "-n", "2", "-r", "1", "--db", filepath.Join(dir, "layers.db"), "--format", "csv"); err != nil {
		t.Errorf("bench --layers 1: %v", err)
	} else if rows := csvRows(t, out); len(rows) == 0 || rows[0]["layers_run"] != "1" || rows[0]["layers_total"] != "6" {
		t.Errorf("bench --layers 1 ran %v", rows)
	}
	// --fusion on,off runs both, as the suites' fusion matrix; off alone is
	// a parameter.
	if out, _, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "--fusion", "off", "--print-suite"); err != nil ||
		!strings.Contains(out, "params:\n      fusion: \"off\"\n") || !strings.Contains(out, "--fusion off") {
		t.Errorf("bench --fusion off --print-suite: %v\n%s", err, out)
	}
	if out, _, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "--fusion", "on,off", "-p", "4", "-n", "2", "-r", "1", "--db", filepath.Join(dir, "fusion.db"), "--format", "csv"); err != nil {
		t.Errorf("bench --fusion on,off: %v", err)
	} else {
		got := map[string]bool{}
		for _, r := range csvRows(t, out) {
			got[r["fusion"]] = true
		}
		if !got["on"] || !got["off"] || len(got) != 2 {
			t.Errorf("bench --fusion on,off ran fusion %v, want on and off", got)
		}
	}
	// --request-rate, --requests and --slo are the suites' serving load: a
	// case a rate, keyed as a vLLM bench serve import at that rate is.
	if out, _, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "--layers", "1", "-b", "2", "-p", "4", "-n", "2", "-r", "1", "--warmup", "0",
		"--request-rate", "200,400.0", "--requests", "3", "--slo", "ttft:60000", "--backend", "cpu", "--db", filepath.Join(dir, "serve.db"), "--format", "csv"); err != nil {
		t.Errorf("bench --request-rate: %v", err)
	} else {
		got := map[string][]string{}
		for _, r := range csvRows(t, out) {
			got[r["key"]] = append(got[r["key"]], r["metric"])
		}
		for _, k := range []string{"model/bench/arrival=poisson:200/batch=2/gen_len=2/layers=1/prompt_len=4/requests=3/slo=ttft:60000",
			"model/bench/arrival=poisson:400/batch=2/gen_len=2/layers=1/prompt_len=4/requests=3/slo=ttft:60000"} {
			if !slices.Contains(got[k], "goodput_per_s") || !slices.Contains(got[k], "request_per_s") || !slices.Contains(got[k], "e2el_p99_ms") {
				t.Errorf("bench --request-rate: case %s records %v", k, got[k])
			}
		}
		if len(got) != 2 {
			t.Errorf("bench --request-rate ran %d cases, want 2: %v", len(got), got)
		}
	}
	// --threads is the cases' threads, in their key as a suite's.
	want := []string{"model/bench/gen_len=8/prompt_len=16/threads=1", "model/bench/batch=2/gen_len=8/prompt_len=16/threads=1"}
	if !slices.Equal(keys, want) {
		t.Errorf("case keys %v, want %v", keys, want)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "-m", "qwen3-moe-mini", "-b", "0"}, "--batch: 0 is below 1"},
		// a negative number is below the least value, not a malformed range
		{[]string{"bench", "-m", "qwen3-moe-mini", "-d", "-1"}, "--depth: -1 is below 0"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-n", "-1"}, "--gen: -1 is below 1"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-p", "16,-8"}, "--prompt: -8 is below 1"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-r", "0"}, "--repetitions must be from 1 to 10000, got 0"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-r", "10001"}, "--repetitions must be from 1 to 10000, got 10001"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--warmup", "20000"}, "--warmup must be from 0 to 10000, got 20000"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--threads", "1025"}, "--threads 1025: want 1 to 1024 (0: every core)"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--layers", "-1"}, "--layers must be at least 0"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--fusion", "maybe"}, `--fusion "maybe": want on, off, or on,off`},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--fusion", "off,off"}, `--fusion "off,off"`},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--layers", "7", "--db", db}, "layers"},
		{[]string{"bench", "-m", "nope", "--db", db}, `"nope"`},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-p", "5000", "--db", db}, "more than the 4096 positions"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--witness-gpu", "M2 Prp", "--db", db}, `unknown Apple GPU "M2 Prp" (did you mean "M2 Pro"?)`},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--db", db, "--steps", filepath.Join(dir, "no", "s.jsonl")}, "--steps " + filepath.Join(dir, "no", "s.jsonl") + ": its folder cannot be used: " + filepath.Join(dir, "no") + ": no such file or directory"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--request-rate", "4"}, "--request-rate needs --requests"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--request-rate", "4,0", "--requests", "8"}, "--request-rate: item 2: rate 0 requests a second is outside 0.001 to 1e+06"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--request-rate", "4,x", "--requests", "8"}, `--request-rate: item 2: rate "x" is not a number`},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--request-rate", "4", "--requests", "8", "--burstiness", "0"}, "--burstiness: burstiness 0 is outside 0.001 to 1000"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--burstiness", "0.5"}, "--burstiness shapes the gaps between requests arriving at --request-rate; give a rate"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--request-rate", "4,4", "--requests", "8"}, "--request-rate: 4 given twice"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--request-rate", "1,1.0", "--requests", "8"}, "--request-rate: 1 given twice (as 1 and 1.0)"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--requests", "-2"}, "--requests must be at least 1"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--range-ratio", "1", "--db", db}, "--range-ratio: bad range_ratio: 1 is outside [0, 1)"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--range-ratio", "NaN", "--db", db}, "--range-ratio NaN: want a fraction from 0 to below 1"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--range-ratio", "-Inf", "--db", db}, "--range-ratio -Inf: want a fraction from 0 to below 1"},
		// The request the run draws, past the positions at any draw of the range.
		{[]string{"bench", "-m", "qwen3-moe-mini", "-p", "4000", "-n", "200", "--range-ratio", "0.01", "--db", db}, "prompt_len 4000 and gen_len 200 at range_ratio 0.01 draw request 0 of 3985 + 199 = 4184 tokens, more than the 4096 positions"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--slo", "ttft:-5", "--db", db}, `--slo: bad slo "ttft:-5": ttft bound "-5" must be a number of milliseconds > 0`},
	} {
		_, _, err := mtl(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// suites validate counts a suite's cases in words: "1 case", "2 cases".
func TestSuitesValidateCountsCases(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		batches, want string
	}{
		{"[1]", `: ok, suite "x", 1 case`},
		{"[1, 2]", `: ok, suite "x", 2 cases`},
	} {
		f := filepath.Join(dir, "x.yaml")
		os.WriteFile(f, []byte("name: x\nmodel: { preset: qwen3-moe-mini }\ncases:\n  - name: c\n    matrix: { batch: "+c.batches+" }\n"), 0o644)
		out, _, err := mtl(t, "suites", "validate", f)
		if err != nil || !strings.HasSuffix(strings.TrimSpace(out), c.want) {
			t.Errorf("batch %s: %v %q, want it to end %q", c.batches, err, out, c.want)
		}
	}
}

// The shipped suites are built in: list, show and validate them by name.
func TestShippedSuites(t *testing.T) {
	out, _, err := mtl(t, "suites", "list")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "suites-list", out)
	t.Chdir(t.TempDir())
	out, _, err = mtl(t, "suites", "show", "ci")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := suites.Shipped("ci")
	if out != string(data) {
		t.Error("suites show ci is not the shipped file")
	}
	if out, _, err := mtl(t, "suites", "validate", "ci", "qwen3-moe"); err != nil || !strings.Contains(out, "ci: ok, suite \"ci\"") {
		t.Errorf("validate by name: %v\n%s", err, out)
	}
	if _, _, err := mtl(t, "suites", "show", "nosuch"); err == nil || !strings.Contains(err.Error(), "built in: ") {
		t.Errorf("unknown suite: %v", err)
	}
	// --set is checked as run would apply it: a prompt the shipped suite's
	// model cannot hold fails, naming the override and the case.
	if _, stderr, err := mtl(t, "suites", "validate", "ci", "--set", "prompt_len=5000"); err == nil ||
		!strings.Contains(stderr, "--set prompt_len=5000: case decode/batch=1: prompt_len 5000 + gen_len 16 = 5016 tokens, more than the 4096 positions") {
		t.Errorf("validate --set: %v\n%s", err, stderr)
	}
	if out, _, err := mtl(t, "suites", "validate", "ci", "--set", "prompt_len=64"); err != nil || !strings.Contains(out, "ci: ok") {
		t.Errorf("validate --set prompt_len=64: %v\n%s", err, out)
	}
	if _, _, err := mtl(t, "suites", "validate", "ci", "--set", "bogus=1"); err == nil || !strings.Contains(err.Error(), `unknown parameter or setting "bogus"`) {
		t.Errorf("validate --set bogus=1: %v", err)
	}
	// A prompt longer than the model's positions fails validation.
	os.WriteFile("long.yaml", []byte("name: long\nmodel: { preset: qwen3-moe-mini }\nbackend: cpu\ncases:\n  - name: c\n    kind: model\n    params: { prompt_len: 4090, gen_len: 16 }\n"), 0o644)
	if _, stderr, err := mtl(t, "suites", "validate", "long.yaml"); err == nil || !strings.Contains(stderr, "long.yaml:7:27: case c: prompt_len 4090 + gen_len 16 = 4106 tokens, more than the 4096 positions") {
		t.Errorf("long prompt: %v\n%s", err, stderr)
	}
	// A file of the same name as a shipped suite wins.
	os.WriteFile("ci", []byte("name: mine\ncases:\n  - name: k\n    kind: kernel\n    op: matmul\n    params: { m: 1, n: 64, k: 64 }\n"), 0o644)
	if out, _, err := mtl(t, "suites", "validate", "ci"); err != nil || !strings.Contains(out, `suite "mine"`) {
		t.Errorf("a path should win over the built-in suite: %v\n%s", err, out)
	}
}

// The built binary works from an empty directory: --version prints the
// commit it was built from, run ci and bench find their suite and model.
func TestBinaryFromEmptyDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the ci suite")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("not a git checkout: no commit to check --version against")
	}
	bin := filepath.Join(t.TempDir(), "mtlbench")
	build := exec.Command("go", "build", "-o", bin, ".")
	// The commit comes from Go's VCS stamp; GOFLAGS wins over a go env
	// file that turns it off.
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("go build -buildvcs=true: %v\n%s", err, out)
	}
	commit := strings.TrimSpace(string(head))
	if info, _ := exec.Command("go", "version", "-m", bin).Output(); !strings.Contains(string(info), "vcs.revision=") {
		// No stamp (a git worktree, which the go command does not stamp
		// from): the Makefile's -X main.commit is the other way in.
		t.Log("the go command recorded no vcs.revision; building with -X main.commit")
		build = exec.Command("go", "build", "-ldflags", "-X main.commit="+commit, "-o", bin, ".")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	dir := t.TempDir()
	mt := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "MTLBENCH_DB="+filepath.Join(dir, "r.db"), "MTLBENCH_GIT_COMMIT=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("mtlbench %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if v := mt("--version"); !strings.Contains(v, "commit "+commit) {
		t.Errorf("--version = %q, want commit %s", v, commit)
	}
	mt("run", "ci", "-q", "--tag", "ci", "--backend", "cpu", "--threads", "1")
	mt("bench", "-m", "qwen3-moe-mini", "-b", "1,2", "-p", "16", "-n", "8", "-r", "2", "-q", "--tag", "quick", "--backend", "cpu", "--threads", "1")
	runs := mt("runs", "--format", "csv")
	recs, err := csv.NewReader(strings.NewReader(runs)).ReadAll()
	if err != nil || len(recs) != 3 {
		t.Fatalf("runs: %v\n%s", err, runs)
	}
	ci := slices.Index(recs[0], "commit")
	for _, r := range recs[1:] {
		if r[ci] != commit {
			t.Errorf("run recorded commit %q from an empty directory, want the binary's %s", r[ci], commit)
		}
	}
}

// bench --print-suite shows the suite the flags build, as a file would say
// it.
func TestBenchPrintSuiteGolden(t *testing.T) {
	for name, args := range map[string][]string{
		"bench-print-suite":         {"-b", "1-8*2", "-p", "16,32", "-n", "8", "-r", "3"},
		"bench-print-suite-serving": {"-b", "8", "-p", "256", "-n", "64", "--request-rate", "0.5,2,8", "--requests", "64", "--slo", "ttft:500,tpot:50", "--range-ratio", "0.5"},
		"bench-print-suite-bursty":  {"-b", "8", "-p", "256", "-n", "64", "--request-rate", "2,8", "--burstiness", "0.25", "--requests", "64"},
	} {
		out, _, err := mtl(t, append([]string{"bench", "-m", "qwen3-moe-mini", "--print-suite"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, name, out)
		if _, err := suites.Parse("bench", []byte(out)); err != nil {
			t.Errorf("%s: the printed suite does not parse: %v", name, err)
		}
	}
}

// A checkpoint --model, a folder or a GGUF file, is the printed suite's
// model path (docs/suites.md: preset is a name from mtlbench models), with
// its own weights; a preset stays a preset.
func TestBenchPrintSuiteModelKey(t *testing.T) {
	gguf := filepath.Join("..", "..", "runner", "testdata", "gguf", "llama-q4_0.gguf")
	folder := filepath.Join("..", "..", "runner", "testdata", "hf", "llama")
	for _, tc := range []struct {
		model string
		want  []string
	}{
		{gguf, []string{"  path: " + gguf + "\n", "  weights: checkpoint\n"}},
		{folder, []string{"  path: " + folder + "\n", "  weights: checkpoint\n"}},
		{"gpt2", []string{"  preset: gpt2\n"}},
	} {
		out, _, err := mtl(t, "bench", "-m", tc.model, "-p", "4", "-n", "2", "--print-suite")
		if err != nil {
			t.Fatalf("bench -m %s --print-suite: %v", tc.model, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("bench -m %s --print-suite does not say %q:\n%s", tc.model, w, out)
			}
		}
		if tc.model != "gpt2" && strings.Contains(out, "preset:") {
			t.Errorf("bench -m %s --print-suite names a checkpoint as a preset:\n%s", tc.model, out)
		}
	}
}

// Overrides are stored as data, shown by runs, and case labels say what
// ran.
func TestOverridesAsData(t *testing.T) {
	db := recordTwoCases(t, "--set", "moe_chunk=1")
	out, _, err := mtl(t, "runs", "--db", db, "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	if rows := csvRows(t, out); len(rows) != 1 || rows[0]["overrides"] != "moe_chunk=1" || !strings.HasPrefix(rows[0]["backend_notes"], "simd: ") {
		t.Errorf("runs: %v", rows)
	}
	out, stderr, err := mtl(t, "show", "two", "--db", db, "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	// The run header names the backend's notes: how it ran.
	if !strings.Contains(stderr, ", backend cpu (simd: ") {
		t.Errorf("show's run header: %q", stderr)
	}
	for _, r := range csvRows(t, out) {
		if !strings.HasSuffix(r["case"], "/moe_chunk=1") || r["moe_chunk"] != "1" || r["overrides"] != "moe_chunk=1" {
			t.Errorf("row after --set moe_chunk=1: case %q moe_chunk %q overrides %q", r["case"], r["moe_chunk"], r["overrides"])
		}
	}
}

// A --set value is one YAML value, commas and all: the documented sampling
// syntax and a list reach the cases whole, not split into two --set
// arguments at the comma (`--set "top_k:40": want name=value`).
func TestSetValueKeepsItsCommas(t *testing.T) {
	const sampling = "temperature:0.7,top_k:40"
	db := recordTwoCases(t, "--set", "sampling="+sampling)
	out, _, err := mtl(t, "runs", "--db", db, "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	if rows := csvRows(t, out); len(rows) != 1 || rows[0]["overrides"] != "sampling="+sampling {
		t.Errorf("runs: %v", rows)
	}
	out, _, err = mtl(t, "show", "two", "--db", db, "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range csvRows(t, out) {
		if !strings.HasSuffix(r["case"], "/sampling="+sampling) || r["sampling"] != sampling {
			t.Errorf("row after --set sampling=%s: case %q sampling %q", sampling, r["case"], r["sampling"])
		}
	}
	one, _, err := mtl(t, "suites", "validate", "ci")
	if err != nil {
		t.Fatal(err)
	}
	two, stderr, err := mtl(t, "suites", "validate", "ci", "--set", "batch=[1,2]")
	if err != nil || one == two {
		t.Errorf("validate --set batch=[1,2]: %v, %q (without it %q)\n%s", err, two, one, stderr)
	}
}

// Every flag of bench that sets what runs reaches the suite --print-suite
// prints (its body, not only the description line), so that the printed
// suite, saved and run, runs what the bench command does.
func TestBenchPrintSuiteCarriesEveryFlag(t *testing.T) {
	// The flags that say where results go or how they are shown, not what
	// runs.
	notSuite := map[string]bool{"db": true, "tag": true, "format": true, "print-suite": true, "quiet": true, "resume": true, "steps": true}
	ckpt := filepath.Join("..", "..", "runner", "testdata", "hf", "llama")
	tests := map[string]struct{ with, without []string }{
		"model":        {[]string{"-m", "tinyllama-1.1b"}, nil},
		"batch":        {[]string{"-b", "2"}, nil},
		"prompt":       {[]string{"-p", "8"}, nil},
		"gen":          {[]string{"-n", "8"}, nil},
		"depth":        {[]string{"-d", "0,64"}, nil},
		"request-rate": {[]string{"--requests", "4", "--request-rate", "2"}, []string{"--requests", "4"}},
		"burstiness":   {[]string{"--requests", "4", "--request-rate", "2", "--burstiness", "0.5"}, []string{"--requests", "4", "--request-rate", "2"}},
		"requests":     {[]string{"--requests", "4"}, nil},
		"range-ratio":  {[]string{"--range-ratio", "0.5"}, nil},
		"slo":          {[]string{"--slo", "ttft:500"}, nil},
		"repetitions":  {[]string{"-r", "2"}, nil},
		"warmup":       {[]string{"--warmup", "0"}, nil},
		"backend":      {[]string{"--backend", "cpu"}, nil},
		"dtype":        {[]string{"--dtype", "q4"}, nil},
		"timing":       {[]string{"--timing", "profile"}, nil},
		"fit":          {[]string{"--fit", "truncate-layers"}, nil},
		"synthetic":    {[]string{"-m", ckpt, "--synthetic"}, []string{"-m", ckpt}},
		"layers":       {[]string{"--layers", "2"}, nil},
		"fusion":       {[]string{"--fusion", "off"}, nil},
		"threads":      {[]string{"--backend", "cpu", "--threads", "2"}, []string{"--backend", "cpu"}},
		"witness-gpu":  {[]string{"--witness-gpu", "M2 Pro"}, nil},
	}
	body := func(args []string) string {
		t.Helper()
		if !slices.Contains(args, "-m") {
			args = append([]string{"-m", "qwen3-moe-mini"}, args...)
		}
		// -p and -n unless the case sets them (a flag given twice is refused)
		for _, f := range []string{"-p", "-n"} {
			if !slices.Contains(args, f) {
				args = append([]string{f, map[string]string{"-p": "16", "-n": "4"}[f]}, args...)
			}
		}
		out, _, err := mtl(t, append([]string{"bench", "--print-suite"}, args...)...)
		if err != nil {
			t.Fatalf("bench %v --print-suite: %v", args, err)
		}
		if _, err := suites.Parse("bench", []byte(out)); err != nil {
			t.Errorf("bench %v --print-suite does not parse: %v", args, err)
		}
		var keep []string
		for _, l := range strings.Split(out, "\n") {
			if !strings.HasPrefix(l, "description:") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	for _, f := range benchCommand().Flags {
		name := f.Names()[0]
		if notSuite[name] {
			continue
		}
		tc, ok := tests[name]
		if !ok {
			t.Errorf("bench flag --%s: no case here says how it reaches the printed suite", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			if body(tc.with) == body(tc.without) {
				t.Errorf("bench %v --print-suite prints the suite it prints without --%s", tc.with, name)
			}
		})
	}
}

// bench and `run` of the suite bench prints record the same cases: the same
// keys and parameters.
func TestBenchPrintedSuiteRunsTheSame(t *testing.T) {
	dir := t.TempDir()
	args := []string{"bench", "-m", "qwen3-moe-mini", "--layers", "1", "-b", "1,2", "-p", "4", "-n", "2", "-r", "1", "--warmup", "0",
		"--backend", "cpu", "--threads", "2", "-q"}
	printed, _, err := mtl(t, append(args, "--print-suite")...)
	if err != nil {
		t.Fatal(err)
	}
	suite := filepath.Join(dir, "bench.yaml")
	if err := os.WriteFile(suite, []byte(printed), 0o644); err != nil {
		t.Fatal(err)
	}
	recorded := func(db string, cmd ...string) map[string]map[string]string {
		t.Helper()
		if _, stderr, err := mtl(t, append(cmd, "--db", db)...); err != nil {
			t.Fatalf("%v: %v\n%s", cmd, err, stderr)
		}
		d, err := results.Open(db)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		runs, err := d.Runs(results.RunFilter{})
		if err != nil || len(runs) != 1 {
			t.Fatalf("runs %v: %v", runs, err)
		}
		cases, err := d.Cases(runs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]string{}
		for _, c := range cases {
			out[c.Key] = c.Params
		}
		return out
	}
	fromBench := recorded(filepath.Join(dir, "bench.db"), args...)
	fromRun := recorded(filepath.Join(dir, "run.db"), "run", suite, "-q")
	if len(fromBench) != 2 || !reflect.DeepEqual(fromBench, fromRun) {
		t.Errorf("bench recorded %v\nrun of its printed suite recorded %v", fromBench, fromRun)
	}
	for k, p := range fromBench {
		if p["threads"] != "2" {
			t.Errorf("case %s records threads %q, want 2 (--threads 2)", k, p["threads"])
		}
	}
}

// bench --print-suite checks the suite as suites validate does, the
// model's configuration included, so what it prints is a suite run takes;
// a problem names the flag behind it, as the run's does.
func TestBenchPrintSuiteChecksModel(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" when the suite prints
	}{
		{[]string{"-m", "qwen3-moe-mini", "--layers", "6"}, ""},
		{[]string{"-m", "qwen3-moe-mini", "--layers", "99"}, "--layers: case bench/batch=1/prompt_len=4/gen_len=2: qwen3-moe-mini: layers=99 out of range 1..6"},
		{[]string{"-m", "no-such-model"}, "--model: "},
	} {
		out, _, err := mtl(t, append([]string{"bench", "--print-suite", "-p", "4", "-n", "2"}, tc.args...)...)
		switch {
		case tc.want == "" && (err != nil || !strings.HasPrefix(out, "name: bench")):
			t.Errorf("bench %s --print-suite: %v\n%s", strings.Join(tc.args, " "), err, out)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("bench %s --print-suite: %v, want %s", strings.Join(tc.args, " "), err, tc.want)
		case tc.want != "" && out != "":
			t.Errorf("bench %s --print-suite refused, yet printed:\n%s", strings.Join(tc.args, " "), out)
		}
	}
}
