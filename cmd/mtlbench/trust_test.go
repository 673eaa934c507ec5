package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/results"
)

// show prints the error a failed case stored, where `run` sends the user.
func TestShowPrintsStoredErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.CreateRun(&results.Run{SuiteName: "s", Tag: "t"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []results.Case{{Key: "model/a", Name: "a", Kind: "model"}, {Key: "model/b", Name: "b", Kind: "model"}}
	if err := db.AddCases(id, cases); err != nil {
		t.Fatal(err)
	}
	if err := db.FailCase(cases[0].ID, "kv cache: out of blocks"); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRep(cases[1].ID, 0, []results.Sample{{Rep: 0, Metric: "decode_tok_s", Value: 1, Unit: "tok/s"}}, nil); err != nil {
		t.Fatal(err)
	}
	db.FinishRun(id, results.RunInterrupted)
	db.Close()
	_, stderr, err := mtl(t, "show", "t", "--db", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"case a failed: kv cache: out of blocks", "case b unfinished: 1 repetition stored"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("show's stderr lacks %q:\n%s", want, stderr)
		}
	}
	// The data says it too: the failed case's row carries its error, and
	// --raw keeps a row for each case with no samples.
	for _, args := range [][]string{{"--format", "csv"}, {"--format", "csv", "--raw"}} {
		out, _, err := mtl(t, append([]string{"show", "t", "--db", path}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, ",a,model/a,model,failed,kv cache: out of blocks,") || !strings.Contains(out, ",b,model/b,model,") {
			t.Errorf("show %v lacks the failed case's row and error:\n%s", args, out)
		}
	}
}

// The gate's turns: the sides alternate step by step, and rounds alternate
// which goes first.
func TestABTurns(t *testing.T) {
	var got strings.Builder
	for r := range 2 {
		for i := range 4 {
			got.WriteByte("AB"[abTurn(r, i)])
		}
		got.WriteByte(' ')
	}
	if got.String() != "ABAB BABA " {
		t.Errorf("turns %q", got.String())
	}
}

// The note on the rounds counts them in words that hold for that count:
// one round has no second order of the sides.
func TestABRoundsNote(t *testing.T) {
	for _, c := range []struct {
		rounds int
		want   string
	}{
		{1, "ab: 1 round (one run a side, repetitions in turns, the baseline first) in 9s"},
		{2, "ab: 2 rounds (one run a side each, repetitions in turns, AB then BA) in 9s"},
		{5, "ab: 5 rounds (one run a side each, repetitions in turns, AB then BA) in 9s"},
	} {
		if got := abRoundsNote(c.rounds, 9*time.Second); got != c.want {
			t.Errorf("%d rounds: %q, want %q", c.rounds, got, c.want)
		}
	}
}

// ab end to end: a candidate made four times slower (the test-only
// MTLBENCH_TEST_SLOWDOWN) is a regression judged on pairs of runs, and a
// --keep folder that already holds an ab's databases is refused before
// anything runs.
func TestABEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs ab")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "mtlbench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	slow := filepath.Join(dir, "slow")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nMTLBENCH_TEST_SLOWDOWN=300% exec "+bin+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	suite := filepath.Join(dir, "k.yaml")
	os.WriteFile(suite, []byte("name: k\nbackend: cpu\nrepetitions: 5\nwarmup: 1\nthresholds: { us_per_call: 5% }\n"+
		"cases:\n  - name: matmul\n    kind: kernel\n    op: matmul\n    params: { m: 1, n: 256, k: 256, dtype: f32 }\n"), 0o644)
	keep, store := filepath.Join(dir, "keep"), filepath.Join(dir, "store.db")
	out, stderr, err := mtl(t, "ab", suite, "--baseline-bin", bin, "--candidate-bin", slow, "--rounds", "5", "--backend", "cpu", "--threads", "1", "--keep", keep, "--format", "csv",
		"--db", store, "--tag", "pr42")
	if exitCode(err) != 1 || !strings.Contains(stderr, "REGRESSION") || !strings.Contains(stderr, "5 pairs of runs") {
		t.Fatalf("4x slower candidate: exit %d (%v), want 1 on pairs of runs\n%s\n%s", exitCode(err), err, stderr, out)
	}
	// --db records both sides' runs in the store, where gate finds them by
	// their tags (unpaired there: the pairs are ab's). Unpaired, gate
	// judges run medians measured minutes apart, which a machine's load
	// can reorder (a baseline run slowed more than 4x beside a quiet
	// candidate's): it then cannot tell (exit 3) where it would find the
	// regression (exit 1), and it never passes it.
	if !strings.Contains(stderr, "ab: recorded in "+store+": baseline runs 1, 2, 3, 4, 5 (tag pr42-baseline), candidate runs 6, 7, 8, 9, 10 (tag pr42-candidate)") {
		t.Errorf("--db: no record of the runs stored in\n%s", stderr)
	}
	gout, gs, err := mtl(t, "gate", "--baseline", "pr42-baseline", "--candidate", "pr42-candidate", "--db", store)
	if code := exitCode(err); code != 1 && code != 3 || !strings.Contains(gs, "pr42-baseline (runs 5,4,3,2,1, cpu") || !strings.Contains(gs, "pr42-candidate (runs 10,9,8,7,6, cpu") {
		t.Errorf("gate on ab's recorded runs: exit %d (%v), want 1 (or 3) on both sides' five runs\n%s\n%s", code, err, gout, gs)
	}
	for _, f := range []string{"baseline.db", "candidate.db", "round05-candidate.log"} {
		if _, err := os.Stat(filepath.Join(keep, f)); err != nil {
			t.Errorf("--keep: %v", err)
		}
	}
	_, _, err = mtl(t, "ab", suite, "--baseline-bin", bin, "--rounds", "3", "--keep", keep)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "already holds baseline.db") {
		t.Errorf("reused --keep folder: exit %d, %v; want 2 and a refusal", exitCode(err), err)
	}
	// A baseline that is no mtlbench is refused before the first round,
	// with what it printed.
	fake := filepath.Join(dir, "fake")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho not an mtlbench >&2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = mtl(t, "ab", suite, "--baseline-bin", fake, "--candidate-bin", bin, "--rounds", "5", "--backend", "cpu", "--threads", "1")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "the baseline binary "+fake+" is not mtlbench") || !strings.Contains(err.Error(), "not an mtlbench") ||
		strings.Contains(stderr, "round 1/5") {
		t.Errorf("a baseline that is no mtlbench: exit %d, %v\n%s", exitCode(err), err, stderr)
	}
}

