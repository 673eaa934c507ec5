//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge/backends"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/internal/childproc/proctest"
)

// ab's check that a side opens its backend waits as long as that backend's
// first open may take: metal-emu's compiles its kernels with clang for a
// minute or two on a cold cache, past the check's minute, so the check gave
// up silently and the round compiled them again.
func TestABBackendCheckLimit(t *testing.T) {
	for _, tc := range []struct {
		backend string
		build   time.Duration // emu.Options.BuildTimeout
		want    time.Duration
	}{
		{"cpu", 0, time.Minute},
		{"cuda", 0, time.Minute},
		{"metal", 0, time.Minute},
		{"metal-emu", 0, time.Minute + emu.DefaultBuildTimeout},
		{"metal-emu", 3 * time.Minute, 4 * time.Minute},
		{"metal-emu", -1, 0}, // the build has no limit: nor has the check
	} {
		o := backends.Options{Emu: emu.Options{BuildTimeout: tc.build}}
		if got := abCheckLimit(tc.backend, o); got != tc.want {
			t.Errorf("%s (build limit %v): %v, want %v", tc.backend, tc.build, got, tc.want)
		}
	}
}

// The check passes on a binary's notice that it compiles kernels, so a
// wait of minutes is explained; and a check cancelled (Ctrl-C) stops the
// binary and what it started, where clang went on compiling into the
// first round.
func TestABBackendCheckNoticeAndCancel(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mtlbench")
	script := "#!/bin/sh\ncd " + dir + "\necho $$ > bin.pid\n" +
		"echo 'mtlbench: compiling the Metal kernels for the emulator with clang++: a minute or two, once' >&2\n" +
		"sleep 5 &\necho $! > child.tmp; mv child.tmp child.pid\nwait\necho '[]'\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var w lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- abBackendOpens(ctx, abSide{label: "baseline", bin: bin}, "metal-emu", time.Minute, &w)
	}()
	waitForChild(t, dir)
	cancel()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Error("the cancelled check did not return within a second")
		<-done
	}
	if want := "ab: the baseline binary " + bin + ": compiling the Metal kernels for the emulator"; !strings.Contains(w.String(), want) {
		t.Errorf("the check said %q, want %q", w.String(), want)
	}
	for _, f := range []string{"bin.pid", "child.pid"} {
		if pid := proctest.PID(t, filepath.Join(dir, f)); !proctest.Gone(pid, time.Second) {
			t.Errorf("%s: process %d runs on a second after the check was cancelled", f, pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// Stopping ab (a signal, a check's time-out) stops what its binaries
// started too: a round's run was sent an interrupt alone and a check's
// binary killed alone, so their descendants (here a shell's background
// sleep, which ignores the interrupt) ran on, and a check waited for the
// output they held open.
func TestABStopLeavesNoProcess(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, bin, dir string) error
	}{
		{"round", func(ctx context.Context, bin, dir string) error {
			side := abSide{label: "baseline", bin: bin}
			_, _, err := runLockstep(ctx, 0, [2]abSide{side, {label: "candidate", bin: bin, skip: true}}, "s.yaml", nil,
				[2]string{filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")})
			return err
		}},
		{"check", func(ctx context.Context, bin, dir string) error {
			return abPreflight(ctx, abSide{label: "baseline", bin: bin}, "s.yaml", "")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "mtlbench")
			script := "#!/bin/sh\ncd " + dir + "\necho $$ > bin.pid\n" +
				"sleep 30 &\necho $! > child.tmp; mv child.tmp child.pid\necho '" + lockstepReady + "'\nwait\n"
			if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- tc.run(ctx, bin, dir) }()
			waitForChild(t, dir)
			cancel()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Error("ab did not return within 5 seconds of being stopped")
				<-done
			}
			for _, f := range []string{"bin.pid", "child.pid"} {
				if pid := proctest.PID(t, filepath.Join(dir, f)); !proctest.Gone(pid, time.Second) {
					t.Errorf("%s: process %d runs on a second after ab returned", f, pid)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
	}
}

// waitForChild waits up to 5 s for a test binary's script to say, in
// dir/child.pid, that it started its child.
func waitForChild(t *testing.T, dir string) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "child.pid")); err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatal("the binary did not start its child")
		}
	}
}
