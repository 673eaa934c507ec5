package emu_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// TestWildDevicePointers fails the dispatch where an address that no bound
// buffer holds becomes a device or constant pointer (`&x[0] + n` moved past
// its buffer, into memory that may well be mapped), naming the kernel, the
// line and the thread, where it read or wrote memory no kernel owns; an
// address inside a buffer, or one past its end, stays good
// (docs/msl-subset.md, "Checks the GPU does not make").
func TestWildDevicePointers(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = `#include <metal_stdlib>
using namespace metal;
float get(device float* p) { return *p; }
float cget(constant float* p) { return *p; }
kernel void decl(device float* x [[buffer(0)]], device float* y [[buffer(1)]], constant uint& n [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  device float* p = &x[0] + (i == 1 ? n : i);
  y[i] = *p;
}
kernel void param(device float* x [[buffer(0)]], device float* y [[buffer(1)]], constant uint& n [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  y[i] = get(&x[0] + (i == 1 ? n : i));
}
kernel void store(device float* x [[buffer(0)]], device float* y [[buffer(1)]], constant uint& n [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  device float* p = &y[0] + (i == 1 ? n : i);
  *p = x[i];
}
kernel void cons(constant float* x [[buffer(0)]], device float* y [[buffer(1)]], constant uint& n [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  y[i] = cget(&x[0] + (i == 1 ? n : i));
}
`
	lib := newLibrary(t, dev, src)
	for _, c := range []struct {
		kernel, space string
		line          int
	}{{"decl", "device", 6}, {"param", "device", 10}, {"store", "device", 13}, {"cons", "constant", 17}} {
		// n = 64: thread 1 reaches 256 bytes past a 16-byte buffer, in
		// memory the process maps.
		x, y := iotaBuf(t, dev, 4), iotaBuf(t, dev, 4)
		n := u32Buf(t, dev, []uint32{64})
		err := run(t, dev, pipe(t, lib, c.kernel, nil), [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: x}, arg{buf: y}, arg{buf: n})
		var ee *emu.ExecutionError
		want := fmt.Sprintf("kernel %s: k.metal:%d: a %s pointer to 0x", c.kernel, c.line, c.space)
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "lies in no bound buffer") ||
			!strings.Contains(err.Error(), "thread (1,0,0)") {
			t.Errorf("%s: got %v, want an ExecutionError saying %q of thread (1,0,0)", c.kernel, err, want)
		}
		// n = 1: in range (thread 1 reads x[1]).
		x, y = iotaBuf(t, dev, 4), newBuf(t, dev, 16)
		n = u32Buf(t, dev, []uint32{1})
		if err := run(t, dev, pipe(t, lib, c.kernel, nil), [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: x}, arg{buf: y}, arg{buf: n}); err != nil {
			t.Errorf("%s in range: %v", c.kernel, err)
		} else if got := f32s(y); got[0] != 0 || got[1] != 1 {
			t.Errorf("%s in range: %v", c.kernel, got)
		}
	}
}

// TestConstantPointerBounds holds a constant pointer made from a
// program-scope constant's address to that constant's bytes: an index past
// them fails the dispatch, naming the constant, where it read whatever the
// library's data held next.
func TestConstantPointerBounds(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const src = `#include <metal_stdlib>
using namespace metal;
constant float table[4] = {1, 2, 3, 4};
namespace q { constexpr constant static half levels[2] = {0.5h, 1.5h}; }
constant float scale = 2;
kernel void k(device float* y [[buffer(0)]], constant uint& n [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  constant float* c = table;
  constant half* h = q::levels;
  constant float* s = &scale;
  y[i] = c[i == 1 ? n : i] + float(h[i & 1]) + s[0];
}
`
	lib := newLibrary(t, dev, src)
	for _, c := range []struct {
		n    uint32
		want string
	}{
		{1, ""},
		{4, "kernel k: out-of-bounds access to program-scope constant 'table': bytes [16, 20) of its 16 bytes"},
		{1000, "kernel k: out-of-bounds access to program-scope constant 'table': bytes [4000, 4004) of its 16 bytes"},
	} {
		y := newBuf(t, dev, 8)
		err := run(t, dev, pipe(t, lib, "k", nil), [3]int{1, 1, 1}, [3]int{2, 1, 1}, arg{buf: y}, arg{buf: u32Buf(t, dev, []uint32{c.n})})
		if c.want == "" {
			if err != nil {
				t.Errorf("n=%d: %v", c.n, err)
			} else if got := f32s(y); got[0] != 3.5 || got[1] != 5.5 {
				t.Errorf("n=%d: y = %v, want [3.5 5.5]", c.n, got)
			}
			continue
		}
		var ee *emu.ExecutionError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "thread (1,0,0)") {
			t.Errorf("n=%d: got %v, want an ExecutionError saying %q of thread (1,0,0)", c.n, err, c.want)
		}
	}
}
