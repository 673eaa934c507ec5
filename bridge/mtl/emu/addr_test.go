package emu_test

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// An address `&x[i]` passed to a function template's device, constant or
// threadgroup pointer parameter deduces the template's T, as in Metal,
// where the emulator's plain pointer deduced none and the kernel did not
// build; so does an element of a struct's array member reached through a
// value or a pointer (`&s.a[i]`, `&p->a[i]`, `&(*p).a[i]`, `&p[0].a[i]`)
// in each address space, and a member's (`&p->f`, `&(*p).f`, `&x[i].f`). Each kernel writes x[i] * 2 + 1 from x[i] = i.
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
struct S { float a[32]; };
struct H { device float* p; };
struct V { float v; };
void via_ref(device S& s, uint i) { twice(&s.a[i]); }
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
		"device S& s = *(device S*)x; twice(&s.a[i])",
		"device S* p = (device S*)x; twice(&p->a[i])",
		"device S* p = (device S*)x; x[i] = get(&p[0].a[0], i) * 2 + 1",
		"H h = {x}; twice(&h.p[i])",
		"constant S& s = *(constant S*)c; x[i] = c_get(&s.a[i]) * 2 + 1",
		"constant S* p = (constant S*)c; x[i] = c_get(&p->a[i]) * 2 + 1",
		"threadgroup S ts; ts.a[i] = x[i]; threadgroup_barrier(mem_flags::mem_threadgroup); x[i] = tg_get(&ts.a[i]) * 2 + 1",
		"threadgroup S ta[2]; ta[1].a[i] = x[i]; threadgroup_barrier(mem_flags::mem_threadgroup); x[i] = tg_get(&ta[1].a[i]) * 2 + 1",
		"threadgroup S ta[1]; threadgroup S* tp = ta; tp->a[i] = x[i]; threadgroup_barrier(mem_flags::mem_threadgroup); x[i] = tg_get(&tp->a[i]) * 2 + 1",
		"via_ref(*(device S*)x, i)",
		"device V* q = (device V*)x; twice(&q[i].v)",
		"device V& r = *(device V*)(x + i); twice(&r.v)",
		"device V* q = (device V*)(x + i); twice(&q->v)",
		"S s; s.a[i] = x[i]; x[i] = t_get(&s.a[i]) * 2 + 1",
		"S ls; thread S* lp = &ls; lp->a[i] = x[i]; x[i] = t_get(&lp->a[i]) * 2 + 1",
		"device S* p = (device S*)x; twice(&(*p).a[i])",
		"device V* q = (device V*)(x + i); twice(&(*q).v)",
		"device S* p = (device S*)x; x[i] = get(&(*p).a[0], i) * 2 + 1",
		"constant S* p = (constant S*)c; x[i] = c_get(&(*p).a[i]) * 2 + 1",
		"threadgroup S ta[1]; threadgroup S* tp = ta; (*tp).a[i] = x[i]; threadgroup_barrier(mem_flags::mem_threadgroup); x[i] = tg_get(&(*tp).a[i]) * 2 + 1",
		"S ls; thread S* lp = &ls; lp->a[i] = x[i]; x[i] = t_get(&(*lp).a[i]) * 2 + 1",
		"H h = {x + i}; twice(&(*h.p))",
	}
	runBodies(t, dev, head, "device float* x [[buffer(0)]], constant float* c [[buffer(1)]], uint i [[thread_position_in_grid]]", cases, 2,
		func(_, i int) float32 { return float32(2*i + 1) })
}
