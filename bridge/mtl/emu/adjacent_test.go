//go:build unix

package emu_test

import (
	"encoding/binary"
	"os"
	"syscall"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// Two buffers side by side in memory, the second's first element taken
// with & and handed to a function: its bounds are the second binding's, not
// the first's, whose one-past-the-end address it also is. Reading it as
// the first's reported a valid atomic as out of bounds.
func TestAdjacentBindings(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	page := os.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	before, err := dev.NewBufferNoCopy(mem[:page])
	if err != nil {
		t.Fatal(err)
	}
	defer before.Release()
	counts, err := dev.NewBufferNoCopy(mem[page:])
	if err != nil {
		t.Fatal(err)
	}
	defer counts.Release()
	p := pipe(t, testLibrary(t, dev, "idioms.metal"), "bump_first", nil)
	if err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{64, 1, 1}, arg{buf: before}, arg{buf: counts}); err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint32(counts.Contents()); got != 64 {
		t.Errorf("counts[0] = %d, want 64", got)
	}
}
