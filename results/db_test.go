package results

import (
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A results path that is a folder says so, not "disk I/O error".
func TestOpenNotAFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), dir+" is a directory: want a results database file") {
		t.Errorf("Open(dir): %v", err)
	}
}

// A path that reaches Open unexpanded by a shell (MTLBENCH_DB from an
// environment file, --db=~/r.db) means the home folder, never a folder
// named ~ in the working directory.
func TestOpenTildePath(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Chdir(work)
	for _, tc := range []struct {
		path, want, err string
	}{
		{path: "~/r.db", want: filepath.Join(home, "r.db")},
		{path: "~/sub/dir/r.db", want: filepath.Join(home, "sub", "dir", "r.db")},
		{path: "rel/r.db", want: filepath.Join(work, "rel", "r.db")},
		{path: "~bob/r.db", err: "only ~ and ~/"},
		{path: "~", err: "a directory"},
	} {
		db, err := Open(tc.path)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Open(%q): %v, want an error saying %q", tc.path, err, tc.err)
			}
		} else if err != nil {
			t.Errorf("Open(%q): %v", tc.path, err)
		} else if db.Path() != tc.want {
			t.Errorf("Open(%q) opened %s, want %s", tc.path, db.Path(), tc.want)
		}
		if db != nil {
			db.Close()
		}
	}
	if names, _ := filepath.Glob(filepath.Join(work, "~*")); len(names) > 0 {
		t.Errorf("Open made %v in the working directory", names)
	}
}

// A schema step that fails (a full disk, here a table already there) names
// the file it was upgrading, and leaves it at the last step that took.
func TestFailedUpgradeNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := open(path, migrations[:1])
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	bad := append(migrations[:1:1], migration{name: "bad", stmts: []string{`CREATE TABLE runs (x)`}})
	if _, err := open(path, bad); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a failed upgrade: %v, want an error naming %s", err, path)
	}
	db, err = open(path, migrations[:1])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, _ := db.SchemaVersion(); v != 1 {
		t.Errorf("schema version %d after a failed step, want 1", v)
	}
}

