//go:build linux

package childproc

import (
	"os/exec"
	"runtime"
	"syscall"
)

// run puts the child in a process group of its own, so that stopping it
// reaches its descendants, which a kill of the child alone left running.
// Out of the parent's group, a terminal's Ctrl-C or a kill of the parent
// no longer reaches it: Pdeathsig kills it when the parent dies instead.
// Pdeathsig fires when the thread that started the child exits, not the
// process, so the goroutine holds its thread until the child is waited for.
func run(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Run()
}
