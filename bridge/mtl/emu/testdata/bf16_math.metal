// bfloat math as MLX's bf16_math.h declares it (emu_test.go
// TestLibraryBFloatMath): Apple's metal_stdlib has no math functions for
// bfloat, so the library declares its own in metal::, metal::fast and
// metal::precise, each a call of the compiler's builtin on a float in the
// namespace's math mode, and simd functions through the builtins on the
// bits.
#include <metal_stdlib>
using namespace metal;

typedef bfloat bf16;

#define BF16_MATH(mode)                                                              \
  METAL_FUNC bf16 abs(bf16 x) { return static_cast<bf16>(__metal_fabs(static_cast<float>(x), mode)); } \
  METAL_FUNC bf16 sqrt(bf16 x) { return static_cast<bf16>(__metal_sqrt(static_cast<float>(x), mode)); } \
  METAL_FUNC bf16 exp(bf16 x) { return static_cast<bf16>(__metal_exp(static_cast<float>(x), mode)); } \
  METAL_FUNC bf16 floor(bf16 x) { return static_cast<bf16>(__metal_floor(static_cast<float>(x), mode)); } \
  METAL_FUNC bf16 fmax(bf16 x, bf16 y) {                                             \
    return static_cast<bf16>(__metal_fmax(static_cast<float>(x), static_cast<float>(y), mode)); \
  }                                                                                  \
  METAL_FUNC bf16 fma(bf16 x, bf16 y, bf16 z) {                                      \
    return static_cast<bf16>(__metal_fma(static_cast<float>(x), static_cast<float>(y), static_cast<float>(z))); \
  }                                                                                  \
  METAL_FUNC bf16 median3(bf16 x, bf16 y, bf16 z) {                                  \
    return static_cast<bf16>(__metal_fmedian3(static_cast<float>(x), static_cast<float>(y), static_cast<float>(z), mode)); \
  }                                                                                  \
  METAL_FUNC bf16 ldexp(bf16 x, int k) { return static_cast<bf16>(__metal_ldexp(static_cast<float>(x), k, mode)); } \
  METAL_FUNC bf16 frexp(bf16 x, thread int& e) { return static_cast<bf16>(__metal_frexp(static_cast<float>(x), &e)); }

namespace metal {
BF16_MATH(__METAL_MAYBE_FAST_MATH__)
namespace fast {
BF16_MATH(__METAL_FAST_MATH__)
}
namespace precise {
BF16_MATH(__METAL_PRECISE_MATH__)
}
METAL_FUNC bf16 simd_sum(bf16 x) { return static_cast<bf16>(__metal_simd_sum(static_cast<float>(x))); }
METAL_FUNC bf16 simd_shuffle_down(bf16 x, ushort d) {
  return as_type<bf16>(__metal_simd_shuffle_down(as_type<uint16_t>(x), d));
}
METAL_FUNC bf16 simd_shuffle_and_fill_up(bf16 x, bf16 fill, ushort d) {
  return as_type<bf16>(__metal_simd_shuffle_and_fill_up(
      as_type<uint16_t>(x), as_type<uint16_t>(fill), d, __metal_get_simdgroup_size(ushort())));
}
} // namespace metal

#undef BF16_MATH

// out[9*i + k] for x = in[i]: the functions above, each result a bfloat.
kernel void bf16_math(
    device const bf16* in [[buffer(0)]],
    device bf16* out [[buffer(1)]],
    uint i [[thread_position_in_grid]]) {
  const bf16 x = in[i];
  const bf16 y = in[(i + 7) % 32];
  int e;
  const bf16 m = precise::frexp(x, e);
  device bf16* o = out + 9 * i;
  o[0] = abs(x);
  o[1] = fast::sqrt(abs(x));
  o[2] = precise::exp(x);
  o[3] = fmax(x, y);
  o[4] = fma(x, y, floor(x));
  o[5] = median3(x, y, bf16(0.5f));
  o[6] = ldexp(m, e + 1);
  o[7] = simd_sum(floor(x));
  o[8] = simd_shuffle_down(x, ushort(3)) + simd_shuffle_and_fill_up(x, bf16(-1.0f), ushort(1));
}

// The float functions stay in metal::fast and metal::precise beside the
// library's bfloat ones: out[i] = precise::sqrt(x) + fast::exp(x) * 4 and
// precise::fmax(x, 1) for x = i + 0.5.
kernel void float_math(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  const float x = float(i) + 0.5f;
  out[2 * i] = precise::sqrt(x) + fast::floor(x) * 4;
  out[2 * i + 1] = precise::fmax(x, 1.0f) + precise::exp(x);
}
