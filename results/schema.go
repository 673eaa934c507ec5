package results

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// migration is one schema step. Step i (0-based) takes a database from
// user_version i to i+1. Steps are append-only: never edit a released step,
// add a new one, because existing files have already run the old text.
type migration struct {
	name  string
	stmts []string
}

// migrations is the schema history; len(migrations) is the current version.
var migrations = []migration{
	{
		name: "core tables: machines, runs, cases, case_params, samples",
		stmts: []string{
			`CREATE TABLE machines (
				id               INTEGER PRIMARY KEY,
				content_hash     TEXT NOT NULL UNIQUE, -- sha256 of the description; deduplicates machines
				hostname         TEXT NOT NULL DEFAULT '',
				os               TEXT NOT NULL DEFAULT '',
				arch             TEXT NOT NULL DEFAULT '',
				cpu_model        TEXT NOT NULL DEFAULT '',
				cpu_cores        INTEGER NOT NULL DEFAULT 0,
				memory_bytes     INTEGER NOT NULL DEFAULT 0,
				gpu_name         TEXT NOT NULL DEFAULT '',
				gpu_memory_bytes INTEGER NOT NULL DEFAULT 0,
				driver           TEXT NOT NULL DEFAULT '',
				thermal_state    TEXT NOT NULL DEFAULT '',
				power_state      TEXT NOT NULL DEFAULT '',
				extra_json       TEXT NOT NULL DEFAULT '{}',
				first_seen       TEXT NOT NULL
			)`,
			`CREATE TABLE runs (
				id           INTEGER PRIMARY KEY,
				suite_name   TEXT NOT NULL DEFAULT '',
				suite_path   TEXT NOT NULL DEFAULT '',
				suite_hash   TEXT NOT NULL DEFAULT '',
				tool_version TEXT NOT NULL DEFAULT '',
				git_commit   TEXT NOT NULL DEFAULT '',
				tag          TEXT NOT NULL DEFAULT '',
				backend      TEXT NOT NULL DEFAULT '',
				timing_mode  TEXT NOT NULL DEFAULT 'throughput',
				machine_id   INTEGER REFERENCES machines(id),
				started_at   TEXT NOT NULL,
				ended_at     TEXT,
				status       TEXT NOT NULL DEFAULT 'running'
				             CHECK (status IN ('running', 'complete', 'interrupted', 'failed')),
				kind         TEXT NOT NULL DEFAULT 'suite',
				notes        TEXT NOT NULL DEFAULT ''
			)`,
			`CREATE INDEX runs_by_tag ON runs(tag)`,
			`CREATE INDEX runs_by_git_commit ON runs(git_commit)`,
			`CREATE INDEX runs_by_suite_name ON runs(suite_name)`,
			`CREATE INDEX runs_by_started_at ON runs(started_at)`,
			`CREATE TABLE cases (
				id          INTEGER PRIMARY KEY,
				run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
				case_key    TEXT NOT NULL,
				name        TEXT NOT NULL DEFAULT '',
				kind        TEXT NOT NULL,
				seq         INTEGER NOT NULL,
				params_json TEXT NOT NULL DEFAULT '{}',
				status      TEXT NOT NULL DEFAULT 'pending'
				            CHECK (status IN ('pending', 'done', 'failed', 'skipped')),
				error       TEXT NOT NULL DEFAULT '',
				started_at  TEXT,
				ended_at    TEXT,
				UNIQUE (run_id, case_key)
			)`,
			// Matching a case across runs looks it up by key alone.
			`CREATE INDEX cases_by_key ON cases(case_key)`,
			`CREATE TABLE case_params (
				case_id   INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
				name      TEXT NOT NULL,
				value     TEXT NOT NULL,
				value_num REAL, -- NULL when value is not a number
				PRIMARY KEY (case_id, name)
			) WITHOUT ROWID`,
			`CREATE INDEX case_params_by_name ON case_params(name, value)`,
			// The primary key refuses a repetition recorded twice, which
			// would silently skew every statistic computed from the table.
			`CREATE TABLE samples (
				case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
				rep     INTEGER NOT NULL CHECK (rep >= 0),
				metric  TEXT NOT NULL,
				value   REAL NOT NULL,
				unit    TEXT NOT NULL DEFAULT '',
				PRIMARY KEY (case_id, metric, rep)
			) WITHOUT ROWID`,
		},
	},
	{
		name: "op_timings, layer counts, emulated runs, views",
		stmts: []string{
			`ALTER TABLE runs ADD COLUMN emulated INTEGER NOT NULL DEFAULT 0 CHECK (emulated IN (0, 1))`,
			`ALTER TABLE cases ADD COLUMN layers_run INTEGER`,   // NULL: not a layer-limited model case
			`ALTER TABLE cases ADD COLUMN layers_total INTEGER`, // the model's full layer count
			`CREATE TABLE op_timings (
				case_id   INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
				rep       INTEGER NOT NULL CHECK (rep >= 0),
				layer     INTEGER NOT NULL CHECK (layer >= -1), -- -1: outside the layers (embedding, lm head)
				component TEXT NOT NULL,
				op        TEXT NOT NULL,
				seconds   REAL NOT NULL,
				calls     INTEGER NOT NULL DEFAULT 1
			)`,
			`CREATE INDEX op_timings_by_case ON op_timings(case_id, rep, layer)`,
			`CREATE VIEW run_summary AS
			SELECT r.id, r.started_at, r.ended_at, r.status, r.kind, r.tag,
			       r.git_commit, r.suite_name, r.backend, r.timing_mode, r.emulated,
			       m.hostname, m.gpu_name,
			       (SELECT count(*) FROM cases c WHERE c.run_id = r.id) AS cases,
			       (SELECT count(*) FROM cases c WHERE c.run_id = r.id AND c.status = 'done') AS done,
			       (SELECT count(*) FROM cases c WHERE c.run_id = r.id AND c.status = 'failed') AS failed
			FROM runs r LEFT JOIN machines m ON m.id = r.machine_id`,
			`CREATE VIEW sample_stats AS
			SELECT c.run_id, s.case_id, c.case_key, c.name, s.metric, s.unit,
			       count(*) AS n, avg(s.value) AS mean, min(s.value) AS min, max(s.value) AS max
			FROM samples s JOIN cases c ON c.id = s.case_id
			GROUP BY s.case_id, s.metric`,
		},
	},
	{
		name: "run provenance as data (overrides, working-tree commit, bandwidth per run), case_medians view",
		stmts: []string{
			// What --set changed, as a JSON object of name -> value.
			`ALTER TABLE runs ADD COLUMN overrides_json TEXT NOT NULL DEFAULT '{}'`,
			// The commit of the checkout the run was started in, when it is
			// not the binary's own (git_commit).
			`ALTER TABLE runs ADD COLUMN tree_commit TEXT NOT NULL DEFAULT ''`,
			// Measured per run: it varies from run to run, so it is no part
			// of the machine's identity.
			`ALTER TABLE runs ADD COLUMN read_bandwidth_gb_s REAL`,
			// One row per case and metric with the median (the mean of the
			// middle one or two samples, as benchmath computes it) and the
			// parameters most queries filter on as columns; docs/data.md has
			// example queries.
			`CREATE VIEW case_medians AS
			WITH ranked AS (
				SELECT case_id, metric, unit, value,
				       row_number() OVER (PARTITION BY case_id, metric ORDER BY value) AS rn,
				       count(*) OVER (PARTITION BY case_id, metric) AS n
				FROM samples),
			med AS (
				SELECT case_id, metric, unit, n, avg(value) AS median, min(value) AS lo, max(value) AS hi
				FROM ranked WHERE rn IN ((n + 1) / 2, (n + 2) / 2)
				GROUP BY case_id, metric)
			SELECT c.run_id, r.started_at, r.tag, r.git_commit, r.suite_name, r.backend, r.timing_mode,
			       r.emulated, r.kind AS run_kind, r.machine_id,
			       c.id AS case_id, c.case_key, c.name AS case_name, c.kind AS case_kind, c.status,
			       c.layers_run, c.layers_total,
			       (SELECT value FROM case_params p WHERE p.case_id = c.id AND p.name = 'model') AS model,
			       (SELECT value FROM case_params p WHERE p.case_id = c.id AND p.name = 'dtype') AS dtype,
			       (SELECT value FROM case_params p WHERE p.case_id = c.id AND p.name = 'op') AS op,
			       (SELECT value_num FROM case_params p WHERE p.case_id = c.id AND p.name = 'batch') AS batch,
			       (SELECT value_num FROM case_params p WHERE p.case_id = c.id AND p.name = 'prompt_len') AS prompt_len,
			       (SELECT value_num FROM case_params p WHERE p.case_id = c.id AND p.name = 'gen_len') AS gen_len,
			       (SELECT value FROM case_params p WHERE p.case_id = c.id AND p.name = 'moe_strategy') AS moe_strategy,
			       (SELECT value_num FROM case_params p WHERE p.case_id = c.id AND p.name = 'moe_chunk') AS moe_chunk,
			       c.params_json,
			       med.metric, med.unit, med.n, med.median
			FROM med JOIN cases c ON c.id = med.case_id JOIN runs r ON r.id = c.run_id`,
		},
	},
	{
		name: "matmul peak per run (prefill's roofline)",
		stmts: []string{
			// Measured per run, as the read bandwidth is.
			`ALTER TABLE runs ADD COLUMN matmul_peak_gflop_s REAL`,
		},
	},
	{
		name: "run owners (a live run is not resumed twice), repetitions stored as they finish",
		stmts: []string{
			`ALTER TABLE runs ADD COLUMN owner_host TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE runs ADD COLUMN owner_pid INTEGER NOT NULL DEFAULT 0`,
			// Repetitions whose samples are stored, so a resumed case runs
			// only the rest; a done case has all of them.
			`ALTER TABLE cases ADD COLUMN reps_done INTEGER NOT NULL DEFAULT 0 CHECK (reps_done >= 0)`,
		},
	},
	{
		name: "op timings carry the cost witness's bytes (profile mode on the Metal emulator)",
		stmts: []string{
			`ALTER TABLE op_timings ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0 CHECK (bytes >= 0)`,
			`ALTER TABLE op_timings ADD COLUMN footprint INTEGER NOT NULL DEFAULT 0 CHECK (footprint >= 0)`,
		},
	},
	{
		name: "operand traffic: the cost witness's bytes per kernel argument (the Metal emulator)",
		stmts: []string{
			// One row per kernel and buffer argument of a repetition's call
			// (kernel cases) or mean decode step (model cases); the distinct
			// bytes are at most the bytes moved.
			`CREATE TABLE operand_traffic (
				case_id          INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
				rep              INTEGER NOT NULL CHECK (rep >= 0),
				kernel           TEXT NOT NULL,
				operand          TEXT NOT NULL,
				read_bytes       INTEGER NOT NULL CHECK (read_bytes >= 0),
				written_bytes    INTEGER NOT NULL CHECK (written_bytes >= 0),
				distinct_read    INTEGER NOT NULL CHECK (distinct_read >= 0 AND distinct_read <= read_bytes),
				distinct_written INTEGER NOT NULL CHECK (distinct_written >= 0 AND distinct_written <= written_bytes),
				PRIMARY KEY (case_id, rep, kernel, operand)
			) WITHOUT ROWID`,
		},
	},
	{
		name: "op timings carry the cost witness's critical loads (profile mode on the Metal emulator)",
		stmts: []string{
			`ALTER TABLE op_timings ADD COLUMN critical_loads INTEGER NOT NULL DEFAULT 0 CHECK (critical_loads >= 0)`,
		},
	},
	{
		name: "the goroutine count a run was made with, per run (a machine row is shared by its runs)",
		stmts: []string{
			`ALTER TABLE runs ADD COLUMN threads TEXT NOT NULL DEFAULT ''`,
		},
	},
	{
		name: "the backend's notes a run was made with, per run (switches such as graphs or fast math off are the run's, not its machine row's)",
		stmts: []string{
			`ALTER TABLE runs ADD COLUMN backend_notes TEXT NOT NULL DEFAULT ''`,
		},
	},
}

