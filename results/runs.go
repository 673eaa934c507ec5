package results

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mtlbench/mtlbench/internal/listarg"
	"github.com/mtlbench/mtlbench/internal/suggest"
)

// Run statuses.
const (
	RunRunning     = "running"
	RunComplete    = "complete"
	RunInterrupted = "interrupted"
	RunFailed      = "failed"
)

// Run kinds.
const (
	KindSuite = "suite"
	KindPeer  = "peer"
	KindTune  = "tune"
)

// Timing modes: throughput runs time whole steps; profile runs synchronise
// per op, so their numbers must not be compared with throughput numbers.
const (
	TimingThroughput = "throughput"
	TimingProfile    = "profile"
)

// Machine describes where a run happened. It is identified by its stable
// facts (host, OS, CPU and GPU model, cores, memory, driver): runs on one
// machine share one row whatever the thermal state or Extra say, and the
// first run's values of those are kept.
type Machine struct {
	Hostname       string            `json:"hostname"`
	OS             string            `json:"os"`
	Arch           string            `json:"arch"`
	CPUModel       string            `json:"cpu_model"`
	CPUCores       int               `json:"cpu_cores"`
	MemoryBytes    int64             `json:"memory_bytes"`
	GPUName        string            `json:"gpu_name"`
	GPUMemoryBytes int64             `json:"gpu_memory_bytes"`
	Driver         string            `json:"driver"`
	ThermalState   string            `json:"thermal_state"`
	PowerState     string            `json:"power_state"`
	Extra          map[string]string `json:"extra,omitempty"`
}

// Run is one invocation of mtlbench. ID, Status ("running"), Kind ("suite"),
// TimingMode ("throughput") and StartedAt (now) are filled by CreateRun when
// empty.
type Run struct {
	ID          int64     `json:"id"`
	SuiteName   string    `json:"suite_name"`
	SuitePath   string    `json:"suite_path"`
	SuiteHash   string    `json:"suite_hash"`
	ToolVersion string    `json:"tool_version"`
	GitCommit   string    `json:"git_commit"`
	Tag         string    `json:"tag"`
	Backend     string    `json:"backend"`
	TimingMode  string    `json:"timing_mode"`
	Status      string    `json:"status"`
	Kind        string    `json:"kind"`
	Notes       string    `json:"notes"`
	Emulated    bool      `json:"emulated"`
	Machine     Machine   `json:"machine"`
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at"`
	// TreeCommit is the commit of the checkout the run was started in when
	// that is not the binary's own commit (GitCommit); "" otherwise.
	TreeCommit string `json:"tree_commit,omitempty"`
	// Overrides are the parameters `run --set` changed in every case.
	Overrides map[string]string `json:"overrides,omitempty"`
	// ReadBandwidthGBs is the memory read bandwidth measured before the
	// run, in GB/s; 0 when not measured.
	ReadBandwidthGBs float64 `json:"read_bandwidth_gb_s,omitempty"`
	// MatmulPeakGFLOPs is the matrix-multiply rate measured before the run
	// (in the weights' dtype), in GFLOP/s: prefill's roofline; 0 when not
	// measured.
	MatmulPeakGFLOPs float64 `json:"matmul_peak_gflop_s,omitempty"`
	// Threads is the goroutine count the run was made with ("default"
	// where none was asked for); "" for runs recorded before it was.
	Threads string `json:"threads,omitempty"`
	// BackendNotes are the backend's account of how it ran (bridge
	// DeviceInfo.Notes: driver, compiler, switches such as CUDA graphs off
	// or Metal fast math off); "" for runs recorded before it was.
	BackendNotes string `json:"backend_notes,omitempty"`
	// OwnerHost and OwnerPID are the process that runs (or last ran) the
	// run. A "running" run whose owner is gone from this host reads as
	// "interrupted" (Orphaned is then true): it can be resumed.
	// They belong to the store the run is in: exports leave them out.
	OwnerHost string `json:"-"`
	OwnerPID  int    `json:"-"`
	Orphaned  bool   `json:"-"`
}

// ErrRunBusy: the run is being run by a live process.
var ErrRunBusy = errors.New("run is in progress")

func thisHost() string {
	h, _ := os.Hostname()
	return h
}

