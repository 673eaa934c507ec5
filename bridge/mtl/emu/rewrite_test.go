package emu

import (
	"fmt"
	"strings"
	"testing"
)

// These tests need no clang: they check the MSL-to-C++ rewrite itself on
// text shaped like clang's preprocessor output.

func rewriteOK(t *testing.T, src string) (string, []kernelInfo, []*fcInfo) {
	t.Helper()
	out, ks, fcs, err := rewriteUnit("# 1 \"k.metal\"\n"+src, "k.metal")
	if err != nil {
		t.Fatal(err)
	}
	return out, ks, fcs
}

func TestRewritePointersAndThreadgroupMemory(t *testing.T) {
	out, _, _ := rewriteOK(t, `
struct P { uint n; };
void helper(device const half* x, const device float* y, constant float* t, threadgroup float4* s,
            constant P& p, thread float& r, device atomic_uint* c) {
  float device* z = nullptr;
  const half constant* w = nullptr;
  device float4* v = (device float4*)(y + 4);
  thread float* a = &r, *b = 0, c2 = 1; thread float& q = r; thread const float& k = r + 1;
  const thread uchar* u = (const thread uchar*)&r + 1;
}
struct Q { float apply(thread const float* x, int n) const { return x[n]; } };
void declared(thread float* x);
kernel void k(device float* o [[buffer(0)]]) {
  threadgroup float partial[32], grid[4][8];
  threadgroup uint total;
  threadgroup half* h = reinterpret_cast<threadgroup half*>(partial);
}
`)
	for _, want := range []string{
		"::metal::__emu::ptr<const half, 1> x",
		"::metal::__emu::ptr<const float, 1> y",
		"::metal::__emu::ptr<const float, 2> t",
		"::metal::__emu::ptr<float4, 3> s",
		"const P& p",
		" float& r",
		"float* a = ::metal::__emu::thread_addr(&r), *b = 0, c2 = 1;  float& q = ::metal::__emu::thread_ref(r);  const float& k = r + 1;",
		"const  uchar* u = ::metal::__emu::thread_addr((::metal::__emu::thread_cast<const uchar* >() * &r) + 1);",
		`{ ::metal::__emu::thread_check((const void *)__builtin_addressof(r), "k.metal", 4);`,
		`{ ::metal::__emu::thread_check((const void *)x, "k.metal", 11); ::metal::__emu::this_space(this, 1, "Q::apply"); ::metal::__emu::stack_check(__func__); return x[n]; }`,
		"void declared( float* x);",
		"::metal::__emu::ptr<atomic_uint, 1> c",
		"::metal::__emu::ptr<float, 1> z",
		"::metal::__emu::ptr<const half, 2> w",
		"auto &partial = ::metal::__emu::tg_var<float[32]>",
		"auto &grid = ::metal::__emu::tg_var<float[4][8]>",
		"auto &total = ::metal::__emu::tg_var<uint>",
		"(::metal::__emu::ptr<float4, 1>)(y + 4)",
		"::metal::__emu::reinterpret_cast_<::metal::__emu::ptr<half, 3>>(partial)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRewriteVectors(t *testing.T) {
	out, _, _ := rewriteOK(t, `
typedef vec<float, 4> F4;
template <typename T> struct S {
  float4 apply(T x) const { return float4(x); }
};
template <class T, int N> float4 h(bool4 m);
void f(float4 a, int4 i) {
  float4 b = float4(a.xy, 1.0h, 2);
  float4 c(a.x, 1, 2, 3);
  int4 cm(a < 1.0f);
  F4 d = F4(i);
  float4 e = (float4)i + (float4)(1.0f);
  half h = 0.5h;
  float l = 0.1 + 1e-5 + 2. + .5e3 + 0x1p-3 + 0x1F + 1.5f + 1 + 1e+2L;
  float s = sizeof(float4);
  metal::vec<bool, 2> m = vec<bool, 2>(true) || (vec<bool, 2>)i.xy;
  float4 sc = static_cast<float4>(i) + static_cast<float4&>(a) + static_cast<vec<float, 4>>(a < 0.0f);
  float4 g = float4(a < b, a.xy == 0.0f && m, !(i > 0), i >> 1) + (float4)(i >= 2) + float4(as_type<float4>(i), h<int, 4>(a < b));
}
`)
	for _, want := range []string{
		`float4 apply(T x) const { ::metal::__emu::this_space(this, 1, "S::apply"); ::metal::__emu::stack_check(__func__); return ::metal::__emu::make<float4 >(x); }`,
		"::metal::__emu::make<float4 >(a.xy, ((half)1.0f), 2)",
		"float4 c = ::metal::__emu::make<float4 >(a.x, 1, 2, 3)",
		"int4 cm = ::metal::__emu::make<int4 >(::metal::__emu::cmp_value(a < 1.0f))",
		"::metal::__emu::make<F4 >(i)",
		"(::metal::__emu::vcast<float4 >() * i) + (::metal::__emu::vcast<float4 >() * (1.0f))",
		"half h = ((half)0.5f)",
		"float l = 0.1f + 1e-5f + 2.f + .5e3f + 0x1p-3f + 0x1F + 1.5f + 1 + 1e+2L;",
		"sizeof(float4)",
		"::metal::__emu::make<float4 >(::metal::__emu::cmp_value(a < b), ::metal::__emu::cmp_value(a.xy == 0.0f) && m, ::metal::__emu::cmp_value(!(::metal::__emu::cmp_value(i > 0))), i >> 1) + (::metal::__emu::vcast<float4 >() * (::metal::__emu::cmp_value(i >= 2))) + ::metal::__emu::make<float4 >(as_type<float4>(i), h<int, 4>(::metal::__emu::cmp_value(a < b)));",
		"float4 sc = ::metal::__emu::make<float4 >(i) + static_cast<float4&>(a) + ::metal::__emu::make<vec<float, 4> >(::metal::__emu::cmp_value(a < 0.0f));",
		"::metal::__emu::bvec<2> m = ::metal::__emu::make<::metal::__emu::bvec<2> >(true) || (::metal::__emu::vcast<::metal::__emu::bvec<2> >() * i.xy)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRewriteKernels(t *testing.T) {
	out, ks, _ := rewriteOK(t, `
typedef struct { int n; } Args;
kernel void plain(constant Args& args, device const char* src, device char* dst,
                  threadgroup char* shmem [[threadgroup(0)]],
                  uint3 tg [[threadgroup_position_in_grid]], ushort lane [[thread_index_in_simdgroup]]) {
}
namespace ns {
[[max_total_threads_per_threadgroup(256)]]
kernel void mixed(device float* a [[buffer(1)]], device float* b, device float* c) {}
}
template <typename T, short F>
kernel void tmpl(device const T* x [[buffer(0)]], device T* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {}
typedef decltype(tmpl<float, 1>) tmpl_t;
template [[host_name("tmpl_f32")]] kernel tmpl_t tmpl<float, 1>;
template [[host_name("tmpl_f16")]] kernel void tmpl<half, 2>(device const half*, device half*, uint);
template [[host_name("tmpl_i32")]] [[kernel]] decltype(tmpl<int, 3>) tmpl<int, 3>;
`)
	got := map[string]kernelInfo{}
	for _, k := range ks {
		got[k.Name] = k
	}
	plain := got["plain"].Params
	if len(plain) != 6 || plain[0].Index != 0 || plain[1].Index != 1 || plain[2].Index != 2 ||
		plain[3].Kind != "threadgroup" || plain[4].Pos != "threadgroup_position_in_grid" {
		t.Errorf("plain: %+v", plain)
	}
	mixed := got["mixed"]
	if p := mixed.Params; p[0].Index != 1 || p[1].Index != 0 || p[2].Index != 2 || mixed.MaxThreads != 256 {
		t.Errorf("mixed: %+v", mixed)
	}
	for _, n := range []string{"tmpl_f32", "tmpl_f16", "tmpl_i32"} {
		if len(got[n].Params) != 3 {
			t.Errorf("%s: %+v", n, got[n])
		}
	}
	for _, want := range []string{
		`using __F = decltype(&tmpl<float, 1>); static_assert(::metal::__emu::pos_ok<::metal::__emu::param_t<__F, 2>, true>(), "k.metal:12: parameter i: [[thread_position_in_grid]] must be declared ushort, uint or their 2- or 3-vectors"); [[clang::noinline]] tmpl<float, 1>(`,
		"{\"mixed\", &::ns::__emu_k1, ::ns::__emu_bn1, &::ns::__emu_kf1, \"1110000000000000000000000000000\"}",
		"::metal::__emu::pos_arg<::metal::__emu::param_t<__F, 5>, ::metal::__emu::POS_LANE>(__f)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRewriteFunctionConstants(t *testing.T) {
	out, ks, fcs := rewriteOK(t, `
constant bool has_b [[function_constant(100 + 1)]];
constant float scale [[function_constant(7)]];
constant bool has_scale = is_function_constant_defined(scale);
kernel void k(device float* b [[buffer(0), function_constant(has_b)]], uint i [[thread_position_in_grid]]) {
  if (has_scale) b[i] *= scale;
}
`)
	if len(fcs) != 2 || fcs[0].Index != 101 || fcs[0].Type != "bool" || !fcs[1].Guarded || fcs[0].Guarded {
		t.Errorf("function constants: %+v %+v", fcs[0], fcs[1])
	}
	if ks[0].Params[0].FC != "has_b" || strings.Join(ks[0].Uses, ",") != "scale,has_b" {
		t.Errorf("kernel: %+v", ks[0])
	}
	for _, want := range []string{
		"static bool has_b ;",
		"static bool has_scale ; static void __emu_fcinit0() { has_scale = (::__emu_fcdef1); }",
		"if (!(__emu_fcdef0 = ::metal::__emu::fc_get(in, n, 101, &::has_b))) ::has_b = {};",
		"  ::__emu_fcinit0();",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRewriteKeepsLines(t *testing.T) {
	src := "kernel void k(device float* x [[buffer(0)]],\n    uint i [[thread_position_in_grid]]) {\n  threadgroup float\n   t[4];\n  x[i] = 1;\n}\n"
	out, _, _ := rewriteOK(t, src)
	body := out[strings.Index(out, "# 1 \"k.metal\""):strings.Index(out, "#line 1")]
	if got, want := strings.Count(body, "\n"), strings.Count(src, "\n")+2; got != want { // the marker line, and the newline before #line
		t.Errorf("%d lines, want %d:\n%s", got, want, body)
	}
}

func TestRewriteErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"\nkernel void k(texture2d<float> t [[texture(0)]]) {}\n", "k.metal:2: parameter t: [[texture]] is not supported"},
		{"\n\nkernel void k(device float* x, uint i) {}\n", "k.metal:3: kernel parameter i has no [[buffer(n)]] or thread-position attribute"},
		{"template <typename T> kernel void k(device T* x [[buffer(0)]]) {}\ntemplate kernel void k<float>(device float*);\n", "k.metal:2: a kernel template instantiation needs [[host_name"},
		{"kernel void k(device float* x [[buffer(0)]]) {\n  threadgroup float t[2] = {1, 2};\n}\n", "k.metal:2: threadgroup variables cannot be initialized"},
		{"kernel void k(device float* x [[buffer(40)]]) {}\n", "index must be an integer constant in [0, 30]"},
		{"kernel void k(device float* x [[buffer(0)]], device float* y [[buffer(0)]]) {}\n", "buffer(0) is used twice"},
		{"vertex float4 v() { return 0; }\n", "vertex is not supported"},
		{"void f(device float* device* p) {}\n", "pointers to device pointers are not supported"},
	} {
		_, _, _, err := rewriteUnit("# 1 \"k.metal\"\n"+c.src, "k.metal")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.src, err, c.want)
		}
	}
}