// LatestSchemaVersion is the schema version this build of mtlbench writes.
func LatestSchemaVersion() int { return len(migrations) }

// ErrSchemaTooNew is returned by Open for a file written by a newer mtlbench.
var ErrSchemaTooNew = errors.New("results: database schema is newer than this mtlbench supports")

// migrate brings db up to len(steps). Each step runs in its own BEGIN
// IMMEDIATE transaction and re-reads user_version inside it, so two processes
// opening a fresh file at once apply each step exactly once.
func migrate(db *sql.DB, path string, steps []migration) error {
	v, err := checkSchema(db, path)
	if err != nil {
		return err
	}
	if v > len(steps) {
		return tooNew(path, v, len(steps))
	}
	for v < len(steps) {
		if err := migrateStep(db, path, steps); err != nil {
			return err
		}
		if v, err = userVersion(db); err != nil {
			return err
		}
	}
	return nil
}

func migrateStep(db *sql.DB, path string, steps []migration) (err error) {
	tx, err := db.Begin()
	if err != nil {
		return fmt.Errorf("results: begin migration: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	// Checked again under the write lock: what open saw may have changed.
	v, err := checkSchema(tx, path)
	if err != nil {
		return err
	}
	if v > len(steps) {
		return tooNew(path, v, len(steps))
	}
	if v == len(steps) {
		return tx.Commit() // another process got there first
	}
	for _, s := range steps[v].stmts {
		if _, err := tx.Exec(s); err != nil {
			return fmt.Errorf("results: migration %d (%s): %w", v+1, steps[v].name, err)
		}
	}
	// PRAGMA takes no bound parameters; v is an int we produced.
	if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v+1)); err != nil {
		return fmt.Errorf("results: set schema version %d: %w", v+1, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("results: commit migration %d: %w", v+1, err)
	}
	return nil
}

func userVersion(db *sql.DB) (int, error) {
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("results: read schema version: %w", err)
	}
	return v, nil
}