// TestDamagedStoreNamed: a file that is no SQLite database, or a store cut
// short, is refused by every way of opening it with an error naming the
// file and what to do, not SQLite's "file is not a database (26)" alone,
// and is left as it was.
func TestDamagedStoreNamed(t *testing.T) {
	store := openTemp(t)
	if _, err := store.CreateRun(&Run{SuiteName: "s", Machine: testMachine()}); err != nil {
		t.Fatal(err)
	}
	store.Close()
	whole, err := os.ReadFile(store.Path())
	if err != nil {
		t.Fatal(err)
	}
	header := `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
	for _, c := range []struct {
		name, want string
		data       []byte
		aside      bool // the advice to move it aside, which a model's file is not given
	}{
		{"text", "is not an SQLite database", []byte("run,case\n1,a\n"), true},
		{"truncated", "is damaged", whole[:5000], true},
		{"gguf", "is a GGUF model file, not an SQLite database: check that --db or MTLBENCH_DB names a results database",
			append([]byte("GGUF\x03\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00"), make([]byte, 64)...), false},
		{"safetensors", "is a safetensors weights file, not an SQLite database",
			append(binary.LittleEndian.AppendUint64(nil, uint64(len(header))), header+"\x00\x00\x80\x3f"...), false},
	} {
		for _, o := range []struct {
			name string
			open func(string) (*DB, error)
		}{{"Open", Open}, {"OpenToWrite", OpenToWrite}, {"OpenReadOnly", OpenReadOnly}} {
			t.Run(c.name+"/"+o.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "r.db")
				if err := os.WriteFile(path, c.data, 0o644); err != nil {
					t.Fatal(err)
				}
				db, err := o.open(path)
				if err == nil {
					db.Close()
					t.Fatalf("%s opened a %s file", o.name, c.name)
				}
				for _, w := range []string{path + " " + c.want, "move", "aside"} {
					if !strings.Contains(err.Error(), w) && (w == path+" "+c.want || c.aside) {
						t.Errorf("%s: %v\nwant it to say %q", o.name, err, w)
					}
				}
				if !c.aside && strings.Contains(err.Error(), "aside") {
					t.Errorf("%s: %v\nadvises moving a model's file aside", o.name, err)
				}
				if !FromStore(err) {
					t.Errorf("%s: FromStore(%v) = false", o.name, err)
				}
				if got, _ := os.ReadFile(path); string(got) != string(c.data) {
					t.Errorf("%s changed the %s file", o.name, c.name)
				}
			})
		}
	}
}

// A database path under a file (--db r.db/x.db) says which part is the
// file, not mkdir's "not a directory" alone.
func TestOpenUnderAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "r.db")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(file, "x.db"), filepath.Join(file, "a", "b", "x.db")} {
		_, err := Open(path)
		if want := file + " is a file, not a folder"; err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s): %v\nwant it to name the path and say %q", path, err, want)
		}
	}
}

// sqliteErr is an error with SQLite's result code, as the driver's are.
type sqliteErr int

func (e sqliteErr) Error() string { return fmt.Sprintf("sqlite error (%d)", int(e)) }
func (e sqliteErr) Code() int     { return int(e) }

// A store's own failure is told with the database's path and what to do,
// whichever SQLite code it is.
func TestStoreErrorSaysWhatToDo(t *testing.T) {
	db := openTemp(t)
	for _, c := range []struct {
		code int
		want string
	}{
		{5, "was locked by another process for more than"},
		{8, "cannot be written (record into another with --db"},
		{11, "is damaged (truncated, or overwritten in part): restore it from a copy"},
		{13, "is on a full disk (free space there, or record into another with --db"},
		{4874, "could not be read or written (a full disk, or a file system SQLite cannot lock or map"},
		{26, "is not an SQLite database: check that --db"},
		{1, ""},
	} {
		err := fmt.Errorf("results: commit: %w", sqliteErr(c.code))
		got := db.StoreError(err)
		if !strings.Contains(got, db.Path()) || !strings.Contains(got, c.want) {
			t.Errorf("code %d: %q, want the path and %q", c.code, got, c.want)
		}
	}
}

// A database path ending in a separator names a folder: it is refused, not
// made a file of that name (filepath.Abs drops the separator).
func TestPathEndingInSeparator(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "new") + "/", filepath.Join(dir, "r.db") + "/"} {
		for _, o := range []struct {
			name string
			open func(string) (*DB, error)
		}{{"Open", Open}, {"OpenToWrite", OpenToWrite}, {"OpenReadOnly", OpenReadOnly}} {
			db, err := o.open(path)
			if err == nil {
				db.Close()
			}
			if want := path + " names a folder (it ends in /): name the database file, such as " + path + "results.db"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s(%s): %v\nwant %q", o.name, path, err, want)
			}
		}
		if _, err := os.Stat(strings.TrimSuffix(path, "/")); err == nil {
			t.Errorf("a file was made at %s", path)
		}
	}
}

// A new store whose open fails part way (a full disk; here a schema step
// that fails) is taken away with SQLite's files beside it, not left as an
// empty or half-made file; a store that was there before is kept.
func TestFailedOpenLeavesNoNewStore(t *testing.T) {
	bad := append(migrations[:1:1], migration{name: "bad", stmts: []string{`CREATE TABLE`}})
	for _, tc := range []struct {
		name    string
		existed bool
	}{{"new", false}, {"there before", true}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.db")
			if tc.existed {
				db, err := open(path, migrations[:1])
				if err != nil {
					t.Fatal(err)
				}
				db.Close()
			}
			if db, err := open(path, bad); err == nil {
				db.Close()
				t.Fatal("a failing schema step opened")
			}
			for _, f := range []string{path, path + "-wal", path + "-shm"} {
				_, err := os.Stat(f)
				if kept := err == nil; kept != (tc.existed && f == path) {
					t.Errorf("%s: kept %v after a failed open (stat: %v)", f, kept, err)
				}
			}
		})
	}
}

// CheckNew says why a store could not be made where a command will make
// it, and makes nothing: no folder, no file.
func TestCheckNewMakesNothing(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(dir, "locked")
	if err := os.Mkdir(locked, 0o555); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string // want: "" for none
	}{
		{"in a folder", filepath.Join(dir, "r.db"), ""},
		{"in folders to make", filepath.Join(dir, "a", "b", "r.db"), ""},
		{"under a file", filepath.Join(file, "r.db"), file + " is a file, not a folder"},
		{"in a folder not to be written", filepath.Join(locked, "x", "r.db"), "folder " + locked + " cannot be written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "in a folder not to be written" && os.Geteuid() == 0 {
				t.Skip("root writes any folder")
			}
			err := CheckNew(tc.path)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("CheckNew(%s) = %v, want %q", tc.path, err, tc.want)
			}
			if _, err := os.Lstat(tc.path); err == nil {
				t.Errorf("%s was made", tc.path)
			}
			if _, err := os.Lstat(filepath.Join(dir, "a")); err == nil {
				t.Errorf("a folder of %s was made", tc.path)
			}
		})
	}
}

// CloseNew takes away a store that holds no run, with SQLite's files
// beside it, and keeps one that holds a run, or that another process has
// open: one that opened it before its work records its run there later,
// in the store at its path, in WAL mode still.
func TestCloseNewRemovesOnlyAnEmptyStore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		withRun bool
		held    bool // another process holds the write lock
		opened  bool // another process opened the store, to record into it later
	}{{"no run", false, false, false}, {"a run", true, false, false}, {"no run, another writing", false, true, false},
		{"no run, another to write", false, false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.db")
			db, err := OpenWith(path, Options{BusyTimeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if tc.withRun {
				if _, err := db.CreateRun(&Run{SuiteName: "s"}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.held {
				other, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
				if err != nil {
					t.Fatal(err)
				}
				defer other.Close()
				tx, err := other.Begin()
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
			}
			var other *DB
			if tc.opened {
				if other, err = Open(path); err != nil {
					t.Fatal(err)
				}
				defer other.Close()
			}
			kept := tc.withRun || tc.held || tc.opened
			removed, err := db.CloseNew()
			if err != nil || removed == kept {
				t.Fatalf("CloseNew: removed %v, %v", removed, err)
			}
			// The other's run goes into the store it opened, which is there.
			if other != nil {
				if err := other.BatchWaiting(time.Second, nil, func(b *DB) error {
					_, err := b.CreateRun(&Run{SuiteName: "s"})
					return err
				}); err != nil {
					t.Errorf("the other process's run: %v", err)
				}
				if mode, err := journalMode(other); err != nil || mode != "wal" {
					t.Errorf("journal mode %q, %v; want wal", mode, err)
				}
			}
			if _, err := os.Stat(path); (err == nil) != kept {
				t.Errorf("stat %v, want the store kept %v", err, kept)
			}
			if !kept {
				for _, f := range []string{path + "-wal", path + "-shm"} {
					if _, err := os.Stat(f); err == nil {
						t.Errorf("%s kept", filepath.Base(f))
					}
				}
			}
		})
	}
}

// A batch (an import) into a store removed or replaced while it was open
// went into the file SQLite had open, which nothing reads: it fails,
// saying so, rather than reporting the runs stored.
func TestBatchIntoAMovedStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		move func(path string) error
		want error
	}{
		{"left as it is", func(string) error { return nil }, nil},
		{"removed", os.Remove, ErrStoreMoved},
		{"replaced", func(path string) error {
			if err := os.Rename(path, path+".old"); err != nil {
				return err
			}
			return os.WriteFile(path, nil, 0o644)
		}, ErrStoreMoved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.db")
			db, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := tc.move(path); err != nil {
				t.Fatal(err)
			}
			err = db.BatchWaiting(time.Second, nil, func(b *DB) error {
				_, err := b.CreateRun(&Run{SuiteName: "s"})
				return err
			})
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Errorf("batch: %v, want %v", err, tc.want)
			}
		})
	}
}

func journalMode(db *DB) (mode string, err error) {
	return mode, db.sql.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
}

// A row edited by hand (or by another program) into a value mtlbench cannot
// read back is the store's fault: the error names the database and what to
// do, and FromStore tells it, so a command writing a file says the file is
// unchanged rather than blame it (export -o).
func TestUnreadableRowNamesTheStore(t *testing.T) {
	for _, c := range []struct {
		name, edit string
		read       func(db *DB, run int64, cs []Case) error
	}{
		{"case parameters not JSON", `UPDATE cases SET params_json = '{bad'`,
			func(db *DB, run int64, _ []Case) error { _, err := db.Cases(run); return err }},
		{"case time not a time", `UPDATE cases SET started_at = 'noon'`,
			func(db *DB, _ int64, cs []Case) error { _, err := db.GetCase(cs[0].ID); return err }},
		{"run time not a time", `UPDATE runs SET started_at = 'noon'`,
			func(db *DB, _ int64, _ []Case) error { _, err := db.Runs(RunFilter{}); return err }},
		{"run overrides not JSON", `UPDATE runs SET overrides_json = '['`,
			func(db *DB, run int64, _ []Case) error { _, err := db.GetRun(run); return err }},
		{"sample not a number", `UPDATE samples SET value = 'fast'`,
			func(db *DB, _ int64, cs []Case) error { _, err := db.Samples(cs[0].ID); return err }},
		{"run's samples not numbers", `UPDATE samples SET value = 'fast'`,
			func(db *DB, run int64, _ []Case) error { _, err := db.RunSamples(run); return err }},
		{"op timing not a number", `UPDATE op_timings SET seconds = 'slow'`,
			func(db *DB, _ int64, cs []Case) error { _, err := db.OpTimings(cs[0].ID); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := openTemp(t)
			run := mustRun(t, db, Run{SuiteName: "s", Machine: testMachine()})
			cs := mustCases(t, db, run, 1)
			if err := db.FinishCase(cs[0].ID, []Sample{{Rep: 0, Metric: "us_per_call", Value: 3, Unit: "us"}},
				[]OpTiming{{Rep: 0, Layer: 0, Component: CompMoE, Op: "x", Seconds: 1, Calls: 1}}, 0, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := db.SQL().Exec(c.edit); err != nil {
				t.Fatal(err)
			}
			err := c.read(db, run, cs)
			if err == nil {
				t.Fatal("read an edited row without an error")
			}
			if !FromStore(err) {
				t.Errorf("FromStore(%v) = false", err)
			}
			if want := "the results database " + db.Path() + " holds a value mtlbench did not write"; !strings.Contains(err.Error(), want) {
				t.Errorf("err = %v, want it to say %q", err, want)
			}
		})
	}
}
