package results

import (
	"path/filepath"
	"strings"
	"testing"
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
