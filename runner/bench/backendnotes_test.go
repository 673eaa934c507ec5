package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cpu"
)

// A run records the backend's notes as its own (runs.backend_notes), not
// in its machine row, which keeps its first run's fields: a later run made
// with another switch would read the first one's notes.
func TestRunRecordsItsBackendNotes(t *testing.T) {
	want := cpu.New(cpu.Options{Threads: 1}).Info().Notes
	if want == "" {
		t.Fatal("the cpu backend has no notes to record")
	}
	s := loadSuite(t, normSuite)
	db := openDB(t)
	for i := range 2 {
		sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		r, err := db.GetRun(sum.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if r.BackendNotes != want {
			t.Errorf("run %d: backend notes %q, want %q", i+1, r.BackendNotes, want)
		}
		if n, ok := r.Machine.Extra["backend_notes"]; ok {
			t.Errorf("run %d: the machine row holds backend notes %q: they are the run's", i+1, n)
		}
	}
}

// A resume is held to the backend notes its run was made with: repetitions
// with another switch would be stored as the same cases. A run recorded
// before the notes were is not checked on them.
func TestResumeHeldToBackendNotes(t *testing.T) {
	s := loadSuite(t, normSuite)
	for _, tc := range []struct {
		stored string
		want   string
	}{
		{"simd: none, switch off", `recorded with backend notes "simd: none, switch off" (now "` + cpu.New(cpu.Options{Threads: 1}).Info().Notes + `")`},
		{"", ""},
	} {
		db := openDB(t)
		sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.SQL().Exec(`UPDATE runs SET backend_notes = ?, status = 'interrupted' WHERE id = ?`, tc.stored, sum.RunID); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SQL().Exec(`DELETE FROM samples WHERE case_id IN (SELECT id FROM cases WHERE run_id = ?)`, sum.RunID); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SQL().Exec(`UPDATE cases SET status = 'pending', reps_done = 0 WHERE run_id = ?`, sum.RunID); err != nil {
			t.Fatal(err)
		}
		_, err = Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, Threads: 1, Resume: sum.RunID})
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("resume of a run with backend notes %q: %v, want %q", tc.stored, err, tc.want)
		}
	}
}

// normSuite is one small kernel case on the cpu backend.
const normSuite = `name: k
backend: cpu
repetitions: 1
warmup: 0
cases:
  - name: norm
    op: rms_norm
    params: { tokens: 1, width: 64 }
`
