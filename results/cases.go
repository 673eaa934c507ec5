package results

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mtlbench/mtlbench/internal/plural"
)

// Case statuses.
const (
	CasePending = "pending"
	CaseDone    = "done"
	CaseFailed  = "failed"
	CaseSkipped = "skipped"
)

// Case kinds.
const (
	CaseModel  = "model"
	CaseKernel = "kernel"
)

// Op timing components.
const (
	CompAttention = "attention"
	CompMoE       = "moe"
	CompMLP       = "mlp"
	CompNorm      = "norm"
	CompOther     = "other"
)

// Case is one measured configuration of a run. Key is the canonical string
// of its parameters (CanonicalKey(Params) when left empty). LayersRun and
// LayersTotal are 0 when the case is not a layer-limited model case.
type Case struct {
	ID          int64             `json:"id"`
	RunID       int64             `json:"run_id"`
	Key         string            `json:"key"`
	Name        string            `json:"name"`
	Kind        string            `json:"kind"`
	Seq         int               `json:"seq"`
	Params      map[string]string `json:"params"`
	Status      string            `json:"status"`
	Error       string            `json:"error,omitempty"`
	LayersRun   int               `json:"layers_run,omitempty"`
	LayersTotal int               `json:"layers_total,omitempty"`
	StartedAt   time.Time         `json:"started_at"`
	EndedAt     time.Time         `json:"ended_at"`
	// RepsDone counts the repetitions whose samples are stored (AddRep):
	// a resumed case runs only the ones after them.
	RepsDone int `json:"reps_done,omitempty"`
}

// Sample is one measurement of one repetition (Rep counts from 0).
type Sample struct {
	Rep    int     `json:"rep"`
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
}

// OpTiming is the time one op took in one repetition. Layer is -1 for ops
// outside the transformer layers.
type OpTiming struct {
	Rep       int     `json:"rep"`
	Layer     int     `json:"layer"`
	Component string  `json:"component"`
	Op        string  `json:"op"`
	Seconds   float64 `json:"seconds"`
	Calls     int     `json:"calls"`
	// Bytes and Footprint are what a cost witness (the Metal emulator)
	// counted the op moving, every access and the distinct bytes, a step
	// as Seconds is; 0 where nothing was counted.
	Bytes     int64 `json:"bytes,omitempty"`
	Footprint int64 `json:"footprint,omitempty"`
	// CriticalLoads are the loads of each of the op's dispatches' busiest
	// simdgroup, summed, as the same witness counted them.
	CriticalLoads int64 `json:"critical_loads,omitempty"`
}

// OperandTraffic is what a cost witness (the Metal emulator) counted one
// buffer argument of one kernel moving in a repetition: in a kernel case's
// call, or in a model case's decode step (the mean over its steps), every
// access and the distinct bytes. Read over DistinctRead is how often the
// kernel re-read the operand (docs/msl-subset.md).
type OperandTraffic struct {
	Rep int `json:"rep"`
	// Kernel is the kernel's function name, Operand its parameter name
	// ("x", "w"), names joined with "+" for arguments bound at one address.
	Kernel          string `json:"kernel"`
	Operand         string `json:"operand"`
	Read            int64  `json:"read"`
	Written         int64  `json:"written"`
	DistinctRead    int64  `json:"distinct_read"`
	DistinctWritten int64  `json:"distinct_written"`
}

// CanonicalKey is the canonical text of a parameter set: name=value pairs
// sorted by name, comma-separated, with a value quoted (Go syntax) when it
// holds a character that would make the text ambiguous. Equal maps give
// equal keys, different maps different keys.
func CanonicalKey(params map[string]string) string {
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(quoteIfNeeded(k))
		b.WriteByte('=')
		b.WriteString(quoteIfNeeded(params[k]))
	}
	return b.String()
}

func quoteIfNeeded(s string) string {
	odd := func(r rune) bool {
		return r == ',' || r == '=' || r == '"' || r == '\\' || r == utf8.RuneError ||
			unicode.IsSpace(r) || unicode.IsControl(r)
	}
	if s == "" || strings.IndexFunc(s, odd) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// numeric is value_num: the parameter as a number when it is a finite one.
func numeric(v string) any {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil
	}
	return f
}

