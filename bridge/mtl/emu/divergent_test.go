package emu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// divergentHelpers are functions whose simd operations kernels reach from
// both sides of a divergent branch; the _ni ones are never inlined, so one
// copy of the operation serves every call.
const divergentHelpers = `#include <metal_stdlib>
using namespace metal;
float sum_of(float v) { return simd_sum(v); }
__attribute__((noinline)) float sum_of_ni(float v) { return simd_sum(v); }
float xor_of(float v) { return simd_shuffle_xor(v, 1); }
__attribute__((noinline)) float xor_of_ni(float v) { return simd_shuffle_xor(v, 1); }
uint ballot_of(bool b) { return uint(simd_vote::vote_t(simd_ballot(b))); }
float first_of(float v) { return simd_broadcast_first(v); }
__attribute__((noinline)) float prefix_of(float v) { return simd_prefix_exclusive_sum(v); }
float quad_of(float v) { return quad_sum(v); }
float nested(float v) { return sum_of(v) + 1; }
__attribute__((noinline)) float nested_ni(float v) { return sum_of_ni(v) * 2; }
__attribute__((noinline)) float bump(float v) { return v + 2; }
__attribute__((noinline)) float pick(bool c, float v) {
  if (c)
    return sum_of_ni(v);
  return sum_of_ni(100.0f * v);
}
`

// TestDivergentHelper runs kernels whose lanes split at a branch and call
// one function on both sides. On a GPU each side runs with only its own
// lanes active, so a simd operation in the function sees those alone; the
// emulator took both sides' calls for one operation, as they wait at the
// same line of the function, so a simd_sum summed both sides' lanes and a
// shuffle read the other side's values. Lanes that call the function
// together (no divergence, or a loop all of them run) stay one operation
// (docs/msl-subset.md, "Synchronisation and SIMD groups"). Each kernel
// runs on one simdgroup; d[i] is a data-dependent condition and o[i] the
// lane's result, as float or uint bits. The rule holds whatever clang
// inlines (-O0: nothing) and with either fiber switch.
func TestDivergentHelper(t *testing.T) {
	eachBuild(t, checkDivergentHelper)
}

// eachBuild runs check on a device of each build a simd rule must hold in:
// the default, -O0 (clang inlines nothing) and the ucontext fiber switch.
func eachBuild(t *testing.T, check func(*testing.T, *emu.Device)) {
	for _, cflags := range [][]string{nil, {"-O0"}, {"-DMSL_EMU_UCONTEXT"}} {
		t.Run(fmt.Sprint(cflags), func(t *testing.T) {
			check(t, newDevice(t, emu.Options{CFlags: cflags}))
		})
	}
}

