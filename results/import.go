package results

import (
	"cmp"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ExportFormat tags every line of an export (and of a Recorder's recovery
// file), so import can refuse a file that is something else, and a later
// layout can be told apart. Version 2 closes the runs with an ExportEnd
// line; version 1 had none, so an export cut at a line's end read as one
// of fewer runs (docs/data.md, "What the store and `import` accept"). A field added to a line is a new
// version too: import refuses a field its format lacks as a misspelling.
const ExportFormat = "mtlbench-run/2"

// ExportFormatV1 is the format before the closing line: its exports import
// as they did, without one.
const ExportFormatV1 = "mtlbench-run/1"

// ExportLine is one line of an export: a run with its machine and
// provenance, its cases, samples and op timings.
type ExportLine struct {
	Format string `json:"format"`
	RunRecord
}

// ExportEnd is an export's closing line: how many runs, cases and samples
// the lines since the start (or the previous closing line, where exports
// were joined) hold, so that import tells a whole export from one cut short.
type ExportEnd struct {
	Runs    int `json:"runs"`
	Cases   int `json:"cases"`
	Samples int `json:"samples"`
}

// ExportEndLine is the closing line as written.
type ExportEndLine struct {
	Format string    `json:"format"`
	End    ExportEnd `json:"end"`
}

// Add counts rec into e.
func (e *ExportEnd) Add(rec *RunRecord) {
	e.Runs++
	e.Cases += len(rec.Cases)
	for _, c := range rec.Cases {
		e.Samples += len(c.Samples)
	}
}

// ExportWriter writes runs as export lines, then (Close) the closing line
// that counts them.
type ExportWriter struct {
	enc *json.Encoder
	end ExportEnd
}

// NewExportWriter writes an export to w.
func NewExportWriter(w io.Writer) *ExportWriter {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &ExportWriter{enc: enc}
}

// Write writes rec as one line.
func (x *ExportWriter) Write(rec *RunRecord) error {
	if err := x.enc.Encode(ExportLine{Format: ExportFormat, RunRecord: *rec}); err != nil {
		return err
	}
	x.end.Add(rec)
	return nil
}

// Close writes the closing line; w is the caller's to flush and close.
func (x *ExportWriter) Close() error {
	return x.enc.Encode(ExportEndLine{Format: ExportFormat, End: x.end})
}

// RunRecord is a whole run with everything measured in it: what `mtlbench
// export` writes one JSON line of, `import` reads back, and peer imports
// build. Field names are the JSON's (docs/data.md).
type RunRecord struct {
	Run   Run          `json:"run"`
	Cases []CaseRecord `json:"cases"`
}

// CaseRecord is one case with its samples, op timings and operand traffic.
type CaseRecord struct {
	Case     Case             `json:"case"`
	Samples  []Sample         `json:"samples"`
	Timings  []OpTiming       `json:"timings,omitempty"`
	Operands []OperandTraffic `json:"operands,omitempty"`
}

// ImportRun stores rec as a new run in one transaction (all of it or
// nothing), keeping its times, statuses and provenance as given: an
// imported run reads as it did where it was made. It returns the new run id
// and fills in rec's ids.
func (db *DB) ImportRun(rec *RunRecord) (int64, error) { return db.importRun(rec, 0) }

// ReplaceRun stores rec in place of run id, under the same id, in one
// transaction: the stored copy of a run that the record holds further on
// (an export taken mid-run, then the finished run's).
func (db *DB) ReplaceRun(id int64, rec *RunRecord) error {
	if id <= 0 {
		return fmt.Errorf("results: replace run %d: no such run", id)
	}
	_, err := db.importRun(rec, id)
	return err
}

// Reps counts the repetitions a record holds: each case's distinct
// repetitions, summed. Of two copies of one run, the one with more is
// further on.
func (rec *RunRecord) Reps() int {
	n := 0
	for _, c := range rec.Cases {
		seen := map[int]bool{}
		for _, s := range c.Samples {
			seen[s.Rep] = true
		}
		n += len(seen)
	}
	return n
}

// checkShape says what in rec no store can hold, naming the case: a kind,
// status or timing mode of no run, a case key missing or repeated, bad layer
// counts, a repetition of a metric recorded twice. Fields an older export
// leaves empty read as importRun fills them in.
func (rec *RunRecord) checkShape() error {
	r := &rec.Run
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	status := r.Status
	if status == "" || status == RunRunning {
		status = RunInterrupted
	}
	if err := oneOf("run status", status, RunComplete, RunInterrupted, RunFailed); err != nil {
		return err
	}
	if err := oneOf("run kind", or(r.Kind, KindSuite), KindSuite, KindPeer, KindTune); err != nil {
		return err
	}
	if err := oneOf("timing mode", or(r.TimingMode, TimingThroughput), TimingThroughput, TimingProfile); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range rec.Cases {
		cr := &rec.Cases[i]
		c := &cr.Case
		if err := oneOf("case kind", c.Kind, CaseModel, CaseKernel); err != nil {
			return fmt.Errorf("case %d %q: %w", i, c.Name, err)
		}
		key := or(c.Key, CanonicalKey(c.Params))
		if key == "" || seen[key] {
			return fmt.Errorf("case %d %q has no key or repeats one", i, c.Name)
		}
		if err := cmp.Or(CheckLine("name", c.Name), CheckLine("key", key)); err != nil {
			return fmt.Errorf("case %d: %w", i, err)
		}
		seen[key] = true
		if err := oneOf("case status", or(c.Status, CaseDone), CasePending, CaseDone, CaseFailed, CaseSkipped); err != nil {
			return fmt.Errorf("case %d %q: %w", i, c.Name, err)
		}
		if c.LayersRun < 0 || c.LayersTotal < 0 || c.LayersTotal > 0 && c.LayersRun > c.LayersTotal {
			return fmt.Errorf("case %d %q: bad layer counts %d of %d", i, c.Name, c.LayersRun, c.LayersTotal)
		}
		type rep struct {
			metric string
			rep    int
		}
		reps := map[rep]bool{}
		for j, s := range cr.Samples {
			if reps[rep{s.Metric, s.Rep}] {
				return fmt.Errorf("case %d %q sample %d: %s rep %d recorded twice", i, c.Name, j, s.Metric, s.Rep)
			}
			reps[rep{s.Metric, s.Rep}] = true
		}
	}
	return nil
}

func (db *DB) importRun(rec *RunRecord, replace int64) (int64, error) {
	r := &rec.Run
	if r.Status == "" || r.Status == RunRunning {
		// A run still running where it came from is not running here.
		r.Status = RunInterrupted
	}
	if r.Kind == "" {
		r.Kind = KindSuite
	}
	if r.TimingMode == "" {
		r.TimingMode = TimingThroughput
	}
	if r.StartedAt.IsZero() {
		return 0, fmt.Errorf("results: import: run has no start time")
	}
	for i := range rec.Cases {
		c := &rec.Cases[i].Case
		if c.Key == "" {
			c.Key = CanonicalKey(c.Params)
		}
		if c.Status == "" {
			c.Status = CaseDone
		}
	}
	if err := rec.checkShape(); err != nil {
		return 0, fmt.Errorf("results: import: %w", err)
	}
	ov := r.Overrides
	if ov == nil {
		ov = map[string]string{}
	}
	ovj, err := json.Marshal(ov)
	if err != nil {
		return 0, err
	}
	var bw, peak any
	if r.ReadBandwidthGBs > 0 {
		bw = r.ReadBandwidthGBs
	}
	if r.MatmulPeakGFLOPs > 0 {
		peak = r.MatmulPeakGFLOPs
	}
	var id int64
	err = db.tx(func(tx *sql.Tx) error {
		mid, err := machineID(tx, r.Machine)
		if err != nil {
			return err
		}
		var keep any // NULL: a new id
		if replace > 0 {
			res, err := tx.Exec(`DELETE FROM runs WHERE id = ?`, replace)
			if err != nil {
				return fmt.Errorf("results: replace run %d: %w", replace, err)
			}
			if err := mustAffect(res, "run", replace); err != nil {
				return err
			}
			keep = replace
		}
		res, err := tx.Exec(`INSERT INTO runs (id, suite_name, suite_path, suite_hash, tool_version, git_commit,
				tag, backend, timing_mode, machine_id, started_at, ended_at, status, kind, notes, emulated,
				overrides_json, tree_commit, read_bandwidth_gb_s, matmul_peak_gflop_s, threads, backend_notes)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			keep, r.SuiteName, r.SuitePath, r.SuiteHash, r.ToolVersion, strings.ToLower(r.GitCommit), r.Tag, r.Backend,
			r.TimingMode, mid, fmtTime(r.StartedAt), fmtTime(r.EndedAt), r.Status, r.Kind, r.Notes, r.Emulated,
			string(ovj), strings.ToLower(r.TreeCommit), bw, peak, r.Threads, r.BackendNotes)
		if err != nil {
			return fmt.Errorf("results: import run: %w", err)
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
		for i := range rec.Cases {
			cr := &rec.Cases[i]
			c := &cr.Case
			params := c.Params
			if params == nil {
				params = map[string]string{}
			}
			pj, err := json.Marshal(params)
			if err != nil {
				return err
			}
			// The repetitions stored: what a resume would count as done.
			reps := map[int]bool{}
			for _, sm := range cr.Samples {
				reps[sm.Rep] = true
			}
			c.RepsDone = len(reps)
			res, err := tx.Exec(`INSERT INTO cases (run_id, case_key, name, kind, seq, params_json, status, error,
					started_at, ended_at, layers_run, layers_total, reps_done)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				id, c.Key, c.Name, c.Kind, i, string(pj), c.Status, c.Error, fmtTime(c.StartedAt), fmtTime(c.EndedAt),
				nullIfZero(c.LayersRun, c.LayersTotal), nullIfZero(c.LayersTotal, c.LayersRun), c.RepsDone)
			if err != nil {
				return fmt.Errorf("results: import case %q: %w", c.Key, err)
			}
			cid, err := res.LastInsertId()
			if err != nil {
				return err
			}
			for k, v := range params {
				if _, err := tx.Exec(`INSERT INTO case_params (case_id, name, value, value_num) VALUES (?, ?, ?, ?)`,
					cid, k, v, numeric(v)); err != nil {
					return fmt.Errorf("results: import case %q param %q: %w", c.Key, k, err)
				}
			}
			if err := insertSamples(tx, cid, cr.Samples); err != nil {
				return err
			}
			if err := insertTimings(tx, cid, cr.Timings); err != nil {
				return err
			}
			if err := insertOperands(tx, cid, cr.Operands); err != nil {
				return err
			}
			c.ID, c.RunID, c.Seq = cid, id, i
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	r.ID = id
	r.StartedAt = r.StartedAt.UTC().Truncate(time.Microsecond)
	return id, nil
}

// ExportRun reads a run back as a record, for `mtlbench export`.
func (db *DB) ExportRun(id int64) (*RunRecord, error) {
	r, err := db.GetRun(id)
	if err != nil {
		return nil, err
	}
	cases, err := db.Cases(id)
	if err != nil {
		return nil, err
	}
	samples, err := db.RunSamples(id)
	if err != nil {
		return nil, err
	}
	rec := &RunRecord{Run: *r}
	for _, c := range cases {
		t, err := db.OpTimings(c.ID)
		if err != nil {
			return nil, err
		}
		ops, err := db.OperandTraffic(c.ID)
		if err != nil {
			return nil, err
		}
		rec.Cases = append(rec.Cases, CaseRecord{Case: c, Samples: samples[c.ID], Timings: t, Operands: ops})
	}
	return rec, nil
}

// FindRun returns the id of a stored run that is rec at this or another
// point (the same start time, suite, tag, commit and machine, and one copy
// holding every case and sample of the other: an export taken while it ran
// is the finished run's beginning), for imports that must not store a run
// twice; the oldest when several are. Runs that share only their start
// (peer results dated by their files, a sweep's runs begun in one second)
// are two runs.
//
// Cases are matched by their keys as keys reads them (FindRecord); nil
// keys matches them as stored.
func (db *DB) FindRun(rec *RunRecord, keys KeyReader) (int64, bool, error) {
	ids, err := db.sameRuns(&rec.Run, "started_at", fmtTime(rec.Run.StartedAt))
	if err != nil {
		return 0, false, err
	}
	for i := len(ids) - 1; i >= 0; i-- {
		got, err := db.ExportRun(ids[i])
		if err != nil {
			return 0, false, err
		}
		if rec.within(got, keys) || got.within(rec, keys) {
			return ids[i], true, nil
		}
	}
	return 0, false, nil
}

// within reports whether every case of rec is one of other's and every
// sample of rec is other's, of the same case, repetition and metric, with
// the same value.
func (rec *RunRecord) within(other *RunRecord, keys KeyReader) bool {
	type at struct {
		key, metric string
		rep         int
	}
	have := map[at]float64{}
	in := map[string]bool{}
	otherKeys := other.caseKeys(keys)
	for i, c := range other.Cases {
		in[otherKeys[i]] = true
		for _, s := range c.Samples {
			have[at{otherKeys[i], s.Metric, s.Rep}] = s.Value
		}
	}
	for i, key := range rec.caseKeys(keys) {
		if !in[key] {
			return false
		}
		for _, s := range rec.Cases[i].Samples {
			if v, ok := have[at{key, s.Metric, s.Rep}]; !ok || v != s.Value {
				return false
			}
		}
	}
	return true
}

// sameRuns are the stored runs of r's suite, tag, commit and machine whose
// column col (started_at or suite_hash, never a caller's text) is v,
// newest first.
func (db *DB) sameRuns(r *Run, col string, v any) ([]int64, error) {
	hash, _, err := machineHash(r.Machine)
	if err != nil {
		return nil, err
	}
	return db.runIDs(`WHERE `+col+` = ? AND suite_name = ? AND tag = ? AND git_commit = ?
		AND machine_id IN (SELECT id FROM machines WHERE content_hash = ?)`, 0,
		v, r.SuiteName, r.Tag, strings.ToLower(r.GitCommit), hash)
}

// FindRecord returns the id of a stored run that is rec: the same suite,
// tag, commit and machine, the same tool, and the same cases with the same
// samples, and either the same start or, where rec has a suite hash, the
// same one; for a peer's results, which carry no run of their own to
// resume. A peer import's suite hash is that of the bytes it read, so the
// same input imported again is found however it was dated: by a copy's
// modification time, or by the time of its import where standard input
// gave it, which has none. Runs that share only their start (files dated
// by their modification time, a sweep's runs begun in one second) are two
// runs. Cases are matched by their keys as keys reads them, given each
// case's key and parameters (suites.RunKeys: a peer result imported before
// a keying rule changed is the same result imported again now); nil keys
// matches them as stored.
func (db *DB) FindRecord(rec *RunRecord, keys KeyReader) (int64, bool, error) {
	r := &rec.Run
	ids, err := db.sameRuns(r, "started_at", fmtTime(r.StartedAt))
	if err != nil {
		return 0, false, err
	}
	if r.SuiteHash != "" {
		more, err := db.sameRuns(r, "suite_hash", r.SuiteHash)
		if err != nil {
			return 0, false, err
		}
		ids = append(ids, more...)
	}
	want := rec.content(keys)
	for _, id := range ids {
		got, err := db.ExportRun(id)
		if err != nil {
			return 0, false, err
		}
		if got.Run.ToolVersion == r.ToolVersion && got.content(keys) == want {
			return id, true, nil
		}
	}
	return 0, false, nil
}

// caseKeys are rec's case keys (of its parameters where a case of an
// older export has none), as keys reads them where it is not nil.
func (rec *RunRecord) caseKeys(keys KeyReader) []string {
	ks := make([]string, len(rec.Cases))
	ps := make([]map[string]string, len(rec.Cases))
	for i, c := range rec.Cases {
		ks[i], ps[i] = cmp.Or(c.Case.Key, CanonicalKey(c.Case.Params)), c.Case.Params
	}
	if keys != nil {
		ks = keys(ks, ps)
	}
	return ks
}

// KeyReader reads one run's case keys as cases are keyed now, given each
// case's stored key and recorded parameters (suites.RunKeys); the store
// keeps the keys as they were written.
type KeyReader func(keys []string, params []map[string]string) []string

// Rekey sets the keys of one run's cases as read reads them, so a run
// stored before a keying rule changed names its cases as a new run does.
func (read KeyReader) Rekey(cases []Case) {
	keys := make([]string, len(cases))
	params := make([]map[string]string, len(cases))
	for i, c := range cases {
		keys[i], params[i] = c.Key, c.Params
	}
	for i, k := range read(keys, params) {
		cases[i].Key = k
	}
}

// content is what a run measured, for telling two runs of one start apart:
// its cases' keys (as keys reads them, where it is not nil) and their
// samples, in a fixed order.
func (rec *RunRecord) content(keys KeyReader) string {
	cases := slices.Clone(rec.Cases)
	for i, k := range rec.caseKeys(keys) {
		cases[i].Case.Key = k
	}
	slices.SortFunc(cases, func(a, b CaseRecord) int { return strings.Compare(a.Case.Key, b.Case.Key) })
	var b strings.Builder
	for _, c := range cases {
		b.WriteString(c.Case.Key)
		b.WriteByte(0)
		ss := slices.Clone(c.Samples)
		slices.SortFunc(ss, func(x, y Sample) int {
			if d := cmp.Compare(x.Rep, y.Rep); d != 0 {
				return d
			}
			if d := strings.Compare(x.Metric, y.Metric); d != 0 {
				return d
			}
			return cmp.Compare(x.Value, y.Value)
		})
		for _, x := range ss {
			fmt.Fprintf(&b, "%d %s %s\x00", x.Rep, x.Metric, strconv.FormatFloat(x.Value, 'g', -1, 64))
		}
		b.WriteByte(1)
	}
	return b.String()
}

// UnsetSample says which sample of data (JSON holding cases[].samples[]: an
// export line, a peer run of mtlbench's format) has no rep, metric or
// value, or null for one, naming its case by names (in order): decoded,
// each reads as its zero, a figure never measured. data must have decoded
// whole already; UnsetSample looks at nothing else.
func UnsetSample(data []byte, names []string) error {
	var raw struct {
		Cases []struct {
			Samples []struct {
				Rep    json.RawMessage `json:"rep"`
				Metric json.RawMessage `json:"metric"`
				Value  json.RawMessage `json:"value"`
			} `json:"samples"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil
	}
	for i, c := range raw.Cases {
		name := ""
		if i < len(names) {
			name = names[i]
		}
		for j, s := range c.Samples {
			for _, f := range []struct {
				name string
				v    json.RawMessage
			}{{"rep", s.Rep}, {"metric", s.Metric}, {"value", s.Value}} {
				what := ""
				switch {
				case f.v == nil:
					what = "has no " + f.name
				case string(f.v) == "null":
					what = "has null for its " + f.name
				}
				if what != "" {
					return fmt.Errorf("case %d %q sample %d %s (cases.samples.%s): a sample is read only whole", i, name, j, what, f.name)
				}
			}
		}
	}
	return nil
}