// A case a side's run failed in ab's rounds is the gate's to judge, as
// `gate` judges it, not a tool error: the run finished its other cases and
// stored the failed one as failed. A case the candidate failed fails the
// gate (exit 1) with the case and its error in the verdict and the
// summary; one the baseline failed is insufficient data. The sides are
// this test binary run as mtlbench; a side given MTLB_TEST_FAIL_CASE
// stores that case as a run does when it fails before any repetition
// (failed, its error, no sample) and exits as such a run does.
func TestABCaseFailed(t *testing.T) {
	if args := os.Getenv("MTLB_TEST_CHILD_ARGS"); args != "" {
		a := strings.Fields(args)
		err := run(append([]string{"mtlbench"}, a...), os.Stdin, os.Stdout, os.Stderr)
		if name := os.Getenv("MTLB_TEST_FAIL_CASE"); err == nil && name != "" && a[0] == "run" && !slices.Contains(a, "--help") {
			err = failStoredCase(a, name, "kernel: launch failed")
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "mtlbench:", err)
			os.Exit(exitCode(err))
		}
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("runs ab twice")
	}
	dir := t.TempDir()
	script := func(name, fail string) string {
		bin := filepath.Join(dir, name)
		env := ""
		if fail != "" {
			env = "MTLB_TEST_FAIL_CASE=" + fail + " "
		}
		if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+env+"MTLB_TEST_CHILD_ARGS=\"$*\" exec "+os.Args[0]+" -test.run='^TestABCaseFailed$'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return bin
	}
	ok, failing := script("mtlbench", ""), script("failing", "b")
	suite := filepath.Join(dir, "k.yaml")
	os.WriteFile(suite, []byte("name: k\nbackend: cpu\nrepetitions: 5\nwarmup: 1\nthresholds: { us_per_call: 5% }\ncases:\n"+
		"  - name: a\n    kind: kernel\n    op: matmul\n    params: { m: 1, n: 256, k: 256, dtype: f32 }\n"+
		"  - name: b\n    kind: kernel\n    op: matmul\n    params: { m: 1, n: 128, k: 128, dtype: f32 }\n"), 0o644)
	ab := func(base, cand, summary string) (string, int) {
		_, stderr, err := mtl(t, "ab", suite, "--baseline-bin", base, "--candidate-bin", cand, "--rounds", "3", "--backend", "cpu", "--threads", "1", "--summary", summary)
		if err != nil {
			stderr += "mtlbench: " + err.Error() + "\n"
		}
		return stderr, exitCode(err)
	}

	summary := filepath.Join(dir, "cand.md")
	stderr, code := ab(ok, failing, summary)
	// The side's runs are read newest first. Case a is ab's A/A: on a
	// loaded machine its verdict may be anything.
	const headline = "perf gate FAILED: the candidate failed 1 of 2 matched cases (b: run 3: failed: kernel: launch failed)"
	if code != 1 {
		t.Fatalf("a case the candidate failed: exit %d, want 1\n%s", code, stderr)
	}
	for _, want := range []string{
		"ab: round 1: the candidate's run failed 1 case (b: kernel: launch failed): the gate judges it\n",
		"ab: round 3: the candidate's run failed 1 case (b: kernel: launch failed): the gate judges it\n",
		"CASE FAILED       b us_per_call: the candidate's case failed, with no sample (run 3: failed: kernel: launch failed; run 2: failed: kernel: launch failed; run 1: failed: kernel: launch failed); the baseline has 15",
		headline,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	// The verdict column is as wide as its longest cell, which case a's
	// verdict on a loaded machine may be.
	if md, _ := os.ReadFile(summary); !strings.Contains(string(md), "## ❌ "+headline) || !regexp.MustCompile(`\| ❌ case failed +\|`).Match(md) {
		t.Errorf("--summary lacks the failed case:\n%s", md)
	}

	stderr, code = ab(failing, ok, filepath.Join(dir, "base.md"))
	// Case a is again the A/A, which a loaded machine may make a (false)
	// regression at the gate's alpha: exit 1 then, for case a alone.
	falseAlarm := code == 1 && strings.Contains(stderr, "REGRESSION        a us_per_call") && !strings.Contains(stderr, "REGRESSION        b ")
	if code != 0 && code != 3 && !falseAlarm || strings.Contains(stderr, "CASE FAILED") ||
		!strings.Contains(stderr, "ab: round 2: the baseline's run failed 1 case (b: kernel: launch failed): the gate judges it\n") ||
		!strings.Contains(stderr, "INSUFFICIENT DATA b us_per_call: baseline has 0 samples and candidate 15") {
		t.Errorf("a case the baseline failed: exit %d, want 0 or 3 (or 1 for case a) with b insufficient data\n%s", code, stderr)
	}
}

