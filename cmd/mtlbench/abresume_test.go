package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/results"
)

// abSideState is what a side database holds: per run (oldest first) its
// id, status, and per case its status and repetitions stored.
type abSideState struct {
	ids      []int64
	statuses []string
	cases    [][]results.Case
}

func readSide(t *testing.T, path, tag string) abSideState {
	t.Helper()
	var s abSideState
	if _, err := os.Stat(path); err != nil {
		return s
	}
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := db.Runs(results.RunFilter{Tag: tag})
	if err != nil {
		t.Fatal(err)
	}
	for i := len(runs) - 1; i >= 0; i-- {
		cs, err := db.Cases(runs[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		s.ids, s.statuses, s.cases = append(s.ids, runs[i].ID), append(s.statuses, runs[i].Status), append(s.cases, cs)
	}
	return s
}

// An interrupted ab is finished by the same ab with --resume DIR: its
// complete rounds are kept, each side's interrupted run finished in place
// (exactly its missing repetitions, after its warm-up) and the rounds left
// run, and the runs ab --db recorded when interrupted are replaced there,
// not doubled. A resume with other settings, of a finished ab or of a
// folder no ab kept is refused before any round. The sides and the
// interrupted ab are this test binary run again as mtlbench.
func TestABResume(t *testing.T) {
	if args := os.Getenv("MTLB_TEST_CHILD_ARGS"); args != "" {
		err := run(append([]string{"mtlbench"}, strings.Fields(args)...), os.Stdin, os.Stdout, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mtlbench:", err)
			os.Exit(exitCode(err))
		}
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("runs ab twice")
	}
	const reps, warmup, rounds = 4, 1, 3
	dir := t.TempDir()
	bin := filepath.Join(dir, "mtlbench")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nMTLB_TEST_CHILD_ARGS=\"$*\" exec "+os.Args[0]+" -test.run='^TestABResume$'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	suite := filepath.Join(dir, "m.yaml")
	os.WriteFile(suite, []byte(fmt.Sprintf("name: m\nmodel: { preset: qwen3-moe-mini, layers: 1, dtype: f32 }\nbackend: cpu\nrepetitions: %d\nwarmup: %d\n"+
		"params: { prompt_len: 4, gen_len: 2 }\ncases:\n  - name: decode\n    matrix: { batch: [1, 2] }\n", reps, warmup)), 0o644)
	keep, store := filepath.Join(dir, "keep"), filepath.Join(dir, "store.db")
	args := []string{"ab", suite, "--baseline-bin", bin, "--candidate-bin", bin, "--rounds", strconv.Itoa(rounds), "--backend", "cpu", "--threads", "1", "--db", store, "--tag", "r"}

	// Interrupted once round 2 stored a repetition.
	child := exec.Command(bin, append(args, "--keep", keep)...)
	stderr, err := child.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "ab: round 2/") {
			go func() {
				for range 3000 {
					if s := readSide(t, filepath.Join(keep, "baseline.db"), abBaselineTag); len(s.ids) == 2 && s.cases[1] != nil && s.cases[1][0].RepsDone > 0 {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				child.Process.Signal(os.Interrupt)
			}()
		}
	}
	child.Wait()
	if code := child.ProcessState.ExitCode(); code != 130 || !strings.Contains(out.String(), "the same ab with --resume "+keep+" finishes it") {
		t.Fatalf("interrupted ab: exit %d, want 130 and how to resume:\n%s", code, out.String())
	}
	var before [2]abSideState
	for i, tag := range []string{abBaselineTag, abCandidateTag} {
		before[i] = readSide(t, filepath.Join(keep, []string{"baseline.db", "candidate.db"}[i]), tag)
	}
	complete := 0
	for complete < len(before[0].ids) && complete < len(before[1].ids) && before[0].statuses[complete] == results.RunComplete && before[1].statuses[complete] == results.RunComplete {
		complete++
	}
	if complete >= rounds {
		t.Fatalf("the interrupt came after the last round:\n%s", out.String())
	}
	// What each side has left of the interrupted round: a case not done
	// runs its warm-up again and the repetitions it lacks.
	var missing [2]int
	for i, s := range before {
		if complete >= len(s.ids) {
			missing[i] = 2 * (reps + warmup)
			continue
		}
		for _, c := range s.cases[complete] {
			if c.Status != results.CaseDone {
				missing[i] += reps - c.RepsDone + warmup
			}
		}
	}

	// args with one flag's value replaced, as a flag given twice is refused
	with := func(flag, value string, more ...string) []string {
		out := slices.Clone(args)
		out[slices.Index(out, flag)+1] = value
		return append(out, more...)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		wants string
	}{
		{"other rounds", with("--rounds", "4", "--resume", keep), "the ab there ran with --rounds 3 (now 4): resume it with the settings it was made with"},
		{"another store", with("--db", filepath.Join(dir, "other.db"), "--resume", keep), "the ab there ran with --db " + store},
		{"beside another --keep", append(args[:len(args):len(args)], "--keep", dir, "--resume", keep), "--resume " + keep + " and --keep " + dir + ": an ab resumes in its own folder"},
		{"no ab's folder", append(args[:len(args):len(args)], "--resume", dir), "--resume " + dir + ": no ab.json there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := mtl(t, tc.args...)
			if exitCode(err) != 2 || !strings.Contains(err.Error(), tc.wants) {
				t.Errorf("exit %d, %v; want 2 and %q", exitCode(err), err, tc.wants)
			}
		})
	}

	_, errOut, err := mtl(t, append(args, "--keep", keep, "--resume", keep)...)
	if err != nil && exitCode(err) == 2 || !strings.Contains(errOut, fmt.Sprintf("ab: resuming %s in round %d/%d", keep, complete+1, rounds)) {
		t.Fatalf("resume: %v\n%s", err, errOut)
	}
	m := regexp.MustCompile(fmt.Sprintf(`ab: round %d took \S+ \((\d+)\+(\d+) steps\)`, complete+1)).FindStringSubmatch(errOut)
	if m == nil || m[1] != strconv.Itoa(missing[0]) || m[2] != strconv.Itoa(missing[1]) {
		t.Errorf("the resumed round ran %v steps, want %d+%d (the repetitions missing and a warm-up per case)\n%s", m, missing[0], missing[1], errOut)
	}
	for i, tag := range []string{abBaselineTag, abCandidateTag} {
		after := readSide(t, filepath.Join(keep, []string{"baseline.db", "candidate.db"}[i]), tag)
		if len(after.ids) != rounds {
			t.Fatalf("%s: %d runs after the resume, want %d", tag, len(after.ids), rounds)
		}
		for r := range rounds {
			if r < len(before[i].ids) && after.ids[r] != before[i].ids[r] {
				t.Errorf("%s: round %d is run %d, was %d: an interrupted run is finished in place", tag, r+1, after.ids[r], before[i].ids[r])
			}
			if after.statuses[r] != results.RunComplete {
				t.Errorf("%s: round %d is %s", tag, r+1, after.statuses[r])
			}
			for _, c := range after.cases[r] {
				if c.Status != results.CaseDone || c.RepsDone != reps {
					t.Errorf("%s: round %d case %s: %s with %d repetitions, want %d", tag, r+1, c.Name, c.Status, c.RepsDone, reps)
				}
			}
		}
	}
	// The store holds each round's runs once, complete.
	db, err := results.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tag := range []string{"r-baseline", "r-candidate"} {
		runs, err := db.Runs(results.RunFilter{Tag: tag})
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, r := range runs {
			if r.Status == results.RunComplete {
				done++
			}
		}
		if len(runs) != rounds || done != rounds {
			t.Errorf("--db: %d runs tagged %s, %d complete; want %d, all complete", len(runs), tag, done, rounds)
		}
	}
	_, _, err = mtl(t, append(args, "--resume", keep)...)
	if want := fmt.Sprintf("the ab there finished its %d rounds: nothing to resume", rounds); exitCode(err) != 2 || !strings.Contains(err.Error(), want) {
		t.Errorf("a finished ab resumed: exit %d, %v; want 2 and %q", exitCode(err), err, want)
	}
}

// An ab whose runs record nothing (the backend does not open here) leaves
// no store: not the --db one, nor a side's in its --keep folder, which the
// same ab may then use again.
func TestABThatRecordsNothingLeavesNoStore(t *testing.T) {
	dir := t.TempDir()
	// TestABResume runs the command its arguments name, as a binary would.
	bin := filepath.Join(dir, "mtlbench")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nMTLB_TEST_CHILD_ARGS=\"$*\" exec "+os.Args[0]+" -test.run='^TestABResume$'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	suite := filepath.Join(dir, "s.yaml")
	os.WriteFile(suite, []byte("name: s\nmodel: { preset: qwen2-0.5b, layers: 1 }\nbackend: cpu\nrepetitions: 1\nwarmup: 0\n"+
		"cases:\n  - name: c\n    kind: model\n    params: { prompt_len: 8, gen_len: 2 }\n"), 0o644)
	// No compiler: metal-emu opens on no machine; the sides inherit it.
	t.Setenv("MTLBENCH_CLANG", filepath.Join(dir, "no-clang++"))
	keep, store := filepath.Join(dir, "keep"), filepath.Join(dir, "store.db")
	for _, attempt := range []string{"first", "again in the same folder"} {
		_, _, err := mtl(t, "ab", suite, "--baseline-bin", bin, "--candidate-bin", bin, "--backend", "metal-emu", "--rounds", "1",
			"--keep", keep, "--db", store, "-q")
		if err == nil || !strings.Contains(err.Error(), "cannot open backend metal-emu here: msl-emu needs clang") {
			t.Fatalf("%s: err = %v, want the backend's refusal", attempt, err)
		}
		for _, f := range []string{store, filepath.Join(keep, "baseline.db"), filepath.Join(keep, "candidate.db")} {
			if _, serr := os.Stat(f); !os.IsNotExist(serr) {
				t.Errorf("%s: the ab recorded nothing but left %s behind (stat: %v)", attempt, f, serr)
			}
		}
	}
}

// abOneRoundSuite writes a suite of one small decode case with one
// repetition into dir, and points TMPDIR at a folder of its own named tmp,
// where ab makes its temporary folder, so a test sees what ab leaves there.
func abOneRoundSuite(t *testing.T, dir, tmp string) (suite, tmpDir string) {
	t.Helper()
	suite = filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(suite, []byte("name: m\nmodel: { preset: qwen3-moe-mini, layers: 1, dtype: f32 }\nbackend: cpu\nrepetitions: 1\nwarmup: 0\n"+
		"params: { prompt_len: 4, gen_len: 2 }\ncases:\n  - name: decode\n    params: { batch: 1 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tmpDir = filepath.Join(dir, tmp)
	if err := os.Mkdir(tmpDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmpDir)
	return suite, tmpDir
}

// An ab whose side's run crashes after rounds were measured keeps them,
// in its temporary folder too, says where, and the same ab with --resume
// finishes it.
func TestABKeepsRoundsWhenARunCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ab twice")
	}
	dir := t.TempDir()
	// TestABResume runs the command its arguments name, as a binary would.
	bin := filepath.Join(dir, "mtlbench")
	run := "MTLB_TEST_CHILD_ARGS=\"$*\" exec " + os.Args[0] + " -test.run='^TestABResume$'\n"
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+run), 0o755); err != nil {
		t.Fatal(err)
	}
	// The candidate's second run (round 2) crashes; the others run.
	count := filepath.Join(dir, "count")
	crash := filepath.Join(dir, "crashes-once")
	if err := os.WriteFile(crash, []byte("#!/bin/sh\ncase \"$*\" in\n*--help*) ;;\nrun*) n=$(cat "+count+" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "+count+
		"\n  if [ $n -eq 2 ]; then echo 'fatal error: a crash' >&2; exit 3; fi ;;\nesac\n"+run), 0o755); err != nil {
		t.Fatal(err)
	}
	suite, tmp := abOneRoundSuite(t, dir, "tmp")
	args := []string{"ab", suite, "--baseline-bin", bin, "--candidate-bin", crash, "--rounds", "3", "--backend", "cpu", "--threads", "1", "-q"}
	_, _, err := mtl(t, args...)
	kept, _ := filepath.Glob(filepath.Join(tmp, "mtlbench-ab-*"))
	if len(kept) != 1 {
		t.Fatalf("err = %v; folders kept: %v, want the ab's", err, kept)
	}
	if want := "round 2 of 3 failed; the 1 complete rounds (and what the failed one recorded) are kept in " + kept[0]; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	for i, want := range []int{2, 1} { // the baseline ran round 2, the candidate crashed in it
		side := readSide(t, filepath.Join(kept[0], []string{"baseline.db", "candidate.db"}[i]), []string{abBaselineTag, abCandidateTag}[i])
		if len(side.ids) != want {
			t.Errorf("side %d holds %d runs, want %d", i, len(side.ids), want)
		}
	}
	// The gate's verdict on three samples a side is its own: only a tool
	// error (exit 2) is the resume's.
	out, _, err := mtl(t, append(args, "--resume", kept[0], "--format", "csv")...)
	if err != nil && exitCode(err) == 2 {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if _, err := os.Stat(kept[0]); !os.IsNotExist(err) {
		t.Errorf("the temporary folder stayed once the resumed rounds were done (%v)", err)
	}
}

