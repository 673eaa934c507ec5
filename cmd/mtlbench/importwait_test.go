package main

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/results"
)

// An import into a store whose write lock another process holds past a
// statement's busy timeout (a long import, a run's write) waits for it up
// to MTLBENCH_DB_WAIT, as a run's writes do, and then stores every run,
// rather than failing "database is locked" after 10 s.
func TestImportWaitsForTheLock(t *testing.T) {
	t.Setenv("MTLBENCH_DB_WAIT", "1m")
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	db := openForTest(t, src)
	id, err := db.CreateRun(&results.Run{SuiteName: "s", Backend: "cpu", Machine: results.Machine{Hostname: "h"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.FinishRun(id, results.RunComplete); err != nil {
		t.Fatal(err)
	}
	export := filepath.Join(dir, "e.jsonl")
	if _, stderr, err := mtl(t, "export", "--db", src, "-o", export); err != nil {
		t.Fatalf("export: %v\n%s", err, stderr)
	}
	dst := filepath.Join(dir, "dst.db")
	openForTest(t, dst).Close()

	held := holdLock(t, dst)
	start := time.Now()
	_, stderr, err := mtl(t, "import", "--db", dst, export)
	if err != nil {
		t.Fatalf("import while another process held the lock %v: %v\n%s", held, err, stderr)
	}
	if d := time.Since(start); d < held {
		t.Errorf("the import ended after %v, before the lock was let go (%v)", d, held)
	}
	if !strings.Contains(stderr, "locked by another process") {
		t.Errorf("stderr does not say the import waits for the lock:\n%s", stderr)
	}
	runs, err := openForTest(t, dst).Runs(results.RunFilter{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("the store holds %d runs (%v), want the one imported", len(runs), err)
	}
}

// ab's recording of both sides' runs into --db waits for a lock another
// process holds as an import does, up to MTLBENCH_DB_WAIT, rather than
// failing after one statement's 10 s.
func TestABRecordWaitsForTheLock(t *testing.T) {
	t.Setenv("MTLBENCH_DB_WAIT", "1m")
	dir := t.TempDir()
	var sides [2]abSide
	for i, label := range []string{"baseline", "candidate"} {
		path := filepath.Join(dir, label+".db")
		db := openForTest(t, path)
		id, err := db.CreateRun(&results.Run{SuiteName: "s", Backend: "cpu", Tag: "ab", Machine: results.Machine{Hostname: "h"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.FinishRun(id, results.RunComplete); err != nil {
			t.Fatal(err)
		}
		db.Close()
		sides[i] = abSide{label: label, db: path, tag: "ab"}
	}
	path := filepath.Join(dir, "store.db")
	store := openForTest(t, path)
	held := holdLock(t, path)
	var w strings.Builder
	if err := recordAB(&w, &recordStore{path: store.Path(), db: store}, path, "pr", sides, nil); err != nil {
		t.Fatalf("recording while another process held the lock %v: %v\n%s", held, err, w.String())
	}
	if !strings.Contains(w.String(), "locked by another process") {
		t.Errorf("ab does not say it waits for the lock:\n%s", w.String())
	}
	if runs, err := store.Runs(results.RunFilter{}); err != nil || len(runs) != 2 {
		t.Errorf("the store holds %d runs (%v), want both sides'", len(runs), err)
	}
}

// holdLock takes the write lock of the store at path from another
// connection, as another process would, and lets it go a second past a
// statement's busy timeout; it returns how long it holds it.
func holdLock(t *testing.T, path string) time.Duration {
	t.Helper()
	other, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	held := results.BusyTimeout + time.Second
	go func() {
		time.Sleep(held)
		tx.Rollback()
	}()
	return held
}