func TestEvalInt(t *testing.T) {
	toks, _ := lex("(700 + 2) * 2 - (1 << 3) + 0x10 - 7 % 4")
	if v, err := evalInt(toks); err != nil || v != 1404-8+16-3 {
		t.Errorf("got %d, %v", v, err)
	}
	toks, _ = lex("FOO + 1")
	if _, err := evalInt(toks); err == nil {
		t.Error("an identifier evaluated")
	}
	enums := enumConsts(mustLex(t, `
enum fc_offsets { FC_A = 300, FC_B = FC_A + 100, FC_C, };
enum class Kind : short { Zero, Two = 2, Three };
enum Opaque : int;
enum fc_offsets var;
enum { ANON = 1 << 4 };`))
	for _, c := range []struct {
		expr string
		want int64
		ok   bool
	}{
		{"FC_A + 1", 301, true},
		{"FC_B", 400, true},
		{"FC_C + 2", 403, true},
		{"fc_offsets::FC_C", 401, true},
		{"Kind::Three", 3, true},
		{"Three", 0, false},
		{"ANON * 2", 32, true},
		{"FC_D", 0, false},
	} {
		v, err := evalIntNames(mustLex(t, c.expr), enums)
		if (err == nil) != c.ok || c.ok && v != c.want {
			t.Errorf("%s = %d, %v; want %d, ok %v", c.expr, v, err, c.want, c.ok)
		}
	}
}