// ownerGone reports whether a run's recorded owner is known to have
// ended: a process of this host that no longer exists. An owner on
// another host, or none recorded, cannot be checked and counts as alive.
func ownerGone(host string, pid int) bool {
	if pid <= 0 || host == "" || host != thisHost() {
		return false
	}
	if pid == os.Getpid() {
		return false
	}
	return !processAlive(pid)
}

// OverridesText prints overrides as "a=1 b=2", sorted by name.
func OverridesText(o map[string]string) string {
	kv := make([]string, 0, len(o))
	for k, v := range o {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, " ")
}

// RunFilter selects runs; empty fields match everything. Limit 0 means no
// limit.
type RunFilter struct {
	Tag       string
	Tags      []string // any of them, beside Tag
	GitCommit string   // prefix
	SuiteName string
	Status    string
	Kind      string
	Backend   string
	Limit     int
}

func oneOf(what, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("results: invalid %s %q (want one of %s)", what, v, strings.Join(allowed, ", "))
}

// machineHash is the dedup key: sha256 of the JSON encoding of the stable
// facts, canonical because struct fields have a fixed order.
func machineHash(m Machine) (hash, extraJSON string, err error) {
	if len(m.Extra) == 0 {
		m.Extra = map[string]string{} // nil and empty describe the same machine
	}
	stable := struct {
		Hostname, OS, Arch, CPUModel string
		CPUCores                     int
		MemoryBytes                  int64
		GPUName                      string
		GPUMemoryBytes               int64
		Driver                       string
	}{m.Hostname, m.OS, m.Arch, m.CPUModel, m.CPUCores, m.MemoryBytes, m.GPUName, m.GPUMemoryBytes, m.Driver}
	full, err := json.Marshal(stable)
	if err != nil {
		return "", "", err
	}
	extra, err := json.Marshal(m.Extra)
	if err != nil {
		return "", "", err
	}
	sum := sha256.Sum256(full)
	return hex.EncodeToString(sum[:]), string(extra), nil
}

// machineID returns the id of m's row, inserting it if new.
func machineID(tx *sql.Tx, m Machine) (int64, error) {
	hash, extra, err := machineHash(m)
	if err != nil {
		return 0, fmt.Errorf("results: encode machine: %w", err)
	}
	_, err = tx.Exec(`INSERT INTO machines (content_hash, hostname, os, arch, cpu_model, cpu_cores,
			memory_bytes, gpu_name, gpu_memory_bytes, driver, thermal_state, power_state, extra_json, first_seen)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (content_hash) DO NOTHING`,
		hash, m.Hostname, m.OS, m.Arch, m.CPUModel, m.CPUCores, m.MemoryBytes, m.GPUName,
		m.GPUMemoryBytes, m.Driver, m.ThermalState, m.PowerState, extra, fmtTime(now()))
	if err != nil {
		return 0, fmt.Errorf("results: store machine: %w", err)
	}
	var id int64
	if err := tx.QueryRow(`SELECT id FROM machines WHERE content_hash = ?`, hash).Scan(&id); err != nil {
		return 0, fmt.Errorf("results: store machine: %w", err)
	}
	return id, nil
}

