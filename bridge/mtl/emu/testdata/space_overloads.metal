// Functions and operators overloaded by the address space of a reference
// parameter, as MLX's headers declare them (emu_test.go
// TestSpaceOverloads): a bfloat16 struct for devices without a native
// bfloat, whose in-place operators are declared per address space by a
// macro, a complex type with per-space operator+=, and an overload set
// whose bodies differ per space.
#include <metal_stdlib>
using namespace metal;

// bf16_t: bfloat16 as its bits, rounded to nearest even from float.
constexpr METAL_FUNC uint16_t to_bf16_bits(float x) {
  uint32_t b = as_type<uint32_t>(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) {
    return uint16_t(0x7fc0);
  }
  b += ((b >> 16) & 1) + 0x7fffu;
  return uint16_t(b >> 16);
}

struct bf16_t {
  uint16_t bits_;
  bf16_t() thread = default;
  bf16_t() threadgroup = default;
  bf16_t() device = default;
  bf16_t() constant = default;

#define BF16_CTOR(space) \
  constexpr METAL_FUNC bf16_t(float x) space : bits_(to_bf16_bits(x)) {}
  BF16_CTOR(thread)
  BF16_CTOR(threadgroup)
  BF16_CTOR(device)
  BF16_CTOR(constant)
#undef BF16_CTOR

#define BF16_CONV(space) \
  constexpr METAL_FUNC operator float() const space { return as_type<float>(uint32_t(bits_) << 16); }
  BF16_CONV(thread)
  BF16_CONV(threadgroup)
  BF16_CONV(device)
  BF16_CONV(constant)
#undef BF16_CONV
};

#define BF16_BINOP(op)                                                   \
  constexpr METAL_FUNC bf16_t operator op(bf16_t a, bf16_t b) {          \
    return bf16_t(static_cast<float>(a) op static_cast<float>(b));      \
  }                                                                      \
  constexpr METAL_FUNC float operator op(bf16_t a, float b) {            \
    return static_cast<float>(a) op b;                                   \
  }                                                                      \
  constexpr METAL_FUNC float operator op(float a, bf16_t b) {            \
    return a op static_cast<float>(b);                                   \
  }
BF16_BINOP(+)
BF16_BINOP(-)
BF16_BINOP(*)
#undef BF16_BINOP

#define BF16_INPLACE(op, name, space)                                     \
  constexpr METAL_FUNC space bf16_t& name(space bf16_t& lhs, bf16_t rhs) { \
    lhs = bf16_t(static_cast<float>(lhs) op static_cast<float>(rhs));    \
    return lhs;                                                          \
  }                                                                      \
  constexpr METAL_FUNC space float& name(space float& lhs, bf16_t rhs) {  \
    lhs = lhs op static_cast<float>(rhs);                                \
    return lhs;                                                          \
  }
#define BF16_INPLACE_SPACES(op, name) \
  BF16_INPLACE(op, name, device)      \
  BF16_INPLACE(op, name, thread)      \
  BF16_INPLACE(op, name, threadgroup)
BF16_INPLACE_SPACES(+, operator+=)
BF16_INPLACE_SPACES(-, operator-=)
BF16_INPLACE_SPACES(*, operator*=)
#undef BF16_INPLACE_SPACES
#undef BF16_INPLACE

