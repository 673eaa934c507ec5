// Member functions and the address space of `this` (emu_test.go
// TestThisAddressSpace): Apple's compiler refuses a call on an object in an
// address space the member is not declared for.
#include <metal_stdlib>
using namespace metal;

// bf16 as its bits, converted by a member declared for thread objects only.
struct bits_thread {
  ushort bits;
  operator float() const { return as_type<float>(uint(bits) << 16); }
};

// The same, declared for every address space.
struct bits_all {
  ushort bits;
  operator float() const thread { return as_type<float>(uint(bits) << 16); }
  operator float() const device { return as_type<float>(uint(bits) << 16); }
  operator float() const threadgroup { return as_type<float>(uint(bits) << 16); }
  operator float() const constant { return as_type<float>(uint(bits) << 16); }
};

// A member template declared for every address space, as MLX's complex_t
// declares its conversions: each overload a template of its own.
struct bits_tmpl {
  ushort bits;
  template <typename U, typename = metal::enable_if_t<metal::is_floating_point_v<U> && sizeof(U) >= 4>>
  operator U() const thread { return U(as_type<float>(uint(bits) << 16)); }
  template <typename U, typename = metal::enable_if_t<metal::is_floating_point_v<U> && sizeof(U) >= 4>>
  operator U() const device { return U(as_type<float>(uint(bits) << 16)); }
  template <typename U, typename = metal::enable_if_t<metal::is_floating_point_v<U> && sizeof(U) >= 4>>
  operator U() const threadgroup { return U(as_type<float>(uint(bits) << 16)); }
  template <typename U, typename = metal::enable_if_t<metal::is_floating_point_v<U> && sizeof(U) >= 4>>
  operator U() const constant { return U(as_type<float>(uint(bits) << 16)); }
};

// Device objects only.
struct bits_device {
  ushort bits;
  float get() const device { return as_type<float>(uint(bits) << 16); }
};

kernel void read_thread_only(device const bits_thread* in [[buffer(0)]], device float* out [[buffer(1)]],
                             uint i [[thread_position_in_grid]]) {
  out[i] = float(in[i]); // refused by Apple's compiler: `this` is device
}

kernel void copy_then_read(device const bits_thread* in [[buffer(0)]], device float* out [[buffer(1)]],
                           uint i [[thread_position_in_grid]]) {
  const bits_thread v = in[i]; // a thread copy: its own conversion applies
  out[i] = float(v);
}

kernel void read_all(device const bits_all* in [[buffer(0)]], device float* out [[buffer(1)]],
                     uint i [[thread_position_in_grid]], uint l [[thread_position_in_threadgroup]]) {
  threadgroup bits_all tg[8];
  tg[l] = in[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const bits_all v = in[i];
  out[i] = float(in[i]) + float(tg[l]) + float(v);
}

kernel void device_on_thread(device const bits_device* in [[buffer(0)]], device float* out [[buffer(1)]],
                             uint i [[thread_position_in_grid]]) {
  out[i] = in[i].get();
  const bits_device v = in[i];
  out[i] += v.get(); // refused: get() is for device objects
}

kernel void read_tmpl(device const bits_tmpl* in [[buffer(0)]], device float* out [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
  const bits_tmpl v = in[i];
  out[i] = float(in[i]) + float(v);
}

// Constructors declared for several address spaces, as MLX's complex_t
// declares them, with one body each: plain, with an initialiser list, and
// templates.
struct cplx {
  float re, im;
  constexpr cplx() thread : re(0), im(0) {}
  constexpr cplx() threadgroup : re(0), im(0) {}
  constexpr cplx(float x) thread : re(x), im(0) {}
  constexpr cplx(float x) device : re(x), im(0) {}
  template <typename U, typename = metal::enable_if_t<metal::is_integral_v<U>>>
  constexpr cplx(U x) thread : re(float(x)), im(1) {}
  template <typename U, typename = metal::enable_if_t<metal::is_integral_v<U>>>
  constexpr cplx(U x) threadgroup : re(float(x)), im(1) {}
  template <typename U, typename = metal::enable_if_t<metal::is_integral_v<U>>>
  constexpr cplx(U x) device : re(float(x)), im(1) {}
  float sum() const thread { return re + im; }
};

kernel void build_cplx(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                       uint i [[thread_position_in_grid]]) {
  const cplx a;
  const cplx b(in[i]);
  const cplx c(i + 0u);
  out[i] = a.sum() + b.sum() + c.sum(); // in[i] + i + 1
}
