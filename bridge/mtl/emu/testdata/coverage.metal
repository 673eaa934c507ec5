// Less common parts of the subset, checked together.
#include <metal_stdlib>
using namespace metal;

namespace cov {

// Per lane: quad and rotate shuffles, votes, an inclusive scan.
kernel void lanes(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                  uint gid [[thread_position_in_grid]]) {
  float v = in[gid];
  device float* o = out + gid * 8;
  o[0] = quad_sum(v);
  o[1] = quad_shuffle_xor(v, 1);
  o[2] = simd_shuffle_rotate_down(v, 1);
  o[3] = simd_all(v > -100.0f) ? 1 : 0;
  o[4] = simd_any(v > 1000.0f) ? 1 : 0;
  o[5] = simd_is_first() ? 1 : 0;
  o[6] = simd_prefix_inclusive_sum(v);
  o[7] = simd_broadcast_first(v);
}

} // namespace cov

// Helpers that deduce their element type from an address-space pointer.
template <typename T> T first(constant T* p) { return p[0]; }
template <typename T> T second(device const T* p) { return p[1]; }

[[max_total_threads_per_threadgroup(64)]]
kernel void misc(device uint* out [[buffer(0)]], device atomic_uint* ctr [[buffer(1)]],
                 device float* mat [[buffer(2)]], constant float* table [[buffer(3)]],
                 uint tid [[thread_index_in_threadgroup]]) {
  threadgroup atomic_uint cnt;
  threadgroup float4 vbuf[2];
  threadgroup uint grid2[4][8];
  if (tid == 0) atomic_store_explicit(&cnt, 0u, memory_order_relaxed);
  if (tid < 32) grid2[tid / 8][tid % 8] = tid;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  atomic_fetch_add_explicit(&cnt, 1u, memory_order_relaxed);
  if (tid == 5) {
    uint expected = 0;
    atomic_compare_exchange_weak_explicit(ctr, &expected, 42u, memory_order_relaxed, memory_order_relaxed);
  }
  threadgroup half* hb = reinterpret_cast<threadgroup half*>(vbuf);
  if (tid == 0) {
    for (short i = 0; i < 16; i++) hb[i] = half(i);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid == 0) {
    threadgroup const half* hr = (threadgroup const half*)vbuf;
    float4 v4 = float4(1.5f, -2.0f, 3.0f, 0.25f);
    half4 h4 = half4(v4);
    bool4 neg = bool4(h4 < half4(0));
    packed_float3 pf = float3(1, 2, 3);
    float3 f3 = pf;
    float2x2 m = float2x2(float2(1, 2), float2(3, 4));
    float2 mv = m * float2(1, 1);
    out[0] = atomic_load_explicit(&cnt, memory_order_relaxed);
    out[1] = uint(hr[7]);
    out[2] = grid2[3][5];
    out[3] = uint(any(neg)) + 2 * uint(all(neg));
    out[4] = as_type<uint>(1.0f);
    out[5] = uint(f3.z + pf[0]);
    out[6] = uint(mv.y);
    out[7] = popcount(0xF0u) + clz(1u);
    out[8] = uint(numeric_limits<half>::max());
    out[9] = uint(fast::exp(0.0f) + precise::sqrt(16.0f));
    out[10] = uint(first(table) + second((device const float*)mat));
  }
  // A diagonal matrix, stored by the first simdgroup.
  simdgroup_float8x8 d(2.0f);
  if (tid < 32) simdgroup_store(d, mat, 8);
}