// failStoredCase turns the case named name of the run `mtlbench run ARGS`
// just stored into one that failed before its first repetition, as the
// runner stores it (failed, with msg, no sample), and returns the error
// such a run ends with.
func failStoredCase(args []string, name, msg string) error {
	var path, tag string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--db":
			path = args[i+1]
		case "--tag":
			tag = args[i+1]
		}
	}
	db, err := results.Open(path)
	if err != nil {
		return err
	}
	defer db.Close()
	runs, err := db.Runs(results.RunFilter{Tag: tag})
	if err != nil || len(runs) == 0 {
		return fmt.Errorf("no run tagged %q in %s: %v", tag, path, err)
	}
	id := runs[0].ID
	if _, err := db.SQL().Exec(`DELETE FROM samples WHERE case_id IN (SELECT id FROM cases WHERE run_id = ? AND name = ?)`, id, name); err != nil {
		return err
	}
	if _, err := db.SQL().Exec(`UPDATE cases SET status = 'failed', error = ?, reps_done = 0 WHERE run_id = ? AND name = ?`, msg, id, name); err != nil {
		return err
	}
	cases, err := db.Cases(id)
	if err != nil {
		return err
	}
	return fmt.Errorf("1 of %d cases failed (see `mtlbench show %d`)", len(cases), id)
}

