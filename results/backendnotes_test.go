package results

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// A run's backend notes (its switches: graphs off, fast math off) are its
// own: runs of one machine row each keep theirs, exports carry them, and
// an export written before they were recorded imports with none.
func TestRunKeepsItsOwnBackendNotes(t *testing.T) {
	db := openTemp(t)
	notes := []string{"sm_90, 132 SMs, graphs on", "sm_90, 132 SMs, graphs off", ""}
	var ids []int64
	for i, n := range notes {
		ids = append(ids, mustRun(t, db, Run{SuiteName: "smoke", Tag: "t", Backend: "cuda", Machine: testMachine(),
			StartedAt: time.Date(2025, 3, 4, 5, 6, i, 0, time.UTC), BackendNotes: n}))
	}
	if n := count(t, db, `SELECT count(*) FROM machines`); n != 1 {
		t.Fatalf("%d machine rows, want the runs to share one", n)
	}
	fresh, err := Open(filepath.Join(t.TempDir(), "fresh.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	for i, id := range ids {
		r, err := db.GetRun(id)
		if err != nil {
			t.Fatal(err)
		}
		if r.BackendNotes != notes[i] {
			t.Errorf("run %d: backend notes %q, want %q", id, r.BackendNotes, notes[i])
		}
		rec, err := db.ExportRun(id)
		if err != nil {
			t.Fatal(err)
		}
		line, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		var back RunRecord
		if err := json.Unmarshal(line, &back); err != nil {
			t.Fatal(err)
		}
		got, err := fresh.ImportRun(&back)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := fresh.GetRun(got); err != nil || r.BackendNotes != notes[i] {
			t.Errorf("run %d imported: backend notes %q (%v), want %q", id, r.BackendNotes, err, notes[i])
		}
	}

	// An export from before the field: the run's JSON has no backend_notes.
	rec, err := db.ExportRun(ids[1])
	if err != nil {
		t.Fatal(err)
	}
	line, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]map[string]any
	if err := json.Unmarshal(line, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["run"]["backend_notes"] != notes[1] {
		t.Fatalf("export's run: backend_notes %v, want %q", raw["run"]["backend_notes"], notes[1])
	}
	delete(raw["run"], "backend_notes")
	raw["run"]["tag"] = "older"
	if line, err = json.Marshal(raw); err != nil {
		t.Fatal(err)
	}
	var old RunRecord
	if err := json.Unmarshal(line, &old); err != nil {
		t.Fatal(err)
	}
	id, err := fresh.ImportRun(&old)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := fresh.GetRun(id); err != nil || r.BackendNotes != "" {
		t.Errorf("older export imported: backend notes %q (%v), want none", r.BackendNotes, err)
	}
}

// A store of the schema before runs.backend_notes upgrades: its runs read
// with no notes, and new runs record theirs.
func TestMigrateAddsBackendNotes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	before := len(migrations) - 1
	if migrations[before].name != "the backend's notes a run was made with, per run (switches such as graphs or fast math off are the run's, not its machine row's)" {
		t.Fatalf("the last step is %q: test the step before backend_notes", migrations[before].name)
	}
	old, err := open(path, migrations[:before])
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO machines (id, content_hash, hostname, os, arch, extra_json, first_seen)
			VALUES (1, 'h', 'box', 'linux', 'amd64', '{"backend_notes":"sm_90, graphs on"}', '2025-01-02T03:04:05.000000Z')`,
		`INSERT INTO runs (id, suite_name, git_commit, tag, backend, machine_id, started_at, ended_at, status, threads)
			VALUES (3, 'smoke', 'abc', 'old', 'cuda', 1, '2025-01-02T03:04:05.000000Z', '2025-01-02T03:05:00.000000Z', 'complete', 'default')`,
	} {
		if _, err := old.SQL().Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	old.Close()

	db := openUpgraded(t, path)
	r, err := db.GetRun(3)
	if err != nil {
		t.Fatal(err)
	}
	// The machine row's notes are its first run's, not every run's: an
	// older run reads none rather than them.
	if r.BackendNotes != "" || r.Threads != "default" || r.Machine.Extra["backend_notes"] != "sm_90, graphs on" {
		t.Errorf("run after upgrade: backend notes %q, threads %q, machine extra %v", r.BackendNotes, r.Threads, r.Machine.Extra)
	}
	id := mustRun(t, db, Run{SuiteName: "smoke", Tag: "new", Backend: "cuda", Machine: testMachine(), BackendNotes: "sm_90, graphs off"})
	if r, err := db.GetRun(id); err != nil || r.BackendNotes != "sm_90, graphs off" {
		t.Errorf("new run after upgrade: backend notes %q (%v)", r.BackendNotes, err)
	}
}
