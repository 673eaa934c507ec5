//go:build !unix

package safetensors

import "os"

// Without mmap the file is read into memory: correct, just not zero-copy.
func mapFile(fh *os.File, size int) ([]byte, func() error, error) {
	return readAll(fh, size)
}
