//go:build unix

package gguf

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func mapFile(fh *os.File, size int) ([]byte, func() error, bool, error) {
	data, err := unix.Mmap(int(fh.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if errors.Is(err, unix.ENODEV) {
		// Some filesystems (certain FUSE mounts, procfs-like) cannot be mapped.
		data, release, err := readAll(fh, size)
		return data, release, false, err
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("mmap: %w", err)
	}
	return data, func() error { return unix.Munmap(data) }, true, nil
}
