package emu_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// toBF16 rounds f to bfloat16 to nearest even, as the kernels' bf16_t does.
func toBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return 0x7fc0
	}
	return uint16((b + (b>>16)&1 + 0x7fff) >> 16)
}

func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// rbf rounds f through bfloat16.
func rbf(f float32) float32 { return fromBF16(toBF16(f)) }

// TestSpaceOverloads runs kernels in MLX's style whose functions and
// operators are overloaded by the address space of a reference parameter
// (testdata/space_overloads.metal): they build, and each call runs the
// overload for its argument's space, as Metal picks it.
func TestSpaceOverloads(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "space_overloads.metal")
	const n = 32

	t.Run("bf16", func(t *testing.T) {
		const a = float32(1.7)
		xs, ys := make([]float32, n), make([]float32, n)
		y, x := newBuf(t, dev, 2*n), newBuf(t, dev, 2*n)
		for i := range n {
			xs[i] = rbf(float32(i-16) * 0.37)
			ys[i] = rbf(float32(i) * 0.13)
			binary.LittleEndian.PutUint16(x.Contents()[2*i:], toBF16(xs[i]))
			binary.LittleEndian.PutUint16(y.Contents()[2*i:], toBF16(ys[i]))
		}
		sums := newBuf(t, dev, 4*3*n)
		if err := run(t, dev, pipe(t, lib, "bf16_ops", nil), [3]int{1, 1, 1}, [3]int{n, 1, 1},
			arg{buf: y}, arg{buf: x}, arg{buf: sums}, arg{bytes: u32Bytes(math.Float32bits(a))}); err != nil {
			t.Fatal(err)
		}
		tg := make([]float32, n)
		for i := range n {
			tg[i] = rbf(xs[i] + xs[i])
		}
		var acc, facc float32
		for _, v := range tg {
			acc = rbf(acc + v)
			facc += v
		}
		got := f32s(sums)
		for i := range n {
			ax := rbf(rbf(a) * xs[i])
			want := rbf(rbf(rbf(ys[i]+ax)*xs[i]) - xs[i])
			if g := fromBF16(binary.LittleEndian.Uint16(y.Contents()[2*i:])); g != want {
				t.Errorf("y[%d] = %v, want %v", i, g, want)
			}
			for j, w := range []float32{acc, facc, tg[i]} {
				if got[3*i+j] != w {
					t.Errorf("sums[%d] = %v, want %v", 3*i+j, got[3*i+j], w)
				}
			}
		}
	})

	t.Run("complex", func(t *testing.T) {
		av, bv, ov := make([]float32, 2*8), make([]float32, 2*n), make([]float32, 2*n)
		for k := range 8 {
			av[2*k], av[2*k+1] = float32(k-3), float32(2*k+1)
		}
		for i := range n {
			bv[2*i], bv[2*i+1] = float32(i%5-2), float32(i%3)
			ov[2*i], ov[2*i+1] = float32(i), float32(-i)
		}
		out := f32Buf(t, dev, ov)
		if err := run(t, dev, pipe(t, lib, "complex_mac", nil), [3]int{1, 1, 1}, [3]int{n, 1, 1},
			arg{buf: f32Buf(t, dev, av)}, arg{buf: f32Buf(t, dev, bv)}, arg{buf: out}); err != nil {
			t.Fatal(err)
		}
		mul := func(ar, ai, br, bi float32) (float32, float32) { return ar*br - ai*bi, ar*bi + ai*br }
		var sr, si float32
		for k := range 8 {
			pr, pi := mul(av[2*k], av[2*k+1], bv[2*k], bv[2*k+1])
			sr, si = sr+pr, si+pi
		}
		got := f32s(out)
		for i := range n {
			var ar, ai float32
			for k := range 8 {
				pr, pi := mul(av[2*k], av[2*k+1], bv[2*i], bv[2*i+1])
				ar, ai = ar+pr, ai+pi
			}
			wr, wi := ov[2*i]+ar+sr, ov[2*i+1]+ai+si
			if got[2*i] != wr || got[2*i+1] != wi {
				t.Errorf("out[%d] = (%v, %v), want (%v, %v)", i, got[2*i], got[2*i+1], wr, wi)
			}
		}
	})

	t.Run("bodies differ", func(t *testing.T) {
		// which(x) adds 1000 for a thread x, 2000 device, 3000 constant
		// (an argument's and a program-scope constant's), 4000
		// threadgroup; move_to scales by 2, 3 or 5 after its spaces.
		init := make([]float32, 2*n)
		for i := range n {
			init[i] = float32(10 * i)
		}
		out := f32Buf(t, dev, init)
		const c = float32(7)
		if err := run(t, dev, pipe(t, lib, "which_space", nil), [3]int{1, 1, 1}, [3]int{n, 1, 1},
			arg{buf: out}, arg{bytes: u32Bytes(math.Float32bits(c))}); err != nil {
			t.Fatal(err)
		}
		got := f32s(out)
		for i := range n {
			fi := float32(i)
			r := (fi + 1000) + (10*fi + 2000) + (c + 3000) + (0.25 + 3000) + (fi + 4000)
			if got[n+i] != r {
				t.Errorf("which: out[%d] = %v, want %v", n+i, got[n+i], r)
			}
			if w := (3*fi + 5*10*fi) * 2; got[i] != w {
				t.Errorf("move_to: out[%d] = %v, want %v", i, got[i], w)
			}
		}
	})

	t.Run("member", func(t *testing.T) {
		// add_to adds 2 to a thread float, 20 to a device one and 200 to
		// a threadgroup one.
		init := make([]float32, n)
		for i := range init {
			init[i] = float32(i)
		}
		out := f32Buf(t, dev, init)
		if err := run(t, dev, pipe(t, lib, "member_space", nil), [3]int{1, 1, 1}, [3]int{n, 1, 1}, arg{buf: out}); err != nil {
			t.Fatal(err)
		}
		for i, v := range f32s(out) {
			if w := init[i] + 20 + (2 + 200); v != w {
				t.Errorf("out[%d] = %v, want %v", i, v, w)
			}
		}
	})

	t.Run("no overload for the space", func(t *testing.T) {
		err := run(t, dev, pipe(t, lib, "no_device_overload", nil), [3]int{1, 1, 1}, [3]int{n, 1, 1}, arg{buf: newBuf(t, dev, 4*n)})
		wantExecError(t, err, "kernel no_device_overload: space_overloads.metal:",
			"no overload of only_local takes references to (device) memory; its overloads take (thread), (threadgroup)")
	})
}

