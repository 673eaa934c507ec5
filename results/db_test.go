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
