package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/bench"
)

// lockAfterFirstRep takes the store's write lock from another connection,
// as another process would, once the run has stored a repetition; locked
// is closed then, and release lets it go.
func lockAfterFirstRep(t *testing.T, path string) (locked <-chan struct{}, release func()) {
	t.Helper()
	ch := make(chan struct{})
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(done)
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
		if err != nil {
			t.Error(err)
			return
		}
		defer db.Close()
		for ctx.Err() == nil {
			var n int
			if db.QueryRow(`SELECT count(*) FROM samples`).Scan(&n) == nil && n > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		tx, err := db.BeginTx(context.Background(), nil)
		if err != nil {
			t.Error(err)
			return
		}
		close(ch)
		<-ctx.Done()
		tx.Rollback()
	}()
	release = func() { cancel(); <-done }
	t.Cleanup(release)
	return ch, release
}

// storedReps are the repetitions the store holds of its one run's case,
// and the run's status.
func storedReps(t *testing.T, path string, run int) (int, string) {
	t.Helper()
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var reps int
	var status string
	if err := db.SQL().QueryRow(`SELECT c.reps_done, r.status FROM cases c JOIN runs r ON r.id = c.run_id WHERE r.id = ?`, run).Scan(&reps, &status); err != nil {
		t.Fatal(err)
	}
	return reps, status
}

// A store another process holds locked past MTLBENCH_DB_WAIT stops a run,
// and loses nothing it measured: the repetition the store refused is in a
// recovery file beside it, which the error and the resume line name with
// the command that imports it; the file imports into a fresh store as the
// run measured it, and into the same store in place of the run, which the
// printed command then resumes to the end.
func TestLockedStoreKeepsWhatTheRunMeasured(t *testing.T) {
	t.Setenv("MTLBENCH_DB_WAIT", "300ms")
	dir := t.TempDir()
	path := filepath.Join(dir, "r.db")
	locked, release := lockAfterFirstRep(t, path)
	start := time.Now()
	_, stderr, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "--layers", "1", "-p", "4", "-n", "2", "-r", "60", "--warmup", "0",
		"--backend", "cpu", "--threads", "1", "--db", path, "--format", "csv")
	select {
	case <-locked:
	default:
		t.Fatalf("the run ended before the store was locked: %v\n%s", err, stderr)
	}
	release()
	if d := time.Since(start); d > time.Minute {
		t.Errorf("the run took %v", d)
	}
	file := filepath.Join(dir, "r.db.run-1.unstored.jsonl")
	importCmd := "mtlbench import --db " + path + " " + file
	if err == nil || !strings.Contains(err.Error(), "locked by another process") || !strings.Contains(err.Error(), "nothing measured is lost") ||
		!strings.Contains(err.Error(), importCmd) {
		t.Fatalf("error %v, want one naming the lock, %s and the command that imports it\n%s", err, file, stderr)
	}
	var resume string
	for _, l := range strings.Split(stderr, "\n") {
		if r, ok := strings.CutPrefix(l, "resume with: "); ok {
			resume = r
		}
	}
	if !strings.HasPrefix(resume, importCmd+" && mtlbench bench ") || !strings.HasSuffix(resume, " --resume 1") {
		t.Fatalf("resume line %q, want the import then the resume", resume)
	}
	stored, _ := storedReps(t, path, 1)
	if shown := strings.Count(stderr, " rep "); shown != stored || stored == 0 || stored >= 60 {
		t.Fatalf("the store holds %d repetitions and the progress showed %d", stored, shown)
	}

	// Into a fresh store: what the store took, and the repetition it refused.
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	if _, _, err := mtl(t, "import", "--db", fresh, file); err != nil {
		t.Fatal(err)
	}
	if got, _ := storedReps(t, fresh, 1); got != stored+1 {
		t.Errorf("the fresh store holds %d repetitions, want the %d stored and the one refused", got, stored)
	}
	a, _ := openForTest(t, path).ExportRun(1)
	b, _ := openForTest(t, fresh).ExportRun(1)
	kept := map[results.Sample]bool{}
	for _, s := range b.Cases[0].Samples {
		kept[s] = true
	}
	for _, s := range a.Cases[0].Samples {
		if !kept[s] {
			t.Errorf("stored sample %+v differs in the recovery file", s)
		}
	}
	if len(b.Cases[0].Samples) <= len(a.Cases[0].Samples) {
		t.Errorf("the recovery file holds %d samples, the store %d", len(b.Cases[0].Samples), len(a.Cases[0].Samples))
	}

	// The printed line: the import, then the resume, to the end.
	for _, cmd := range strings.Split(resume, " && ") {
		_, stderr, err := mtl(t, strings.Fields(cmd)[1:]...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, stderr)
		}
		if strings.HasPrefix(cmd, "mtlbench bench") {
			if ran := strings.Count(stderr, " rep "); ran != 60-stored-1 {
				t.Errorf("the resume ran %d repetitions, want the %d neither stored nor kept", ran, 60-stored-1)
			}
		}
	}
	if got, status := storedReps(t, path, 1); got != 60 || status != results.RunComplete {
		t.Errorf("after the import and the resume: %d repetitions, %s", got, status)
	}
}

