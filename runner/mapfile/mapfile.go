// Package mapfile maps a checkpoint file read-only. Readers (runner/gguf,
// runner/safetensors) hand tensors out as sub-slices of the mapping, which a
// backend that shares host memory wraps in place; a backend that copies a
// tensor instead gives its pages back with Drop, so the weight is resident
// once, not also as the file's pages (docs/quantization.md, "Memory").
package mapfile

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/mtlbench/mtlbench/internal/readfile"
)

// Mapping is a whole file's bytes: an mmap where the platform and the file
// system allow it, else a copy on the heap.
type Mapping struct {
	data  []byte
	unmap func() error // nil when the file was read into the heap
}

// Map maps size bytes of fh read-only. The mapping outlives fh, which may be
// closed at once.
func Map(fh *os.File, size int) (*Mapping, error) {
	if size <= 0 {
		return nil, fmt.Errorf("cannot map %d bytes", size)
	}
	data, unmap, err := mmap(fh, size)
	if err == nil {
		return &Mapping{data: data, unmap: unmap}, nil
	}
	if !errors.Is(err, errNoMap) {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	// Some file systems (certain FUSE mounts, procfs-like) cannot be mapped.
	buf := make([]byte, size)
	n, err := fh.ReadAt(buf, 0)
	if n == size {
		return &Mapping{data: buf}, nil
	}
	if err == nil {
		err = errors.New("short read")
	}
	return nil, fmt.Errorf("file changed while reading: %w", err)
}

// Bytes is the file's contents, read-only, valid until Close.
func (m *Mapping) Bytes() []byte { return m.data }

// Mapped reports whether b lies inside the mmap (false when the file was
// read into the heap): memory a GPU may wrap without copying.
func (m *Mapping) Mapped(b []byte) bool {
	return m.unmap != nil && len(b) > 0 && within(b, m.data)
}

// Drop tells the OS that b, bytes of the mapping, will not be read again
// (a tensor a backend copied, or one transcoded): the whole pages it spans
// leave the process's resident set and are read from the file again if
// touched. Bytes outside the mapping are left alone, so Drop is safe on any
// memory (docs/quantization.md, "Memory").
func (m *Mapping) Drop(b []byte) {
	if !m.Mapped(b) {
		return
	}
	page := uintptr(os.Getpagesize())
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo, hi := (p+page-1)&^(page-1), (p+uintptr(len(b)))&^(page-1)
	if hi <= lo {
		return
	}
	dontNeed(b[lo-p : hi-p])
}

// Close unmaps the file; slices of it must not be used afterwards. Closing
// twice is harmless.
func (m *Mapping) Close() error {
	if m.data == nil {
		return nil
	}
	m.data = nil
	if m.unmap == nil {
		return nil
	}
	return m.unmap()
}

// within reports whether b lies inside region.
func within(b, region []byte) bool {
	if len(region) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	r := uintptr(unsafe.Pointer(unsafe.SliceData(region)))
	return p >= r && p+uintptr(len(b)) <= r+uintptr(len(region))
}

// CheckRegular fails unless path is a regular file (after symlinks): a
// FIFO, device or socket in a checkpoint would block or never end, and is
// checked before it is opened, since opening a FIFO waits for a writer.
func CheckRegular(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return readfile.PathError(path, err)
	}
	switch {
	case fi.IsDir():
		return fmt.Errorf("%s: not a regular file (a folder)", path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s: not a regular file (%s)", path, fi.Mode().Type())
	}
	return nil
}