// An ab whose rounds are done but cannot be read for the gate (a side's
// database spoilt) keeps its temporary folder and says where: the rounds
// measured are not removed with it.
func TestABKeepsRoundsTheGateCannotRead(t *testing.T) {
	dir := t.TempDir()
	// TestABResume runs the command its arguments name, as a binary would.
	env, child := "MTLB_TEST_CHILD_ARGS=\"$*\" ", os.Args[0]+" -test.run='^TestABResume$'"
	bin := filepath.Join(dir, "mtlbench")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+env+"exec "+child+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The candidate's second run (round 2) spoils its database once done.
	count := filepath.Join(dir, "count")
	spoil := filepath.Join(dir, "spoils")
	if err := os.WriteFile(spoil, []byte("#!/bin/sh\ncase \"$*\" in\nrun*--help*) "+env+"exec "+child+" ;;\nrun*) ;;\n*) "+env+"exec "+child+" ;;\nesac\n"+
		"n=$(cat "+count+" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "+count+"\n"+env+child+"\nrc=$?\n"+
		"if [ $n -eq 2 ]; then while [ $# -gt 0 ]; do [ \"$1\" = --db ] && db=$2; shift; done; rm -f \"$db-wal\" \"$db-shm\"; echo 'not a store' > \"$db\"; fi\nexit $rc\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	suite, tmp := abOneRoundSuite(t, dir, "tmp")
	_, _, err := mtl(t, "ab", suite, "--baseline-bin", bin, "--candidate-bin", spoil, "--rounds", "2", "--backend", "cpu", "--threads", "1", "-q")
	kept, _ := filepath.Glob(filepath.Join(tmp, "mtlbench-ab-*"))
	if len(kept) != 1 {
		t.Fatalf("err = %v; folders kept: %v, want the ab's", err, kept)
	}
	if want := "ab: the runs are kept in " + kept[0]; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if side := readSide(t, filepath.Join(kept[0], "baseline.db"), abBaselineTag); len(side.ids) != 2 {
		t.Errorf("the baseline's database holds %d runs, want its 2 rounds", len(side.ids))
	}
}

// A binary whose round-1 run records nothing stops the ab; the other
// side's round stays in the temporary folder, which the error names.
func TestABKeepsRoundWhenASideRecordsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ab")
	}
	dir := t.TempDir()
	// TestABResume runs the command its arguments name, as a binary would.
	run := "MTLB_TEST_CHILD_ARGS=\"$*\" exec " + os.Args[0] + " -test.run='^TestABResume$'\n"
	bin := filepath.Join(dir, "mtlbench")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+run), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		side int    // the side that records nothing
		kept string // the side database that stays
	}{
		{"candidate", 1, "baseline.db"},
		{"baseline", 0, "candidate.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Its run exits at once, cleanly, having recorded nothing.
			silent := filepath.Join(dir, "silent-"+tc.name)
			if err := os.WriteFile(silent, []byte("#!/bin/sh\ncase \"$*\" in\nrun\\ *--help*) ;;\nrun*) exit 0 ;;\nesac\n"+run), 0o755); err != nil {
				t.Fatal(err)
			}
			bins := []string{bin, bin}
			bins[tc.side] = silent
			suite, tmp := abOneRoundSuite(t, dir, "tmp-"+tc.name)
			_, _, err := mtl(t, "ab", suite, "--baseline-bin", bins[0], "--candidate-bin", bins[1], "--rounds", "3", "--backend", "cpu", "--threads", "1", "-q")
			kept, _ := filepath.Glob(filepath.Join(tmp, "mtlbench-ab-*"))
			if len(kept) != 1 {
				t.Fatalf("err = %v; folders kept: %v, want the ab's", err, kept)
			}
			for _, want := range []string{"after round 1 the " + tc.name + " binary " + silent + " recorded no run",
				"ab: what round 1 recorded is kept in " + kept[0] + " (" + tc.kept + ", and its logs)"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want %q", err, want)
				}
			}
			tags := []string{abBaselineTag, abCandidateTag}
			if side := readSide(t, filepath.Join(kept[0], tc.kept), tags[1-tc.side]); len(side.ids) != 1 {
				t.Errorf("%s holds %d runs, want round 1's", tc.kept, len(side.ids))
			}
		})
	}
}

