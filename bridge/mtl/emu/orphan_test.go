//go:build linux

package emu

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/internal/childproc/proctest"
)

// A compile stopped at its limit stops clang and what clang started (its
// linker), at once: the killed driver's children went on, holding clang's
// output open, so the build waited for them and they outlived it.
func TestCompileStopKillsChildren(t *testing.T) {
	dir := t.TempDir()
	cc := filepath.Join(dir, "clang++")
	// A compiler that starts a child and both wait for long.
	script := "#!/bin/sh\necho $$ > cc.pid\nsleep 5 &\necho $! > child.pid\nwait\n"
	if err := os.WriteFile(cc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	tc := &toolchain{cc: &Compiler{Path: cc}, dir: dir}
	start := time.Now()
	_, err := tc.run(300*time.Millisecond, "compiling k.metal", dir)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "did not finish compiling k.metal within 300ms") {
		t.Errorf("err = %v, want the limit named", err)
	}
	if took > 1300*time.Millisecond {
		t.Errorf("the stopped compile returned after %v, want within a second of its limit", took)
	}
	for _, f := range []string{"cc.pid", "child.pid"} {
		if pid := proctest.PID(t, filepath.Join(dir, f)); !proctest.Gone(pid, time.Second) {
			t.Errorf("%s: process %d still runs a second after the compile stopped", f, pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// A compile whose mtlbench is killed outright (SIGKILL, or a SIGTERM it
// does not catch) takes clang with it: clang is in a group of its own, out
// of reach of a signal to the parent's, so it must die with the parent.
func TestCompileDiesWithParent(t *testing.T) {
	if dir := os.Getenv("EMU_ORPHAN_DIR"); dir != "" { // the parent to kill
		tc := &toolchain{cc: &Compiler{Path: filepath.Join(dir, "clang++")}, dir: dir}
		tc.run(-1, "compiling k.metal", dir)
		return
	}
	dir := t.TempDir()
	script := "#!/bin/sh\necho $$ > cc.tmp; mv cc.tmp cc.pid\nexec sleep 30\n"
	if err := os.WriteFile(filepath.Join(dir, "clang++"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(os.Args[0], "-test.run=^TestCompileDiesWithParent$")
	parent.Env = append(os.Environ(), "EMU_ORPHAN_DIR="+dir)
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	for end := time.Now().Add(10 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(dir, "cc.pid")); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		} else if time.Now().After(end) {
			parent.Process.Kill()
			t.Fatal("the fake clang did not start")
		}
	}
	parent.Process.Kill()
	parent.Wait()
	if !proctest.Gone(pid, time.Second) {
		t.Errorf("clang (process %d) still runs a second after its parent was killed", pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
