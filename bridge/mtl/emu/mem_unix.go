//go:build unix

package emu

import "syscall"

// allocShared maps zeroed memory outside the Go heap: the C runtime keeps
// pointers into it, and the GC must neither move nor scan it.
func allocShared(n int) ([]byte, error) {
	return syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
}

func freeShared(b []byte) { _ = syscall.Munmap(b) }