// ab refuses, before its first round, a binary that is no mtlbench, fails,
// predates run --lockstep or refuses the suite as its side runs it: the
// other side measured a whole round before the failure showed.
func TestABPreflightRefusesBeforeRounds(t *testing.T) {
	dir := t.TempDir()
	// help is what a current mtlbench prints for `run --lockstep --help`.
	const help = "if [ \"$1 $2\" = \"run --lockstep\" ]; then echo 'NAME:'; echo '   mtlbench run - run a benchmark suite'; exit 0; fi\n"
	for _, tc := range []struct {
		name, script, extra, backend, want string
	}{
		{"no mtlbench", "echo hello\n", "", "", "the baseline binary BIN is not mtlbench: `run --lockstep --help` printed no mtlbench help\nhello"},
		{"exits non-zero", "echo boom >&2\nexit 3\n", "", "", "the baseline binary BIN failed `run --lockstep --help`: exit status 3\nboom"},
		{"older than ab", "echo 'Incorrect Usage: flag provided but not defined: -lockstep' >&2\nexit 1\n", "", "",
			"the baseline binary BIN does not know `run --lockstep`"},
		{"refuses the suite", help + "echo \"$*\" >&2\nexit 2\n", "batch=3", "cpu",
			"the baseline binary BIN refuses the suite (suites validate s.yaml --set backend=cpu --set batch=3): exit status 2\nsuites validate s.yaml --set backend=cpu --set batch=3"},
		{"an mtlbench", help + "exit 0\n", "", "", ""},
		// An mtlbench from before suites validate --set checks the suite
		// as written.
		{"no validate --set", help + "case \"$*\" in *--set*) echo 'Incorrect Usage: flag provided but not defined: -set' >&2; exit 1;; esac\nexit 0\n",
			"", "cpu", ""},
		{"no validate --set, a bad suite", help + "case \"$*\" in *--set*) echo 'Incorrect Usage: flag provided but not defined: -set' >&2; exit 1;; esac\necho bad suite >&2\nexit 2\n",
			"", "cpu", "the baseline binary BIN refuses the suite (suites validate s.yaml): exit status 2\nbad suite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+tc.script), 0o755); err != nil {
				t.Fatal(err)
			}
			side := abSide{label: "baseline", bin: bin}
			if tc.extra != "" {
				side.extra = []string{"--set", tc.extra}
			}
			err := abPreflight(t.Context(), side, "s.yaml", tc.backend)
			want := strings.ReplaceAll(tc.want, "BIN", bin)
			if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
				t.Errorf("%v, want %q", err, want)
			}
		})
	}
	// ab itself asks before its first round.
	suite := filepath.Join(dir, "k.yaml")
	os.WriteFile(suite, []byte("name: k\nbackend: cpu\ncases:\n  - name: matmul\n    kind: kernel\n    op: matmul\n    params: { m: 1, n: 64, k: 64, dtype: f32 }\n"), 0o644)
	bad, good := filepath.Join(dir, "no-mtlbench"), filepath.Join(dir, "an-mtlbench")
	_, stderr, err := mtl(t, "ab", suite, "--baseline-bin", bad, "--candidate-bin", good, "--rounds", "3", "--keep", filepath.Join(dir, "keep"))
	if exitCode(err) != 2 || !strings.Contains(err.Error(), bad+" is not mtlbench") || strings.Contains(stderr, "round 1/3") {
		t.Errorf("ab with a baseline that is no mtlbench: exit %d, %v\n%s", exitCode(err), err, stderr)
	}
}

// An interrupted ab keeps what it measured, even in its temporary folder,
// and says where; with nothing recorded there is nothing to keep.
func TestABInterruptedKeepsMeasuredRounds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		round int
		keep  bool
		has   string
	}{
		{"before anything was recorded", nil, 0, false, "ab interrupted in round 1 of 3; nothing was recorded yet"},
		{"after two rounds", []string{"baseline.db", "candidate.db"}, 2, true,
			"ab interrupted in round 3 of 3; the 2 complete rounds (and what the interrupted one recorded, marked interrupted) are kept in DIR (baseline.db, candidate.db"},
		{"the baseline's first repetitions", []string{"baseline.db"}, 0, true, "`mtlbench show ab-baseline --db DIR/baseline.db` shows them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			keep, err := abInterrupted(dir, tc.round, 3)
			if keep != tc.keep || exitCode(err) != 130 || !strings.Contains(err.Error(), strings.ReplaceAll(tc.has, "DIR", dir)) {
				t.Errorf("keep %v, exit %d, %v; want keep %v, 130 and %q", keep, exitCode(err), err, tc.keep, tc.has)
			}
		})
	}
}

