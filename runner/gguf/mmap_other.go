//go:build !unix

package gguf

import "os"

// Without mmap the file is read into memory: correct, just not zero-copy.
func mapFile(fh *os.File, size int) ([]byte, func() error, bool, error) {
	data, release, err := readAll(fh, size)
	return data, release, false, err
}

// Drop does nothing where the file is read into memory: its bytes are one
// allocation, freed with the file.
func (f *File) Drop(b []byte) {}
