//go:build !unix

package mapfile

import (
	"errors"
	"os"
)

// errNoMap: without mmap the file is read into memory: correct, just not
// zero-copy.
var errNoMap = errors.New("no mmap on this platform")

func mmap(fh *os.File, size int) ([]byte, func() error, error) {
	return nil, nil, errNoMap
}

// dontNeed is never reached: nothing is mapped.
func dontNeed(b []byte) {}