// TestRewriteStoreMarks checks which assignments the cost witness brackets
// as stores: left sides that reach memory through [], -> or *, in
// statements, and not declarations or plain variables.
func TestRewriteStoreMarks(t *testing.T) {
	const mark, cmark = "(::metal::__emu::store_mark(false), ", "(::metal::__emu::store_mark(true), "
	for _, c := range []struct{ stmt, want string }{
		{"out[i] = x;", mark + "out[i]) = x;"},
		{"out[idx[i]] += x;", cmark + "out[idx[i]]) += x;"},
		{"o.p[i].x = x;", mark + "o.p[i].x) = x;"},
		{"s->v = x;", mark + "s->v) = x;"},
		{"*out = x;", mark + "*out) = x;"},
		{"*(out + 1) = x;", mark + "*(out + 1)) = x;"},
		{"((device float4*)out)[i] = v;", mark + "((::metal::__emu::ptr<float4, 1>)out)[i]) = v;"},
		{"if (i > 0) out[i] = x;", "if (i > 0) " + mark + "out[i]) = x;"},
		{"if (i > 0) ((device float4*)out)[i] = v;", "if (i > 0) " + mark + "((::metal::__emu::ptr<float4, 1>)out)[i]) = v;"},
		{"while (i > 0) (out)[i--] += x;", "i > 0) " + cmark + "(out)[i--]) += x;"},
		{"x = out[i];", "x = out[i];"},
		{"float a[2] = {x, x};", "float a[2] = {x, x};"},
		{"float b = x;", "float b = x;"},
	} {
		out, _, _ := rewriteOK(t, "void f(device float* out, device const uint* idx, float x, float4 v, uint i) {\n  "+c.stmt+"\n}\n")
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: output lacks %q:\n%s", c.stmt, c.want, out)
		}
	}
}

