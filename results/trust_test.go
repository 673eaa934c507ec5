package results

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
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

// A store this process may not write is opened read-only, so a command
// that records refuses it before its work (OpenToWrite), whether the file
// or its folder is read-only: SQLite opened a read-only file in a writable
// folder for reading without a word, and a run met it only at its first
// write, once its model was built. Root may write anything, so this runs
// as a user only.
func TestReadOnlyStoreRefusedBeforeWork(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root writes read-only files and folders")
	}
	for _, tc := range []struct {
		name            string
		file, directory os.FileMode
	}{
		{"a read-only file in a writable folder", 0o444, 0o755},
		{"a read-only file in a read-only folder", 0o444, 0o555},
		{"a writable file in a read-only folder", 0o644, 0o555},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "r.db")
			db, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			os.Chmod(path, tc.file)
			os.Chmod(dir, tc.directory)
			t.Cleanup(func() { os.Chmod(dir, 0o755) })
			if db, err := Open(path); err != nil || !db.ReadOnly() {
				t.Errorf("Open: %v, read-only %v", err, err == nil && db.ReadOnly())
			} else {
				db.Close()
			}
			_, err = OpenToWrite(path)
			if !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), path) {
				t.Errorf("OpenToWrite: %v, want ErrReadOnly naming %s", err, path)
			}
		})
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

// A repetition's operand traffic is stored with its samples, all or
// nothing: a row of another rep, one with more distinct bytes than bytes,
// no name or an operand recorded twice stores nothing of the repetition.
// Stored rows read back in order, travel through export and import, and go
// with their run.
func TestOperandTraffic(t *testing.T) {
	db := openTemp(t)
	id, _ := db.CreateRun(&Run{SuiteName: "s", StartedAt: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)})
	cs := []Case{{Key: "kernel/gemv", Kind: CaseKernel}}
	if err := db.AddCases(id, cs); err != nil {
		t.Fatal(err)
	}
	c := cs[0].ID
	x := OperandTraffic{Kernel: "matvec_bf16", Operand: "x", Read: 2 << 20, DistinctRead: 65536}
	w := OperandTraffic{Kernel: "matvec_bf16", Operand: "w", Read: 20 << 20, DistinctRead: 20 << 20}
	out := OperandTraffic{Kernel: "matvec_bf16", Operand: "out", Written: 81920, DistinctWritten: 81920}
	sample := []Sample{{Metric: "us_per_call", Value: 9}}
	for _, bad := range []struct {
		name string
		ops  []OperandTraffic
	}{
		{"another rep", []OperandTraffic{x, {Rep: 1, Kernel: "k", Operand: "y"}}},
		{"more distinct bytes read than read", []OperandTraffic{{Kernel: "k", Operand: "x", Read: 1, DistinctRead: 2}}},
		{"more distinct bytes written than written", []OperandTraffic{{Kernel: "k", Operand: "o", Written: 1, DistinctWritten: 2}}},
		{"no operand name", []OperandTraffic{{Kernel: "k"}}},
		{"no kernel name", []OperandTraffic{{Operand: "x"}}},
		{"an operand twice", []OperandTraffic{x, x}},
	} {
		if err := db.AddRep(c, 0, sample, nil, bad.ops...); err == nil {
			t.Errorf("%s: accepted", bad.name)
		} else {
			t.Logf("%s: %v", bad.name, err)
		}
		if n := count(t, db, `SELECT count(*) FROM samples`) + count(t, db, `SELECT count(*) FROM operand_traffic`); n != 0 {
			t.Fatalf("%s: %d rows of a refused repetition stored", bad.name, n)
		}
	}
	for rep := range 2 {
		ops := []OperandTraffic{x, w, out}
		for i := range ops {
			ops[i].Rep = rep
		}
		if err := db.AddRep(c, rep, []Sample{{Rep: rep, Metric: "us_per_call", Value: 9}}, nil, ops...); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishCase(c, nil, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	got, err := db.OperandTraffic(c)
	if err != nil {
		t.Fatal(err)
	}
	want := []OperandTraffic{out, w, x, out, w, x}
	for i := range want {
		want[i].Rep = i / 3
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back:\n%+v\nwant:\n%+v", got, want)
	}
	rec, err := db.ExportRun(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRun(id); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT count(*) FROM operand_traffic`); n != 0 {
		t.Errorf("%d operand rows left after DeleteRun", n)
	}
	if _, err := db.ImportRun(rec); err != nil {
		t.Fatal(err)
	}
	again, err := db.OperandTraffic(rec.Cases[0].Case.ID)
	if err != nil || !reflect.DeepEqual(again, want) {
		t.Errorf("after export and import: %+v, %v", again, err)
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

// A store in a folder this process may not write, whose latest commits are
// still in its -wal (its last writer died, or it was copied without its
// -shm), is read whole or refused by name: SQLite's immutable mode reads
// the main file alone, and those commits' runs would silently be missing.
func TestReadOnlyFolderWithUnappliedWAL(t *testing.T) {
	src := filepath.Join(t.TempDir(), "r.db")
	db, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	db.Close() // the schema is in r.db itself
	if db, err = Open(src); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	id, err := db.CreateRun(&Run{SuiteName: "s", Status: RunComplete})
	if err != nil {
		t.Fatal(err)
	}
	// Copied while the writer still holds it: the run is in r.db-wal only.
	dir := t.TempDir()
	for _, name := range []string{"r.db", "r.db-wal"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(src), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "r.db")
	open := Open
	if os.Getuid() == 0 {
		// Root may create r.db-shm anywhere: take the path a user takes
		// once mode=ro cannot, the immutable one.
		saved := readOnlyModes
		readOnlyModes = readOnlyModes[len(readOnlyModes)-1:]
		t.Cleanup(func() { readOnlyModes = saved })
		open = OpenReadOnly
	} else {
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	}
	ro, err := open(path)
	if err != nil {
		if !errors.Is(err, ErrUnreadWAL) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "r.db-wal") {
			t.Fatalf("open: %v, want ErrUnreadWAL naming %s and its -wal", err, path)
		}
		return
	}
	defer ro.Close()
	if _, err := ro.GetRun(id); err != nil {
		t.Errorf("the run in the -wal is missing: %v", err)
	}
}

// A new store in a folder this process may not write is refused naming the
// folder, not with SQLite's "unable to open database file (14)" beside a
// read-only attempt's "no such file". Root may write anything, so this runs
// as a user only.
func TestNewStoreInAFolderNotWritable(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root writes any folder")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o555)
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	for _, path := range []string{filepath.Join(dir, "r.db"), filepath.Join(dir, "sub", "r.db")} {
		for _, o := range []struct {
			name string
			open func(string) (*DB, error)
		}{{"Open", Open}, {"OpenToWrite", OpenToWrite}} {
			_, err := o.open(path)
			want := path + " cannot be made: this process may not write the folder " + dir + ";"
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "no such file") {
				t.Errorf("%s(%s): %v\nwant %q", o.name, path, err, want)
			}
		}
	}
}
