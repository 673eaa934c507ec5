package emu_test

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// TestCastOperands runs C-style casts to vector and alias types that stand
// after a multiplicative or unary operator (`a / (float4)q`, `-(float4)q`,
// MLX's `x / (complex64_t)sqrt(...)`): the rewriter's conversion grouped
// with the operator's left side (`(a / vcast<float4>()) * q`) and failed to
// build. Each kernel writes its value at x[i] for x[i] = i.
func TestCastOperands(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const head = `#include <metal_stdlib>
using namespace metal;
typedef float2 F2;
struct P {
  float v;
  P(float a) : v(a) {}
};
P operator/(P a, P b) { return P(a.v / b.v); }
typedef P PP;
`
	cases := []elementCase{
		{"const int4 q = int4(1, 2, 4, 8); const float4 r = float4(x[i]) / (float4)q; x[i] = r.w * 8 + r.x", func(i int) float32 { return float32(2 * i) }},
		{"const int4 q = int4(int(x[i]), 1, 2, 3); x[i] = (-(float4)q).x * 2 + ((float4)q * (float4)q).y", func(i int) float32 { return float32(1 - 2*i) }},
		{"const int2 q = int2(int(x[i]), 4); const float2 r = float2(3, 8) / (F2)q * 2; x[i] = r.y + (float)q.x", func(i int) float32 { return float32(4 + i) }},
		{"x[i] = ((float4)(int4)float4(x[i] + 0.5f)).x + 10 * -(float)(int)x[i]", func(i int) float32 { return float32(-9 * i) }},
		{"x[i] = (P(x[i]) / (PP)metal::precise::sqrt(4.0f)).v", func(i int) float32 { return float32(i) / 2 }},
	}
	runElementCases(t, dev, head, cases)
}

// TestHalfBFloatConversions converts between half and bfloat, which Metal
// does explicitly (MLX's fp8.h makes a bfloat16_t of a float16_t) and
// clang refuses ("static_cast from '_Float16' to '__bf16' is not
// allowed"): by a functional cast, a C-style cast and a static_cast, of
// scalars, vectors and aliases, rounded to nearest even as through float.
// Each kernel writes its value at x[i] for x[i] = i.
func TestHalfBFloatConversions(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const head = `#include <metal_stdlib>
using namespace metal;
typedef half float16_t;
typedef bfloat bfloat16_t;
`
	viaHalf := func(i int) float32 { return rbf(f16ToF32(f32ToF16(float32(i) + 1000))) }
	cases := []elementCase{
		{"const half h = half(x[i]) * 1.5h; x[i] = float(bfloat(h)) + float(static_cast<bfloat>(h)) + float((bfloat)h) + float(half(bfloat(h)))", func(i int) float32 { return 6 * float32(i) }},
		{"x[i] = float(bfloat(half(x[i] + 1000.0f)))", viaHalf},
		{"const half4 h = half4(x[i] + 1000.0f, x[i], -x[i], 0.5f); const bfloat4 b = bfloat4(h); const half4 back = (half4)b; x[i] = float(b.x) + float(back.y) + float(static_cast<bfloat2>(h.zw).x)", viaHalf},
		{"x[i] = float(static_cast<bfloat16_t>(float16_t(x[i] * 3.0f))) + float((float16_t)(bfloat16_t)x[i])", func(i int) float32 { return 4 * float32(i) }},
	}
	runElementCases(t, dev, head, cases)
}

// TestMLXElementwiseIdioms builds what MLX's general element-wise kernels
// (binary_g, unary_g, copy_g) and its FromFP8 write, which failed to build:
// a template's type parameter constructed of a vector's component
// (`IdxT(grid_dim.x)`: the conversion bound it to a non-const reference),
// a braced list passed for a vector or struct parameter
// (`elem_to_loc_2_nd<IdxT>({N * index.x, index.y, index.z}, ...)`: clang
// list-initialises no vector in an argument) and a dereferenced thread
// pointer cast (`*(thread fp8_e4m3*)(&x)`, which grouped the `*` with the
// cast alone). Each kernel writes its value at x[i] for x[i] = i.
func TestMLXElementwiseIdioms(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const head = `#include <metal_stdlib>
using namespace metal;
template <typename T> T idx2(uint2 g) { return T(g.x) * T(g.y) + (T)g.x + static_cast<T>(g.y); }
template <typename IdxT = int64_t>
METAL_FUNC vec<IdxT, 2> loc(uint3 e, int s) { return vec<IdxT, 2>(IdxT(e.x * s + e.z), IdxT(e.y)); }
struct S { int a; float b; };
float g(S s, float2 v) { return s.a + s.b + v.x * v.y; }
struct U8 { uchar c; };
`
	cases := []elementCase{
		{"x[i] = float(idx2<int64_t>(uint2(i, 3)))", func(i int) float32 { return float32(4*i + 3) }},
		{"const auto l = loc<int64_t>({2 * i, 5u, 1u}, 3); x[i] = float(l.x + l.y) + g({1, 2.5f}, {3, 4})", func(i int) float32 { return float32(6*i) + 21.5 }},
		{"uchar b = uchar(x[i]); x[i] = float(*(thread uchar*)&b) + float((*(thread U8*)(&b)).c)", func(i int) float32 { return float32(2 * i) }},
	}
	runElementCases(t, dev, head, cases)
}
