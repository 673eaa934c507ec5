// Package results is mtlbench's results store: one SQLite file (pure Go,
// modernc.org/sqlite, no cgo) holding every run, case and repetition so that
// runs can be compared, resumed and queried later, from Go or from
// `sqlite3 results.db`.
//
// The file is opened in WAL mode with a busy timeout and every write
// transaction starts with BEGIN IMMEDIATE, so several mtlbench processes can
// write to the same file at once: they queue instead of failing with
// SQLITE_BUSY. Within one process a DB uses a single connection; its methods
// may be called from several goroutines and are serialised.
//
// A run is stored through a Recorder, which keeps in memory all it stored:
// when the store refuses a write (a lock held past the wait, a full disk,
// a file made read-only or removed), the run as measured goes to a
// recovery file beside the database, in export's format, for `mtlbench
// import`.
//
// The schema is versioned with PRAGMA user_version and upgraded in place by
// Open (see migrations in schema.go); a file written by a newer mtlbench is
// refused rather than guessed at, and so is a database another program
// made (tables but no mtlbench schema), before anything in it changes.
//
// # Tables
//
//	machines     one row per distinct machine description (hostname, OS, CPU,
//	             GPU, driver, thermal/power state, extra_json); content_hash
//	             deduplicates, so the same description always has the same id.
//	runs         one row per invocation: suite_name/suite_path/suite_hash,
//	             tool_version, git_commit, tag, backend, timing_mode
//	             ('throughput'|'profile'), machine_id -> machines, started_at,
//	             ended_at, status ('running'|'complete'|'interrupted'|'failed'),
//	             kind ('suite'|'peer'|'tune'), notes, emulated (1 = timings
//	             from an emulator; never compare with real ones).
//	cases        one row per case of a run: case_key (canonical parameter
//	             string; matches cases across runs and drives resume), name,
//	             kind ('model'|'kernel'), seq (order in the run), params_json,
//	             status ('pending'|'done'|'failed'|'skipped'), error,
//	             layers_run/layers_total (a model case cut to its first N
//	             layers), started_at, ended_at.
//	case_params  the case's parameters one per row: case_id, name, value (text),
//	             value_num (real, NULL when not numeric), for WHERE clauses.
//	samples      every repetition's measurements: case_id, rep, metric
//	             (e.g. 'decode_tok_s', 'ttft_ms'), value, unit.
//	op_timings   per-op profile: case_id, rep, layer (-1 = outside the layers),
//	             component ('attention'|'moe'|'mlp'|'norm'|'other'), op,
//	             seconds, calls; bytes and footprint, what the Metal
//	             emulator's cost witness counted the op moving (every
//	             access, distinct bytes; 0 elsewhere), and critical_loads,
//	             the loads of its dispatches' busiest simdgroups.
//	operand_traffic  per buffer argument of a kernel case's call or a model
//	             case's mean decode step, what the Metal emulator's cost
//	             witness counted: case_id, rep, kernel, operand (the
//	             kernel's parameter name), read_bytes, written_bytes,
//	             distinct_read, distinct_written.
//
// Views for people at the sqlite3 prompt: run_summary (runs with their
// machine and case counts) and sample_stats (n/mean/min/max per case and
// metric). Times are stored as UTC text, 2006-01-02T15:04:05.000000Z, which
// sorts correctly and works with SQLite's date functions.
package results
