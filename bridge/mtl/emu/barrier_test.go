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