// ab --db copies both sides' runs into the store in round order, each
// side under its own tag, and an interrupted ab does the same with what it
// measured: both go through recordAB.
func TestABRecordsBothSides(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "k.yaml")
	os.WriteFile(suite, []byte("name: k\nbackend: cpu\nrepetitions: 2\nwarmup: 0\n"+
		"cases:\n  - name: matmul\n    kind: kernel\n    op: matmul\n    params: { m: 1, n: 64, k: 64, dtype: f32 }\n"), 0o644)
	sides := [2]abSide{{label: "baseline", db: filepath.Join(dir, "baseline.db"), tag: abBaselineTag},
		{label: "candidate", db: filepath.Join(dir, "candidate.db"), tag: abCandidateTag}}
	for _, side := range sides {
		for range 2 {
			if _, stderr, err := mtl(t, "run", suite, "--db", side.db, "--tag", side.tag, "--backend", "cpu", "--threads", "1", "--quiet"); err != nil {
				t.Fatalf("%s run: %v\n%s", side.label, err, stderr)
			}
		}
	}
	path := filepath.Join(dir, "store.db")
	store, err := results.OpenToWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	err = recordAB(&w, &recordStore{path: store.Path(), db: store}, path, "pr7", sides, nil)
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	if want := "baseline runs 1, 2 (tag pr7-baseline), candidate runs 3, 4 (tag pr7-candidate)"; !strings.Contains(w.String(), want) {
		t.Errorf("said %q, want %q", w.String(), want)
	}
	out, _, err := mtl(t, "runs", "--db", path, "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pr7-baseline", "pr7-candidate"} {
		if strings.Count(out, want) != 2 {
			t.Errorf("runs: %d runs tagged %s, want 2\n%s", strings.Count(out, want), want, out)
		}
	}
}

// Every command that records results refuses a store it may not write
// before its work, naming the store; they opened it read-only and failed
// at their first write, after loading models and probing the machine, and
// import and tune without naming it. Root writes read-only files, so this
// runs as a user only.
func TestWritersRefuseReadOnlyStore(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root writes read-only files")
	}
	tmp := isolate(t)
	store := filepath.Join(tmp, "store")
	path := filepath.Join(store, "r.db")
	if _, _, err := mtl(t, "peer", "import", filepath.Join("testdata", "peer", "hf.json"), "--db", path); err != nil {
		t.Fatal(err)
	}
	// A run the store does not hold, to import.
	other, exported := filepath.Join(tmp, "other.db"), filepath.Join(tmp, "run.jsonl")
	if _, _, err := mtl(t, "peer", "import", filepath.Join("testdata", "peer", "llama-bench-depth.json"), "--db", other); err != nil {
		t.Fatal(err)
	}
	if _, _, err := mtl(t, "export", "latest", "--db", other, "-o", exported); err != nil {
		t.Fatal(err)
	}
	suite := filepath.Join(tmp, "two.yaml")
	if err := os.WriteFile(suite, []byte(twoCaseSuite), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o444)
	os.Chmod(store, 0o555)
	t.Cleanup(func() { os.Chmod(store, 0o755) })
	for _, args := range [][]string{
		{"run", suite, "-q"},
		{"bench", "-m", "qwen3-moe-mini", "--layers", "1", "-p", "4", "-n", "2", "-r", "1", "--warmup", "0", "--backend", "cpu", "-q"},
		{"tune", "--kernel", "moe", "--shape", "tokens=2,experts=4,top_k=2,hidden=32,intermediate=16", "--dtype", "f32", "--backend", "cpu", "--threads", "2",
			"--dir", filepath.Join(tmp, "tuned"), "--rounds", "3", "--confirm", "6", "--sample-time", "1ms"},
		{"import", exported},
		{"peer", "import", filepath.Join("testdata", "peer", "hf.json"), "--tag", "again"},
	} {
		_, _, err := mtlTune(t, append(args, "--db", path)...)
		if err == nil || !strings.Contains(err.Error(), path+" cannot be written") || strings.Contains(err.Error(), "attempt to write") {
			t.Errorf("%s on a read-only store: %v, want it refused by path before any write", args[0], err)
		}
	}
	if out, _, err := mtl(t, "runs", "--db", path, "--format", "csv"); err != nil || strings.Count(out, "\n") != 2 {
		t.Errorf("runs of the read-only store: %v\n%s", err, out)
	}
}