func openForTest(t *testing.T, path string) *results.DB {
	t.Helper()
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Ctrl-C while a repetition waits for a locked store writes the recovery
// file at once, and a second Ctrl-C, which kills, loses nothing. The run
// is this test binary run again as mtlbench.
func TestInterruptWhileStoreLocked(t *testing.T) {
	if args := os.Getenv("MTLB_TEST_CHILD_ARGS"); args != "" {
		err := run(append([]string{"mtlbench"}, strings.Fields(args)...), os.Stdin, os.Stdout, os.Stderr)
		if err != nil {
			os.Exit(exitCode(err))
		}
		os.Exit(0)
	}
	// The child's next repetition must be waiting on the lock when the
	// signal comes. One still being measured then (a repetition takes
	// milliseconds, but a loaded machine may not have run the child that
	// far) is dropped, and with nothing measured left unstored no file is
	// kept: the case is run again with a longer wait.
	waits := []time.Duration{time.Second, 5 * time.Second, 20 * time.Second}
	for i, wait := range waits {
		path, file, out := interruptWhileLocked(t, wait)
		if file == "" {
			if i == len(waits)-1 {
				t.Fatalf("no recovery file named once stopped:\n%s", out)
			}
			t.Logf("no recovery file named once stopped %v after the lock; again with a longer wait:\n%s", wait, out)
			continue
		}
		fresh := filepath.Join(t.TempDir(), "fresh.db")
		if _, _, err := mtl(t, "import", "--db", fresh, file); err != nil {
			t.Fatalf("import %s: %v", file, err)
		}
		stored, _ := storedReps(t, path, 1)
		if got, _ := storedReps(t, fresh, 1); got != stored+1 {
			t.Errorf("the recovery file holds %d repetitions, want the %d stored and the one refused", got, stored)
		}
		return
	}
}

// interruptWhileLocked runs TestInterruptWhileStoreLocked's child on a
// store of its own, which is locked once a repetition is stored, sends the
// child Ctrl-C wait later, and a second one once it names its recovery
// file. It returns the store, the file ("" if none was named) and the
// child's stderr.
func interruptWhileLocked(t *testing.T, wait time.Duration) (path, file, stderrText string) {
	t.Helper()
	dir := t.TempDir()
	path = filepath.Join(dir, "r.db")
	locked, _ := lockAfterFirstRep(t, path)
	child := exec.Command(os.Args[0], "-test.run=^TestInterruptWhileStoreLocked$")
	child.Env = append(os.Environ(), "MTLBENCH_DB_WAIT=1h",
		"MTLB_TEST_CHILD_ARGS=bench -m qwen3-moe-mini --layers 1 -p 4 -n 2 -r 10000 --warmup 0 --backend cpu --threads 1 --db "+path)
	stderr, err := child.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	select {
	case <-locked:
	case <-time.After(time.Minute):
		t.Fatal("the run stored no repetition")
	}
	// The child's next repetition is now measured, then waits on the lock.
	time.Sleep(wait)
	child.Process.Signal(os.Interrupt)
	var out strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if _, after, ok := strings.Cut(sc.Text(), "is kept in "); ok {
			file, _, _ = strings.Cut(after, ";")
			child.Process.Signal(os.Interrupt) // the second: kills
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	child.Wait()
	return path, file, out.String()
}

// run and bench offer --resume by one rule: a run stopped, or one whose
// store failed under it once it had kept repetitions, unless it is
// complete, which --resume refuses (a failure reading its cases back).
func TestResumeOfferedOnlyForUnfinishedRuns(t *testing.T) {
	moved := fmt.Errorf("reading the cases back: %w", results.ErrStoreMoved)
	for _, tc := range []struct {
		name   string
		status string
		err    error
		reps   int
		want   bool
	}{
		{"interrupted", results.RunInterrupted, bench.ErrInterrupted, 0, true},
		{"step log", results.RunInterrupted, bench.ErrStepLog, 3, true},
		{"store failed after repetitions", results.RunRunning, moved, 3, true},
		{"store failed before any", results.RunRunning, moved, 0, false},
		{"other error", results.RunFailed, errors.New("no backend"), 3, false},
		{"complete, cases not read back", results.RunComplete, moved, 3, false},
		{"complete, interrupted after", results.RunComplete, bench.ErrInterrupted, 3, false},
	} {
		if got := resumable(tc.status, tc.err, tc.reps); got != tc.want {
			t.Errorf("%s: resumable %v, want %v", tc.name, got, tc.want)
		}
	}
}
