//go:build linux

// Package proctest holds what tests of stopped child processes share: the
// process ids their fake programs write, and a wait for a process to end.
package proctest

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// PID reads the process id a test's fake program wrote to path.
func PID(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}

// Gone waits up to d for pid to end; a zombie has ended, as its parent may
// be the one that has not waited for it.
func Gone(pid int, d time.Duration) bool {
	for end := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil && syscall.Kill(pid, 0) != nil {
			return true
		}
		// The state follows the command's name, which ends at the last ')'.
		if i := bytes.LastIndexByte(b, ')'); err == nil && i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}
