//go:build linux

package cuda

import "github.com/ebitengine/purego"

// puregoCall returns the raw result of a C function (for functions that
// return pointers).
//
//go:uintptrescapes
func puregoCall(fn uintptr, args ...uintptr) (uintptr, uintptr, uintptr) {
	return purego.SyscallN(fn, args...)
}
