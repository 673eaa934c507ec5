package results

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A user_version no mtlbench writes (negative) is a clear error, not a panic.
func TestNegativeSchemaVersion(t *testing.T) {
	for _, v := range []int{-1, -2147483648} {
		path := filepath.Join(t.TempDir(), "r.db")
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.SQL().Exec(fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
			t.Fatal(err)
		}
		db.Close()
		_, err = Open(path)
		if !errors.Is(err, ErrSchemaInvalid) || !strings.Contains(err.Error(), fmt.Sprint(v)) {
			t.Errorf("user_version %d: %v, want ErrSchemaInvalid naming the version", v, err)
		}
		if _, err := OpenReadOnly(path); !errors.Is(err, ErrSchemaInvalid) {
			t.Errorf("read-only, user_version %d: %v", v, err)
		}
	}
}

func TestOpenReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.CreateRun(&Run{SuiteName: "s", Status: RunComplete})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.ReadOnly() {
		t.Error("not marked read-only")
	}
	if runs, err := ro.Runs(RunFilter{}); err != nil || len(runs) != 1 || runs[0].ID != id {
		t.Errorf("runs %v, %v", runs, err)
	}
	if _, err := ro.CreateRun(&Run{SuiteName: "x"}); err == nil {
		t.Error("a read-only database took a write")
	}
	if _, err := OpenReadOnly(filepath.Join(t.TempDir(), "none.db")); err == nil {
		t.Error("OpenReadOnly created a database")
	}
}

// Open falls back to reading a database it may not write. Root may write
// anything, so this runs as a user only.
func TestOpenFallsBackToReadOnly(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root writes read-only files; OpenReadOnly is tested directly")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "r.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	os.Chmod(path, 0o444)
	os.Chmod(dir, 0o555)
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if !db.ReadOnly() {
		t.Error("not read-only")
	}
}

func TestAddRep(t *testing.T) {
	db := openTemp(t)
	id, _ := db.CreateRun(&Run{SuiteName: "s"})
	cs := []Case{{Key: "a", Kind: "model"}}
	if err := db.AddCases(id, cs); err != nil {
		t.Fatal(err)
	}
	c := cs[0].ID
	if err := db.AddRep(c, 1, []Sample{{Rep: 1, Metric: "m", Value: 1}}, nil); err == nil {
		t.Error("rep 1 accepted before rep 0")
	}
	if err := db.AddRep(c, 0, []Sample{{Rep: 1, Metric: "m", Value: 1}}, nil); err == nil {
		t.Error("a sample of another rep accepted")
	}
	for rep := range 2 {
		if err := db.AddRep(c, rep, []Sample{{Rep: rep, Metric: "m", Value: float64(rep)}}, []OpTiming{{Rep: rep, Layer: 0, Component: CompMoE, Op: "x", Seconds: 1, Calls: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := db.GetCase(c)
	if got.RepsDone != 2 || got.Status != CasePending {
		t.Errorf("after 2 reps: reps_done %d, %s", got.RepsDone, got.Status)
	}
	if err := db.FinishCase(c, nil, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRep(c, 2, nil, nil); err == nil {
		t.Error("a rep added to a done case")
	}
	if ss, _ := db.Samples(c); len(ss) != 2 {
		t.Errorf("%d samples", len(ss))
	}
}

// A run whose process is gone reads as interrupted and can be resumed; one
// whose process lives cannot be resumed by another.
func TestRunOwners(t *testing.T) {
	db := openTemp(t)
	id, err := db.CreateRun(&Run{SuiteName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := db.GetRun(id)
	if r.Status != RunRunning || r.OwnerPID != os.Getpid() {
		t.Fatalf("new run: %s, owner %d", r.Status, r.OwnerPID)
	}
	// A live owner that is not us: the test's parent process.
	db.SQL().Exec(`UPDATE runs SET owner_pid = ? WHERE id = ?`, os.Getppid(), id)
	if err := db.ResumeRun(id); !errors.Is(err, ErrRunBusy) {
		t.Errorf("resume of a live run: %v", err)
	}
	// A dead owner: a finished child process's pid.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no `true` to make a dead process:", err)
	}
	db.SQL().Exec(`UPDATE runs SET owner_pid = ? WHERE id = ?`, cmd.Process.Pid, id)
	r, _ = db.GetRun(id)
	if r.Status != RunInterrupted || !r.Orphaned {
		t.Errorf("run of a dead process: %s (orphaned %v), want interrupted", r.Status, r.Orphaned)
	}
	if err := db.ResumeRun(id); err != nil {
		t.Errorf("resume of a dead process's run: %v", err)
	}
	if r, _ = db.GetRun(id); r.Status != RunRunning || r.OwnerPID != os.Getpid() {
		t.Errorf("after resume: %s, owner %d", r.Status, r.OwnerPID)
	}
}
