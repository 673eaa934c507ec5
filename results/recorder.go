package results

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mtlbench/mtlbench/internal/atomicfile"
)

// DefaultWait is how long a Recorder's write waits in all for a lock
// another process holds on the store before the run stops: long enough for
// another process's import or a sqlite3 session's short transaction.
const DefaultWait = 2 * time.Minute

// stopGrace is how long a write in hand may still take once the run is
// stopped before the recovery file is written: a store that answers
// commits in milliseconds, and needs no file.
const stopGrace = 500 * time.Millisecond

// RecordOptions are how a Recorder waits for a store another process holds.
type RecordOptions struct {
	// Wait is how long one write waits in all for a lock another process
	// holds, in turns of the store's busy timeout (0: DefaultWait).
	Wait time.Duration
	// Context, once done (Ctrl-C), ends a wait: what was measured is
	// written to the recovery file before the turn in hand ends, so that a
	// second signal, which kills, loses nothing.
	Context context.Context
	// Note, when set, is told when a write starts waiting, and why.
	Note func(string)
}

func (o RecordOptions) wait() time.Duration {
	if o.Wait > 0 {
		return o.Wait
	}
	return DefaultWait
}

// Recorder stores one run as it is measured and keeps in memory the whole
// run it stored: when the store refuses a write (a lock held past the
// wait, a full disk, a file made read-only, removed or replaced), what the
// run measured is written to a recovery file beside the database, in
// `mtlbench export`'s format, and the error (an *UnstoredError) names the
// file and the command that imports it. Once the store has refused a
// write, the recorder leaves it alone: later writes update the file.
type Recorder struct {
	db *DB
	o  RecordOptions

	mu   sync.Mutex
	rec  RunRecord
	byID map[int64]int // case id -> index in rec.Cases
	// lost: a write holding measurements did not reach the store.
	lost    bool
	refused *UnstoredError
	file    string // the recovery file, once written
	waited  time.Duration
}

// Record stores r as a new run (CreateRun, waiting as the recorder's
// writes do) and returns its recorder.
func (db *DB) Record(r *Run, o RecordOptions) (*Recorder, error) { return db.RecordCases(r, nil, o) }

// RecordCases is Record storing the run's cases too, pending (AddCases),
// in the same transaction: a store that fails between the two leaves no
// run without its cases, which would read as one that measured nothing
// and has nothing to resume.
func (db *DB) RecordCases(r *Run, cases []Case, o RecordOptions) (*Recorder, error) {
	k := &Recorder{db: db, o: o, byID: map[int64]int{}}
	err := k.store(false, func() error {
		return db.Batch(func(b *DB) error {
			if _, err := b.CreateRun(r); err != nil {
				return err
			}
			if len(cases) == 0 {
				return nil
			}
			return b.AddCases(r.ID, cases)
		})
	})
	if err != nil {
		return nil, err
	}
	k.rec.Run = *r
	k.rec.Run.Overrides = maps.Clone(r.Overrides)
	for i, c := range cases {
		c.Params = maps.Clone(c.Params)
		k.rec.Cases = append(k.rec.Cases, CaseRecord{Case: c})
		k.byID[c.ID] = i
	}
	return k, nil
}

// Resume claims run id (ResumeRun) and returns its recorder, which holds
// what the store holds of the run: a recovery file then holds the run
// whole, the repetitions stored before as well.
func (db *DB) Resume(id int64, o RecordOptions) (*Recorder, error) {
	k := &Recorder{db: db, o: o, byID: map[int64]int{}}
	if err := k.store(false, func() error { return db.ResumeRun(id) }); err != nil {
		return nil, err
	}
	rec, err := db.ExportRun(id)
	if err != nil {
		return nil, err
	}
	k.rec = *rec
	for i, c := range k.rec.Cases {
		k.byID[c.Case.ID] = i
	}
	return k, nil
}

// Run is the run as recorded.
func (k *Recorder) Run() *Run {
	k.mu.Lock()
	defer k.mu.Unlock()
	r := k.rec.Run
	return &r
}

// Cases are the run's cases as recorded, in order.
func (k *Recorder) Cases() []Case {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]Case, len(k.rec.Cases))
	for i, c := range k.rec.Cases {
		out[i] = c.Case
		out[i].Params = maps.Clone(c.Case.Params)
	}
	return out
}

// Recovery is the recovery file the recorder wrote, "" when none.
func (k *Recorder) Recovery() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.file
}

