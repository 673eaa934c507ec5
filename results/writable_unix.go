//go:build unix

package results

import "golang.org/x/sys/unix"

// writable is nil where this process may make files in the folder dir.
func writable(dir string) error { return unix.Access(dir, unix.W_OK|unix.X_OK) }

// fileWritable is nil where this process may write the file path.
func fileWritable(path string) error { return unix.Access(path, unix.W_OK) }