// CreateRun stores r (and its machine), fills in r.ID and the defaults
// described on Run, and returns the new id.
func (db *DB) CreateRun(r *Run) (int64, error) {
	if r.Status == "" {
		r.Status = RunRunning
	}
	if r.Kind == "" {
		r.Kind = KindSuite
	}
	if r.TimingMode == "" {
		r.TimingMode = TimingThroughput
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = now()
	}
	// Hand back exactly what GetRun will read: UTC, microseconds.
	r.StartedAt = r.StartedAt.UTC().Truncate(time.Microsecond)
	if !r.EndedAt.IsZero() {
		r.EndedAt = r.EndedAt.UTC().Truncate(time.Microsecond)
	}
	// Lower case so that commit prefixes match however git printed them.
	r.GitCommit = strings.ToLower(r.GitCommit)
	if err := oneOf("run status", r.Status, RunRunning, RunComplete, RunInterrupted, RunFailed); err != nil {
		return 0, err
	}
	if err := oneOf("run kind", r.Kind, KindSuite, KindPeer, KindTune); err != nil {
		return 0, err
	}
	if err := oneOf("timing mode", r.TimingMode, TimingThroughput, TimingProfile); err != nil {
		return 0, err
	}
	r.TreeCommit = strings.ToLower(r.TreeCommit)
	overrides := r.Overrides
	if overrides == nil {
		overrides = map[string]string{}
	}
	ov, err := json.Marshal(overrides)
	if err != nil {
		return 0, fmt.Errorf("results: encode overrides: %w", err)
	}
	var bw any
	if r.ReadBandwidthGBs > 0 {
		bw = r.ReadBandwidthGBs
	}
	var peak any
	if r.MatmulPeakGFLOPs > 0 {
		peak = r.MatmulPeakGFLOPs
	}
	if r.Status == RunRunning {
		r.OwnerHost, r.OwnerPID = thisHost(), os.Getpid()
	}
	var id int64
	err = db.tx(func(tx *sql.Tx) error {
		mid, err := machineID(tx, r.Machine)
		if err != nil {
			return err
		}
		res, err := tx.Exec(`INSERT INTO runs (suite_name, suite_path, suite_hash, tool_version, git_commit,
				tag, backend, timing_mode, machine_id, started_at, ended_at, status, kind, notes, emulated,
				overrides_json, tree_commit, read_bandwidth_gb_s, matmul_peak_gflop_s, owner_host, owner_pid, threads,
				backend_notes)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.SuiteName, r.SuitePath, r.SuiteHash, r.ToolVersion, r.GitCommit, r.Tag, r.Backend,
			r.TimingMode, mid, fmtTime(r.StartedAt), fmtTime(r.EndedAt), r.Status, r.Kind, r.Notes, r.Emulated,
			string(ov), r.TreeCommit, bw, peak, r.OwnerHost, r.OwnerPID, r.Threads, r.BackendNotes)
		if err != nil {
			return fmt.Errorf("results: create run: %w", err)
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return 0, err
	}
	r.ID = id
	return id, nil
}

// FinishRun sets a run's final status ("complete", "interrupted" or
// "failed") and its end time.
func (db *DB) FinishRun(id int64, status string) error {
	if err := oneOf("final run status", status, RunComplete, RunInterrupted, RunFailed); err != nil {
		return err
	}
	res, err := db.q().Exec(`UPDATE runs SET status = ?, ended_at = ? WHERE id = ?`, status, fmtTime(now()), id)
	if err != nil {
		return fmt.Errorf("results: finish run %d: %w", id, err)
	}
	return mustAffect(res, "run", id)
}

// MarkInterrupted marks a run that a vanished process left "running" as
// "interrupted"; its finished cases stay, its pending ones can be resumed.
// A run in any other state is left alone.
func (db *DB) MarkInterrupted(id int64) error {
	if _, err := db.GetRun(id); err != nil {
		return err
	}
	_, err := db.q().Exec(`UPDATE runs SET status = 'interrupted', ended_at = ? WHERE id = ? AND status = 'running'`,
		fmtTime(now()), id)
	if err != nil {
		return fmt.Errorf("results: mark run %d interrupted: %w", id, err)
	}
	return nil
}

// ResumeRun sets an interrupted or failed run back to "running", owned by
// this process, so that its unfinished cases can be run; resuming a
// complete run is an error, and so is resuming a run a live process still
// runs (ErrRunBusy): the check and the claim are one transaction, so two
// processes resuming one run at once cannot both get it.
func (db *DB) ResumeRun(id int64) error {
	return db.tx(func(tx *sql.Tx) error {
		if err := resumeRefusal(tx, id); err != nil {
			return err
		}
		_, err := tx.Exec(`UPDATE runs SET status = 'running', ended_at = NULL, owner_host = ?, owner_pid = ? WHERE id = ?`,
			thisHost(), os.Getpid(), id)
		if err != nil {
			return fmt.Errorf("results: resume run %d: %w", id, err)
		}
		return nil
	})
}

// CheckResume says, without claiming it, why ResumeRun would refuse run id
// now (nil: it would not), so that a resume is refused before its work; a
// run missing from the store is ErrNotFound, naming the store.
func (db *DB) CheckResume(id int64) error {
	return resumeRefusal(db.sql, id)
}

// resumeRefusal is why run id cannot be resumed: not in the store,
// complete, or run by another live process.
func resumeRefusal(q interface {
	QueryRow(query string, args ...any) *sql.Row
}, id int64) error {
	var (
		status, host string
		pid          int
	)
	err := q.QueryRow(`SELECT status, owner_host, owner_pid FROM runs WHERE id = ?`, id).Scan(&status, &host, &pid)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("results: run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("results: run %d: %w", id, err)
	}
	switch {
	case status == RunComplete:
		return fmt.Errorf("results: run %d is complete; nothing to resume", id)
	case status == RunRunning && host == thisHost() && pid == os.Getpid():
		return nil // ours already
	case status == RunRunning && !ownerGone(host, pid):
		who := fmt.Sprintf("process %d on %s", pid, host)
		if pid == 0 {
			who = "another process"
		}
		return fmt.Errorf("results: run %d: %w: %s is running it (wait for it, or stop it first)", id, ErrRunBusy, who)
	}
	return nil
}

// DeleteRun removes a run with its cases, samples and timings.
func (db *DB) DeleteRun(id int64) error {
	res, err := db.q().Exec(`DELETE FROM runs WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("results: delete run %d: %w", id, err)
	}
	return mustAffect(res, "run", id)
}

func mustAffect(res sql.Result, what string, id int64) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("results: %s %d: %w", what, id, ErrNotFound)
	}
	return nil
}

