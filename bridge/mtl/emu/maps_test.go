package emu_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// Each library runs its threadgroups on a worker per OS thread, whose
// fiber stacks get guard pages; a worker must not take thousands of the
// process's memory mappings (Linux's vm.max_map_count, 65530 by default),
// or a process that loads a few dozen libraries can map no more memory.
func TestWorkerMappings(t *testing.T) {
	count := func() int {
		b, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Skipf("skipping: %v", err)
		}
		return bytes.Count(b, []byte("\n"))
	}
	dev := newDevice(t, emu.Options{Workers: 1})
	const src = `#include <metal_stdlib>
using namespace metal;
kernel void fill(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = i; }
`
	lib, err := dev.NewLibrary(map[string]string{"k.metal": src}, mtl.CompileOptions{LanguageVersion: "3.1"})
	if err != nil {
		t.Fatal(err)
	}
	p := pipe(t, lib, "fill", nil)
	out := newBuf(t, dev, 4*64)
	before := count()
	if err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{64, 1, 1}, arg{buf: out}); err != nil {
		t.Fatal(err)
	}
	if added := count() - before; added > 512 {
		t.Errorf("a dispatch of 64 threads on a new library added %d memory mappings, want at most 512", added)
	}
}
