//go:build !unix

package results

// processAlive cannot tell here: every recorded owner counts as alive, so
// a run is never taken from a process that may still run it.
func processAlive(pid int) bool { return true }
