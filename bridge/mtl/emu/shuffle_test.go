package emu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// A shuffle that reads an inactive lane (one that returned, lies past a
// partial simdgroup or took the other branch) gets poison, every bit set,
// as Metal leaves that value undefined; it gave the reading lane its own
// value, so a kernel that used it computed right here and maybe wrong on a
// Mac. A source outside the segment (down past lane 31 or a cluster's
// edge) keeps Metal's defined value, and simd_broadcast_first reads the
// first active lane. Each kernel runs on one threadgroup of threads lanes
// and writes the bits of its result at o[i]; a lane that writes nothing
// leaves keep there (docs/msl-subset.md, "Synchronisation and SIMD groups").
func TestShuffleInactiveLane(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const keep, poison32, poison16 = keepBits, 0xffffffff, 0xffff
	f := func(v float32) uint32 { return math.Float32bits(v) }
	cases := []struct {
		threads int
		body    string
		want    func(i int) uint32
	}{
		// Lanes 24-27 return: 20-23 read them, 28-31 read past lane 31.
		{32, "if (i >= 24 && i < 28) return; o[i] = as_type<uint>(simd_shuffle_down(float(i), 4))", func(i int) uint32 {
			switch {
			case i < 20:
				return f(float32(i + 4))
			case i < 24:
				return poison32
			case i < 28:
				return keep
			}
			return f(float32(i))
		}},
		// Lanes 0-7 return: 8-10 read them; with all lanes in, 0-2 keep
		// their own values.
		{32, "if (i < 8) return; o[i] = as_type<uint>(simd_shuffle_up(float(i), 3))", func(i int) uint32 {
			switch {
			case i < 8:
				return keep
			case i < 11:
				return poison32
			}
			return f(float32(i - 3))
		}},
		{32, "o[i] = as_type<uint>(simd_shuffle_up(float(i), 3))", func(i int) uint32 {
			if i < 3 {
				return f(float32(i))
			}
			return f(float32(i - 3))
		}},
		// A partial simdgroup of 20 lanes: 4-15 read lanes 20-31.
		{20, "o[i] = as_type<uint>(simd_shuffle_xor(float(i), 16))", func(i int) uint32 {
			switch {
			case i >= 20:
				return keep
			case i >= 4 && i < 16:
				return poison32
			}
			return f(float32(i ^ 16))
		}},
		// The even lanes read the odd ones, which take the other branch.
		{32, "float v = float(i); if (i % 2 == 0) v = simd_shuffle(v, i + 1); o[i] = as_type<uint>(v)", func(i int) uint32 {
			if i%2 == 0 {
				return poison32
			}
			return f(float32(i))
		}},
		{32, "if (i == 5) return; o[i] = uint(simd_shuffle_rotate_down(int(i), 1))", func(i int) uint32 {
			switch i {
			case 4:
				return poison32
			case 5:
				return keep
			}
			return uint32((i + 1) % 32)
		}},
		{32, "if (i == 0) return; o[i] = simd_shuffle_rotate_up(uint(i), 1)", func(i int) uint32 {
			switch i {
			case 0:
				return keep
			case 1:
				return poison32
			}
			return uint32(i - 1)
		}},
		{32, "if (i < 4) return; o[i] = simd_broadcast(ushort(i), 2)", func(i int) uint32 {
			if i < 4 {
				return keep
			}
			return poison16
		}},
		{32, "if (i >= 16) return; o[i] = as_type<ushort>(simd_shuffle_down(half(i), 8))", func(i int) uint32 {
			switch {
			case i >= 16:
				return keep
			case i >= 8:
				return poison16
			}
			return uint32(f32ToF16(float32(i + 8)))
		}},
		// Per element: both of a vector's components.
		{32, "if (i & 1) return; const float2 v = simd_shuffle_xor(float2(i, -float(i)), 1); o[i] = as_type<uint>(v.x) ^ as_type<uint>(v.y) ^ isnan(v.y)", func(i int) uint32 {
			if i&1 == 1 {
				return keep
			}
			return 1
		}},
		{32, "if (i % 4 == 0) return; o[i] = as_type<uint>(quad_shuffle_up(float(i), 1))", func(i int) uint32 {
			switch i % 4 {
			case 0:
				return keep
			case 1:
				return poison32
			}
			return f(float32(i - 1))
		}},
		// Lane 3 of each quad reads past the quad's edge: its own value.
		{32, "if (i % 4 == 2) return; o[i] = as_type<uint>(quad_shuffle_down(float(i), 1))", func(i int) uint32 {
			switch i % 4 {
			case 0:
				return f(float32(i + 1))
			case 1:
				return poison32
			case 2:
				return keep
			}
			return f(float32(i))
		}},
		{32, "if (i % 4 == 3) return; o[i] = quad_broadcast(int(i), 3)", func(i int) uint32 {
			if i%4 == 3 {
				return keep
			}
			return poison32
		}},
		// Clusters of 8; lanes 30 and 31 return: 26 and 27 read their data,
		// 28 and 29 the filling data of 24 and 25.
		{32, "if (i >= 30) return; o[i] = as_type<uint>(simd_shuffle_and_fill_down(float(i), float(i) + 100, 4, 8))", func(i int) uint32 {
			c := i % 8
			switch {
			case i >= 30:
				return keep
			case i == 26 || i == 27:
				return poison32
			case c < 4:
				return f(float32(i + 4))
			}
			return f(float32(i-4) + 100)
		}},
		// Clusters of 4; lanes 0 and 1 return: 2 and 3 read their data.
		{32, "if (i < 2) return; o[i] = as_type<uint>(simd_shuffle_and_fill_up(float(i), float(i) + 100, 2, 4))", func(i int) uint32 {
			c := i % 4
			switch {
			case i < 2:
				return keep
			case i < 4:
				return poison32
			case c < 2:
				return f(float32(i+2) + 100)
			}
			return f(float32(i - 2))
		}},
		// Each quad's lane 1 returns: lane 0 reads its data, lane 2 lane 3's
		// data, lane 3 (past the edge) lane 0's filling data.
		{32, "if (i % 4 == 1) return; o[i] = as_type<uint>(quad_shuffle_and_fill_down(float(i), float(i) + 100, 1))", func(i int) uint32 {
			switch i % 4 {
			case 0:
				return poison32
			case 1:
				return keep
			case 2:
				return f(float32(i + 1))
			}
			return f(float32(i-3) + 100)
		}},
		// An index that is no lane of the segment is no valid lane ID:
		// poison, all lanes active (a delta, past the edge, is defined).
		{32, "o[i] = as_type<uint>(simd_shuffle(float(i), i + 16))", func(i int) uint32 {
			if i >= 16 {
				return poison32
			}
			return f(float32(i + 16))
		}},
		{32, "o[i] = as_type<uint>(simd_shuffle(float(i), int(i) - 1))", func(i int) uint32 {
			if i == 0 {
				return poison32
			}
			return f(float32(i - 1))
		}},
		{32, "o[i] = as_type<uint>(quad_shuffle(float(i), (i % 4) + 1))", func(i int) uint32 {
			if i%4 == 3 {
				return poison32
			}
			return f(float32(i + 1))
		}},
		// A delta converts to ushort as Metal's parameter does: -1 is
		// 65535 lanes, past the edge, so each lane keeps its value.
		{32, "o[i] = as_type<uint>(simd_shuffle_up(float(i), -1))", func(i int) uint32 { return f(float32(i)) }},
		// The first active lane, which is defined.
		{32, "if (i < 3) return; o[i] = as_type<uint>(simd_broadcast_first(float(i)))", func(i int) uint32 {
			if i < 3 {
				return keep
			}
			return f(3)
		}},
		// Kernels that discard what they read from inactive lanes compute
		// right: a suffix sum over a partial simdgroup of 20 lanes, the
		// read kept by a branch and by select.
		{20, "float s = float(i); for (ushort d = 1; d < 32; d *= 2) { const float u = simd_shuffle_down(s, d); if (i + d < 20) s += u; } o[i] = as_type<uint>(s)", suffix},
		{20, "float s = float(i); for (ushort d = 1; d < 32; d *= 2) s += select(0.0f, simd_shuffle_down(s, d), i + d < 20); o[i] = as_type<uint>(s)", suffix},
	}
	lib := caseLibrary(t, dev, "#include <metal_stdlib>\nusing namespace metal;\n", len(cases), func(name string, j int) string {
		return fmt.Sprintf("kernel void %s(device uint* o [[buffer(0)]], uint i [[thread_position_in_grid]]) { %s; }\n", name, cases[j].body)
	})
	for j, c := range cases {
		init := make([]uint32, 32)
		for i := range init {
			init[i] = keep
		}
		o := u32Buf(t, dev, init)
		if err := runCase(t, dev, lib, j, c.threads, arg{buf: o}); err != nil {
			t.Errorf("%s: %v", c.body, err)
			continue
		}
		for i, v := range u32s(o) {
			if w := c.want(i); v != w {
				t.Errorf("%d lanes, %s: o[%d] = %#x, want %#x", c.threads, c.body, i, v, w)
				break
			}
		}
	}
}

// keepBits is what a lane that writes nothing leaves at o[i].
const keepBits = 0x12345678

// suffix is lane i's sum of the lanes i to 19 as floats, for a
// simdgroup of 20 lanes; lanes past it write nothing.
func suffix(i int) uint32 {
	if i >= 20 {
		return keepBits
	}
	return math.Float32bits(float32((i + 19) * (20 - i) / 2))
}
