// Package childproc runs a child process (clang, another mtlbench) so that
// stopping it stops what it started too, and, on Linux, so that it dies
// with its parent: a compile stopped or orphaned went on for minutes
// (docs/msl-subset.md, "Speed").
package childproc

import (
	"os/exec"
	"time"
)

// WaitDelay bounds how long Run waits, once the child is stopped, for
// output pipes that a descendant still holds open.
const WaitDelay = time.Second

// Run runs cmd as cmd.Run does. Where cmd's context ends, Run stops the
// child and, on Linux, every process of its group (its descendants); on
// Linux the child also gets SIGKILL when this process dies.
func Run(cmd *exec.Cmd) error {
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = WaitDelay
	}
	return run(cmd)
}
