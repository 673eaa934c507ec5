package emu_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// Library functions that Metal's standard library declares and kernels
// written like MLX's use, which failed to build: simd_shuffle_and_fill_up
// and _down (with and without a modulo, and the quad ones), sincos, the
// fast:: and precise:: variants of every math function, and the type
// traits' _v variables, counting half and bfloat as floating-point, with a
// trait a library specialises. Each kernel writes its value at x[i] for
// x[i] = i, on one simdgroup.
func TestLibraryFunctions(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const head = `#include <metal_stdlib>
using namespace metal;
namespace metal {
template <class T, T v> struct is_integral<integral_constant<T, v>> : true_type {};
}
// Metal has no erf: MLX's erf.h defines its own, called unqualified.
float erf(float a) { return a * 2 + 1; }
`
	cluster := func(i, m, to int, data, fill func(l int) float32) float32 {
		c := i % m
		if to >= 0 && to < m {
			return data(i - c + to)
		}
		return fill(i - c + (to%m+m)%m)
	}
	id := func(l int) float32 { return float32(l) }
	plus := func(d float32) func(l int) float32 { return func(l int) float32 { return float32(l) + d } }
	cases := []elementCase{
		{"x[i] = simd_shuffle_and_fill_down(x[i], x[i] + 100, ushort(1))", func(i int) float32 { return cluster(i, 32, i+1, id, plus(100)) }},
		{"x[i] = simd_shuffle_and_fill_up(x[i], x[i] + 100, 2)", func(i int) float32 { return cluster(i, 32, i-2, id, plus(100)) }},
		{"x[i] = simd_shuffle_and_fill_down(x[i], x[i] + 100, ushort(1), ushort(4))", func(i int) float32 { return cluster(i, 4, i%4+1, id, plus(100)) }},
		{"x[i] = simd_shuffle_and_fill_up(x[i], x[i] + 100, 1, 8)", func(i int) float32 { return cluster(i, 8, i%8-1, id, plus(100)) }},
		{"x[i] = float(quad_shuffle_and_fill_up(half(x[i]), half(x[i] + 100), 1))", func(i int) float32 { return cluster(i, 4, i%4-1, id, plus(100)) }},
		{"half4 h = half4(half(x[i]), 0, 0, 1); h = simd_shuffle_and_fill_down(h, half4(-1), 2, 16); x[i] = float(h.x) + float(h.w) * 1000", func(i int) float32 {
			return cluster(i, 16, i%16+2, plus(1000), func(int) float32 { return -1001 })
		}},
		{"float v = x[i]; for (int k = 1; k <= 16; k *= 2) v += simd_shuffle_and_fill_up(v, 0.0f, k); x[i] = v", func(i int) float32 { return float32(i * (i + 1) / 2) }},
		{"float c; const float s = sincos(x[i] * 0.25f, c); x[i] = (s == sin(x[i] * 0.25f)) + (c == cos(x[i] * 0.25f)) * 2", func(int) float32 { return 3 }},
		{"const float4 a = float4(x[i], 0, 1, 2) * 0.5f; float4 c; const float4 s = fast::sincos(a, c); half hc; x[i] = all(s == sin(a)) + all(c == cos(a)) * 2 + float(precise::sincos(half(0), hc) + hc) * 4", func(int) float32 { return 7 }},
		{"x[i] = fast::sinpi(0.5f) + precise::cospi(0.0f) + fast::fmod(5.0f, 3.0f) + precise::fma(x[i], 2.0f, 1.0f) + fast::fdim(3.0f, 1.0f) + precise::copysign(1.0f, -1.0f) + " +
			"fast::max3(1.0f, 2.0f, 3.0f) + precise::median3(1.0f, 5.0f, 3.0f) + fast::ldexp(1.0f, 2) + fast::distance(float2(0), float2(3, 4)) + " +
			"fast::atanh(0.0f) + precise::asinh(0.0f) + fast::acosh(1.0f) + precise::tanpi(0.0f)", func(i int) float32 { return float32(2*i + 21) }},
		{"x[i] = erf(x[i])", func(i int) float32 { return float32(2*i + 1) }},
		// frexp and modf, which failed to build: the shim had neither.
		{"int e; const float m = frexp(x[i] * 0.75f - 3.0f, e); x[i] = m * 1024 + e", func(i int) float32 {
			m, e := math.Frexp(float64(float32(i)*0.75 - 3))
			return float32(m)*1024 + float32(e)
		}},
		{"int2 e; const float2 m = frexp(float2(x[i], -0.1f * x[i]), e); x[i] = (m.x + m.y) * 1024 + (e.x * 100 + e.y)", func(i int) float32 {
			mx, ex := math.Frexp(float64(i))
			my, ey := math.Frexp(float64(float32(-0.1) * float32(i)))
			return (float32(mx)+float32(my))*1024 + float32(ex*100+ey)
		}},
		{"int e; const half m = frexp(half(x[i]) * 0.5h, e); x[i] = float(m) * 1024 + e", func(i int) float32 {
			m, e := math.Frexp(float64(i) * 0.5)
			return float32(m)*1024 + float32(e)
		}},
		{"float ip; const float f = modf(x[i] * 0.25f - 4.0f, ip); x[i] = f + 128 * ip", func(i int) float32 {
			ip, f := math.Modf(float64(float32(i)*0.25 - 4))
			return float32(f) + 128*float32(ip)
		}},
		{"half2 ip; const half2 f = modf(half2(half(x[i]) * 0.5h, -half(x[i]) * 0.25h), ip); x[i] = float(f.x) + float(f.y) * 4 + float(ip.x) * 16 + float(ip.y) * 64", func(i int) float32 {
			ix, fx := math.Modf(float64(i) * 0.5)
			iy, fy := math.Modf(-float64(i) * 0.25)
			return float32(fx) + float32(fy)*4 + float32(ix)*16 + float32(iy)*64
		}},
		{"x[i] += is_floating_point_v<half> + is_floating_point<bfloat>::value * 2 + is_arithmetic_v<half> * 4 + is_signed_v<half> * 8 + is_scalar_v<bfloat> * 16 + " +
			"is_integral_v<short> * 32 + is_unsigned_v<uint> * 64 + !is_floating_point_v<int> * 128 + is_same_v<make_unsigned_t<int>, uint> * 256 + " +
			"bool_constant<true>::value * 512 + is_convertible_v<int, float> * 1024 + is_integral_v<integral_constant<int, 3>> * 2048", func(i int) float32 { return float32(i + 4095) }},
	}
	runElementCases(t, dev, head, cases)

	// A modulo that is no cluster size fails the dispatch at its line.
	lib := newLibrary(t, dev, `#include <metal_stdlib>
using namespace metal;
kernel void k0(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[i] = simd_shuffle_and_fill_up(x[i], 0.0f, 1, 3);
}
`)
	wantExecError(t, runCase(t, dev, lib, 0, 32, arg{buf: iotaBuf(t, dev, 32)}),
		"kernel k0: simd_shuffle_and_fill_up: modulo 3 is not a power of two from 2 to 32 at k.metal:4")
}

