//go:build unix

package results

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with this id exists on this host
// (signal 0 checks without sending anything; EPERM: it exists, not ours).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
