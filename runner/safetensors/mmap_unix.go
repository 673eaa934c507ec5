//go:build unix

package safetensors

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func mapFile(fh *os.File, size int) ([]byte, func() error, error) {
	data, err := unix.Mmap(int(fh.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if errors.Is(err, unix.ENODEV) {
		// Some filesystems (certain FUSE mounts, procfs-like) cannot be mapped.
		return readAll(fh, size)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return data, func() error { return unix.Munmap(data) }, nil
}