// Matrices take the specification's operators: a vector times a matrix (a
// row: component c is dot(v, m[c])) and a matrix times a matrix, which
// failed to build, a scalar on either side, +, -, negation, the compound
// assignments and transpose, square or not. Each kernel writes its value
// at x[i] for x[i] = i.
func TestMatrixOperators(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	cases := []elementCase{
		{"const float2x2 m = float2x2(float2(1, 2), float2(3, 4)); const float2 r = m * float2(x[i], 1) * 2; x[i] = r.x * 100 + r.y", func(i int) float32 { return float32(200*i + 600 + 4*i + 8) }},
		{"const float2x2 m = float2x2(float2(1, 2), float2(3, 4)); const float2 r = float2(x[i], 1) * m; x[i] = r.x * 100 + r.y", func(i int) float32 { return float32(103*i + 204) }},
		{"const float2x2 m = float2x2(float2(1, 2), float2(3, 4)); const float2x2 n = m * m, t = transpose(m); x[i] += n[1][0] * 1000 + t[0][1] * 100 + (2 * m - m)[1][1] * 10 + (-m)[0][0]", func(i int) float32 { return float32(i + 15339) }},
		{"const float3x2 z = float3x2(float2(1), float2(2), float2(x[i])); const float2x3 w = float2x3(float3(1), float3(2)); const float2x2 p = z * w; const float2x3 tz = transpose(z); x[i] = p[1][1] * 10 + tz[1][2]", func(i int) float32 { return float32(60 + 21*i) }},
		{"float2x2 m = float2x2(float2(x[i], 1), float2(2, 3)); m += m; m *= 0.5f; m -= float2x2(float2(1), float2(1)); x[i] = m[0][0] * 10 + m[1][1]", func(i int) float32 { return float32(10*i - 8) }},
		{"const half2x2 h = half2x2(half2(1, 2), half2(3, 4)); const half2 r = half2(half(x[i]), 1) * h; x[i] = float(r.y)", func(i int) float32 { return float32(3*i + 4) }},
	}
	runElementCases(t, dev, "#include <metal_stdlib>\nusing namespace metal;\n", cases)
}