const runSelect = `SELECT r.id, r.suite_name, r.suite_path, r.suite_hash, r.tool_version, r.git_commit,
		r.tag, r.backend, r.timing_mode, r.status, r.kind, r.notes, r.emulated, r.started_at, r.ended_at,
		coalesce(m.hostname, ''), coalesce(m.os, ''), coalesce(m.arch, ''), coalesce(m.cpu_model, ''),
		coalesce(m.cpu_cores, 0), coalesce(m.memory_bytes, 0), coalesce(m.gpu_name, ''),
		coalesce(m.gpu_memory_bytes, 0), coalesce(m.driver, ''), coalesce(m.thermal_state, ''),
		coalesce(m.power_state, ''), coalesce(m.extra_json, '{}'),
		r.overrides_json, r.tree_commit, coalesce(r.read_bandwidth_gb_s, 0), coalesce(r.matmul_peak_gflop_s, 0), r.owner_host, r.owner_pid,
		r.threads, r.backend_notes
	FROM runs r LEFT JOIN machines m ON m.id = r.machine_id`

type scanner interface{ Scan(dest ...any) error }

func scanRun(s scanner) (Run, error) {
	var (
		r              Run
		started, ended sql.NullString
		extra, ov      string
	)
	m := &r.Machine
	err := s.Scan(&r.ID, &r.SuiteName, &r.SuitePath, &r.SuiteHash, &r.ToolVersion, &r.GitCommit,
		&r.Tag, &r.Backend, &r.TimingMode, &r.Status, &r.Kind, &r.Notes, &r.Emulated, &started, &ended,
		&m.Hostname, &m.OS, &m.Arch, &m.CPUModel, &m.CPUCores, &m.MemoryBytes, &m.GPUName,
		&m.GPUMemoryBytes, &m.Driver, &m.ThermalState, &m.PowerState, &extra,
		&ov, &r.TreeCommit, &r.ReadBandwidthGBs, &r.MatmulPeakGFLOPs, &r.OwnerHost, &r.OwnerPID, &r.Threads, &r.BackendNotes)
	if err != nil {
		return r, unreadable(err)
	}
	if r.Status == RunRunning && ownerGone(r.OwnerHost, r.OwnerPID) {
		// Its process died (SIGKILL, a crash): what is stored is all
		// there will be, and the run can be resumed.
		r.Status, r.Orphaned = RunInterrupted, true
	}
	if r.StartedAt, err = parseTime(started); err != nil {
		return r, unreadable(err)
	}
	if r.EndedAt, err = parseTime(ended); err != nil {
		return r, unreadable(err)
	}
	if err := json.Unmarshal([]byte(extra), &m.Extra); err != nil {
		return r, unreadable(fmt.Errorf("results: run %d: machine extra_json: %w", r.ID, err))
	}
	if len(m.Extra) == 0 {
		m.Extra = nil
	}
	if err := json.Unmarshal([]byte(ov), &r.Overrides); err != nil {
		return r, unreadable(fmt.Errorf("results: run %d: overrides_json: %w", r.ID, err))
	}
	if len(r.Overrides) == 0 {
		r.Overrides = nil
	}
	return r, nil
}

