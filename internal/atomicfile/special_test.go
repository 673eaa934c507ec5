//go:build unix

package atomicfile

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A folder is refused by name before anything is written (the rename
// failed after the write, naming a temporary file); a pipe is written in
// place and stays a pipe, where a rename put a file in its place.
func TestWriteFolderAndPipe(t *testing.T) {
	dir := t.TempDir()
	wrote := false
	err := Write(dir, func(w io.Writer) error { wrote = true; return nil })
	if err == nil || err.Error() != dir+" is a folder: name a file to write" || wrote {
		t.Errorf("a folder: %v (written: %v)", err, wrote)
	}
	fifo := filepath.Join(dir, "out.pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no named pipe: %v", err)
	}
	got := make(chan string, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- err.Error()
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- string(b)
	}()
	if err := Write(fifo, func(w io.Writer) error { _, err := io.WriteString(w, "run 1\n"); return err }); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "run 1\n" {
			t.Errorf("read %q from the pipe", s)
		}
	case <-time.After(10 * time.Second):
		t.Error("nothing was written into the pipe")
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the pipe was replaced: %v %v", st.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || !strings.HasSuffix(ents[0].Name(), ".pipe") {
		t.Errorf("the folder holds %v", ents)
	}
}
