// RMSNorm, residual add + RMSNorm, and RoPE (neox) with Qwen3's QK-norm.
#include "norm.h"

// rms_norm: one threadgroup per row (norm.h), float4 at a time where the
// host set norm_vec.
kernel void rms_norm(constant NormArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                     device const float* w [[buffer(2)]], device float* out [[buffer(3)]],
                     uint row [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                     ushort ntg [[threads_per_threadgroup]], ushort lane [[thread_index_in_simdgroup]],
                     ushort sg [[simdgroup_index_in_threadgroup]], ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float partial[32];
  device const float* xr = x + ulong(row) * a.dim;
  device float* o = out + ulong(row) * a.dim;
  // Without a residual, rms_norm_row is given o where it takes one: only
  // add_rms_norm's instantiation touches it.
  if (norm_vec) {
    rms_norm_row<float4, false>((device float4*)o, (device const float4*)xr, (device const float4*)w,
                                (device float4*)o, a.dim / 4, a.dim, a.eps, partial, tid, ntg, lane, sg, nsg);
  } else {
    rms_norm_row<float, false>(o, xr, w, o, a.dim, a.dim, a.eps, partial, tid, ntg, lane, sg, nsg);
  }
}

// add_rms_norm: residual += x, then out = RMSNorm(residual) * w. Each thread
// reads back only the residual elements it wrote itself.
kernel void add_rms_norm(constant NormArgs& a [[buffer(0)]], device float* residual [[buffer(1)]],
                         device const float* x [[buffer(2)]], device const float* w [[buffer(3)]],
                         device float* out [[buffer(4)]], uint row [[threadgroup_position_in_grid]],
                         ushort tid [[thread_index_in_threadgroup]], ushort ntg [[threads_per_threadgroup]],
                         ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                         ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float partial[32];
  device float* r = residual + ulong(row) * a.dim;
  device const float* xr = x + ulong(row) * a.dim;
  device float* o = out + ulong(row) * a.dim;
  if (norm_vec) {
    rms_norm_row<float4, true>((device float4*)r, (device const float4*)xr, (device const float4*)w,
                               (device float4*)o, a.dim / 4, a.dim, a.eps, partial, tid, ntg, lane, sg, nsg);
  } else {
    rms_norm_row<float, true>(r, xr, w, o, a.dim, a.dim, a.eps, partial, tid, ntg, lane, sg, nsg);
  }
}

// rope_qk rotates q and k in place, neox style (element i pairs with
// i + head_dim/2), after RMS-normalising each head when has_qk_norm. One
// simdgroup per head: the query heads, then the key heads, of token tg.y;
// a threadgroup holds as many heads as it has simdgroups. inv_freq holds
// the head_dim/2 rotary frequencies as the host computes them.
kernel void rope_qk(constant RopeArgs& a [[buffer(0)]], device float* q [[buffer(1)]], device float* k [[buffer(2)]],
                    device const float* qn [[buffer(3), function_constant(has_qk_norm)]],
                    device const float* kn [[buffer(4), function_constant(has_qk_norm)]],
                    device const int* positions [[buffer(5)]], device const float* inv_freq [[buffer(6)]],
                    uint2 tg [[threadgroup_position_in_grid]], ushort lane [[thread_index_in_simdgroup]],
                    ushort sg [[simdgroup_index_in_threadgroup]], ushort nsg [[simdgroups_per_threadgroup]]) {
  const uint head = tg.x * nsg + sg;
  const uint t = tg.y;
  if (head >= a.heads + a.kv_heads) {
    return;
  }
  const uint D = a.head_dim;
  const uint half_d = D / 2;
  device float* x;
  device const float* nw;
  if (head < a.heads) {
    x = q + (ulong(t) * a.heads + head) * D;
    nw = qn;
  } else {
    x = k + (ulong(t) * a.kv_heads + (head - a.heads)) * D;
    nw = kn;
  }
  float inv = 1.0f;
  if (has_qk_norm) {
    float ss = 0.0f;
    for (uint i = lane; i < half_d; i += 32) {
      float u = x[i], v = x[i + half_d];
      ss += u * u + v * v;
    }
    ss = simd_sum(ss);
    inv = 1.0f / sqrt(ss / float(D) + a.eps);
  }
  const float pos = float(positions[t]);
  for (uint i = lane; i < half_d; i += 32) {
    float u = x[i], v = x[i + half_d];
    if (has_qk_norm) {
      u = u * inv * nw[i];
      v = v * inv * nw[i + half_d];
    }
    const float2 cs = rope_cos_sin(pos, inv_freq[i]);
    x[i] = u * cs.x - v * cs.y;
    x[i + half_d] = v * cs.x + u * cs.y;
  }
}