// A template's type parameter standing for a vector converts by value in
// its functional cast, C-style cast and static_cast (`T(v)`, `(T)v`,
// `static_cast<T>(v)`), as Metal's do, where clang's cast between vectors
// of one size was a bit cast (1 became 1e-45) and one between sizes, or a
// constructor of several arguments (`T(a, b)`), failed to build; a scalar
// or a struct of that parameter is cast or constructed as written. So do
// a dependent type's (`typename T::v4(v)`), a decltype's, a vector
// alias's qualified by its class (`S4::f4(v)`) and an alias's of any of
// these (`using V = T; V(v)`). Each kernel writes its
// value at x[i] for x[i] = i.
func TestTemplateParamConversions(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	const head = `#include <metal_stdlib>
using namespace metal;
template <typename T4> T4 ctor(int4 v) { return T4(v); }
template <typename T4, typename S> T4 cast(S v) { return (T4)v; }
template <typename T4, typename S> T4 scast(S v) { return static_cast<T4>(v); }
template <typename T4> T4 make4(float a) { return T4(a, a, 0, 1); }
template <typename T2> T2 make2(float a, int b) { const T2 r = T2(a, b); return r; }
struct P { int a; P(int4 v) : a(v.x + 1) {} };
template <typename T> struct Box { T v; T get(int4 w) const { return v + T(w); } };
struct S4 { typedef float4 f4; };
struct Tr { using v4 = float4; };
template <typename T> typename T::v4 dep(int4 v) { return typename T::v4(v) + (typename T::v4)v; }
template <typename T4> T4 named(int4 v) { using V = T4; typedef T4 W; using D = decltype(T4()); return V(v) + (W)v + static_cast<V>(v) + D(v); }
`
	cases := []elementCase{
		{"x[i] = ctor<float4>(int4(int(x[i]))).x", func(i int) float32 { return float32(i) }},
		{"x[i] = cast<float4>(int4(int(x[i]))).y + cast<int2>(float2(x[i] + 0.5f)).x * 100", func(i int) float32 { return float32(101 * i) }},
		{"x[i] = scast<float4>(int4(int(x[i]))).z", func(i int) float32 { return float32(i) }},
		{"x[i] = float(cast<half4>(float4(x[i])).w) + float(scast<half2>(uint2(3)).x) * 100", func(i int) float32 { return float32(i + 300) }},
		{"x[i] = make4<float4>(x[i]).y + make2<float2>(1, int(x[i])).y * 100", func(i int) float32 { return float32(101 * i) }},
		{"x[i] = cast<float>(int(x[i])) + scast<int>(x[i] + 0.5f) * 100 + ctor<P>(int4(int(x[i]))).a * 10000", func(i int) float32 { return float32(10101*i + 10000) }},
		{"const Box<float4> b = {float4(1)}; x[i] = b.get(int4(int(x[i]))).x", func(i int) float32 { return float32(i + 1) }},
		{"x[i] = named<float4>(int4(int(x[i]))).x", func(i int) float32 { return float32(4 * i) }},
		{"const int4 a = int4(int(x[i])); x[i] = S4::f4(a).x + ((S4::f4)a).y * 10 + dep<Tr>(a).z * 100 + decltype(float4())(a).w * 1000 + ((decltype(float4()))a).x * 10000", func(i int) float32 { return float32(i + 10*i + 200*i + 1000*i + 10000*i) }},
	}
	runElementCases(t, dev, head, cases)
}