// TestRewriteComparisons checks which operands the rewriter makes a
// comparison's value (cmp_value: a bool vector for vectors): those whose
// outermost operator compares, not an if's condition itself, template
// arguments or an operator's name.
func TestRewriteComparisons(t *testing.T) {
	const cv = "::metal::__emu::cmp_value("
	for _, c := range []struct{ stmt, want string }{
		{"int4 m = a < b;", "int4 m = " + cv + "a < b);"},
		{"m = (a == b) + 1;", "m = (" + cv + "a == b)) + 1;"},
		{"m = a < b && c >= d || !(a != b);", "m = " + cv + "a < b) && " + cv + "c >= d) || " + cv + "!(" + cv + "a != b)));"},
		{"return n > 2 ? a : b;", "return " + cv + "n > 2) ? a : b;"},
		{"if (n > 2 && all(a <= b)) n = 1;", "if (n > 2 && all(" + cv + "a <= b))) n = 1;"},
		{"for (int k = 0; k < n; k++) n >>= 1;", "for (int k = 0; __emu_loop0.tick(), " + cv + "k < n); k++) n >>= 1;"},
		{"m = f(a < b, c > d);", "m = f(" + cv + "a < b), " + cv + "c > d));"},
		{"m = f(a < b, c > 1.0f, !(a == b));", "m = f(" + cv + "a < b), " + cv + "c > 1.0f), " + cv + "!(" + cv + "a == b))));"},
		{"m = f(g<int, 2>(n), is_same<int, T>::value, h<4, 2> {n});", "m = f(g<int, 2>(n), is_same<int, T>::value, h<4, 2> {n});"},
		{"vec<int, 2> w = f(a < b, c > d);", "vec<int, 2> w = f(" + cv + "a < b), " + cv + "c > d));"},
		{"for (vec<int, 2> w = n; w.x; ) {}", "for (vec<int, 2> w = n; __emu_loop0.tick(), w.x; ) {}"},
		{"m = f((a < b), (c > d));", "m = f((" + cv + "a < b)), (" + cv + "c > d)));"},
		{"m = vec<int, 4>(n);", "m = ::metal::__emu::make<vec<int, 4> >(n);"},
		{"m = g(&a < &b);", "m = g(" + cv + "&a < &b));"},
		// A '<' after a name no template has compares, as in C++, whatever
		// follows the '>' that could close it.
		{"m = f(a < b, c > (d));", "m = f(" + cv + "a < b), " + cv + "c > (d)));"},
		{"m = f(a < b, c > -d);", "m = f(" + cv + "a < b), " + cv + "c > -d));"},
		{"m = a < b, c > d;", "m = " + cv + "a < b), " + cv + "c > d);"},
		{"m = f(a.x < b.x, c.x > (d.x));", "m = f(" + cv + "a.x < b.x), " + cv + "c.x > (d.x)));"},
		{"m = f(g<int, 2>(n), k<int, 2>(-n));", "m = f(g<int, 2>(n), k<int, 2>(-n));"},
		{"m = f(std::min<int>(n, 2), metal::as_type<int>(n) > (n));", "m = f(std::min<int>(n, 2), " + cv + "metal::as_type<int>(n) > (n)));"},
	} {
		out, _, _ := rewriteOK(t, "template <class T, int N> int g(int);\ntemplate <int A, int B> struct h { int n; };\n"+
			"template <class T, int N> T k(T);\n"+
			"void f(int4 m, float4 a, float4 b, float4 c, float4 d, int n) {\n  "+c.stmt+"\n}\n")
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: output lacks %q:\n%s", c.stmt, c.want, out)
		}
	}
}

