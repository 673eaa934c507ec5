package emu_test

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// TestVectorAliasConversions holds casts and constructors of a vector named
// through any alias to Metal's conversion by value (int4 1 is float4 1,
// not the bits 1e-45): the type is resolved by clang, not by the alias's
// spelling (docs/msl-subset.md, "Types").
func TestVectorAliasConversions(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const head = `#include <metal_stdlib>
using namespace metal;
struct B { typedef float4 f4; using g4 = float4; };
struct D : B { float get(int4 v) const { return f4(v).x + ((f4)v).y + static_cast<g4>(v).z + g4(v).w; } };
template <typename T> struct TB { using v4 = T; };
struct DT : TB<float4> { float get(int4 v) const { return v4(v).x + ((v4)v).y + static_cast<v4>(v).z + TB<float4>::v4(v).w; } };
template <typename T> struct UB { using v4 = vec<T, 4>; };
template <typename T> struct UD : UB<T> { using typename UB<T>::v4; T get(int4 v) const { return v4(v).x + ((v4)v).y; } };
template <typename T> struct S { using W = vec<T, 4>; T get(int4 v) const { return W(v).x + ((W)v).y + static_cast<W>(v).z; } };
struct Late { float get(int4 v) const { return L4(v).x + ((L4)v).y; } using L4 = float4; };
template <typename T> using V4 = vec<T, 4>;
typedef float4 A1; typedef A1 A2; using A3 = A2;
using F4 = vec<float, 4>;
template <typename T> float direct(int4 a) { T v(a); return v.x; }
struct Pair { int a, b; Pair(int x, int y) : a(x), b(y) {} };
using P2 = Pair; typedef int I;
struct NA { using g = float4; };
float g(float v) { return v + 1; }
`
	cases := []struct {
		what, body string
		want       float32 // times i
	}{
		{"a base class's typedef and using, unqualified", "const D d; x[i] = d.get(int4(int(x[i])))", 4},
		{"a template base's alias of its parameter", "const DT d; x[i] = d.get(int4(int(x[i])))", 4},
		{"a dependent base's alias, by using typename", "const UD<float> d; x[i] = d.get(int4(int(x[i])))", 2},
		{"using in a template", "const S<float> s; x[i] = s.get(int4(int(x[i])))", 3},
		{"a member alias declared after its use", "const Late l; x[i] = l.get(int4(int(x[i])))", 2},
		{"an alias template", "const int4 a = int4(int(x[i])); x[i] = V4<float>(a).x + ((V4<float>)a).y + static_cast<V4<float>>(a).z", 3},
		{"a typedef of a typedef", "const int4 a = int4(int(x[i])); x[i] = A2(a).x + ((A2)a).y + A3(a).z + static_cast<A3>(a).w", 4},
		{"an alias of vec<float, 4>", "const int4 a = int4(int(x[i])); x[i] = F4(a).x + ((F4)a).y", 2},
		{"the library's alias template", "const int4 a = int4(int(x[i])); x[i] = metal::conditional_t<true, float4, int4>(a).x + ((conditional_t<true, float4, int4>)a).y", 2},
		{"direct initialisation", "const int4 a = int4(int(x[i])); A2 v(a); F4 w(a); x[i] = v.x + w.y + direct<float4>(a) + direct<V4<float>>(a)", 4},
		{"a function named as another scope's alias", "x[i] = g(x[i]) - 1", 1},
		{"aliases of other types, as written", "const P2 p = P2(int(x[i]), 1); x[i] = float(p.a * p.b + I(x[i] + 0.5f) + (I)x[i])", 3},
	}
	bodies := make([]string, len(cases))
	for j, c := range cases {
		bodies[j] = "/* " + c.what + " */ " + c.body // named in runBodies' errors
	}
	runBodies(t, dev, head, "device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]",
		bodies, 1, func(j, i int) float32 { return cases[j].want * float32(i) })
}