// A store that fails under a command (damaged: here a column its schema
// version has is gone) is named in the error, whatever the command, as
// run's and bench's failures are.
func TestStoreFailuresNameTheStore(t *testing.T) {
	tmp := isolate(t)
	path := filepath.Join(tmp, "r.db")
	peer := filepath.Join("testdata", "peer", "hf.json")
	if _, _, err := mtl(t, "peer", "import", peer, "--db", path); err != nil {
		t.Fatal(err)
	}
	exported := filepath.Join(tmp, "run.jsonl")
	if _, _, err := mtl(t, "export", "latest", "--db", path, "-o", exported); err != nil {
		t.Fatal(err)
	}
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().Exec(`ALTER TABLE runs DROP COLUMN threads`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, args := range [][]string{
		{"runs"},
		{"show", "latest"},
		{"compare", "1", "1"},
		{"gate", "--baseline", "1", "--candidate", "1"},
		{"report", "--out", filepath.Join(tmp, "report")},
		{"export", "latest", "-o", filepath.Join(tmp, "again.jsonl")},
		{"import", exported},
		{"peer", "import", peer, "--tag", "again"},
	} {
		_, _, err := mtl(t, append(args, "--db", path)...)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s on a damaged store: %v, want an error naming %s", args[0], err, path)
		}
	}
}

// A closed terminal (SIGHUP) stops a run as Ctrl-C does: the step log is
// flushed to the last repetition stored, the run is marked interrupted and
// the command that resumes it printed, and the signal is answered as it
// comes. Under nohup (SIGHUP ignored) the run goes on. The run is this test binary run again as mtlbench.
func TestClosedTerminalStopsARun(t *testing.T) {
	if args := os.Getenv("MTLB_TEST_CHILD_ARGS"); args != "" {
		err := run(append([]string{"mtlbench"}, strings.Fields(args)...), os.Stdin, os.Stdout, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mtlbench:", err)
			os.Exit(exitCode(err))
		}
		os.Exit(0)
	}
	for _, nohup := range []bool{false, true} {
		dir := t.TempDir()
		path, steps := filepath.Join(dir, "r.db"), filepath.Join(dir, "steps.jsonl")
		child := exec.Command(os.Args[0], "-test.run=^TestClosedTerminalStopsARun$")
		if nohup {
			// SIGHUP ignored by a shell that then runs the child, as nohup
			// does: ignored in this process, it stayed ignored past
			// signal.Reset, which does not undo signal.Ignore, and a second
			// run of the test (-count 2) started its nohup false child
			// with SIGHUP ignored too.
			child = exec.Command("/bin/sh", "-c", `trap "" HUP; exec "$0" "$@"`, os.Args[0], "-test.run=^TestClosedTerminalStopsARun$")
		}
		child.Env = append(os.Environ(), "MTLB_TEST_CHILD_ARGS=bench -m qwen3-moe-mini --layers 1 -p 4 -n 2 -r 10000 --warmup 0 --backend cpu --threads 1 --db "+path+" --steps "+steps)
		stderr, err := child.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		sc := bufio.NewScanner(stderr)
		reps := 0
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), " rep ") {
				reps++
				switch {
				case reps == 2:
					child.Process.Signal(syscall.SIGHUP)
				case nohup && reps == 4:
					child.Process.Signal(os.Interrupt) // it went on past the SIGHUP
				}
			}
		}
		err = child.Wait()
		code := child.ProcessState.ExitCode()
		if code != 130 || !strings.Contains(out.String(), "resume with: ") {
			t.Fatalf("nohup %v: exit %d (%v), want 130 and a resume command:\n%s", nohup, code, err, out.String())
		}
		if nohup && reps < 4 {
			t.Errorf("under nohup, SIGHUP stopped the run after %d repetitions", reps)
		}
		// The signal is answered at once, once (a step may take minutes).
		if n := strings.Count(out.String(), "stopping once the step in hand ends"); n != 1 {
			t.Errorf("nohup %v: the signal answered %d times, want once:\n%s", nohup, n, out.String())
		}
		db, err := results.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var status string
		var stored int
		db.SQL().QueryRow(`SELECT r.status, c.reps_done FROM runs r JOIN cases c ON c.run_id = r.id`).Scan(&status, &stored)
		db.Close()
		if status != results.RunInterrupted || stored < 2 {
			t.Errorf("nohup %v: run %s with %d repetitions stored, want interrupted with 2 or more", nohup, status, stored)
		}
		log, _ := os.ReadFile(steps)
		for rep := range stored {
			if !strings.Contains(string(log), fmt.Sprintf(`"rep":%d,`, rep)) {
				t.Errorf("nohup %v: the step log lacks repetition %d of the %d stored", nohup, rep, stored)
			}
		}
	}
}