// AddCases inserts cases as pending, with their parameters, in one
// transaction. It fills in each case's ID, RunID, Status, Key (when empty)
// and Seq (the order of insertion within the run, continuing after cases
// added earlier).
func (db *DB) AddCases(runID int64, cases []Case) error {
	for i := range cases {
		c := &cases[i]
		if err := oneOf("case kind", c.Kind, CaseModel, CaseKernel); err != nil {
			return fmt.Errorf("%w (case %d %q)", err, i, c.Name)
		}
		if c.Key == "" {
			c.Key = CanonicalKey(c.Params)
		}
		if c.Key == "" {
			return fmt.Errorf("results: case %d %q has neither a key nor parameters", i, c.Name)
		}
		if c.LayersRun < 0 || c.LayersTotal < 0 || c.LayersTotal > 0 && c.LayersRun > c.LayersTotal {
			return fmt.Errorf("results: case %d %q: bad layer counts %d of %d", i, c.Name, c.LayersRun, c.LayersTotal)
		}
	}
	ids := make([]int64, len(cases))
	var base int
	err := db.tx(func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM runs WHERE id = ?`, runID).Scan(&n); err != nil {
			return fmt.Errorf("results: add cases: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("results: add cases: run %d: %w", runID, ErrNotFound)
		}
		if err := tx.QueryRow(`SELECT coalesce(max(seq) + 1, 0) FROM cases WHERE run_id = ?`, runID).Scan(&base); err != nil {
			return fmt.Errorf("results: add cases: %w", err)
		}
		// The layer counts are stored with the case, not only when it is
		// done: the repetitions of an interrupted run are a truncated
		// model's figures too.
		insCase, err := tx.Prepare(`INSERT INTO cases (run_id, case_key, name, kind, seq, params_json, status, layers_run, layers_total)
			VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)`)
		if err != nil {
			return fmt.Errorf("results: add cases: %w", err)
		}
		defer insCase.Close()
		insParam, err := tx.Prepare(`INSERT INTO case_params (case_id, name, value, value_num) VALUES (?, ?, ?, ?)`)
		if err != nil {
			return fmt.Errorf("results: add cases: %w", err)
		}
		defer insParam.Close()
		for i, c := range cases {
			params := c.Params
			if params == nil {
				params = map[string]string{}
			}
			pj, err := json.Marshal(params)
			if err != nil {
				return fmt.Errorf("results: case %q params: %w", c.Key, err)
			}
			res, err := insCase.Exec(runID, c.Key, c.Name, c.Kind, base+i, string(pj),
				nullIfZero(c.LayersRun, c.LayersTotal), nullIfZero(c.LayersTotal, c.LayersRun))
			if err != nil {
				if strings.Contains(err.Error(), "UNIQUE") {
					return fmt.Errorf("results: run %d already has a case with key %q", runID, c.Key)
				}
				return fmt.Errorf("results: add case %q: %w", c.Key, err)
			}
			if ids[i], err = res.LastInsertId(); err != nil {
				return err
			}
			for k, v := range c.Params {
				if _, err := insParam.Exec(ids[i], k, v, numeric(v)); err != nil {
					return fmt.Errorf("results: add case %q param %q: %w", c.Key, k, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Only touch the caller's slice once the rows are really there.
	for i := range cases {
		cases[i].ID, cases[i].RunID, cases[i].Seq = ids[i], runID, base+i
		cases[i].Status, cases[i].Error = CasePending, ""
	}
	return nil
}

const caseSelect = `SELECT id, run_id, case_key, name, kind, seq, params_json, status, error,
	coalesce(layers_run, 0), coalesce(layers_total, 0), started_at, ended_at, reps_done FROM cases`

func scanCase(s scanner) (Case, error) {
	var (
		c              Case
		pj             string
		started, ended sql.NullString
	)
	err := s.Scan(&c.ID, &c.RunID, &c.Key, &c.Name, &c.Kind, &c.Seq, &pj, &c.Status, &c.Error,
		&c.LayersRun, &c.LayersTotal, &started, &ended, &c.RepsDone)
	if err != nil {
		return c, unreadable(err)
	}
	if err := json.Unmarshal([]byte(pj), &c.Params); err != nil {
		return c, unreadable(fmt.Errorf("results: case %d params_json: %w", c.ID, err))
	}
	if c.StartedAt, err = parseTime(started); err != nil {
		return c, unreadable(err)
	}
	if c.EndedAt, err = parseTime(ended); err != nil {
		return c, unreadable(err)
	}
	return c, nil
}

// Cases lists a run's cases in seq order.
func (db *DB) Cases(runID int64) ([]Case, error) {
	rows, err := db.q().Query(caseSelect+` WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("results: cases of run %d: %w", runID, err)
	}
	defer rows.Close()
	var out []Case
	for rows.Next() {
		c, err := scanCase(rows)
		if err != nil {
			return nil, db.readErr(fmt.Errorf("results: cases of run %d: %w", runID, err))
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("results: cases of run %d: %w", runID, err)
	}
	return out, nil
}

