//go:build unix

package offheap

import "golang.org/x/sys/unix"

// Alloc returns n zeroed bytes outside the Go heap, the function that
// frees them, and whether they are an mmap (false when it fell back to the
// heap). Weights are the bulk of a process's memory; on the heap, the GC
// pacer would let garbage grow to as much again before collecting
// (GOGC=100), doubling peak RSS.
func Alloc(n int) ([]byte, func(), bool) {
	if n == 0 {
		return nil, func() {}, false
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return make([]byte, n), func() {}, false
	}
	adviseHugePages(b)
	return b, func() { unix.Munmap(b) }, true
}
