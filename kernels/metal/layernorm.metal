// LayerNorm with weight and bias, and residual add + LayerNorm (GPT-2).
#include "mtlbench.h"

// layer_norm_row normalises the row r (already in device memory) into o:
// the mean first, then the variance about it (two reductions, as the
// reference), so a row with a large mean loses nothing.
inline void layer_norm_row(device const float* r, device float* o, device const float* w, device const float* b,
                           uint dim, float eps, threadgroup float* partial, ushort tid, ushort ntg, ushort lane,
                           ushort sg, ushort nsg) {
  float s = 0.0f;
  for (uint i = tid; i < dim; i += ntg) {
    s += r[i];
  }
  const float mean = tg_sum(s, partial, lane, sg, nsg) / float(dim);
  float ss = 0.0f;
  for (uint i = tid; i < dim; i += ntg) {
    const float d = r[i] - mean;
    ss += d * d;
  }
  const float inv = 1.0f / sqrt(tg_sum(ss, partial, lane, sg, nsg) / float(dim) + eps);
  for (uint i = tid; i < dim; i += ntg) {
    o[i] = (r[i] - mean) * inv * w[i] + b[i];
  }
}

// layer_norm: one threadgroup per row.
kernel void layer_norm(constant NormArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                       device const float* w [[buffer(2)]], device const float* b [[buffer(3)]],
                       device float* out [[buffer(4)]], uint row [[threadgroup_position_in_grid]],
                       ushort tid [[thread_index_in_threadgroup]], ushort ntg [[threads_per_threadgroup]],
                       ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                       ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float partial[32];
  layer_norm_row(x + ulong(row) * a.dim, out + ulong(row) * a.dim, w, b, a.dim, a.eps, partial, tid, ntg, lane, sg, nsg);
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
  for (uint i = tid; i < a.dim; i += ntg) {
    r[i] += xr[i];
  }
  layer_norm_row(r, out + ulong(row) * a.dim, w, b, a.dim, a.eps, partial, tid, ntg, lane, sg, nsg);
}
