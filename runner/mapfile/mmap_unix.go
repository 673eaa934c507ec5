//go:build unix

package mapfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// errNoMap: the file system cannot map files; the caller reads it instead.
var errNoMap = unix.ENODEV

func mmap(fh *os.File, size int) ([]byte, func() error, error) {
	data, err := unix.Mmap(int(fh.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return unix.Munmap(data) }, nil
}

// dontNeed drops whole pages of a read-only file mapping: they come back
// from the file (or the page cache) when next touched, so no data is lost.
func dontNeed(b []byte) { _ = unix.Madvise(b, unix.MADV_DONTNEED) }
