// LayerNorm with weight and bias, and residual add + LayerNorm (GPT-2).
#include "norm.h"

// layer_norm: one threadgroup per row (norm.h), float4 at a time where the
// host set norm_vec.
kernel void layer_norm(constant NormArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                       device const float* w [[buffer(2)]], device const float* b [[buffer(3)]],
                       device float* out [[buffer(4)]], uint row [[threadgroup_position_in_grid]],
                       ushort tid [[thread_index_in_threadgroup]], ushort ntg [[threads_per_threadgroup]],
                       ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                       ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float partial[32];
  device const float* xr = x + ulong(row) * a.dim;
  device float* o = out + ulong(row) * a.dim;
  // Without a residual, layer_norm_row is given o where it takes one: only
  // add_layer_norm's instantiation touches it.
  if (norm_vec) {
    layer_norm_row<float4, false>((device float4*)o, (device const float4*)xr, (device const float4*)w,
                                  (device const float4*)b, (device float4*)o, a.dim / 4, a.dim, a.eps, partial, tid,
                                  ntg, lane, sg, nsg);
  } else {
    layer_norm_row<float, false>(o, xr, w, b, o, a.dim, a.dim, a.eps, partial, tid, ntg, lane, sg, nsg);
  }
}

// add_layer_norm: residual += x, then out = LayerNorm(residual). Each
// thread writes and later reads back only its own residual elements, and
// tg_sum's barrier orders the rest.
kernel void add_layer_norm(constant NormArgs& a [[buffer(0)]], device float* residual [[buffer(1)]],
                           device const float* x [[buffer(2)]], device const float* w [[buffer(3)]],
                           device const float* b [[buffer(4)]], device float* out [[buffer(5)]],
                           uint row [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                           ushort ntg [[threads_per_threadgroup]], ushort lane [[thread_index_in_simdgroup]],
                           ushort sg [[simdgroup_index_in_threadgroup]], ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float partial[32];
  device float* r = residual + ulong(row) * a.dim;
  device const float* xr = x + ulong(row) * a.dim;
  device float* o = out + ulong(row) * a.dim;
  if (norm_vec) {
    layer_norm_row<float4, true>((device float4*)r, (device const float4*)xr, (device const float4*)w,
                                 (device const float4*)b, (device float4*)o, a.dim / 4, a.dim, a.eps, partial, tid,
                                 ntg, lane, sg, nsg);
  } else {
    layer_norm_row<float, true>(r, xr, w, b, o, a.dim, a.dim, a.eps, partial, tid, ntg, lane, sg, nsg);
  }
}
