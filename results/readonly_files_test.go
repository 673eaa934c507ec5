package results

import (
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
