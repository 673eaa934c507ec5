//go:build unix

package metal

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// Weights in mmap'd memory are aliased, not copied, also when they start
// mid-page; heap memory through Weight is copied.
func TestWeightMappedAliases(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skip(err)
	}
	be, err := New(emu.New(emu.Options{}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	data := mem[100 : 100+4*1000] // 1000 f32, not page-aligned, crossing a page
	for i := range data {
		data[i] = byte(i)
	}
	w, err := be.WeightMapped(bridge.F32, []int{1000}, data)
	if err != nil {
		t.Fatal(err)
	}
	got := w.(*tensor).contents()
	if unsafe.SliceData(got) != unsafe.SliceData(data) || len(got) != len(data) {
		t.Fatal("WeightMapped copied the weights instead of aliasing them")
	}
	c, err := be.Weight(bridge.F32, []int{1000}, data)
	if err != nil {
		t.Fatal(err)
	}
	if cc := c.(*tensor).contents(); unsafe.SliceData(cc) == unsafe.SliceData(data) || string(cc) != string(data) {
		t.Fatal("Weight did not make an equal copy")
	}
}
