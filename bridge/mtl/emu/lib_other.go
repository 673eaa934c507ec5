//go:build !(darwin || linux || freebsd || netbsd)

package emu

import (
	"fmt"
	"runtime"
)

func openLib(path string) (*clib, error) {
	return nil, fmt.Errorf("msl-emu: loading compiled kernels is not supported on %s", runtime.GOOS)
}
