package host

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Resident is how many bytes of the pages b spans are in memory
// (mincore(2)), -1 where the kernel does not say.
func Resident(b []byte) int64 {
	if len(b) == 0 {
		return 0
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&b[0]))
	first := start &^ (page - 1)
	n := (start + uintptr(len(b)) - first + page - 1) / page
	vec := make([]byte, n)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, first, n*page, uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return -1
	}
	var in int64
	for _, v := range vec {
		in += int64(v & 1)
	}
	return in * int64(page)
}
