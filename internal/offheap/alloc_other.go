//go:build !unix

package offheap

// Alloc is the Go heap where there is no mmap: the bytes, a free that does
// nothing, and false.
func Alloc(n int) ([]byte, func(), bool) { return make([]byte, n), func() {}, false }
