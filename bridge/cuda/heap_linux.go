//go:build linux

package cuda

import (
	"sync"

	"github.com/ebitengine/purego"
)

var (
	trimOnce sync.Once
	trimFn   uintptr // glibc's malloc_trim, 0 where the C library has none
)

// giveBackHeap hands the C heap's free pages back to the system. NVRTC
// compiles the kernel programs side by side, each thread in a glibc arena
// of its own, and what those compiles free stays resident otherwise: about
// 2 GiB held through the run after a first compile on a 16-core host
// (docs/cuda.md, "Setup").
func giveBackHeap() {
	trimOnce.Do(func() {
		h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			return // not glibc: musl returns freed memory itself
		}
		trimFn, _ = purego.Dlsym(h, "malloc_trim")
	})
	if trimFn != 0 {
		purego.SyscallN(trimFn, 0)
	}
}