// ErrSchemaInvalid: the file's schema version is one no mtlbench writes.
var ErrSchemaInvalid = errors.New("results: database schema version is invalid")

func badVersion(path string, v int) error {
	return fmt.Errorf("%w: %s has schema version %d (PRAGMA user_version); it is not an mtlbench results database, or it is damaged",
		ErrSchemaInvalid, path, v)
}

func tooNew(path string, have, know int) error {
	return fmt.Errorf("%w: %s has schema version %d, this mtlbench knows up to %d; use a newer mtlbench or another database file",
		ErrSchemaTooNew, path, have, know)
}

// ErrNotResults: the file is a database another program made.
var ErrNotResults = errors.New("not an mtlbench results database")

// coreTables are the tables every mtlbench results database has had since
// schema version 1 (steps are append-only: none drops them).
var coreTables = []string{"machines", "runs", "cases", "case_params", "samples"}

// querier is what the schema is read through: the database or a
// transaction.
type querier interface {
	Query(query string, args ...any) (*sql.Rows, error)
}

// checkSchema returns the schema version of a file mtlbench may use, and
// refuses the others: a version no mtlbench writes, or another program's
// database (recognise).
func checkSchema(q querier, path string) (int, error) {
	v, names, err := schemaOf(q)
	if err != nil {
		return 0, fmt.Errorf("results: read the schema of %s: %w", path, err)
	}
	if v < 0 {
		return v, badVersion(path, v)
	}
	return v, recognise(path, v, names)
}