// An output file that is the results database (or SQLite's -wal beside
// it) is refused before anything is written: export -o, --steps, tune
// --out and gate --summary replaced or truncated it, and every run in it
// was gone.
func TestOutputIsNotTheStore(t *testing.T) {
	tmp := isolate(t)
	path := filepath.Join(tmp, "r.db")
	if _, _, err := mtl(t, "peer", "import", filepath.Join("testdata", "peer", "hf.json"), "--db", path); err != nil {
		t.Fatal(err)
	}
	suite := filepath.Join(tmp, "two.yaml")
	if err := os.WriteFile(suite, []byte(twoCaseSuite), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"export", "latest", "-o", path},
		{"export", "latest", "-o", path + "-wal"},
		{"export", "latest", "-o", link},
		{"run", suite, "-q", "--steps", path},
		{"bench", "-m", "qwen3-moe-mini", "--layers", "1", "-p", "4", "-n", "2", "-r", "1", "--warmup", "0", "--backend", "cpu", "-q", "--steps", path},
		{"tune", "--kernel", "moe", "--shape", "tokens=2,experts=4,top_k=2,hidden=32,intermediate=16", "--dtype", "f32", "--backend", "cpu", "--threads", "2",
			"--out", path, "--rounds", "3", "--confirm", "6", "--sample-time", "1ms"},
		{"gate", "--baseline", "1", "--candidate", "1", "--summary", path},
	} {
		_, _, err := mtl(t, append(args, "--db", path)...)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%v: %v, want the output refused, naming the store", args, err)
		}
		if out, _, err := mtl(t, "runs", "--db", path, "--format", "csv"); err != nil || strings.Count(out, "\n") != 2 {
			t.Fatalf("after %v the store holds: %v\n%s", args, err, out)
		}
	}
	// A store the command makes: tune's --out is checked once it is there.
	fresh := filepath.Join(tmp, "new.db")
	_, _, err := mtl(t, "tune", "--kernel", "moe", "--shape", "tokens=2,experts=4,top_k=2,hidden=32,intermediate=16", "--dtype", "f32",
		"--backend", "cpu", "--threads", "2", "--out", fresh, "--rounds", "3", "--confirm", "6", "--sample-time", "1ms", "--db", fresh)
	if err == nil || !strings.Contains(err.Error(), "is the results database "+fresh) {
		t.Errorf("tune --out its new store: %v", err)
	}
}

