package model

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A model path that is neither a folder nor a regular file is refused at
// once, by what it is: opening a named pipe would wait for a writer, and
// reading a device would not end.
func TestModelPathSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	pipe, ggufPipe := filepath.Join(dir, "model"), filepath.Join(dir, "model.gguf")
	for _, p := range []string{pipe, ggufPipe} {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skip("no FIFOs here:", err)
		}
	}
	for _, c := range []struct{ path, want string }{
		{pipe, `model "` + pipe + `" is a named pipe: give a checkpoint folder`},
		{ggufPipe, `model "` + ggufPipe + `" is a named pipe: give a checkpoint folder`},
		{"/dev/null", `model "/dev/null" is a device: give a checkpoint folder`},
	} {
		for name, open := range map[string]func() error{
			"checkpoint": func() error { _, _, err := Open(Spec{Model: c.path}); return err },
			"synthetic":  func() error { _, _, err := Open(Spec{Model: c.path, Synthetic: true}); return err },
		} {
			done := make(chan error, 1)
			go func() { done <- open() }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s(%s): %v, want %q", name, c.path, err, c.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s(%s) still waiting after 10s", name, c.path)
			}
		}
	}
}