// TestLibraryBFloatMath builds math and simd functions for bfloat declared
// as MLX's bf16_math.h declares them (testdata/bf16_math.metal): in
// metal::, metal::fast and metal::precise, through the compiler's builtins
// (`__metal_exp(x, __METAL_MAYBE_FAST_MATH__)`). The library's functions
// collided with the shim's own bfloat overloads ("redefinition of 'abs'"),
// and the builtins were undeclared; each result is checked against Go,
// bit for bit but exp's (one bfloat ulp).
func TestLibraryBFloatMath(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "bf16_math.metal")
	const n = 32
	x := make([]float32, n)
	in := newBuf(t, dev, 2*n)
	for i := range x {
		x[i] = rbf(float32(i-12) * 0.61)
		binary.LittleEndian.PutUint16(in.Contents()[2*i:], toBF16(x[i]))
	}
	out := newBuf(t, dev, 2*9*n)
	if err := run(t, dev, pipe(t, lib, "bf16_math", nil), [3]int{1, 1, 1}, [3]int{n, 1, 1}, arg{buf: in}, arg{buf: out}); err != nil {
		t.Fatal(err)
	}
	floor := func(v float32) float32 { return float32(math.Floor(float64(v))) }
	var floors float32
	for _, v := range x {
		floors += floor(v)
	}
	for i, v := range x {
		y := x[(i+7)%n]
		med := max(min(v, y), min(max(v, y), 0.5))
		up := float32(-1)
		if i > 0 {
			up = x[i-1]
		}
		want := []float32{
			float32(math.Abs(float64(v))),
			rbf(float32(math.Sqrt(math.Abs(float64(v))))),
			rbf(float32(math.Exp(float64(v)))),
			max(v, y),
			rbf(float32(float64(v)*float64(y) + float64(floor(v)))),
			med,
			2 * v,
			rbf(floors),
			0,
		}
		if i+3 < n {
			want[8] = rbf(x[i+3] + up)
		}
		for k, w := range want {
			if k == 8 && i+3 >= n {
				continue // past the simdgroup's end
			}
			gb := binary.LittleEndian.Uint16(out.Contents()[2*(9*i+k):])
			d := int(gb) - int(toBF16(w))
			if d != 0 && !(k == 2 && (d == 1 || d == -1)) {
				t.Errorf("x = %v: out[%d] = %v, want %v", v, k, fromBF16(gb), w)
			}
		}
	}

	// Beside them, metal::precise's float functions stay the ones a float
	// argument calls; through a using-directive the library's bfloat
	// sqrt hid them and rounded the root to a bfloat.
	fout := newBuf(t, dev, 4*2*n)
	if err := run(t, dev, pipe(t, lib, "float_math", nil), [3]int{1, 1, 1}, [3]int{n, 1, 1}, arg{buf: fout}); err != nil {
		t.Fatal(err)
	}
	got := f32s(fout)
	for i := range n {
		v := float32(i) + 0.5
		if w := float32(math.Sqrt(float64(v))) + floor(v)*4; got[2*i] != w {
			t.Errorf("precise::sqrt(%v) + fast::floor(%v) * 4 = %v, want %v", v, v, got[2*i], w)
		}
		if w := max(v, 1) + float32(math.Exp(float64(v))); math.Abs(float64(got[2*i+1]-w)) > 1e-6*float64(w) {
			t.Errorf("precise::fmax(%v, 1) + precise::exp(%v) = %v, want %v", v, v, got[2*i+1], w)
		}
	}
}
