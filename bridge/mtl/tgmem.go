package mtl

import (
	"fmt"
	"math"
)

// ThreadgroupArg is one of a kernel's [[threadgroup(n)]] arguments, whose
// memory the encoder sizes with SetThreadgroupMemoryLength(length, n).
type ThreadgroupArg struct {
	Name  string
	Index int
}

// ThreadgroupLengths is a compute encoder's threadgroup memory lengths by
// [[threadgroup(n)]] index. As in Metal, a length stays set for the
// encoder's later dispatches (setThreadgroupMemoryLength:atIndex: is encoder
// state, like a bound buffer), but a dispatch is given memory only at the
// indices its own kernel's threadgroup arguments use: a length an earlier
// kernel left at another index is not this one's. Both devices size and
// check dispatches by it.
type ThreadgroupLengths [31]int

// Set is SetThreadgroupMemoryLength(length, index), refusing what Metal's
// API validation refuses.
func (l *ThreadgroupLengths) Set(length, index int) error {
	switch {
	case index < 0 || index >= len(l):
		return fmt.Errorf("SetThreadgroupMemoryLength: index %d out of range [0, 30]", index)
	case length < 0 || length%16 != 0:
		return fmt.Errorf("SetThreadgroupMemoryLength: %d bytes is not a multiple of 16", length)
	}
	l[index] = length
	return nil
}

// Dynamic is the dynamic threadgroup memory one threadgroup of kernel takes:
// the lengths at args' indices. It refuses a threadgroup argument left
// without memory, and static (the pipeline's staticThreadgroupMemoryLength)
// and dynamic memory together over limit, the device's
// maxThreadgroupMemoryLength: Metal's validation fails such a dispatch, and
// a GPU given it faults or reads out of bounds instead.
func (l *ThreadgroupLengths) Dynamic(kernel string, args []ThreadgroupArg, static, limit int) (int, error) {
	dyn := 0
	for _, a := range args {
		if a.Index < 0 || a.Index >= len(l) {
			return 0, fmt.Errorf("kernel %s: threadgroup(%d) '%s': index out of range [0, 30]", kernel, a.Index, a.Name)
		}
		n := l[a.Index]
		if n == 0 {
			return 0, fmt.Errorf("kernel %s: threadgroup(%d) '%s' has no memory (SetThreadgroupMemoryLength)", kernel, a.Index, a.Name)
		}
		dyn = min(dyn, math.MaxInt-n) + n // saturates: Set keeps each length at least 0
	}
	if static > limit || dyn > limit-static {
		total := min(dyn, math.MaxInt-static) + static
		return dyn, fmt.Errorf("kernel %s: %d bytes of threadgroup memory (%d static, %d dynamic) exceed the device's %d", kernel, total, static, dyn, limit)
	}
	return dyn, nil
}
