package results

import (
	"bytes"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// makeSQLite writes a database as another program would: its statements,
// in SQLite's default (rollback journal) mode.
func makeSQLite(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// A database another program made is refused, by name and with what it
// holds, and left exactly as it was: no mtlbench tables, no WAL, no
// user_version. Before, a file with its own runs table failed in migration
// 1 without naming the file, and one without it quietly got mtlbench's
// tables and user_version 7, even from read-only commands.
func TestForeignDatabaseIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stmts []string
		want  string
	}{
		{"its own runs table", []string{`CREATE TABLE runs (id INTEGER PRIMARY KEY, what TEXT)`, `CREATE TABLE app_data (k TEXT, v TEXT)`,
			`INSERT INTO runs (what) VALUES ('a run of something else')`},
			"(it has tables app_data, runs, but no mtlbench schema)"},
		{"no runs table", []string{`CREATE TABLE app_data (k TEXT, v TEXT)`, `INSERT INTO app_data VALUES ('a', 'b')`},
			"(it has tables app_data, but no mtlbench schema)"},
		{"only a view", []string{`CREATE VIEW answer AS SELECT 42`}, "(it has tables answer, but no mtlbench schema)"},
		{"a schema version of its own", []string{`CREATE TABLE app_data (k TEXT)`, `PRAGMA user_version = 3`},
			"(it has tables app_data, but schema version 3 (PRAGMA user_version) without mtlbench's machines, runs, cases, case_params, samples)"},
		{"a schema version past ours", []string{`CREATE TABLE runs (id INTEGER)`, `PRAGMA user_version = 4242`},
			"(it has tables runs, but schema version 4242 (PRAGMA user_version) without mtlbench's machines, cases, case_params, samples)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "foreign.sqlite")
			makeSQLite(t, path, tc.stmts...)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, open := range []struct {
				name string
				f    func(string) (*DB, error)
			}{{"Open", Open}, {"OpenReadOnly", OpenReadOnly}} {
				db, err := open.f(path)
				if err == nil {
					db.Close()
				}
				if !errors.Is(err, ErrNotResults) || !strings.Contains(err.Error(), path+" is not an mtlbench results database") ||
					!strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: err = %v\nwant ErrNotResults naming %s and saying %q", open.name, err, path, tc.want)
				}
			}
			// migrate checks again under its write lock, for whoever calls it.
			raw, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			if err := migrate(raw, path, migrations); !errors.Is(err, ErrNotResults) {
				t.Errorf("migrate: err = %v, want ErrNotResults", err)
			}
			raw.Close()
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Error("the refused file changed")
			}
			if _, err := os.Stat(path + "-wal"); err == nil {
				t.Error("the refused file got a WAL")
			}
		})
	}
}

// An empty file, or an SQLite database with nothing in it, is a new store:
// it is initialised as before.
func TestEmptyFilesAreInitialised(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
	}{
		{"no file", func(*testing.T, string) {}},
		{"an empty file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"a database with nothing in it", func(t *testing.T, path string) {
			makeSQLite(t, path, `CREATE TABLE gone (x)`, `DROP TABLE gone`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.db")
			tc.make(t, path)
			db, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if v, err := db.SchemaVersion(); err != nil || v != LatestSchemaVersion() {
				t.Errorf("version %d, %v; want %d", v, err, LatestSchemaVersion())
			}
			if got := pragma(t, db, "journal_mode"); got != "wal" {
				t.Errorf("journal_mode %q, want wal", got)
			}
		})
	}
}
