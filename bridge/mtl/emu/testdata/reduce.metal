// Reductions: the prototype's RMSNorm, simd shuffles, scans, atomics and
// dynamic threadgroup memory.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

// One threadgroup per row: simd_sum, then a 32-float threadgroup buffer.
kernel void rms_norm(device const half* x [[buffer(0)]], device const half* w [[buffer(1)]],
                     device half* out [[buffer(2)]], constant RMSArgs& p [[buffer(3)]],
                     uint row [[threadgroup_position_in_grid]], uint tid [[thread_position_in_threadgroup]],
                     uint ntg [[threads_per_threadgroup]], uint lane [[thread_index_in_simdgroup]],
                     uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float partial[32];
  device const half* xr = x + row * p.dim;
  float s = 0;
  for (uint i = tid; i < p.dim; i += ntg) {
    float v = xr[i];
    s += v * v;
  }
  s = simd_sum(s);
  if (lane == 0) partial[sg] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float tot = 0;
  for (uint i = 0; i < (ntg + 31) / 32; i++) tot += partial[i];
  float inv = rsqrt(tot / p.dim + p.eps);
  for (uint i = tid; i < p.dim; i += ntg) out[row * p.dim + i] = half(float(xr[i]) * inv * float(w[i]));
}

// Per lane: the simdgroup's sum by xor butterflies and by simd_sum, max,
// min, a broadcast, shuffles down and up, and the ballot's popcount.
kernel void simd_ops(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                     uint gid [[thread_position_in_grid]], ushort lane [[thread_index_in_simdgroup]]) {
  float v = in[gid];
  float b = v;
  for (ushort m = 16; m > 0; m >>= 1) b += simd_shuffle_xor(b, m);
  device float* o = out + gid * 8;
  o[0] = b;
  o[1] = simd_sum(v);
  o[2] = simd_max(v);
  o[3] = simd_min(v);
  o[4] = simd_broadcast(v, 3);
  o[5] = simd_shuffle_down(v, 1);
  o[6] = simd_shuffle_up(v, 2);
  o[7] = float(popcount(uint(simd_vote::vote_t(simd_ballot(v > 0.0f)))));
}

// Exclusive prefix sum over a threadgroup: simd_prefix_exclusive_sum in
// each simdgroup, then over the simdgroup totals.
kernel void scan(device const uint* in [[buffer(0)]], device uint* out [[buffer(1)]],
                 uint gid [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]],
                 uint sg [[simdgroup_index_in_threadgroup]], uint nsg [[simdgroups_per_threadgroup]]) {
  threadgroup uint sums[32];
  uint v = in[gid];
  uint x = simd_prefix_exclusive_sum(v);
  if (lane == 31) sums[sg] = x + v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    uint t = lane < nsg ? sums[lane] : 0;
    sums[lane] = simd_prefix_exclusive_sum(t);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[gid] = x + sums[sg];
}

// A 16-bin histogram through threadgroup atomics, merged with device
// atomics, and a float atomic total.
kernel void histogram(device const uint* in [[buffer(0)]], device atomic_uint* hist [[buffer(1)]],
                      constant uint& n [[buffer(2)]], device atomic_float* total [[buffer(3)]],
                      uint gid [[thread_position_in_grid]], uint tid [[thread_index_in_threadgroup]]) {
  threadgroup atomic_uint local[16];
  if (tid < 16) atomic_store_explicit(&local[tid], 0u, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (gid < n) {
    atomic_fetch_add_explicit(&local[in[gid] % 16], 1u, memory_order_relaxed);
    atomic_fetch_add_explicit(total, float(in[gid]), memory_order_relaxed);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid < 16) {
    uint c = atomic_load_explicit(&local[tid], memory_order_relaxed);
    atomic_fetch_add_explicit(&hist[tid], c, memory_order_relaxed);
  }
}

// Reverses each threadgroup's slice through dynamic threadgroup memory.
kernel void tg_reverse(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                       threadgroup float* buf [[threadgroup(0)]], uint gid [[thread_position_in_grid]],
                       uint tid [[thread_position_in_threadgroup]], uint ntg [[threads_per_threadgroup]]) {
  buf[tid] = in[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[gid] = buf[ntg - 1 - tid];
}

// Vector constructors and casts convert values (clang's would cast bits).
kernel void vec_ops(device const float4* in [[buffer(0)]], device float4* out [[buffer(1)]],
                    uint i [[thread_position_in_grid]]) {
  float4 v = in[i];
  int4 iv = int4(v);
  float4 back = float4(iv);
  half2 h = half2(v.zw);
  float2 hf = float2(h) * float(2.0h);
  float4 r(back.xy, hf);
  r = select(r, float4(0.5f), v < 0.0f);
  r.w = clamp(r.w, -1.0f, 1.0f);
  out[i] = r + (float4)(1.0f) + (float4)iv;
}