// TestArrayParameters runs functions whose array parameters are declared
// in an address space, as MLX's elem_to_loc_2 takes `constant const
// int64_t strides[2]`: the parameter is a pointer of that space, which
// took no constant or threadgroup pointer and failed to build ("no known
// conversion from 'ptr<const int64_t, 2>' to 'const int64_t *'").
func TestArrayParameters(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := newLibrary(t, dev, `#include <metal_stdlib>
using namespace metal;
template <typename IdxT = int64_t>
METAL_FUNC IdxT loc2(uint2 elem, constant const int64_t strides[2]) {
  return elem.x * IdxT(strides[1]) + elem.y * IdxT(strides[0]);
}
METAL_FUNC float first_of(const threadgroup float buf[8], device const float rows[4]) { return buf[0] + rows[1]; }
kernel void k(
    device const float* a [[buffer(0)]],
    device float* c [[buffer(1)]],
    constant const int64_t* st [[buffer(2)]],
    uint2 index [[thread_position_in_grid]],
    uint lid [[thread_index_in_threadgroup]]) {
  threadgroup float tg[8];
  tg[lid] = a[lid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  c[index.x + 4 * index.y] = a[loc2(index, st)] + first_of(tg, a);
}
`)
	a := make([]float32, 8)
	for i := range a {
		a[i] = float32(10 + i)
	}
	strides := make([]byte, 16)
	binary.LittleEndian.PutUint64(strides, 4)
	binary.LittleEndian.PutUint64(strides[8:], 1)
	c := newBuf(t, dev, 4*8)
	if err := run(t, dev, pipe(t, lib, "k", nil), [3]int{1, 1, 1}, [3]int{4, 2, 1},
		arg{buf: f32Buf(t, dev, a)}, arg{buf: c}, arg{bytes: strides}); err != nil {
		t.Fatal(err)
	}
	for j, v := range f32s(c) {
		if w := a[j] + a[0] + a[1]; v != w {
			t.Errorf("c[%d] = %v, want %v", j, v, w)
		}
	}
}

// TestIncludesFromTheRoot builds a library whose headers include each
// other by their paths from the sources' root, as MLX's do
// (`#include "mlx/backend/metal/kernels/bf16.h"` in a header of that
// folder), which its build resolves with `-I` the root: a nested header's
// include was looked up in its own folder alone and not found.
func TestIncludesFromTheRoot(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib, err := dev.NewLibrary(map[string]string{
		"k.metal": `#include "kern/ops/a.h"
kernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = twice_plus_one(x[i]); }
`,
		"kern/ops/a.h": "#pragma once\n#include \"kern/ops/b.h\"\nMETAL_FUNC float twice_plus_one(float v) { return twice(v) + 1; }\n",
		"kern/ops/b.h": "#pragma once\n#include <metal_stdlib>\nusing namespace metal;\nMETAL_FUNC float twice(float v) { return 2 * v; }\n",
	}, mtl.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x := iotaBuf(t, dev, 8)
	if err := run(t, dev, pipe(t, lib, "k", nil), [3]int{1, 1, 1}, [3]int{8, 1, 1}, arg{buf: x}); err != nil {
		t.Fatal(err)
	}
	for i, v := range f32s(x) {
		if w := float32(2*i + 1); v != w {
			t.Errorf("x[%d] = %v, want %v", i, v, w)
		}
	}
}
