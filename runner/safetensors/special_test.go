package safetensors

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO (or any special file) in place of a checkpoint file is refused at
// once; opening it would block until a writer came.
func TestSpecialFilesRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.safetensors")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Open(fifo)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("Open(FIFO) = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Open of a FIFO hangs")
	}
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("OpenDir with a FIFO: %v", err)
	}
}
