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
	cases := []struct {
		body string
		want func(i int) float32
	}{
		{"const int4 q = int4(1, 2, 4, 8); const float4 r = float4(x[i]) / (float4)q; x[i] = r.w * 8 + r.x", func(i int) float32 { return float32(2 * i) }},
		{"const int4 q = int4(int(x[i]), 1, 2, 3); x[i] = (-(float4)q).x * 2 + ((float4)q * (float4)q).y", func(i int) float32 { return float32(1 - 2*i) }},
		{"const int2 q = int2(int(x[i]), 4); const float2 r = float2(3, 8) / (F2)q * 2; x[i] = r.y + (float)q.x", func(i int) float32 { return float32(4 + i) }},
		{"x[i] = ((float4)(int4)float4(x[i] + 0.5f)).x + 10 * -(float)(int)x[i]", func(i int) float32 { return float32(-9 * i) }},
		{"x[i] = (P(x[i]) / (PP)metal::precise::sqrt(4.0f)).v", func(i int) float32 { return float32(i) / 2 }},
	}
	bodies := make([]string, len(cases))
	for j, c := range cases {
		bodies[j] = c.body
	}
	runBodies(t, dev, head, "device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]", bodies, 1,
		func(j, i int) float32 { return cases[j].want(i) })
}
