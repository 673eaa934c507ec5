package results

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// folderNames lists dir's entries by name, sorted.
func folderNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// A store opened for reading leaves its folder as it found it: a mode=ro
// connection made a -wal and a -shm beside a store no process had open and
// left them there, since it may not checkpoint. A store a writer holds (or
// whose writer was killed, its -wal and -shm left) is read through the
// writer's files, its commits in the -wal included, and nothing is added;
// a run the writer commits while the reader is open is read too.
func TestReadOnlyOpenLeavesTheFolder(t *testing.T) {
	for _, tc := range []struct {
		name string
		// writer is how the store stands as it is read: "closed" (no
		// process has it), "open" (its writer holds it, a run in the
		// -wal), "killed" (copied with its -wal and -shm while held).
		writer string
	}{
		{"no process has the store open", "closed"},
		{"its writer holds it open", "open"},
		{"its writer was killed", "killed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "r.db")
			w, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			first, err := w.CreateRun(&Run{SuiteName: "s", Status: RunComplete})
			if err != nil {
				t.Fatal(err)
			}
			switch tc.writer {
			case "closed":
				w.Close()
			case "open":
				t.Cleanup(func() { w.Close() })
			case "killed":
				copyDir := t.TempDir()
				for _, name := range []string{"r.db", "r.db-wal", "r.db-shm"} {
					b, err := os.ReadFile(filepath.Join(dir, name))
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(copyDir, name), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				w.Close()
				dir, path = copyDir, filepath.Join(copyDir, "r.db")
			}
			before := folderNames(t, dir)
			ro, err := OpenReadOnly(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ro.GetRun(first); err != nil {
				t.Errorf("run %d: %v", first, err)
			}
			if tc.writer == "open" {
				// read while the writer goes on writing
				second, err := w.CreateRun(&Run{SuiteName: "s", Status: RunComplete})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ro.GetRun(second); err != nil {
					t.Errorf("run %d, committed while the reader was open: %v", second, err)
				}
			}
			if err := ro.Close(); err != nil {
				t.Fatal(err)
			}
			if after := folderNames(t, dir); !reflect.DeepEqual(after, before) {
				t.Errorf("folder held %v before the store was read, %v after", before, after)
			}
		})
	}
}

// A store an older mtlbench wrote that this process may not write is read
// all the same, through an upgraded private copy: it was refused, saying
// only to make it writable once, and its results could not be read. The
// file and its folder are left as they were, and writes still fail.
func TestReadOnlyOlderSchemaIsRead(t *testing.T) {
	for _, v := range []int{1, LatestSchemaVersion() - 1} {
		t.Run(fmt.Sprintf("schema version %d", v), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "old.db")
			old, err := open(path, migrations[:v])
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{
				`INSERT INTO runs (id, suite_name, git_commit, backend, started_at, status)
					VALUES (7, 'smoke', 'abcdef123', 'cpu', '2025-01-02T03:04:05.000000Z', 'complete')`,
				`INSERT INTO cases (id, run_id, case_key, name, kind, seq, params_json, status)
					VALUES (11, 7, 'm=64', 'mm', 'kernel', 0, '{"m":"64"}', 'done')`,
				`INSERT INTO samples VALUES (11, 0, 'gflops', 1.5, 'GFLOP/s')`,
			} {
				if _, err := old.SQL().Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			old.Close()
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			names := folderNames(t, dir)
			ro, err := OpenReadOnly(path)
			if err != nil {
				t.Fatal(err)
			}
			if !ro.ReadOnly() || ro.Path() != path {
				t.Errorf("read-only %v, path %s, want read-only at %s", ro.ReadOnly(), ro.Path(), path)
			}
			if r, err := ro.GetRun(7); err != nil || r.SuiteName != "smoke" {
				t.Errorf("run 7: %+v, %v", r, err)
			}
			if s, err := ro.Samples(11); err != nil || len(s) != 1 || s[0].Value != 1.5 {
				t.Errorf("samples: %+v, %v", s, err)
			}
			if _, err := ro.CreateRun(&Run{SuiteName: "x"}); err == nil {
				t.Error("a read-only store took a write")
			}
			if err := ro.Close(); err != nil {
				t.Fatal(err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
				t.Error("the read-only store was changed")
			}
			if after := folderNames(t, dir); !reflect.DeepEqual(after, names) {
				t.Errorf("folder held %v before the store was read, %v after", names, after)
			}
		})
	}
}
