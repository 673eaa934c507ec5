//go:build unix

package gguf

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

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

// Drop tells the OS that b, bytes of the mapping, will not be read again
// (a tensor that was transcoded): the whole pages it spans leave the
// process's resident set. Pages are re-read from the file if touched.
func (f *File) Drop(b []byte) {
	if !f.Mapped(b) {
		return
	}
	page := uintptr(os.Getpagesize())
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo, hi := (p+page-1)&^(page-1), (p+uintptr(len(b)))&^(page-1)
	if hi <= lo {
		return
	}
	_ = unix.Madvise(b[lo-p:hi-p], unix.MADV_DONTNEED)
}
