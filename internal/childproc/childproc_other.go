//go:build !linux

package childproc

import "os/exec"

// run leaves the child in this process's group: without Pdeathsig to end it
// with its parent, only a signal to the group (a terminal's Ctrl-C) reaches
// it once the parent is gone. A stopped child's descendants may outlive it.
func run(cmd *exec.Cmd) error { return cmd.Run() }
