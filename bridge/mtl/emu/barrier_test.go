package emu_test

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// TestBarrierFlagSpellings runs the barrier and fence flags as Metal's
// code spells them: unqualified (`threadgroup_barrier(mem_device)`,
// `simdgroup_barrier(mem_none)`), qualified by mem_flags or metal::, and
// combined with `|` (docs/msl-subset.md, "Synchronisation").
func TestBarrierFlagSpellings(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const head = `#include <metal_stdlib>
using namespace metal;
constant constexpr mem_flags both = mem_device | mem_threadgroup;
`
	const pre = "threadgroup float tg[32]; tg[i] = x[i]; "
	const post = "; x[i] = tg[31 - i] + tg[i]"
	bodies := []string{
		pre + "threadgroup_barrier(mem_threadgroup)" + post,
		pre + "threadgroup_barrier(mem_device | mem_threadgroup)" + post,
		pre + "threadgroup_barrier(metal::mem_flags::mem_threadgroup | metal::mem_flags::mem_device)" + post,
		pre + "threadgroup_barrier(both)" + post,
		pre + "threadgroup_barrier(mem_flags::mem_texture | mem_threadgroup); simdgroup_barrier(mem_none)" + post,
		pre + "simdgroup_barrier(mem_threadgroup); atomic_thread_fence(mem_device, memory_order_relaxed, thread_scope_threadgroup); threadgroup_barrier(mem_threadgroup)" + post,
		pre + "atomic_thread_fence(mem_threadgroup, memory_order::memory_order_relaxed); threadgroup_barrier(metal::mem_threadgroup)" + post,
	}
	runBodies(t, dev, head, "device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]",
		bodies, 1, func(j, i int) float32 { return 31 })
}

// TestLanesRunOneAfterAnother pins what docs/msl-subset.md, "Not
// supported", says of lanes of one simdgroup: they run one after another
// between sync points, not in lockstep, so a lane that reads threadgroup
// words after lane 0 has stored over them sees the store, where lanes in
// lockstep read first. llama.cpp's vec attention for heads of 128 stores
// S and M over its P values so. A sync point between the reads and the
// store (a simdgroup_barrier, or any simd operation) gives the lockstep
// result.
func TestLanesRunOneAfterAnother(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const pre = "threadgroup float tg[32]; tg[i] = x[i]; simdgroup_barrier(mem_threadgroup); " +
		"float s = 0; for (int k = 0; k < 32; k++) { s += tg[k]; } "
	const post = "if (i == 0) { tg[0] = 1000; } threadgroup_barrier(mem_threadgroup); x[i] = s"
	runElementCases(t, dev, "#include <metal_stdlib>\nusing namespace metal;\n", []elementCase{
		// Lane 0 runs to the barrier first, its store made before lane 1
		// reads tg[0]: lanes 1 to 31 add 1000 where they would add 0.
		{pre + post, func(i int) float32 {
			if i == 0 {
				return 496
			}
			return 1496
		}},
		{pre + "simdgroup_barrier(mem_threadgroup); " + post, func(int) float32 { return 496 }},
		{pre + "s += simd_sum(0.0f); " + post, func(int) float32 { return 496 }},
	})
}

// TestReverseLanes pins Options.ReverseLanes: each simdgroup's lanes run
// last to first between sync points, so each order gets one of the two
// lockstep patterns wrong and a kernel that relies on lockstep differs
// between them (docs/msl-subset.md, "Lanes in lockstep"). x is 0..31, so
// the sum of tg is 496, and 1496 once lane 0 or 31 has stored 1000 over
// tg[0].
func TestReverseLanes(t *testing.T) {
	const pre = "threadgroup float tg[32]; tg[i] = x[i]; simdgroup_barrier(mem_threadgroup); "
	const sum = "float s = 0; for (int k = 0; k < 32; k++) { s += tg[k]; } "
	const end = "threadgroup_barrier(mem_threadgroup); x[i] = s"
	readThenStore := pre + sum + "if (i == 0) { tg[0] = 1000; } " + end // lockstep: 496 in every lane
	storeThenRead := pre + "if (i == 0) { tg[0] = 1000; } " + sum + end // lockstep: 1496 in every lane
	synced := pre + sum + "simdgroup_barrier(mem_threadgroup); if (i == 0) { tg[0] = 1000; } " + end
	all := func(v float32) func(int) float32 { return func(int) float32 { return v } }
	lane0 := func(v0, rest float32) func(int) float32 {
		return func(i int) float32 {
			if i == 0 {
				return v0
			}
			return rest
		}
	}
	for _, c := range []struct {
		name    string
		reverse bool
		cases   []elementCase
	}{
		{"first to last", false, []elementCase{
			{readThenStore, lane0(496, 1496)}, // lanes 1 to 31 read lane 0's store
			{storeThenRead, all(1496)},
			{synced, all(496)},
		}},
		{"last to first", true, []elementCase{
			{readThenStore, all(496)},
			{storeThenRead, lane0(1496, 496)}, // lanes 31 to 1 read before lane 0 stores
			{synced, all(496)},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev := newDevice(t, emu.Options{ReverseLanes: c.reverse})
			runElementCases(t, dev, "#include <metal_stdlib>\nusing namespace metal;\n", c.cases)
		})
	}
}