// An ab interrupted while it checks the binaries, before any round, exits
// 130 saying so: the check's binary, stopped by the interrupt, made it
// blame the next check's binary ("failed `run --lockstep --help`: context
// canceled") and exit 2, a tool error. The baseline's devices check here
// interrupts ab itself, as Ctrl-C would while it ran.
func TestABInterruptedWhileChecking(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "interrupts")
	script := "#!/bin/sh\n" +
		"if [ \"$1 $2\" = \"run --lockstep\" ]; then echo '   mtlbench run - run a benchmark suite'; exit 0; fi\n" +
		"if [ \"$1\" = devices ]; then kill -INT $PPID; exec sleep 20; fi\nexit 0\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	suite := filepath.Join(dir, "k.yaml")
	os.WriteFile(suite, []byte("name: k\nbackend: cpu\ncases:\n  - name: matmul\n    kind: kernel\n    op: matmul\n    params: { m: 1, n: 64, k: 64, dtype: f32 }\n"), 0o644)
	keep := filepath.Join(dir, "keep")
	_, stderr, err := mtl(t, "ab", suite, "--baseline-bin", bin, "--candidate-bin", bin, "--rounds", "3", "--keep", keep)
	if exitCode(err) != 130 || !strings.Contains(err.Error(), "ab interrupted while it checked the binaries, before its rounds: nothing was measured") ||
		strings.Contains(stderr, "round 1/3") {
		t.Errorf("ab interrupted in its checks: exit %d, %v\n%s", exitCode(err), err, stderr)
	}
	if left, _ := os.ReadDir(keep); len(left) != 0 {
		t.Errorf("--keep %s holds %d files after an ab that measured nothing", keep, len(left))
	}
}