// Every function body starts with the stack check (docs/msl-subset.md,
// "The time limit"), and nothing else that opens a brace outside a
// function: initialisers, class, enum and namespace bodies, blocks.
func TestRewriteStackChecks(t *testing.T) {
	const check = "::metal::__emu::stack_check(__func__);"
	for _, tc := range []struct {
		src  string
		want int // checks in the output
	}{
		{"uint f(uint n) { return n; }", 1},
		{"template <typename T, int N = 4> T g(T x) { return x; }", 1},
		{"constexpr int steps(int n) { int s = 0; while (n > 1) { n /= 2; s++; } return s; }", 1},
		{"auto h(float x) -> float { return x; }", 1},
		{"auto h(float x) -> decltype(x) { return x; }", 1},
		{"float h(float x) __attribute__((always_inline)) { return x; }", 1},
		{"__attribute__((always_inline)) float h(float x) { return x; }", 1},
		{"struct S { float a; S(float x) : a(x) {} float get() const { return a; } };", 2},
		{"struct S { float a, b; S(float x) : a(x), b{x} {} };", 1},
		{"struct S { float a[2] = {1, 2}; bool operator()(int x) const { return x > 0; } };", 1},
		{"struct S { operator float() const { return 1; } };", 1},
		{"kernel void k(device float* o [[buffer(0)]]) { if (o) { o[0] = 1; } for (;;) { break; } }", 1},
		{"constant float t[2] = {1, 2};", 0},
		{"constant float4 v{1, 2, 3, 4};", 0},
		{"struct P { float x; }; constant P p = {1};", 0},
		{"enum E { A, B }; namespace n { struct alignas(16) Q { int q; }; }", 0},
		{"constant float k = 2; decltype(k) u{3};", 0},
	} {
		out, _, _ := rewriteOK(t, tc.src)
		if got := strings.Count(out, check); got != tc.want {
			t.Errorf("%s: %d stack checks, want %d:\n%s", tc.src, got, tc.want, out)
		}
	}
}

