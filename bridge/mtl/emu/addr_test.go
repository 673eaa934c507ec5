package emu_test

import (
	"fmt"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// An address `&x[i]` passed to a function template's device, constant or
// threadgroup pointer parameter deduces the template's T, as in Metal,
// where the emulator's plain pointer deduced none and the kernel did not
// build; each kernel writes x[i] * 2 + 1 from x[i] = i.
func TestTemplateAddressArgs(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const head = `#include <metal_stdlib>
using namespace metal;
template <typename T> void twice(device T* p) { *p = *p * 2 + 1; }
template <typename T> T get(device const T* p, int k) { return p[k]; }
template <typename T> T tg_get(threadgroup T* p) { return *p; }
template <typename T> T c_get(constant T* p) { return p[0]; }
template <typename T, typename U> void put(device T* p, U v) { p[0] = T(v); }
template <typename T> T t_get(thread T* p) { return *p; }
template <typename P> float any_get(P p) { return p[0]; }
`
	cases := []string{
		"twice(&x[i])",
		"x[i] = get(&x[i], 0) * 2 + 1",
		"x[i] = get(&x[0], i) * 2 + 1",
		"twice<float>(&x[i])",
		"threadgroup float tg[32]; tg[i] = x[i]; threadgroup_barrier(mem_flags::mem_threadgroup); x[i] = tg_get(&tg[i]) * 2 + 1",
		"threadgroup float tg[2][32]; tg[1][i] = x[i]; threadgroup_barrier(mem_flags::mem_threadgroup); x[i] = tg_get(&tg[1][i]) * 2 + 1",
		"x[i] = c_get(&c[i]) * 2 + 1",
		"put(&x[i], x[i] * 2 + 1)",
		"float local[2] = {x[i], 0}; x[i] = t_get(&local[0]) * 2 + 1",
		"x[i] = any_get(&x[i]) * 2 + 1",
	}
	src := head
	for j, body := range cases {
		src += fmt.Sprintf("kernel void k%d(device float* x [[buffer(0)]], constant float* c [[buffer(1)]], uint i [[thread_position_in_grid]]) { %s; }\n", j, body)
	}
	lib, err := dev.NewLibrary(map[string]string{"k.metal": src}, mtl.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := make([]float32, 32)
	for i := range in {
		in[i] = float32(i)
	}
	for j, body := range cases {
		x, c := f32Buf(t, dev, in), f32Buf(t, dev, in)
		if err := run(t, dev, pipe(t, lib, fmt.Sprintf("k%d", j), nil), [3]int{1, 1, 1}, [3]int{32, 1, 1}, arg{buf: x}, arg{buf: c}); err != nil {
			t.Errorf("%s: %v", body, err)
			continue
		}
		for i, v := range f32s(x) {
			if want := float32(2*i + 1); v != want {
				t.Errorf("%s: x[%d] = %v, want %v", body, i, v, want)
				break
			}
		}
	}
}