// GetCase returns one case; the error wraps ErrNotFound if there is none.
func (db *DB) GetCase(caseID int64) (*Case, error) {
	c, err := scanCase(db.q().QueryRow(caseSelect+` WHERE id = ?`, caseID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("results: case %d: %w", caseID, ErrNotFound)
	}
	if err != nil {
		return nil, db.readErr(fmt.Errorf("results: case %d: %w", caseID, err))
	}
	return &c, nil
}

// StartCase records when a case began (FinishCase fills it in if never set).
func (db *DB) StartCase(caseID int64) error {
	res, err := db.q().Exec(`UPDATE cases SET started_at = ? WHERE id = ?`, fmtTime(now()), caseID)
	if err != nil {
		return fmt.Errorf("results: start case %d: %w", caseID, err)
	}
	return mustAffect(res, "case", caseID)
}

// caseStatus reads a case's status inside tx.
func caseStatus(tx *sql.Tx, caseID int64) (string, error) {
	var st string
	err := tx.QueryRow(`SELECT status FROM cases WHERE id = ?`, caseID).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("results: case %d: %w", caseID, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("results: case %d: %w", caseID, err)
	}
	return st, nil
}

// SetCaseParams sets recorded parameters of a case once it has run (what
// its steps turned out to use), in its parameters and their index alike;
// a case's key never changes.
func (db *DB) SetCaseParams(caseID int64, set map[string]string) error {
	return db.tx(func(tx *sql.Tx) error {
		var raw string
		if err := tx.QueryRow(`SELECT params_json FROM cases WHERE id = ?`, caseID).Scan(&raw); err == sql.ErrNoRows {
			return fmt.Errorf("results: case %d: %w", caseID, ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("results: case %d: %w", caseID, err)
		}
		params := map[string]string{}
		if err := json.Unmarshal([]byte(raw), &params); err != nil {
			return fmt.Errorf("results: case %d parameters: %w", caseID, err)
		}
		for k, v := range set {
			params[k] = v
			if _, err := tx.Exec(`DELETE FROM case_params WHERE case_id = ? AND name = ?`, caseID, k); err != nil {
				return err
			}
			if _, err := tx.Exec(`INSERT INTO case_params (case_id, name, value, value_num) VALUES (?, ?, ?, ?)`, caseID, k, v, numeric(v)); err != nil {
				return fmt.Errorf("results: case %d param %q: %w", caseID, k, err)
			}
		}
		pj, err := json.Marshal(params)
		if err != nil {
			return err
		}
		_, err = tx.Exec(`UPDATE cases SET params_json = ? WHERE id = ?`, string(pj), caseID)
		return err
	})
}

// FinishCase stores a case's samples, op timings and operand traffic and
// marks it done in one transaction: on any error (an invalid value, a
// repetition recorded twice) nothing is stored and the case keeps its
// status. Only a pending or failed (being retried) case can be finished.
// layersRun/layersTotal are 0 for cases that are not layer-limited model
// runs.
func (db *DB) FinishCase(caseID int64, samples []Sample, timings []OpTiming, layersRun, layersTotal int, operands ...OperandTraffic) error {
	if layersRun < 0 || layersTotal < 0 || layersTotal > 0 && layersRun > layersTotal {
		return fmt.Errorf("results: case %d: bad layer counts %d of %d", caseID, layersRun, layersTotal)
	}
	return db.tx(func(tx *sql.Tx) error {
		st, err := caseStatus(tx, caseID)
		if err != nil {
			return err
		}
		if st != CasePending && st != CaseFailed {
			return fmt.Errorf("results: case %d is %s; only a pending or failed case can be finished", caseID, st)
		}
		if err := insertSamples(tx, caseID, samples); err != nil {
			return err
		}
		if err := insertTimings(tx, caseID, timings); err != nil {
			return err
		}
		if err := insertOperands(tx, caseID, operands); err != nil {
			return err
		}
		t := fmtTime(now())
		_, err = tx.Exec(`UPDATE cases SET status = 'done', error = '', layers_run = ?, layers_total = ?,
				started_at = coalesce(started_at, ?), ended_at = ? WHERE id = ?`,
			nullIfZero(layersRun, layersTotal), nullIfZero(layersTotal, layersRun), t, t, caseID)
		if err != nil {
			return fmt.Errorf("results: finish case %d: %w", caseID, err)
		}
		return nil
	})
}

// AddRep stores one finished repetition's samples, op timings and operand
// traffic and counts it in the case's reps_done, in one transaction: an
// interrupted run keeps every repetition it finished, and a resumed case
// starts at reps_done. rep must be the next repetition (reps_done) of a
// pending or failed case; every row must be of that repetition.
func (db *DB) AddRep(caseID int64, rep int, samples []Sample, timings []OpTiming, operands ...OperandTraffic) error {
	for i, s := range samples {
		if s.Rep != rep {
			return fmt.Errorf("results: case %d: sample %d is of rep %d, not %d", caseID, i, s.Rep, rep)
		}
	}
	for i, t := range timings {
		if t.Rep != rep {
			return fmt.Errorf("results: case %d: op timing %d is of rep %d, not %d", caseID, i, t.Rep, rep)
		}
	}
	for i, o := range operands {
		if o.Rep != rep {
			return fmt.Errorf("results: case %d: operand traffic %d is of rep %d, not %d", caseID, i, o.Rep, rep)
		}
	}
	return db.tx(func(tx *sql.Tx) error {
		var (
			st   string
			done int
		)
		err := tx.QueryRow(`SELECT status, reps_done FROM cases WHERE id = ?`, caseID).Scan(&st, &done)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("results: case %d: %w", caseID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("results: case %d: %w", caseID, err)
		}
		if st != CasePending && st != CaseFailed {
			return fmt.Errorf("results: case %d is %s; repetitions are added to a pending or failed case", caseID, st)
		}
		if rep != done {
			return fmt.Errorf("results: case %d has %s stored; the next is rep %d, not %d", caseID, plural.Of(done, "repetition"), done, rep)
		}
		if err := insertSamples(tx, caseID, samples); err != nil {
			return err
		}
		if err := insertTimings(tx, caseID, timings); err != nil {
			return err
		}
		if err := insertOperands(tx, caseID, operands); err != nil {
			return err
		}
		_, err = tx.Exec(`UPDATE cases SET reps_done = ?, started_at = coalesce(started_at, ?) WHERE id = ?`, rep+1, fmtTime(now()), caseID)
		if err != nil {
			return fmt.Errorf("results: case %d rep %d: %w", caseID, rep, err)
		}
		return nil
	})
}

// nullIfZero stores NULL for "not a layer-limited case" (both counts 0), so
// that SQL readers see the difference from a real 0.
func nullIfZero(v, other int) any {
	if v == 0 && other == 0 {
		return nil
	}
	return v
}

func insertSamples(tx *sql.Tx, caseID int64, samples []Sample) error {
	if len(samples) == 0 {
		return nil
	}
	st, err := tx.Prepare(`INSERT INTO samples (case_id, rep, metric, value, unit) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("results: store samples: %w", err)
	}
	defer st.Close()
	for i, s := range samples {
		// Checked here, row by row, rather than up front: the transaction
		// is what guarantees all-or-nothing, and the tests rely on that.
		if err := CheckSample(s); err != nil {
			return fmt.Errorf("results: case %d sample %d: %w", caseID, i, err)
		}
		if _, err := st.Exec(caseID, s.Rep, s.Metric, s.Value, s.Unit); err != nil {
			if strings.Contains(err.Error(), "UNIQUE") || strings.Contains(err.Error(), "PRIMARY KEY") {
				return fmt.Errorf("results: case %d: %s rep %d recorded twice", caseID, s.Metric, s.Rep)
			}
			return fmt.Errorf("results: case %d sample %d: %w", caseID, i, err)
		}
	}
	return nil
}

func insertTimings(tx *sql.Tx, caseID int64, timings []OpTiming) error {
	if len(timings) == 0 {
		return nil
	}
	st, err := tx.Prepare(`INSERT INTO op_timings (case_id, rep, layer, component, op, seconds, calls, bytes, footprint, critical_loads)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("results: store op timings: %w", err)
	}
	defer st.Close()
	for i, t := range timings {
		if err := checkTiming(caseID, i, t); err != nil {
			return err
		}
		if _, err := st.Exec(caseID, t.Rep, t.Layer, t.Component, t.Op, t.Seconds, t.Calls, t.Bytes, t.Footprint, t.CriticalLoads); err != nil {
			return fmt.Errorf("results: case %d timing %d: %w", caseID, i, err)
		}
	}
	return nil
}

func insertOperands(tx *sql.Tx, caseID int64, operands []OperandTraffic) error {
	if len(operands) == 0 {
		return nil
	}
	st, err := tx.Prepare(`INSERT INTO operand_traffic (case_id, rep, kernel, operand, read_bytes, written_bytes,
		distinct_read, distinct_written) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("results: store operand traffic: %w", err)
	}
	defer st.Close()
	for i, o := range operands {
		if err := checkOperand(caseID, i, o); err != nil {
			return err
		}
		if _, err := st.Exec(caseID, o.Rep, o.Kernel, o.Operand, o.Read, o.Written, o.DistinctRead, o.DistinctWritten); err != nil {
			if strings.Contains(err.Error(), "UNIQUE") || strings.Contains(err.Error(), "PRIMARY KEY") {
				return fmt.Errorf("results: case %d: %s's %s rep %d recorded twice", caseID, o.Kernel, o.Operand, o.Rep)
			}
			return fmt.Errorf("results: case %d operand traffic %d: %w", caseID, i, err)
		}
	}
	return nil
}

func checkTiming(caseID int64, i int, t OpTiming) error {
	if err := timingFault(t); err != nil {
		return fmt.Errorf("results: case %d timing %d: %w", caseID, i, err)
	}
	return nil
}

// timingFault says what of an op timing no store holds, naming the field
// (an export's key): import names the file, line and case around it.
func timingFault(t OpTiming) error {
	if err := oneOf("op component", t.Component, CompAttention, CompMoE, CompMLP, CompNorm, CompOther); err != nil {
		return err
	}
	for _, f := range []struct {
		field string
		bad   bool
		v     any
	}{
		{"op", t.Op == "", `""`},
		{"rep", t.Rep < 0, t.Rep},
		{"layer", t.Layer < -1, t.Layer},
		{"seconds", math.IsNaN(t.Seconds) || math.IsInf(t.Seconds, 0) || t.Seconds < 0, t.Seconds},
		{"calls", t.Calls < 0, t.Calls},
		{"bytes", t.Bytes < 0, t.Bytes},
		{"footprint", t.Footprint < 0, t.Footprint},
		{"critical_loads", t.CriticalLoads < 0, t.CriticalLoads},
	} {
		if f.bad {
			return fmt.Errorf("op %q: %s %v is no value it can take", t.Op, f.field, f.v)
		}
	}
	return nil
}

func checkOperand(caseID int64, i int, o OperandTraffic) error {
	if err := operandFault(o); err != nil {
		return fmt.Errorf("results: case %d operand traffic %d %w", caseID, i, err)
	}
	return nil
}

// operandFault says what of an operand traffic row no store holds.
func operandFault(o OperandTraffic) error {
	var bad string
	switch {
	case o.Kernel == "" || o.Operand == "":
		bad = "needs a kernel and an operand name"
	case o.Rep < 0:
		bad = fmt.Sprintf("rep %d", o.Rep)
	case o.DistinctRead < 0 || o.Read < o.DistinctRead:
		bad = fmt.Sprintf("%d distinct bytes read of %d read", o.DistinctRead, o.Read)
	case o.DistinctWritten < 0 || o.Written < o.DistinctWritten:
		bad = fmt.Sprintf("%d distinct bytes written of %d written", o.DistinctWritten, o.Written)
	}
	if bad != "" {
		return fmt.Errorf("(%q's %q): %s", o.Kernel, o.Operand, bad)
	}
	return nil
}

// checkRows says what of a repetition's or a case's rows the store would
// refuse, before anything is stored.
func checkRows(caseID int64, samples []Sample, timings []OpTiming, operands []OperandTraffic) error {
	for i, s := range samples {
		if err := CheckSample(s); err != nil {
			return fmt.Errorf("results: case %d sample %d: %w", caseID, i, err)
		}
	}
	for i, t := range timings {
		if err := checkTiming(caseID, i, t); err != nil {
			return err
		}
	}
	for i, o := range operands {
		if err := checkOperand(caseID, i, o); err != nil {
			return err
		}
	}
	return nil
}

// FailCase marks a pending (or already failed) case failed with msg.
func (db *DB) FailCase(caseID int64, msg string) error {
	return db.setCaseOutcome(caseID, CaseFailed, msg)
}

// SkipCase marks a pending case skipped, with the reason.
func (db *DB) SkipCase(caseID int64, reason string) error {
	return db.setCaseOutcome(caseID, CaseSkipped, reason)
}

func (db *DB) setCaseOutcome(caseID int64, status, msg string) error {
	return db.tx(func(tx *sql.Tx) error {
		st, err := caseStatus(tx, caseID)
		if err != nil {
			return err
		}
		if st == CaseDone {
			return fmt.Errorf("results: case %d is done; it cannot become %s", caseID, status)
		}
		t := fmtTime(now())
		_, err = tx.Exec(`UPDATE cases SET status = ?, error = ?, started_at = coalesce(started_at, ?), ended_at = ?
			WHERE id = ?`, status, msg, t, t, caseID)
		if err != nil {
			return fmt.Errorf("results: mark case %d %s: %w", caseID, status, err)
		}
		return nil
	})
}

// Samples returns a case's samples ordered by metric, then rep.
func (db *DB) Samples(caseID int64) ([]Sample, error) {
	rows, err := db.q().Query(`SELECT rep, metric, value, unit FROM samples WHERE case_id = ? ORDER BY metric, rep`, caseID)
	if err != nil {
		return nil, fmt.Errorf("results: samples of case %d: %w", caseID, err)
	}
	defer rows.Close()
	var out []Sample
	for rows.Next() {
		var s Sample
		if err := rows.Scan(&s.Rep, &s.Metric, &s.Value, &s.Unit); err != nil {
			return nil, db.readErr(fmt.Errorf("results: samples of case %d: %w", caseID, unreadable(err)))
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// RunSamples returns every sample of a run keyed by case id, in one query
// (reports comparing whole runs would otherwise issue one per case).
func (db *DB) RunSamples(runID int64) (map[int64][]Sample, error) {
	rows, err := db.q().Query(`SELECT s.case_id, s.rep, s.metric, s.value, s.unit
		FROM samples s JOIN cases c ON c.id = s.case_id
		WHERE c.run_id = ? ORDER BY s.case_id, s.metric, s.rep`, runID)
	if err != nil {
		return nil, fmt.Errorf("results: samples of run %d: %w", runID, err)
	}
	defer rows.Close()
	out := map[int64][]Sample{}
	for rows.Next() {
		var (
			id int64
			s  Sample
		)
		if err := rows.Scan(&id, &s.Rep, &s.Metric, &s.Value, &s.Unit); err != nil {
			return nil, db.readErr(fmt.Errorf("results: samples of run %d: %w", runID, unreadable(err)))
		}
		out[id] = append(out[id], s)
	}
	return out, rows.Err()
}

// OpTimings returns a case's op timings ordered by rep, layer, then
// insertion order.
func (db *DB) OpTimings(caseID int64) ([]OpTiming, error) {
	rows, err := db.q().Query(`SELECT rep, layer, component, op, seconds, calls, bytes, footprint, critical_loads FROM op_timings
		WHERE case_id = ? ORDER BY rep, layer, rowid`, caseID)
	if err != nil {
		return nil, fmt.Errorf("results: op timings of case %d: %w", caseID, err)
	}
	defer rows.Close()
	var out []OpTiming
	for rows.Next() {
		var t OpTiming
		if err := rows.Scan(&t.Rep, &t.Layer, &t.Component, &t.Op, &t.Seconds, &t.Calls, &t.Bytes, &t.Footprint, &t.CriticalLoads); err != nil {
			return nil, db.readErr(fmt.Errorf("results: op timings of case %d: %w", caseID, unreadable(err)))
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// OperandTraffic returns a case's operand traffic ordered by rep, kernel
// and operand.
func (db *DB) OperandTraffic(caseID int64) ([]OperandTraffic, error) {
	rows, err := db.q().Query(`SELECT rep, kernel, operand, read_bytes, written_bytes, distinct_read, distinct_written
		FROM operand_traffic WHERE case_id = ? ORDER BY rep, kernel, operand`, caseID)
	if err != nil {
		return nil, fmt.Errorf("results: operand traffic of case %d: %w", caseID, err)
	}
	defer rows.Close()
	var out []OperandTraffic
	for rows.Next() {
		var o OperandTraffic
		if err := rows.Scan(&o.Rep, &o.Kernel, &o.Operand, &o.Read, &o.Written, &o.DistinctRead, &o.DistinctWritten); err != nil {
			return nil, db.readErr(fmt.Errorf("results: operand traffic of case %d: %w", caseID, unreadable(err)))
		}
		out = append(out, o)
	}
	return out, rows.Err()
}
