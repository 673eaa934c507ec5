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
// mid-page, as long as they are 16-byte aligned (the kernels' widest load);
// unaligned ones and heap memory through Weight are copied.
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
	for i := range mem {
		mem[i] = byte(i)
	}
	for _, c := range []struct {
		off   int
		alias bool
	}{{112, true}, {100, false}, {page, true}} {
		data := mem[c.off : c.off+4*1000] // 1000 f32, crossing a page
		w, err := be.WeightMapped(bridge.F32, []int{1000}, data)
		if err != nil {
			t.Fatal(err)
		}
		got := w.(*tensor).contents()
		if aliased := unsafe.SliceData(got) == unsafe.SliceData(data); aliased != c.alias || string(got) != string(data) {
			t.Errorf("offset %d: aliased %v, want %v (equal contents: %v)", c.off, aliased, c.alias, string(got) == string(data))
		}
	}
	data := mem[100 : 100+4*1000]
	c, err := be.Weight(bridge.F32, []int{1000}, data)
	if err != nil {
		t.Fatal(err)
	}
	if cc := c.(*tensor).contents(); unsafe.SliceData(cc) == unsafe.SliceData(data) || string(cc) != string(data) {
		t.Fatal("Weight did not make an equal copy")
	}
}