// schemaOf reads the schema version and the tables and views (SQLite's own
// left out) in one statement, so both come from one snapshot while another
// process may be creating the schema.
func schemaOf(q querier) (v int, names []string, err error) {
	rows, err := q.Query(`SELECT u.user_version, m.name FROM pragma_user_version AS u
		LEFT JOIN (SELECT name FROM sqlite_master WHERE type IN ('table', 'view')
			AND name NOT LIKE 'sqlite\_%' ESCAPE '\') AS m
		ORDER BY m.name`)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var n sql.NullString
		if err := rows.Scan(&v, &n); err != nil {
			return 0, nil, err
		}
		if n.Valid {
			names = append(names, n.String)
		}
	}
	return v, names, rows.Err()
}

// recognise tells whether mtlbench may use a file at schema version v with
// these tables: an empty database (user_version 0, no tables) to
// initialise, or one with mtlbench's core tables. Another program's
// database is refused before anything is written to it: migration 1 would
// fail on a table it has ("runs"), or quietly add mtlbench's beside its own.
func recognise(path string, v int, names []string) error {
	if v == 0 && len(names) == 0 {
		return nil
	}
	var missing []string
	for _, t := range coreTables {
		if !slices.Contains(names, t) {
			missing = append(missing, t)
		}
	}
	if v > 0 && len(missing) == 0 {
		return nil
	}
	return notResults(path, v, names, missing)
}

// notResults says what the file holds instead of mtlbench's schema.
func notResults(path string, v int, names, missing []string) error {
	has := "no tables"
	if len(names) > 0 {
		shown := names
		if len(shown) > 8 {
			shown = shown[:8]
		}
		has = "tables " + strings.Join(shown, ", ")
		if len(names) > len(shown) {
			has += fmt.Sprintf(" and %d more", len(names)-len(shown))
		}
	}
	why := "no mtlbench schema"
	switch {
	case v > 0:
		why = fmt.Sprintf("schema version %d (PRAGMA user_version) without mtlbench's %s", v, strings.Join(missing, ", "))
	case len(missing) == 0:
		why = "schema version 0 (PRAGMA user_version), which no mtlbench database has: is it damaged?"
	}
	return fmt.Errorf("results: %s is %w (it has %s, but %s); use another database file",
		path, ErrNotResults, has, why)
}