// AddCases adds cases to the run as DB.AddCases does, filling in their ids.
func (k *Recorder) AddCases(cases []Case) error {
	for i := range cases {
		c := &cases[i]
		if err := oneOf("case kind", c.Kind, CaseModel, CaseKernel); err != nil {
			return fmt.Errorf("%w (case %d %q)", err, i, c.Name)
		}
		if c.Key == "" {
			c.Key = CanonicalKey(c.Params)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	first := len(k.rec.Cases)
	for _, c := range cases {
		c.Params = maps.Clone(c.Params)
		c.Status, c.Error, c.RunID = CasePending, "", k.rec.Run.ID
		k.rec.Cases = append(k.rec.Cases, CaseRecord{Case: c})
	}
	return k.write(false, func() error { return k.db.AddCases(k.rec.Run.ID, cases) }, func() {
		for i := range cases {
			k.rec.Cases[first+i].Case.ID, k.rec.Cases[first+i].Case.Seq = cases[i].ID, cases[i].Seq
			k.byID[cases[i].ID] = first + i
		}
	})
}

// AddFinishedCases adds cases that have run, each with its samples, op
// timings and operand traffic and its status (done, failed or skipped,
// with its error), in one transaction: a tune's bucket.
func (k *Recorder) AddFinishedCases(recs []CaseRecord) error {
	measured := false
	for i := range recs {
		c := &recs[i].Case
		if err := oneOf("case kind", c.Kind, CaseModel, CaseKernel); err != nil {
			return fmt.Errorf("%w (case %d %q)", err, i, c.Name)
		}
		if err := oneOf("case status", c.Status, CaseDone, CaseFailed, CaseSkipped); err != nil {
			return fmt.Errorf("%w (case %d %q)", err, i, c.Name)
		}
		if c.Key == "" {
			c.Key = CanonicalKey(c.Params)
		}
		if err := checkRows(0, recs[i].Samples, recs[i].Timings, recs[i].Operands); err != nil {
			return fmt.Errorf("case %q: %w", c.Name, err)
		}
		measured = measured || len(recs[i].Samples) > 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	first := len(k.rec.Cases)
	t := now()
	for _, r := range recs {
		r.Case.Params = maps.Clone(r.Case.Params)
		r.Case.RunID, r.Case.StartedAt, r.Case.EndedAt = k.rec.Run.ID, t, t
		k.rec.Cases = append(k.rec.Cases, r)
	}
	cases := make([]Case, len(recs))
	for i, r := range recs {
		cases[i] = r.Case
	}
	store := func() error {
		return k.db.Batch(func(b *DB) error {
			if err := b.AddCases(k.rec.Run.ID, cases); err != nil {
				return err
			}
			for i, r := range recs {
				var err error
				switch r.Case.Status {
				case CaseDone:
					err = b.FinishCase(cases[i].ID, r.Samples, r.Timings, r.Case.LayersRun, r.Case.LayersTotal, r.Operands...)
				case CaseFailed:
					err = b.FailCase(cases[i].ID, r.Case.Error)
				default:
					err = b.SkipCase(cases[i].ID, r.Case.Error)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	return k.write(measured, store, func() {
		for i := range recs {
			recs[i].Case.ID, recs[i].Case.RunID, recs[i].Case.Seq = cases[i].ID, cases[i].RunID, cases[i].Seq
			k.rec.Cases[first+i].Case.ID, k.rec.Cases[first+i].Case.Seq = cases[i].ID, cases[i].Seq
			k.byID[cases[i].ID] = first + i
		}
	})
}

// caseRec is the recorded case of id.
func (k *Recorder) caseRec(id int64) (*CaseRecord, error) {
	i, ok := k.byID[id]
	if !ok {
		return nil, fmt.Errorf("results: case %d is not of run %d: %w", id, k.rec.Run.ID, ErrNotFound)
	}
	return &k.rec.Cases[i], nil
}

// addRows checks a case's new rows and adds them to the run kept in
// memory (k.mu held).
func (k *Recorder) addRows(caseID int64, samples []Sample, timings []OpTiming, operands []OperandTraffic) (*CaseRecord, error) {
	if err := checkRows(caseID, samples, timings, operands); err != nil {
		return nil, err
	}
	c, err := k.caseRec(caseID)
	if err != nil {
		return nil, err
	}
	c.Samples = append(c.Samples, samples...)
	c.Timings = append(c.Timings, timings...)
	c.Operands = append(c.Operands, operands...)
	if c.Case.StartedAt.IsZero() {
		c.Case.StartedAt = now()
	}
	return c, nil
}

// AddRep stores one finished repetition as DB.AddRep does.
func (k *Recorder) AddRep(caseID int64, rep int, samples []Sample, timings []OpTiming, operands ...OperandTraffic) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, err := k.addRows(caseID, samples, timings, operands)
	if err != nil {
		return err
	}
	c.Case.RepsDone = rep + 1
	return k.write(len(samples)+len(timings)+len(operands) > 0,
		func() error { return k.db.AddRep(caseID, rep, samples, timings, operands...) }, nil)
}

// FinishCase stores a case's last samples and marks it done, as
// DB.FinishCase does.
func (k *Recorder) FinishCase(caseID int64, samples []Sample, timings []OpTiming, layersRun, layersTotal int, operands ...OperandTraffic) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, err := k.addRows(caseID, samples, timings, operands)
	if err != nil {
		return err
	}
	c.Case.Status, c.Case.Error, c.Case.EndedAt = CaseDone, "", now()
	c.Case.LayersRun, c.Case.LayersTotal = layersRun, layersTotal
	return k.write(len(samples)+len(timings)+len(operands) > 0,
		func() error {
			return k.db.FinishCase(caseID, samples, timings, layersRun, layersTotal, operands...)
		}, nil)
}

// FailCase marks a case failed, as DB.FailCase does.
func (k *Recorder) FailCase(caseID int64, msg string) error {
	return k.outcome(caseID, CaseFailed, msg, k.db.FailCase)
}

// SkipCase marks a case skipped, as DB.SkipCase does.
func (k *Recorder) SkipCase(caseID int64, reason string) error {
	return k.outcome(caseID, CaseSkipped, reason, k.db.SkipCase)
}

func (k *Recorder) outcome(caseID int64, status, msg string, store func(int64, string) error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, err := k.caseRec(caseID)
	if err != nil {
		return err
	}
	t := now()
	if c.Case.StartedAt.IsZero() {
		c.Case.StartedAt = t
	}
	c.Case.Status, c.Case.Error, c.Case.EndedAt = status, msg, t
	return k.write(false, func() error { return store(caseID, msg) }, nil)
}

// SetCaseParams sets parameters of a case, as DB.SetCaseParams does.
func (k *Recorder) SetCaseParams(caseID int64, set map[string]string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, err := k.caseRec(caseID)
	if err != nil {
		return err
	}
	if c.Case.Params == nil {
		c.Case.Params = map[string]string{}
	}
	maps.Copy(c.Case.Params, set)
	return k.write(false, func() error { return k.db.SetCaseParams(caseID, set) }, nil)
}

// FinishRun sets the run's final status, as DB.FinishRun does.
func (k *Recorder) FinishRun(status string) error {
	if err := oneOf("final run status", status, RunComplete, RunInterrupted, RunFailed); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rec.Run.Status, k.rec.Run.EndedAt = status, now()
	return k.write(false, func() error { return k.db.FinishRun(k.rec.Run.ID, status) }, nil)
}

// write stores a change already made to the record (measured: one that
// holds measurements), waiting out a busy store; stored, when set, runs
// once the store took it. A store that refuses has the record written to
// the recovery file. k.mu is held.
func (k *Recorder) write(measured bool, store func() error, stored func()) error {
	if k.refused != nil {
		// The store refused already: the recovery file is the record now.
		k.lost = k.lost || measured
		return k.refuse(k.refused.Err)
	}
	err := k.store(measured, store)
	if err == nil {
		// A file removed or replaced under SQLite takes writes that are lost with it.
		err = k.db.checkFile()
	}
	switch {
	case err == nil:
		if stored != nil {
			stored()
		}
		return nil
	case !FromStore(err):
		return err
	}
	if measured || errors.Is(err, ErrStoreMoved) && k.rec.Reps() > 0 {
		k.lost = true
	}
	return k.refuse(err)
}

// store runs f, again while the store is busy, for up to the wait; when
// the context ends meanwhile it writes the recovery file (measured: f
// holds measurements) before it waits for f's turn in hand to end, and
// tries no more. k.mu is held, or k is not yet shared.
func (k *Recorder) store(measured bool, f func() error) error {
	start := time.Now()
	defer func() { k.waited = time.Since(start) }()
	var stop <-chan struct{}
	if k.o.Context != nil {
		stop = k.o.Context.Done()
	}
	noted := false
	for {
		done := make(chan error, 1)
		go func() { done <- f() }()
		var err error
		select {
		case err = <-done:
		case <-stop:
			select {
			case err = <-done:
			case <-time.After(stopGrace):
				err = k.keepWhileStopping(measured, done)
			}
			return err
		}
		if err == nil || !isBusy(err) || time.Since(start) >= k.o.wait() {
			return err
		}
		if !noted && k.o.Note != nil {
			noted = true
			k.o.Note(fmt.Sprintf("the results database %s has been locked by another process for %v; waiting up to %v in all for it "+
				"(Ctrl-C stops the run; what it measured is kept either way)", k.db.path, roundTime(time.Since(start)), roundTime(k.o.wait())))
		}
		select {
		case <-stop:
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// keepWhileStopping writes the recovery file while the write done will
// answer is still waiting on the store, then waits for it: the file goes
// again when the write is stored after all.
func (k *Recorder) keepWhileStopping(measured bool, done <-chan error) error {
	if !measured && !k.lost || k.rec.Run.ID == 0 {
		return <-done
	}
	path, ferr := k.keep()
	if k.o.Note != nil {
		if ferr == nil {
			k.o.Note(fmt.Sprintf("stopping while the results database %s is busy: what the run measured is kept in %s; "+
				"waiting up to %v for the store's answer (a second Ctrl-C quits now, the file keeps it)", k.db.path, path, roundTime(k.db.busy)))
		} else {
			k.o.Note(fmt.Sprintf("stopping while the results database %s is busy, and what the run measured could not be kept in a file: %v; "+
				"waiting up to %v for the store's answer", k.db.path, ferr, roundTime(k.db.busy)))
		}
	}
	err := <-done
	if err == nil && ferr == nil {
		os.Remove(path)
		k.file = ""
	}
	return err
}

// refuse records that the store refused err and writes the recovery file
// when the store lacks something measured.
func (k *Recorder) refuse(err error) error {
	u := &UnstoredError{Err: err, DB: k.db.path, Waited: k.waited}
	if k.refused != nil {
		u.Waited = k.refused.Waited
	}
	if k.lost {
		u.File, u.FileErr = k.keep()
	}
	k.refused = u
	return u
}

// keep writes the record to the recovery file: beside the database, named
// after the run, else in the temporary folder (the database's folder full
// or not writable); an earlier recovery file of the run is never
// overwritten.
func (k *Recorder) keep() (string, error) {
	var buf strings.Builder
	x := NewExportWriter(&buf)
	if err := x.Write(&k.rec); err != nil {
		return "", err
	}
	if err := x.Close(); err != nil {
		return "", err
	}
	write := func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		if _, err := bw.WriteString(buf.String()); err != nil {
			return err
		}
		return bw.Flush()
	}
	if k.file != "" {
		if err := atomicfile.Write(k.file, write); err == nil {
			return k.file, nil
		}
	}
	var errs []error
	for _, dir := range []string{filepath.Dir(k.db.path), os.TempDir()} {
		path, err := reserve(dir, fmt.Sprintf("%s.run-%d.unstored", filepath.Base(k.db.path), k.rec.Run.ID))
		if err == nil {
			if err = atomicfile.Write(path, write); err == nil {
				k.file = path
				return path, nil
			}
			os.Remove(path)
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}

// reserve creates dir/name.jsonl, else name-2.jsonl and so on, empty, for
// the caller to write: the first free name.
func reserve(dir, name string) (string, error) {
	for n := 1; ; n++ {
		path := filepath.Join(dir, name+".jsonl")
		if n > 1 {
			path = filepath.Join(dir, name+"-"+strconv.Itoa(n)+".jsonl")
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) && n < 1000 {
			continue
		}
		if err != nil {
			return "", err
		}
		return path, f.Close()
	}
}

// UnstoredError is a Recorder's error when the store refused a write: Err
// is the store's, File the recovery file holding the run as recorded (what
// the store took and what it did not), "" when the store lacks nothing
// measured or the file could not be written (FileErr says why).
type UnstoredError struct {
	Err     error
	DB      string
	File    string
	FileErr error
	// Waited is how long the refused write waited for the store.
	Waited time.Duration
}

func (e *UnstoredError) Error() string {
	switch {
	case e.File != "":
		return fmt.Sprintf("%v; nothing measured is lost: the run, with what the store did not take, is in %s; `%s` stores it (before any --resume, which would measure it again)",
			e.Err, e.File, e.ImportCommand())
	case e.FileErr != nil:
		return fmt.Sprintf("%v; what the store did not take could not be kept in a file either: %v", e.Err, e.FileErr)
	}
	return e.Err.Error()
}

func (e *UnstoredError) Unwrap() error { return e.Err }

// ImportCommand is the command that stores the recovery file into the
// database the run was recorded in.
func (e *UnstoredError) ImportCommand() string {
	return "mtlbench import --db " + shellWord(e.DB) + " " + shellWord(e.File)
}

// roundTime is d as a person reads it: whole seconds, or milliseconds
// under one.
func roundTime(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// shellWord quotes a word a shell would split or expand.
func shellWord(a string) string {
	if a == "" || strings.ContainsAny(a, " \t'\"$*?;&|<>()`\\#~!{}[]") {
		return strconv.Quote(a)
	}
	return a
}