// A round's log holds all that its run printed, on stdout and stderr alike:
// the two streams are read at once and went into one buffer unguarded, so a
// run printing on both (its csv summary and its last progress line) left
// a log of whichever bytes won.
func TestABRoundLogsKeepBothStreams(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "chatty")
	script := "#!/bin/sh\n" +
		"(i=0; while [ $i -lt 3000 ]; do echo \"err line $i\" >&2; i=$((i+1)); done) &\n" +
		"i=0; while [ $i -lt 3000 ]; do echo \"out line $i\"; i=$((i+1)); done\nwait\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	side := abSide{label: "baseline", bin: bin, db: filepath.Join(dir, "b.db")}
	logs := [2]string{filepath.Join(dir, "b.log"), filepath.Join(dir, "c.log")}
	if _, _, err := runLockstep(t.Context(), 0, [2]abSide{side, side}, "s.yaml", nil, logs); err != nil {
		t.Fatal(err)
	}
	for _, log := range logs {
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for l := range strings.Lines(string(b)) {
			got[strings.TrimSuffix(l, "\n")] = true
		}
		for i := range 3000 {
			for _, s := range []string{"out", "err"} {
				if w := fmt.Sprintf("%s line %d", s, i); !got[w] {
					t.Fatalf("%s lacks %q (%d bytes)", filepath.Base(log), w, len(b))
				}
			}
		}
	}
}

// ab refuses, before its first round, a side whose binary cannot open the
// backend its run takes (by the binary's devices list): the round began,
// "round 1/3" printed, and only then did that side's run fail.
func TestABBackendOpensBeforeRounds(t *testing.T) {
	dir := t.TempDir()
	const help = "if [ \"$1 $2\" = \"run --lockstep\" ]; then echo '   mtlbench run - run a benchmark suite'; exit 0; fi\n"
	devices := func(json string) string {
		return help + "if [ \"$1\" = devices ]; then echo '" + json + "'; fi\nexit 0\n"
	}
	for _, tc := range []struct {
		name, script, backend, want string
	}{
		{"does not open", devices(`[{"backend":"cpu","device":"x","status":"ok"},{"backend":"cuda","device":null,"status":"no CUDA driver"}]`), "cuda",
			"the baseline binary BIN cannot open backend cuda here: no CUDA driver"},
		{"opens", devices(`[{"backend":"cuda","device":"H100","status":"ok"}]`), "cuda", ""},
		{"auto", devices(`[{"backend":"cuda","device":null,"status":"no CUDA driver"}]`), "auto", ""},
		{"no devices list", help + "exit 0\n", "cuda", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+tc.script), 0o755); err != nil {
				t.Fatal(err)
			}
			err := abBackendOpens(t.Context(), abSide{label: "baseline", bin: bin}, tc.backend, time.Minute, io.Discard)
			want := strings.ReplaceAll(tc.want, "BIN", bin)
			if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
				t.Errorf("%v, want %q", err, want)
			}
		})
	}
	// It asks of that backend alone: the whole list opens metal-emu, whose
	// first open compiles for minutes, past the check's minute, and the
	// clang it started went on compiling through the rounds.
	for _, backend := range []string{"cpu", "cuda"} {
		args := filepath.Join(dir, backend+".args")
		bin := filepath.Join(dir, "asked-"+backend)
		script := help + "if [ \"$1\" = devices ]; then echo \"$*\" > " + args + "; echo '[]'; fi\nexit 0\n"
		if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := abBackendOpens(t.Context(), abSide{label: "baseline", bin: bin}, backend, time.Minute, io.Discard); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(args)
		if want := "devices --backend " + backend + " --format json\n"; err != nil || string(got) != want {
			t.Errorf("%s: the binary was asked %q (%v), want %q", backend, got, err, want)
		}
	}
	// ab itself asks before its first round, of the suite's backend.
	suite := filepath.Join(dir, "k.yaml")
	os.WriteFile(suite, []byte("name: k\nbackend: cpu\ncases:\n  - name: matmul\n    kind: kernel\n    op: matmul\n    params: { m: 1, n: 64, k: 64, dtype: f32 }\n"), 0o644)
	bad := filepath.Join(dir, "no-cpu")
	os.WriteFile(bad, []byte("#!/bin/sh\n"+devices(`[{"backend":"cpu","device":null,"status":"broken here"}]`)), 0o755)
	_, stderr, err := mtl(t, "ab", suite, "--baseline-bin", bad, "--candidate-bin", bad, "--rounds", "3", "--keep", filepath.Join(dir, "keep"))
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "cannot open backend cpu here: broken here") || strings.Contains(stderr, "round 1/3") {
		t.Errorf("ab with a side that cannot open its backend: exit %d, %v\n%s", exitCode(err), err, stderr)
	}
}
