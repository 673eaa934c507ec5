package emu_test

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// Vector values in constant expressions build and compute as in Metal:
// constexpr vector variables, in a function or at program scope, made by
// constructors of scalars, of other vectors and of swizzles, read by
// swizzles or subscripts (`v[2]`, `v.zw.y`, also as an array bound, a
// template argument or its default, a case label, an if constexpr's
// condition and an enumerator's value) and combined by arithmetic,
// constexpr functions and member functions that return vectors, and bool
// vectors (`bool2`, comparisons, `all`, `any`); each kernel writes its
// value at x[i] for x[i] = i.
func TestConstexprVectors(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const head = `#include <metal_stdlib>
using namespace metal;
constant constexpr half4 H = half4(1.0h, 2.0h, 3.0h, 4.0h);
constexpr float2 K = float2(0.5f);
constexpr int4 twice(int4 v) { return v * 2; }
constexpr float2 swap(float2 a) { return a.yx + a.xx; }
struct P { float x; };
constexpr int sum4(int4 v) { int s = 0; for (int k = 0; k < 4; k++) s += v[k]; return s; }
template <int N> constexpr int tk() { return N; }
constexpr bool2 M = int2(1, 2) < int2(3, 1);
constexpr int4 V4 = int4(1, 2, 3, 4);
constexpr int sum2(int2 a) { return a.x + a.y; }
struct F { int x; };
constexpr F F9 = {9};
enum E4 { E4A = V4.z, E4B = V4[3] };
template <int N = V4.w> constexpr int td() { return N; }
struct Q { int2 q; constexpr int2 get() const { return q.yx; } constexpr int first() const { return q.x; } };
`
	cases := []elementCase{
		{"constexpr int4 v = int4(1, 2, 3, 4); x[i] += v[i & 3]", func(i int) float32 { return float32(i + i&3 + 1) }},
		{"constexpr float2 k = float2(0.5f); x[i] += k.x + k.y", func(i int) float32 { return float32(i) + 1 }},
		{"x[i] += float(H[i & 3]) + K.y", func(i int) float32 { return float32(i+i&3+1) + 0.5 }},
		{"constexpr int s = twice(int4(1, 2, 3, 4)).z + int4(5).w; x[i] += s", func(i int) float32 { return float32(i + 11) }},
		{"constexpr float4 w = float4(K, K.yx * 2) + float4(int2(1, 2).yx, 3, 4); x[i] += w[i & 3]", func(i int) float32 {
			return float32(i) + []float32{2.5, 1.5, 4, 5}[i&3]
		}},
		{"constexpr float q = swap(float2(1, 2)).x + H.a + (int4(1, 2, 3, 4) + 1).y; x[i] += q", func(i int) float32 { return float32(i + 3 + 4 + 3) }},
		{"constexpr P p = {3}; constexpr float r = p.x + float3(float2(1, 2), 3).b; x[i] += r", func(i int) float32 { return float32(i + 6) }},
		{"constexpr int4 v = int4(1, 2, 3, 4); constexpr int r = v.zw.y * 10 + v.wzyx.yx.x; x[i] += r", func(i int) float32 { return float32(i + 43) }},
		{"x[i] = swap(float2(x[i], 1)).x", func(i int) float32 { return float32(1 + i) }},
		{"constexpr int4 v = int4(1, 2, 3, 4); constexpr int n = v[2]; float a[n] = {5, 6, 7}; x[i] += a[n - 1] + tk<n>()", func(i int) float32 { return float32(i + 10) }},
		{"constexpr int4 v = int4(1, 2, 3, 4); float a[v[2]] = {5, 6, 7}; x[i] += a[2] + tk<v[1]>() + sum4(v) + (v * 2)[3]", func(i int) float32 { return float32(i + 7 + 2 + 10 + 8) }},
		{"constexpr int4 v = int4(1, 2, 3, 4); float b[v.y + v[0]] = {1, 2, 3}; x[i] += b[2] + tk<tk<v[2]>() + v[0]>()", func(i int) float32 { return float32(i + 7) }},
		{"constexpr float r = H[1] + float2(4, 5)[1]; static_assert(int3(7, 8, 9)[2] == 9, \"v[2]\"); x[i] += r", func(i int) float32 { return float32(i + 7) }},
		{"constexpr int r = M.x * 10 + M[1] + all(M) * 100 + any(M) * 1000; x[i] += r", func(i int) float32 { return float32(i + 1010) }},
		{"constexpr bool4 b = bool4(true, false, true, true); static_assert(any(b) && !all(b), \"b\"); constexpr int r = b.z + b.yx.y + b.wzyx[2]; x[i] += r", func(i int) float32 { return float32(i + 2) }},
		{"constexpr bool2 m = !bool2(true, false) && bool2(true); static_assert(all(int4(1, 2, 3, 4) < int4(5)), \"all\"); constexpr bool a = any(float2(1, 2) == float2(0, 2)); x[i] += m.y + a + tk<any(M)>()", func(i int) float32 { return float32(i + 3) }},
		{"constexpr float4 c = (float4)int4(1, 2, 3, 4); static_assert(c.w == 4, \"c.w\"); x[i] += c.w", func(i int) float32 { return float32(i + 4) }},
		{"x[i] += tk<V4.z>() * 1000 + tk<sum2(V4.xy)>() * 100 + tk<V4.zw.y>() * 10 + tk<F9.x>()", func(i int) float32 { return float32(i + 3349) }},
		{"constexpr int n = V4.y; constexpr int2 w = V4.wz; x[i] += tk<n>() + tk<w.x>() * 10 + sum2(V4.xy + w) * 100", func(i int) float32 { return float32(i + 1042) }},
		{"switch (i & 3) { case V4.y: x[i] += 10; break; case V4[2]: x[i] += 20; break; default: break; }", func(i int) float32 { return float32(i + []int{0, 0, 10, 20}[i&3]) }},
		{"if constexpr (V4.x == 1 && V4.zw.y == 4) x[i] += 100", func(i int) float32 { return float32(i + 100) }},
		{"x[i] += E4A * 10 + E4B + td()", func(i int) float32 { return float32(i + 38) }},
		{"constexpr Q p = {int2(5, 6)}; constexpr int c = p.get().x * 10 + p.first(); float a[p.first()] = {1}; x[i] += c + tk<p.get().y>() * 100 + a[0]", func(i int) float32 { return float32(i + 566) }},
	}
	runElementCases(t, dev, head, cases)
}