func checkDivergentHelper(t *testing.T, dev *emu.Device) {
	const poison = 0xffffffff
	d := make([]uint32, 32)
	for i := range d {
		d[i] = uint32((i*7 + 3) % 11 % 2)
	}
	// sum adds v over the lanes in.
	sum := func(in func(l int) bool, v func(l int) float32) float32 {
		var s float32
		for l := range 32 {
			if in(l) {
				s += v(l)
			}
		}
		return s
	}
	f := math.Float32bits
	even := func(l int) bool { return l%2 == 0 }
	odd := func(l int) bool { return l%2 == 1 }
	low := func(l int) bool { return l < 5 }
	high := func(l int) bool { return l >= 5 }
	set := func(l int) bool { return d[l] != 0 }
	unset := func(l int) bool { return d[l] == 0 }
	lane := func(l int) float32 { return float32(l) }
	const1 := func(c float32) func(int) float32 { return func(int) float32 { return c } }
	byParity := func(i int) uint32 {
		if i%2 == 0 {
			return f(sum(even, lane))
		}
		return f(sum(odd, func(l int) float32 { return 100 * float32(l) }))
	}
	xorLow := func(i int) uint32 {
		switch {
		case i == 4 || i == 5: // their partners took the other side
			return poison
		case i < 4:
			return f(float32(i ^ 1))
		}
		return f(float32(i^1) + 100)
	}
	// Lanes with i % 4 == 2 run the loop twice, 8 of them each time; the
	// odd lanes call once, all 16.
	loopOrOnce := func(i int) uint32 {
		switch {
		case i%2 == 1:
			return f(16)
		case i%4 == 2:
			return f(16)
		}
		return f(0)
	}
	twice := func(i int) uint32 {
		if i < 5 {
			return f(sum(low, const1(1)) + sum(low, const1(10)))
		}
		return f(sum(high, const1(100)))
	}
	cases := []struct {
		body string
		want func(i int) uint32
	}{
		// Divergent: each side's lanes only.
		{"float r; if (i % 2 == 0) r = sum_of(float(i)); else r = sum_of(100.0f * i); o[i] = as_type<uint>(r)", byParity},
		{"float r; if (i % 2 == 0) r = sum_of_ni(float(i)); else r = sum_of_ni(100.0f * i); o[i] = as_type<uint>(r)", byParity},
		{"o[i] = as_type<uint>(i % 2 == 0 ? sum_of(float(i)) : sum_of(100.0f * i))", byParity},
		{"o[i] = as_type<uint>(i % 2 == 0 ? sum_of_ni(float(i)) : sum_of_ni(100.0f * i))", byParity},
		{"float r; if (i < 5) r = xor_of(float(i)); else r = xor_of(float(i) + 100); o[i] = as_type<uint>(r)", xorLow},
		{"float r; if (i < 5) r = xor_of_ni(float(i)); else r = xor_of_ni(float(i) + 100); o[i] = as_type<uint>(r)", xorLow},
		{"uint r; if (d[i] != 0) r = ballot_of(i % 3 == 0); else r = ballot_of(i % 3 == 0); o[i] = r", func(i int) uint32 {
			var m uint32
			for l := range 32 {
				if (d[l] != 0) == (d[i] != 0) && l%3 == 0 {
					m |= 1 << l
				}
			}
			return m
		}},
		{"float r; if (i % 3 != 0) r = first_of(float(i)); else r = first_of(float(i) + 100); o[i] = as_type<uint>(r)", func(i int) uint32 {
			if i%3 != 0 {
				return f(1)
			}
			return f(100)
		}},
		{"float r; if (i < 5) r = prefix_of(1.0f); else r = prefix_of(2.0f); o[i] = as_type<uint>(r)", func(i int) uint32 {
			if i < 5 {
				return f(float32(i))
			}
			return f(float32(2 * (i - 5)))
		}},
		{"float r; if (i % 2 == 0) r = quad_of(float(i)); else r = quad_of(100.0f * i); o[i] = as_type<uint>(r)", func(i int) uint32 {
			q := i &^ 3
			if i%2 == 0 {
				return f(float32(q + q + 2))
			}
			return f(100 * float32(q+1+q+3))
		}},
		// A function calling one that holds the operation.
		{"float r; if (d[i] != 0) r = nested(float(i)); else r = nested(1000.0f); o[i] = as_type<uint>(r)", func(i int) uint32 {
			if d[i] != 0 {
				return f(sum(set, lane) + 1)
			}
			return f(sum(unset, const1(1000)) + 1)
		}},
		{"float r; if (d[i] != 0) r = nested_ni(float(i)); else r = nested_ni(1000.0f); o[i] = as_type<uint>(r)", func(i int) uint32 {
			if d[i] != 0 {
				return f(2 * sum(set, lane))
			}
			return f(2 * sum(unset, const1(1000)))
		}},
		// Both sides end their function with the call (a jump for clang).
		{"o[i] = as_type<uint>(pick(i % 2 == 0, float(i)))", byParity},
		// A loop whose trip count differs by lane on one side.
		{"float s = 0; if (i % 2 == 0) { for (uint k = 0; k < i % 4; k++) s += sum_of(1.0f); } else { s = sum_of(1.0f); } o[i] = as_type<uint>(s)", loopOrOnce},
		{"float s = 0; if (i % 2 == 0) { for (uint k = 0; k < i % 4; k++) s += sum_of_ni(1.0f); } else { s = sum_of_ni(1.0f); } o[i] = as_type<uint>(s)", loopOrOnce},
		// One side calls the function twice.
		{"float r; if (i < 5) r = sum_of(1.0f) + sum_of(10.0f); else r = sum_of(100.0f); o[i] = as_type<uint>(r)", twice},
		{"float r; if (i < 5) { r = sum_of_ni(1.0f); r += sum_of_ni(10.0f); } else { r = sum_of_ni(100.0f); } o[i] = as_type<uint>(r)", twice},
		// Converged: every lane calls the function at once.
		{"o[i] = as_type<uint>(sum_of(float(i)))", func(int) uint32 { return f(sum(even, lane) + sum(odd, lane)) }},
		{"o[i] = as_type<uint>(nested_ni(float(i)) + sum_of_ni(1.0f))", func(int) uint32 { return f(2*(sum(even, lane)+sum(odd, lane)) + 32) }},
		{"float s = 0; for (uint k = 0; k < 3; k++) s += xor_of_ni(float(i + k)); o[i] = as_type<uint>(s)", func(i int) uint32 {
			return f(float32(3*(i^1) + 3))
		}},
		// A call all lanes make between two branches on one condition,
		// which clang would copy into both.
		{"float a = 1.0f; if (i < 5) a = bump(a); float s = sum_of_ni(a); if (i < 5) s = bump(s); o[i] = as_type<uint>(s)", func(i int) uint32 {
			if i < 5 {
				return f(5*3 + 27 + 2)
			}
			return f(5*3 + 27)
		}},
		// A loop whose trip count differs by lane: iteration k has the
		// lanes that run it (24, 16, 8).
		{"float s = 0; for (uint k = 0; k < i % 4; k++) s += sum_of_ni(1.0f); o[i] = as_type<uint>(s)", func(i int) uint32 {
			return f([]float32{0, 24, 40, 48}[i%4])
		}},
		{"float r = 0; if (i < 5) r = sum_of(1.0f); o[i] = as_type<uint>(r)", func(i int) uint32 {
			if i < 5 {
				return f(5)
			}
			return f(0)
		}},
	}
	lib := caseLibrary(t, dev, divergentHelpers, len(cases), func(name string, j int) string {
		return fmt.Sprintf("kernel void %s(device uint* o [[buffer(0)]], device const uint* d [[buffer(1)]], uint i [[thread_position_in_grid]]) { %s; }\n", name, cases[j].body)
	})
	for j, c := range cases {
		o := u32Buf(t, dev, make([]uint32, 32))
		if err := runCase(t, dev, lib, j, 32, arg{buf: o}, arg{buf: u32Buf(t, dev, d)}); err != nil {
			t.Errorf("%s: %v", c.body, err)
			continue
		}
		for i, v := range u32s(o) {
			if w := c.want(i); v != w {
				t.Errorf("%s: o[%d] = %#x, want %#x", c.body, i, v, w)
				break
			}
		}
	}
}
