//go:build darwin || linux || freebsd || netbsd

package emu

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

var (
	clibsMu sync.Mutex
	clibs   = map[string]*clib{}
)

func openLib(path string) (*clib, error) {
	clibsMu.Lock()
	defer clibsMu.Unlock()
	if l := clibs[path]; l != nil {
		return l, nil
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("msl-emu: loading %s: %w", path, err)
	}
	var abiFn, sizeFn func() int64
	l := &clib{}
	purego.RegisterLibFunc(&abiFn, h, "msl_emu_abi")
	purego.RegisterLibFunc(&sizeFn, h, "msl_emu_desc_size")
	purego.RegisterLibFunc(&l.find, h, "msl_emu_find_kernel")
	purego.RegisterLibFunc(&l.staticTG, h, "msl_emu_static_tg")
	purego.RegisterLibFunc(&l.begin, h, "msl_emu_begin")
	purego.RegisterLibFunc(&l.work, h, "msl_emu_work")
	if a, s := abiFn(), sizeFn(); a != abi || s != int64(unsafe.Sizeof(cDesc{})) {
		return nil, fmt.Errorf("msl-emu: %s has runtime ABI %d (desc %d bytes), want %d (%d bytes)", path, a, s, abi, unsafe.Sizeof(cDesc{}))
	}
	clibs[path] = l
	return l, nil
}
