//go:build linux

package childproc

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// start puts the child in a process group of its own, so that stopping it
// reaches its descendants, which a kill of the child alone left running.
// Out of the parent's group, a terminal's Ctrl-C or a kill of the parent
// no longer reaches it: Pdeathsig kills it when the parent dies instead.
// Pdeathsig fires when the thread that started the child exits, not the
// process, so the goroutine holds its thread until the child is waited for.
func start(cmd *exec.Cmd, stop os.Signal) (func() error, error) {
	sig, ok := stop.(syscall.Signal)
	if !ok {
		return nil, errors.New("childproc: a stop signal that is not a syscall.Signal")
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, sig) }
	runtime.LockOSThread()
	if err := cmd.Start(); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return func() error {
		defer runtime.UnlockOSThread()
		// The child ended but not yet waited for keeps its process id, and
		// so its group's: a kill of the group then reaches no other.
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				break
			}
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return cmd.Wait()
	}, nil
}