// GetRun returns one run with its machine; the error wraps ErrNotFound if
// there is no such run.
func (db *DB) GetRun(id int64) (*Run, error) {
	r, err := scanRun(db.q().QueryRow(runSelect+` WHERE r.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("results: run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, db.readErr(fmt.Errorf("results: run %d: %w", id, err))
	}
	return &r, nil
}

// Runs lists the runs matching f, newest first.
func (db *DB) Runs(f RunFilter) ([]Run, error) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	if f.Tag != "" {
		add(`r.tag = ?`, f.Tag)
	}
	if len(f.Tags) > 0 {
		where = append(where, `r.tag IN (?`+strings.Repeat(`, ?`, len(f.Tags)-1)+`)`)
		for _, t := range f.Tags {
			args = append(args, t)
		}
	}
	if f.GitCommit != "" {
		// substr rather than LIKE: '%' and '_' in the argument stay literal.
		where = append(where, `substr(r.git_commit, 1, length(?)) = ?`)
		c := strings.ToLower(f.GitCommit)
		args = append(args, c, c)
	}
	if f.SuiteName != "" {
		add(`r.suite_name = ?`, f.SuiteName)
	}
	if f.Status != "" {
		add(`r.status = ?`, f.Status)
	}
	if f.Kind != "" {
		add(`r.kind = ?`, f.Kind)
	}
	if f.Backend != "" {
		add(`r.backend = ?`, f.Backend)
	}
	q := runSelect
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY r.started_at DESC, r.id DESC`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := db.q().Query(q, args...)
	if err != nil {
		return nil, fmt.Errorf("results: list runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, db.readErr(fmt.Errorf("results: list runs: %w", err))
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("results: list runs: %w", err)
	}
	return out, nil
}

// EmptyRefError is the error of a run reference that names no run at all
// ("", ",", "  "), naming it as given and what a reference is.
func EmptyRefError(ref string) error {
	return fmt.Errorf("empty run reference %q: give a run id, a tag, \"latest\" or a git commit prefix, or a comma-separated list of them", ref)
}

// SplitRefs splits a comma-separated list of run references, each trimmed.
// A list naming nothing is EmptyRefError; an empty item among others is
// refused (listarg.Split), not skipped.
func SplitRefs(list string) ([]string, error) {
	if strings.Trim(list, ", \t") == "" {
		return nil, EmptyRefError(list)
	}
	return listarg.Split("run references", list)
}

// ResolveRef turns what a user typed into run ids, newest first. In order of
// precedence ref is: a run id ("42"); a tag; "latest" (the newest run); a
// git commit prefix of at least 4 hex digits. The error wraps ErrNotFound
// when nothing matches.
func (db *DB) ResolveRef(ref string) ([]int64, error) {
	if strings.TrimSpace(ref) == "" {
		return nil, fmt.Errorf("results: %w", EmptyRefError(ref))
	}
	ref = strings.TrimSpace(ref)
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil && id > 0 {
		var n int
		if err := db.q().QueryRow(`SELECT count(*) FROM runs WHERE id = ?`, id).Scan(&n); err != nil {
			return nil, fmt.Errorf("results: resolve %q: %w", ref, err)
		}
		if n > 0 {
			return []int64{id}, nil
		}
	}
	ids, err := db.runIDs(`WHERE tag = ?`, 0, ref)
	if err != nil || len(ids) > 0 {
		return ids, err
	}
	if ref == "latest" {
		ids, err := db.runIDs(``, 1)
		if err != nil || len(ids) > 0 {
			return ids, err
		}
	}
	if len(ref) >= 4 && isHex(ref) {
		ids, err := db.runIDs(`WHERE substr(git_commit, 1, length(?1)) = ?1`, 0, strings.ToLower(ref))
		if err != nil {
			return nil, err
		}
		// A prefix of no commit falls through to the one "no run matches"
		// error: an empty list would read as a reference with no data.
		if len(ids) > 0 {
			if err := db.oneCommit(ref); err != nil {
				return nil, err
			}
			return ids, nil
		}
	}
	var runs int
	if err := db.q().QueryRow(`SELECT count(*) FROM runs`).Scan(&runs); err != nil {
		return nil, fmt.Errorf("results: resolve %q: %w", ref, err)
	}
	tags, err := db.tags()
	if err != nil {
		return nil, fmt.Errorf("results: resolve %q: %w", ref, err)
	}
	return nil, &NoRunError{Ref: ref, Store: db.Path(), Empty: runs == 0, Tag: suggest.Closest(ref, tags)}
}

// tags lists the store's run tags, each once.
func (db *DB) tags() ([]string, error) {
	return column[string](db.q().Query(`SELECT DISTINCT tag FROM runs WHERE tag != '' ORDER BY tag`))
}

// column reads a query's one column, each row's value in order.
func column[T any](rows *sql.Rows, err error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// NoRunError is a run reference that matches no run of a store. It is
// ErrNotFound without saying so again after "no run matches".
type NoRunError struct {
	Ref, Store string
	Empty      bool   // the store holds no run at all
	Tag        string // a tag of the store Ref is a likely typo of, or ""
}

// Error names the store: a run looked for in the wrong one is the usual
// cause. A store with no run says how runs get there, as listing its runs
// would show nothing.
func (e *NoRunError) Error() string {
	if e.Empty {
		return fmt.Sprintf("results: no run matches %q: %s holds no runs yet (record one with mtlbench run ci or mtlbench bench, or read an export in with mtlbench import)",
			e.Ref, e.Store)
	}
	hint := ""
	if e.Tag != "" {
		// A mistyped tag (mian for main) is the usual miss: name the tag.
		hint = fmt.Sprintf(": did you mean the tag %q?", e.Tag)
	}
	return fmt.Sprintf("results: no run matches %q in %s%s (tried run id, tag, \"latest\" and git commit prefix; mtlbench runs --db %s lists them)",
		e.Ref, e.Store, hint, e.Store)
}

func (e *NoRunError) Is(target error) bool { return target == ErrNotFound }

// oneCommit refuses a commit prefix that names runs of different commits,
// as git refuses an ambiguous one: pooled, their figures would read as one
// commit's. A short and a full spelling of one commit are one.
func (db *DB) oneCommit(prefix string) error {
	all, err := column[string](db.q().Query(`SELECT DISTINCT git_commit FROM runs WHERE substr(git_commit, 1, length(?1)) = ?1 ORDER BY length(git_commit) DESC`,
		strings.ToLower(prefix)))
	if err != nil {
		return fmt.Errorf("results: resolve %q: %w", prefix, err)
	}
	var commits []string
	for _, c := range all {
		if !slices.ContainsFunc(commits, func(long string) bool { return strings.HasPrefix(long, c) }) {
			commits = append(commits, c)
		}
	}
	if len(commits) > 1 {
		slices.Sort(commits)
		return fmt.Errorf("results: commit prefix %q is ambiguous: it names runs of %d commits (%s); give more of it",
			prefix, len(commits), strings.Join(commits, ", "))
	}
	return nil
}

// CheckTag says why tag could not be found again by ResolveRef: a number
// or "latest" (which a reference reads as a run id or the newest run
// first), a comma (which pools references), or spaces at its ends.
func CheckTag(tag string) error {
	if tag == "" {
		return nil
	}
	if err := CheckLine("tag", tag); err != nil {
		return err
	}
	if id, err := strconv.ParseInt(tag, 10, 64); err == nil {
		return fmt.Errorf("tag %q is a number, which a reference reads as run %d", tag, id)
	}
	switch {
	case tag == "latest":
		return fmt.Errorf("tag %q is how a reference names the newest runs", tag)
	case strings.Contains(tag, ","):
		return fmt.Errorf("tag %q holds a comma, which pools references (a,b)", tag)
	case strings.TrimSpace(tag) != tag:
		return fmt.Errorf("tag %q starts or ends with a space", tag)
	}
	return nil
}

// runIDs lists the ids of runs matching where (may be empty), newest first.
func (db *DB) runIDs(where string, limit int, args ...any) ([]int64, error) {
	q := `SELECT id FROM runs ` + where + ` ORDER BY started_at DESC, id DESC`
	if limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, limit)
	}
	ids, err := column[int64](db.q().Query(q, args...))
	if err != nil {
		return nil, fmt.Errorf("results: resolve run: %w", err)
	}
	return ids, nil
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
