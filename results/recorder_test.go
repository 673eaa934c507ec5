package results

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// holdLock takes the store's write lock from another connection, as another
// process would, until the returned function is called.
func holdLock(t *testing.T, path string) (release func()) {
	t.Helper()
	other, err := sql.Open("sqlite", dsn(path, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := other.Begin() // BEGIN IMMEDIATE (dsn's _txlock)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			tx.Rollback()
			other.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// recording starts a run of two cases in a store whose statements wait
// busy for a lock.
func recording(t *testing.T, busy time.Duration, o RecordOptions) (*DB, *Recorder, []Case) {
	t.Helper()
	db, err := OpenWith(filepath.Join(t.TempDir(), "results.db"), Options{BusyTimeout: busy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	k, err := db.Record(&Run{SuiteName: "s", Tag: "t", Backend: "cpu", Machine: testMachine(), Overrides: map[string]string{"batch": "2"}}, o)
	if err != nil {
		t.Fatal(err)
	}
	cases := []Case{
		{Name: "a", Kind: CaseModel, Params: map[string]string{"batch": "1"}},
		{Name: "b", Kind: CaseKernel, Params: map[string]string{"op": "matmul"}},
	}
	if err := k.AddCases(cases); err != nil {
		t.Fatal(err)
	}
	return db, k, cases
}

func repSamples(rep int, v float64) []Sample {
	return []Sample{{Rep: rep, Metric: "decode_tok_s", Value: v, Unit: "tok/s"}, {Rep: rep, Metric: "ttft_ms", Value: v / 10, Unit: "ms"}}
}

// readRecovery reads a recovery file as import does: export lines, each
// run checked.
func readRecovery(t *testing.T, path string) *RunRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	var recs []*RunRecord
	var end *ExportEnd
	for sc.Scan() {
		if end != nil {
			t.Fatalf("%s: a line after the closing line", path)
		}
		var e struct{ End *ExportEnd }
		if err := json.Unmarshal(sc.Bytes(), &e); err == nil && e.End != nil {
			end = e.End
			continue
		}
		var l ExportLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Format != ExportFormat {
			t.Fatalf("format %q", l.Format)
		}
		if err := l.RunRecord.Check(); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &l.RunRecord)
	}
	if len(recs) != 1 {
		t.Fatalf("%s holds %d runs, want 1", path, len(recs))
	}
	if end == nil || end.Runs != 1 {
		t.Fatalf("%s closes with %+v, want a count of its 1 run", path, end)
	}
	return recs[0]
}

// samplesByKey are a run's samples, by case key.
func samplesByKey(t *testing.T, db *DB, id int64) map[string][]Sample {
	t.Helper()
	rec, err := db.ExportRun(id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]Sample{}
	for _, c := range rec.Cases {
		out[c.Case.Key] = c.Samples
	}
	return out
}

// A lock another process holds past the wait stops the recording: the
// repetition the store did not take is in the recovery file, with the run
// and the repetitions it did take, and the file imports into a fresh
// store as the run measured, and into the same store in place of the run.
func TestRecorderKeepsWhatALockedStoreRefused(t *testing.T) {
	var notes []string
	db, k, cases := recording(t, 50*time.Millisecond, RecordOptions{Wait: 300 * time.Millisecond, Note: func(s string) { notes = append(notes, s) }})
	measured := map[string][]Sample{}
	add := func(c Case, rep int, v float64) error {
		ss := repSamples(rep, v)
		measured[c.Key] = append(measured[c.Key], ss...)
		return k.AddRep(c.ID, rep, ss, nil)
	}
	if err := add(cases[0], 0, 100); err != nil {
		t.Fatal(err)
	}
	if err := add(cases[0], 1, 101); err != nil {
		t.Fatal(err)
	}
	release := holdLock(t, db.Path())
	start := time.Now()
	err := add(cases[0], 2, 102)
	took := time.Since(start)
	var u *UnstoredError
	if !errors.As(err, &u) || !FromStore(err) || !isBusy(err) {
		t.Fatalf("AddRep under a held lock: %v, want an UnstoredError of SQLITE_BUSY", err)
	}
	if took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("the write gave up after %v, want the wait of 300ms", took)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "locked by another process") {
		t.Errorf("notes while waiting: %q", notes)
	}
	want := filepath.Join(filepath.Dir(db.Path()), "results.db.run-1.unstored.jsonl")
	if u.File != want || k.Recovery() != want {
		t.Fatalf("recovery file %q (%q), want %q", u.File, k.Recovery(), want)
	}
	for _, s := range []string{want, "mtlbench import --db " + db.Path() + " " + want, "before any --resume"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not say %q: %v", s, err)
		}
	}
	if msg := db.StoreError(err); u.Waited < 300*time.Millisecond || !strings.Contains(msg, "locked by another process for more than "+roundTime(u.Waited).String()) {
		t.Errorf("StoreError: %q (waited %v)", msg, u.Waited)
	}
	// The store is not waited on again: the rest goes to the file.
	if err := add(cases[1], 0, 7); !errors.As(err, &u) || u.File != want {
		t.Errorf("a write after the refusal: %v", err)
	}
	if err := k.FailCase(cases[0].ID, "stopped"); err == nil {
		t.Error("FailCase after the refusal: no error")
	}
	if err := k.FinishRun(RunFailed); err == nil {
		t.Error("FinishRun after the refusal: no error")
	}
	// A write that waited on the store would have said so (each wait's
	// first busy answer is noted): a count, where a bound on their time
	// measured the machine's load.
	if len(notes) != 1 {
		t.Errorf("writes after the refusal waited on the store: notes %q", notes)
	}
	release()

	rec := readRecovery(t, want)
	if rec.Run.Status != RunFailed || rec.Run.Tag != "t" || rec.Run.Overrides["batch"] != "2" || len(rec.Cases) != 2 {
		t.Errorf("recovered run: %+v", rec.Run)
	}
	fresh := openTemp(t)
	id, err := fresh.ImportRun(rec)
	if err != nil {
		t.Fatal(err)
	}
	if got := samplesByKey(t, fresh, id); !sameSamples(got, measured) {
		t.Errorf("imported samples %v, want what was measured %v", got, measured)
	}
	// Into the store it was refused by: the run there, further on.
	rec = readRecovery(t, want)
	same, ok, err := db.FindRun(rec, nil)
	if err != nil || !ok || same != k.Run().ID {
		t.Fatalf("FindRun: %d %v %v", same, ok, err)
	}
	if err := db.ReplaceRun(same, rec); err != nil {
		t.Fatal(err)
	}
	if got := samplesByKey(t, db, same); !sameSamples(got, measured) {
		t.Errorf("samples after the import into the same store %v, want %v", got, measured)
	}
}

func sameSamples(a, b map[string][]Sample) bool {
	norm := func(m map[string][]Sample) map[string]map[Sample]bool {
		out := map[string]map[Sample]bool{}
		for k, ss := range m {
			out[k] = map[Sample]bool{}
			for _, s := range ss {
				out[k][s] = true
			}
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// Stopping the run (Ctrl-C) while a write waits for a locked store ends the
// wait, with the recovery file written before the turn in hand ends: a
// second signal, which kills, finds it written.
func TestRecorderStoppedWhileWaiting(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var notes []string
	var kept []string // recovery files there when a note was made
	var dir string
	db, k, cases := recording(t, 2*time.Second, RecordOptions{Wait: time.Hour, Context: ctx, Note: func(s string) {
		mu.Lock()
		defer mu.Unlock()
		notes = append(notes, s)
		names, _ := filepath.Glob(filepath.Join(dir, "*.unstored.jsonl"))
		kept = append(kept, names...)
	}})
	dir = filepath.Dir(db.Path())
	if err := k.AddRep(cases[0].ID, 0, repSamples(0, 1), nil); err != nil {
		t.Fatal(err)
	}
	holdLock(t, db.Path())
	// Stopped as the write begins, it meets the write waiting on the lock
	// (the statement's 2 s busy wait, past stopGrace): a timer's stop, late
	// on a loaded machine, came after that wait had answered busy, and the
	// write then ended without keeping the file while stopping.
	cancel()
	start := time.Now()
	err := k.AddRep(cases[0].ID, 1, repSamples(1, 2), nil)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the write ended %v after it began, not once stopped", d)
	}
	var u *UnstoredError
	if !errors.As(err, &u) || u.File == "" {
		t.Fatalf("AddRep stopped while waiting: %v", err)
	}
	mu.Lock()
	said := strings.Join(notes, "\n")
	mu.Unlock()
	if !strings.Contains(said, "kept in "+u.File) || len(kept) != 1 || kept[0] != u.File {
		t.Errorf("notes: %s; files there as they were made: %q", said, kept)
	}
	if got := readRecovery(t, u.File).Reps(); got != 2 {
		t.Errorf("the recovery file holds %d repetitions, want 2", got)
	}
}

// A store that answers takes a write made after the stop, and no recovery
// file is left.
func TestRecorderStoppedStoreFree(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	db, k, cases := recording(t, 50*time.Millisecond, RecordOptions{Context: ctx})
	if err := k.AddRep(cases[0].ID, 0, repSamples(0, 1), nil); err != nil {
		t.Fatal(err)
	}
	if err := k.FinishCase(cases[0].ID, nil, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	if k.Recovery() != "" {
		t.Errorf("recovery file %s with nothing refused", k.Recovery())
	}
	if names, _ := filepath.Glob(filepath.Join(filepath.Dir(db.Path()), "*.jsonl")); len(names) > 0 {
		t.Errorf("left %v", names)
	}
}

// A database file removed while the run records into it takes SQLite's
// writes without an error, and loses them: the recorder sees it and keeps
// the whole run in the recovery file.
func TestRecorderStoreRemoved(t *testing.T) {
	db, k, cases := recording(t, 50*time.Millisecond, RecordOptions{})
	if err := k.AddRep(cases[0].ID, 0, repSamples(0, 1), nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"", "-wal", "-shm"} {
		os.Remove(db.Path() + f)
	}
	err := k.AddRep(cases[0].ID, 1, repSamples(1, 2), nil)
	var u *UnstoredError
	if !errors.As(err, &u) || !errors.Is(err, ErrStoreMoved) || !FromStore(err) || u.File == "" {
		t.Fatalf("AddRep into a removed store: %v", err)
	}
	if got := readRecovery(t, u.File).Reps(); got != 2 {
		t.Errorf("the recovery file holds %d repetitions, want both", got)
	}
}

// A second recovery file of one run (a resumed run refused again) never
// replaces the first.
func TestRecoveryFileNeverReplaced(t *testing.T) {
	dir := t.TempDir()
	a, err := reserve(dir, "r.db.run-1.unstored")
	if err != nil {
		t.Fatal(err)
	}
	b, err := reserve(dir, "r.db.run-1.unstored")
	if err != nil {
		t.Fatal(err)
	}
	if a == b || filepath.Base(b) != "r.db.run-1.unstored-2.jsonl" {
		t.Errorf("reserved %s then %s", a, b)
	}
}

// A resumed run's recorder starts from what the store holds: its recovery
// file holds the run whole.
func TestRecorderResumeHoldsTheStoredRun(t *testing.T) {
	db, k, cases := recording(t, 50*time.Millisecond, RecordOptions{Wait: 100 * time.Millisecond})
	if err := k.AddRep(cases[0].ID, 0, repSamples(0, 1), nil); err != nil {
		t.Fatal(err)
	}
	if err := k.FinishRun(RunInterrupted); err != nil {
		t.Fatal(err)
	}
	k2, err := db.Resume(k.Run().ID, RecordOptions{Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := k2.Cases(); len(got) != 2 || got[0].RepsDone != 1 {
		t.Fatalf("resumed cases %+v", got)
	}
	holdLock(t, db.Path())
	err = k2.AddRep(cases[0].ID, 1, repSamples(1, 2), nil)
	var u *UnstoredError
	if !errors.As(err, &u) || u.File == "" {
		t.Fatalf("AddRep: %v", err)
	}
	if got := readRecovery(t, u.File).Reps(); got != 2 {
		t.Errorf("the recovery file holds %d repetitions, want 2", got)
	}
}

// FindRecord finds a peer run by the bytes it was read from (its suite
// hash) whatever its start, as well as by its start: a peer result read
// again from standard input, which has no modification time to date it,
// is dated by its import, later each time. Other samples, another tool or
// another hash are other runs.
func TestFindRecordBySuiteHash(t *testing.T) {
	db := openTemp(t)
	peer := func(start time.Time, hash, tool string, v float64) *RunRecord {
		return &RunRecord{Run: Run{SuiteName: "mlx_lm.benchmark", SuiteHash: hash, Tag: "mlx-lm", Kind: KindPeer, Status: RunComplete,
			ToolVersion: tool, StartedAt: start, EndedAt: start, Machine: Machine{Hostname: "h", CPUModel: "c"}},
			Cases: []CaseRecord{{Case: Case{Name: "bench", Key: "model/bench/batch=1", Kind: CaseModel, Params: map[string]string{"batch": "1"}, Status: CaseDone},
				Samples: []Sample{{Metric: "decode_tok_s", Unit: "tok/s", Value: v}}}}}
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	id, err := db.ImportRun(peer(t0, "abc", "mlx_lm.benchmark", 40))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		rec  *RunRecord
		want bool
	}{
		{"the same bytes, dated later", peer(t0.Add(time.Hour), "abc", "mlx_lm.benchmark", 40), true},
		{"the same start, no hash (stored before hashes)", peer(t0, "", "mlx_lm.benchmark", 40), true},
		{"the same bytes, other samples", peer(t0.Add(time.Hour), "abc", "mlx_lm.benchmark", 41), false},
		{"the same bytes, another tool", peer(t0.Add(time.Hour), "abc", "other", 40), false},
		{"other bytes, dated later", peer(t0.Add(time.Hour), "def", "mlx_lm.benchmark", 40), false},
		{"no hash, dated later", peer(t0.Add(time.Hour), "", "mlx_lm.benchmark", 40), false},
	} {
		got, ok, err := db.FindRecord(tc.rec, nil)
		if err != nil || ok != tc.want || ok && got != id {
			t.Errorf("%s: FindRecord = %d, %v, %v; want found %v", tc.what, got, ok, err, tc.want)
		}
	}
}
