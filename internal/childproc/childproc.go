// Package childproc runs a child process (clang, another mtlbench) so that
// stopping it stops what it started too, and, on Linux, so that it dies
// with its parent: a compile stopped or orphaned went on for minutes
// (docs/msl-subset.md, "Speed"), and a stopped ab round's descendants
// outlived it (docs/perf-gate.md).
package childproc

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// WaitDelay bounds how long Run waits, once the child is stopped, for
// output pipes that a descendant still holds open.
const WaitDelay = time.Second

// Run runs cmd as cmd.Run does. Where cmd's context ends, Run stops the
// child and, on Linux, every process of its group (its descendants); on
// Linux the child also gets SIGKILL when this process dies.
func Run(cmd *exec.Cmd) error {
	wait, err := Start(cmd, syscall.SIGKILL)
	if err != nil {
		return err
	}
	return wait()
}

// Start starts cmd as cmd.Start does, for a caller that talks to the child
// while it runs. Where cmd's context ends, stop goes to the child and, on
// Linux, to every process of its group: os.Interrupt lets a run store what
// it finished, and cmd.WaitDelay (WaitDelay if 0) bounds how long it may
// take before the child is killed. On Linux, once the child has ended, what
// is left of its group is killed before wait returns, and the child gets
// SIGKILL when this process dies. wait is cmd.Wait, to be called from the
// goroutine that called Start: on Linux that goroutine holds its thread
// until then, since the child's death signal follows the thread.
func Start(cmd *exec.Cmd, stop os.Signal) (wait func() error, err error) {
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = WaitDelay
	}
	return start(cmd, stop)
}