// frameOf is the frame scope that starts the body of a function named
// name (openFrame).
func frameOf(name string) string {
	return fmt.Sprintf(" ::metal::__emu::frame_scope __emu_frame(%du, __builtin_return_address(0));", callTag(name))
}

// Every function body that may hold a thread at a simd operation or in a
// loop (one of its own, or of a function it calls), outside a constexpr
// function, opens a frame scope, and every call of such a function, in a
// body that opens one, notes its place first (call_at), a member's call in
// its object: the scheduler orders lanes in a call and lanes at the
// caller's operations by it (docs/msl-subset.md, "Synchronisation and SIMD
// groups"). A declaration, a destructor, a call of a template's member and
// a function of no frame take none.
func TestRewriteCallPlaces(t *testing.T) {
	at := func(name string) string { return fmt.Sprintf("(::metal::__emu::call_at(%du), ", callTag(name)) }
	const head = "struct S { float v; float get(float x) { return v + simd_sum(x); } float sum() const { return g(v); } };\n" +
		"float g(float x) { return simd_max(x); }\ntemplate <class T> T tg(T x) { while (x > 1) x /= 2; return x; }\n" +
		"namespace ns { float h(float x) { return tg(x); } float plain(float x) { return x * 2; } }\n" +
		"constexpr float c(float x) { return x + g(x); }\n"
	for _, c := range []struct{ stmt, want string }{
		{"y = g(x);", "y = " + at("g") + "g(x));"},
		{"y = g(g(x)) + tg<float>(x);", "y = " + at("g") + "g(" + at("g") + "g(x)))) + " + at("tg") + "tg<float>(x));"},
		{"y = ns::h(x) + ::g(x);", "y = " + at("h") + "ns::h(x)) + " + at("g") + "::g(x));"},
		{"return g(x);", "return " + at("g") + "g(x));"},
		{"if (g(x) > 0) y = 1;", "if (" + at("g") + "g(x)) > 0) y = 1;"},
		{"if (y > g(x)) y = 1;", "if (y > " + at("g") + "g(x))) y = 1;"},
		{"y = s.get(x) + p->sum() + a[1].get(x);", "y = " + at("get") + "s).get(x) + " + at("sum") + "p)->sum() + " + at("get") + "a[1]).get(x);"},
		{"y = c(x) + ns::plain(x);", "y = c(x) + ns::plain(x);"},
		{"S t(x); t.~S();", "S t(x); t.~S();"},
		{"float g(float); y = x;", "float g(float); y = x;"},
	} {
		out, _, _ := rewriteOK(t, head+"void body(float x, float y, thread S& s, thread S* p, thread S* a) {\n  "+c.stmt+"\n}\n")
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: output lacks %q:\n%s", c.stmt, c.want, out)
		}
	}
	out, _, _ := rewriteOK(t, head)
	for _, name := range []string{"get", "sum", "g", "tg", "h"} {
		if !strings.Contains(out, frameOf(name)) {
			t.Errorf("%s opens no frame:\n%s", name, out)
		}
	}
	if strings.Contains(out, frameOf("c")) || strings.Contains(out, frameOf("plain")) || strings.Contains(out, "x + "+at("g")) {
		t.Errorf("the constexpr function or one that reaches no simd operation opens a frame, or notes a call:\n%s", out)
	}
}

