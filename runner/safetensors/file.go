package safetensors

import (
	"fmt"
	"maps"
	"math"
	"os"

	"github.com/mtlbench/mtlbench/internal/standin"
	"github.com/mtlbench/mtlbench/runner/mapfile"
)

// File is one memory-mapped .safetensors file. Its methods may be called
// concurrently, except Close, which must come after all other use.
type File struct {
	path      string
	data      []byte // the whole file: m's bytes, nil once closed
	m         *mapfile.Mapping
	dataStart int64
	tensors   []TensorInfo // sorted by Begin
	byName    map[string]int
	meta      map[string]string
}

// Open maps path read-only and validates its header. Errors name the path.
func Open(path string) (*File, error) {
	return open(path, -1)
}

// open is Open refusing a header of more than maxTensors tensors (-1: no
// bound).
func open(path string, maxTensors int) (*File, error) {
	// Checked before opening: opening a FIFO blocks until a writer comes.
	if err := mapfile.CheckRegular(path); err != nil {
		return nil, err
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError already names the path
	}
	// The mapping outlives the descriptor, so it can be closed right away.
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	size := fi.Size()
	if size < 8 {
		// Mapping an empty file fails with EINVAL; report the real problem.
		return nil, fmt.Errorf("%s: file has %d bytes, fewer than the 8-byte header length", path, size)
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("%s: %d bytes is too large to map on this platform", path, size)
	}
	m, err := mapfile.Map(fh, int(size))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// A download may leave a Git LFS pointer or a web page in its place.
	if err := standin.Check(path, m.Bytes()); err != nil {
		m.Close()
		return nil, err
	}
	tensors, meta, dataStart, err := parseHeader(m.Bytes(), size, maxTensors)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f := &File{path: path, data: m.Bytes(), m: m, dataStart: dataStart, tensors: tensors, meta: meta}
	f.byName = make(map[string]int, len(tensors))
	for i, t := range tensors {
		f.byName[t.Name] = i
	}
	return f, nil
}

// Path is the path given to Open.
func (f *File) Path() string { return f.path }

// Tensors lists the tensors in file order (by Begin). The result is a copy.
func (f *File) Tensors() []TensorInfo {
	out := make([]TensorInfo, len(f.tensors))
	for i, t := range f.tensors {
		out[i] = t.clone()
	}
	return out
}

// Info describes the named tensor.
func (f *File) Info(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.tensors[i].clone(), true
}

// Bytes returns the named tensor's bytes as a read-only sub-slice of the
// mapping, valid until Close. Its capacity is clipped so that an append
// copies instead of running into the next tensor.
func (f *File) Bytes(name string) ([]byte, error) {
	if f.data == nil {
		return nil, fmt.Errorf("%s: file is closed", f.path)
	}
	i, ok := f.byName[name]
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %q", f.path, name)
	}
	return f.slice(f.tensors[i]), nil
}

func (f *File) slice(t TensorInfo) []byte {
	b, e := f.dataStart+t.Begin, f.dataStart+t.End
	return f.data[b:e:e]
}

// Metadata returns a copy of the header's __metadata__ (nil if absent).
func (f *File) Metadata() map[string]string { return maps.Clone(f.meta) }

// Close unmaps the file. Slices from Bytes must not be used afterwards.
// Closing twice is harmless. There is deliberately no finalizer: slices
// handed out do not keep the File reachable, so a GC-driven unmap would pull
// memory from under them.
func (f *File) Close() error {
	if f.data == nil {
		return nil
	}
	f.data = nil
	if err := f.m.Close(); err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	return nil
}

// Memory is the memory the file holds: its mapping.
func (f *File) Memory() []byte { return f.m.Bytes() }

// Mapped reports whether b lies inside this file's mmap (not a heap copy):
// memory a GPU may wrap without copying.
func (f *File) Mapped(b []byte) bool { return f.m.Mapped(b) }

// Drop gives back the pages of b, bytes of this file's mapping that a
// backend has copied and will not read again; other memory is left alone
// (mapfile.Mapping.Drop).
func (f *File) Drop(b []byte) { f.m.Drop(b) }
