//go:build !linux

package childproc

import (
	"os"
	"os/exec"
)

// start leaves the child in this process's group: without Pdeathsig to end
// it with its parent, only a signal to the group (a terminal's Ctrl-C)
// reaches it once the parent is gone. A stopped child's descendants may
// outlive it.
func start(cmd *exec.Cmd, stop os.Signal) (func() error, error) {
	cmd.Cancel = func() error { return cmd.Process.Signal(stop) }
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd.Wait, nil
}