// Every loop opens a scope (loop_scope) whose tick counts its rounds and
// checks the time limit: in the condition, or, where the condition
// declares a variable, in a for's increment, a while becoming that for; a
// do-while's in its while, a range-based for's at the start of its body.
// A loop of a constexpr function, which may hold no scope, takes the
// check alone.
func TestRewriteLoopTicks(t *testing.T) {
	const (
		open = "switch (::metal::__emu::loop_scope __emu_loop0(0); 0) default: "
		tick = "__emu_loop0.tick()"
		lt   = "::metal::__emu::loop_tick()"
	)
	for _, tc := range []struct{ loop, want string }{
		{"while (x < n) x++;", open + "while (" + tick + ", x < n) x++;"},
		{"while (x = f()) {}", open + "while (" + tick + ", x = f()) {}"},
		{"while (*p = f()) {}", open + "while (" + tick + ", *p = f()) {}"},
		{"while (s.v = f()) {}", open + "while (" + tick + ", s.v = f()) {}"},
		{"while (int v = f()) {}", open + "for ( ;int v = f(); " + tick + ") {}"},
		{"while (const S* p = g()) {}", open + "for ( ;const S* p = g(); " + tick + ") {}"},
		{"while (S s{f()}) {}", open + "for ( ;S s{f()}; " + tick + ") {}"},
		{"do { x++; } while (x < n);", open + "do { x++; } while (" + tick + ", x < n);"},
		{"do x++; while (x < n);", open + "do x++; while (" + tick + ", x < n);"},
		{"do if (x) x++; else x--; while (x < n);", open + "do if (x) x++; else x--; while (" + tick + ", x < n);"},
		{"for (int i = 0; f(); i++) {}", open + "for (int i = 0; " + tick + ", f(); i++) {}"},
		{"for (;;) {}", open + "for (; (" + tick + ", true);) {}"},
		{"for (; int v = f(); ) {}", open + "for (; int v = f(); " + tick + " ) {}"},
		{"for (int k = 2; int v = k; k--, x++) {}", open + "for (int k = 2; int v = k; " + tick + ", k--, x++) {}"},
		{"for (int k = 2; S s{k}; k--) {}", open + "for (int k = 2; S s{k}; " + tick + ", k--) {}"},
		{"for (int v : a) x += v;", open + "for (int v : a) { " + tick + "; x += v; }"},
		{"for (int v : a) { x += v; }", open + "for (int v : a) { " + tick + "; { x += v; } }"},
		{"for (int v : a) if (v) x++; else { x--; }", open + "for (int v : a) { " + tick + "; if (v) x++; else { x--; } }"},
		// An else after the loop binds as written.
		{"if (n) while (x < n) x++; else x = 1;", "if (n) " + open + "while (" + tick + ", x < n) x++; else x = 1;"},
		{"while (x < n) while (x < 2) x++;", open + "while (" + tick + ", x < n) " +
			"switch (::metal::__emu::loop_scope __emu_loop1(1); 0) default: while (__emu_loop1.tick(), x < 2) x++;"},
		// A loop hint stays just before its loop.
		{"if (n)\n#pragma unroll\nfor (;;) {}", "if (n)" + open + "\n#pragma unroll\nfor (; (" + tick + ", true);) {}"},
	} {
		out, _, _ := rewriteOK(t, "struct S { int v; S(int x) : v(x) {} explicit operator bool() const { return v != 0; } };\n"+
			"int f(); thread const S* g();\nvoid h(thread int* p, int n, S s, thread int* a) { int x = 0; "+tc.loop+" }\n")
		if !strings.Contains(out, tc.want) {
			t.Errorf("%s: output lacks %q:\n%s", tc.loop, tc.want, out)
		}
	}
	for _, tc := range []struct{ src, want string }{
		{"constexpr int steps(int n) { int s = 0; while (n > 1) { n /= 2; s++; } return s; }", "while (" + lt + ", n > 1)"},
		{"template <int N> constexpr int f(int n) { for (int k = 0; k < N; k++) n++; return n; }", "for (int k = 0; " + lt + ", "},
		{"template <int N> constexpr int f(int n) { do { n++; } while (n < N); return n; }", "do { n++; } while (" + lt + ", n < N);"},
		{"struct Q { static constexpr int f(int n) { for (int v : {1, 2}) n += v; return n; } };", "for (int v : {1, 2}) n += v;"},
	} {
		out, _, _ := rewriteOK(t, tc.src+"\n")
		if !strings.Contains(out, tc.want) || strings.Contains(out, "loop_scope") {
			t.Errorf("%s: output lacks %q or opens a scope:\n%s", tc.src, tc.want, out)
		}
	}
}

