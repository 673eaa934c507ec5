package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteThroughLinks: a path that is a link has its target replaced and
// stays a link; a failed write leaves the target as it was.
func TestWriteThroughLinks(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, dir string) (path, target string)
	}{
		{"plain file", func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "out.json")
			must(t, os.WriteFile(p, []byte("old"), 0o644))
			return p, p
		}},
		{"new file", func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "out.json")
			return p, p
		}},
		{"relative link", func(t *testing.T, dir string) (string, string) {
			must(t, os.Mkdir(filepath.Join(dir, "shared"), 0o755))
			target := filepath.Join(dir, "shared", "real.json")
			must(t, os.WriteFile(target, []byte("old"), 0o644))
			p := filepath.Join(dir, "out.json")
			must(t, os.Symlink(filepath.Join("shared", "real.json"), p))
			return p, target
		}},
		{"absolute link to a link", func(t *testing.T, dir string) (string, string) {
			target := filepath.Join(dir, "real.json")
			must(t, os.WriteFile(target, []byte("old"), 0o644))
			must(t, os.Symlink(target, filepath.Join(dir, "mid.json")))
			p := filepath.Join(dir, "out.json")
			must(t, os.Symlink("mid.json", p))
			return p, target
		}},
		{"dangling link", func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "out.json")
			must(t, os.Symlink("made.json", p))
			return p, filepath.Join(dir, "made.json")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path, target := c.setup(t, dir)
			before, _ := os.Lstat(path)
			// A failed write changes nothing.
			err := Write(path, func(w io.Writer) error {
				io.WriteString(w, "half")
				return errors.New("disk full")
			})
			if err == nil || !strings.Contains(err.Error(), "disk full (the file is unchanged)") {
				t.Errorf("failed write: %v", err)
			}
			if b, err := os.ReadFile(target); err == nil && string(b) != "old" {
				t.Errorf("failed write changed the target to %q", b)
			}
			must(t, Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }))
			if b, err := os.ReadFile(target); err != nil || string(b) != "new" {
				t.Errorf("target holds %q, %v; want new", b, err)
			}
			after, err := os.Lstat(path)
			must(t, err)
			if before != nil && after.Mode().Type() != before.Mode().Type() {
				t.Errorf("%s was %v, is now %v: the link was replaced", path, before.Mode().Type(), after.Mode().Type())
			}
			if st, _ := os.Stat(target); st.Mode().Perm() != 0o644 {
				t.Errorf("mode %v, want 0644", st.Mode().Perm())
			}
			ents, _ := os.ReadDir(filepath.Dir(target))
			for _, e := range ents {
				if strings.Contains(e.Name(), ".tmp") {
					t.Errorf("temporary file %s left behind", e.Name())
				}
			}
		})
	}
}

func TestLinkLoop(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	must(t, os.Symlink("b", a))
	must(t, os.Symlink("a", b))
	if err := Write(a, func(io.Writer) error { return nil }); err == nil || !strings.Contains(err.Error(), "symbolic links in a chain") {
		t.Errorf("a loop of links: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