// y[i] = (y[i] + a*x[i]) * x[i] - x[i], each step rounded to bf16, through
// the device operators; acc sums a*x over the group in a thread bf16 and a
// thread float; tg holds each lane's x, doubled through the threadgroup
// operator.
kernel void bf16_ops(
    device bf16_t* y [[buffer(0)]],
    device const bf16_t* x [[buffer(1)]],
    device float* sums [[buffer(2)]],
    constant float& a [[buffer(3)]],
    uint i [[thread_position_in_grid]],
    uint lid [[thread_index_in_threadgroup]]) {
  threadgroup bf16_t tg[32];
  tg[lid] = x[i];
  bf16_t ax = bf16_t(a) * x[i];
  y[i] += ax;
  y[i] *= x[i];
  y[i] -= x[i];
  tg[lid] += tg[lid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  bf16_t acc = bf16_t(0.0f);
  float facc = 0;
  for (uint k = 0; k < 32; k++) {
    acc += tg[k];
    facc += tg[k];
  }
  sums[3 * i] = acc;
  sums[3 * i + 1] = facc;
  sums[3 * i + 2] = tg[lid];
}

// complex_t: MLX's complex.h shape, operator+= a template per space.
template <typename T>
struct complex_t {
  T real;
  T imag;
  constexpr complex_t(T r, T i) thread : real(r), imag(i) {}
  constexpr complex_t(T r, T i) threadgroup : real(r), imag(i) {}
  constexpr complex_t(T r, T i) device : real(r), imag(i) {}
  constexpr complex_t() thread : real(0), imag(0) {}
  constexpr complex_t() threadgroup : real(0), imag(0) {}
};
typedef complex_t<float> complex64_t;

template <typename T>
constexpr complex_t<T> operator*(complex_t<T> a, complex_t<T> b) {
  return {a.real * b.real - a.imag * b.imag, a.real * b.imag + a.imag * b.real};
}

template <typename T>
constexpr thread complex_t<T>& operator+=(
    thread complex_t<T>& a,
    complex_t<T> b) {
  a.real += b.real;
  a.imag += b.imag;
  return a;
}

template <typename T>
constexpr threadgroup complex_t<T>& operator+=(
    threadgroup complex_t<T>& a,
    complex_t<T> b) {
  a.real += b.real;
  a.imag += b.imag;
  return a;
}

template <typename T>
constexpr device complex_t<T>& operator+=(
    device complex_t<T>& a,
    complex_t<T> b) {
  a.real += b.real;
  a.imag += b.imag;
  return a;
}

// out[i] += sum over k of a[k] * b[i]: in a thread accumulator, in a
// threadgroup one (lane 0 adds every product in turn), and in device memory.
kernel void complex_mac(
    device const complex64_t* a [[buffer(0)]],
    device const complex64_t* b [[buffer(1)]],
    device complex64_t* out [[buffer(2)]],
    uint i [[thread_position_in_grid]]) {
  threadgroup complex64_t shared;
  complex64_t acc;
  for (uint k = 0; k < 8; k++) {
    acc += a[k] * b[i];
  }
  if (i == 0) {
    shared = complex64_t();
    for (uint k = 0; k < 8; k++) {
      shared += a[k] * b[k];
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[i] += acc;
  out[i] += shared;
}

// Bodies that differ per space: each overload says which it is.
METAL_FUNC float which(thread const float& x) { return x + 1000; }
METAL_FUNC float which(device const float& x) { return x + 2000; }
METAL_FUNC float which(constant float& x) { return x + 3000; }
METAL_FUNC float which(threadgroup const float& x) { return x + 4000; }

// Two reference parameters, each of its own space.
METAL_FUNC void move_to(device float& to, thread const float& from) { to = from * 2; }
METAL_FUNC void move_to(threadgroup float& to, thread const float& from) { to = from * 3; }
METAL_FUNC void move_to(thread float& to, device const float& from) { to = from * 5; }

constant float table[2] = {0.5f, 0.25f};

kernel void which_space(
    device float* out [[buffer(0)]],
    constant float& c [[buffer(1)]],
    uint i [[thread_position_in_grid]],
    uint lid [[thread_index_in_threadgroup]]) {
  threadgroup float tg[32];
  float local = float(i);
  tg[lid] = float(i);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float r = which(local) + which(out[i]) + which(c) + which(table[1]) + which(tg[lid]);
  move_to(tg[lid], local);
  float got = 0;
  move_to(got, out[i]);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[32 + i] = r;
  move_to(out[i], tg[lid] + got);
}

// Only thread and threadgroup overloads: a device argument has none, which
// Metal refuses to build; the emulator fails the dispatch.
METAL_FUNC float only_local(thread float& x) { return x; }
METAL_FUNC float only_local(threadgroup float& x) { return -x; }

kernel void no_device_overload(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[i] = only_local(out[i]);
}

// A member function overloaded by its parameter's space, the thread one
// first, with bodies that differ.
struct Acc {
  float scale;
  void add_to(thread float& x) const { x += scale; }
  void add_to(device float& x) const { x += 10 * scale; }
  void add_to(threadgroup float& x) const { x += 100 * scale; }
};

kernel void member_space(
    device float* out [[buffer(0)]],
    uint i [[thread_position_in_grid]],
    uint lid [[thread_index_in_threadgroup]]) {
  threadgroup float tg[32];
  tg[lid] = 0;
  float l = 0;
  const Acc a = {2};
  a.add_to(l);
  a.add_to(out[i]);
  a.add_to(tg[lid]);
  out[i] += l + tg[lid];
}