// An auto variable initialised by a swizzle takes the swizzle's value, a
// bool vector where the shim's swizzle is a type of its own.
func TestRewriteAutoSwizzles(t *testing.T) {
	for _, tc := range []struct{ decl, want string }{
		{"auto s = m.xy;", "auto s = ::metal::__emu::swz_value( m.xy);"},
		{"const auto s = f(m).rgba;", "const auto s = ::metal::__emu::swz_value( f(m).rgba);"},
		{"auto s = m.x;", "auto s = m.x;"},
		{"auto s = m.xyzwx;", "auto s = m.xyzwx;"},
		{"auto s = m.xg;", "auto s = m.xg;"},
		{"auto s = m.xy, u = m.zw;", "auto s = m.xy, u = m.zw;"},
		{"auto s{m.xy};", "auto s{m.xy};"},
		{"auto& s = m.xy;", "auto& s = m.xy;"},
	} {
		out, _, _ := rewriteOK(t, "bool4 f(bool4 m);\nvoid h(bool4 m) { "+tc.decl+" }\n")
		if !strings.Contains(out, tc.want) {
			t.Errorf("%s: output lacks %q:\n%s", tc.decl, tc.want, out)
		}
	}
}

// A function's pointer or reference parameter without an address space is
// a thread pointer or reference, and gets the check of one declared
// `thread`; a template's, whose T may name an address space, and a const
// reference, which may bind a temporary, do not.
func TestRewritePlainPointerParams(t *testing.T) {
	const check = "::metal::__emu::thread_check("
	for _, tc := range []struct {
		src  string
		want int // checks in the output
	}{
		{"float f(float* p) { return *p; }", 1},
		{"float f(const float* const p, int n = 2) { return p[n]; }", 1},
		{"float f(int n, float* p = nullptr) { return p ? p[n] : 0; }", 1},
		{"float f(vec<float, 4>* p, thread float* q, float* r) { return p->x + *q + *r; }", 3},
		{"struct S { float get(float* p) const { return *p; } };", 1},
		{"template <typename T> T f(T* p) { return *p; }", 0},
		{"float f(device float* p, constant float* c, threadgroup float* t) { return *p + *c + *t; }", 0},
		{"float f(float& r, float x) { return r + x; }", 1},
		{"void f(vec<float, 4>& v, thread float& t) { v.x = t; }", 2},
		{"float f(const float& r, float const& s, constant float& c) { return r + s + c; }", 0},
		{"template <typename T> void f(T& r) { r += 1; }", 0},
		{"float f(float* p);", 0},
	} {
		out, _, _ := rewriteOK(t, tc.src+"\n")
		if got := strings.Count(out, check); got != tc.want {
			t.Errorf("%s: %d thread pointer checks, want %d:\n%s", tc.src, got, tc.want, out)
		}
	}
}

func mustLex(t *testing.T, src string) []token {
	t.Helper()
	toks, err := lex(src)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}
