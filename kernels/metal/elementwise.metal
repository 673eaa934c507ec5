// Embedding gather, row gather, SwiGLU's silu-multiply, add, and argmax.
#include "mtlbench.h"

// embedding: out[t][i] = table[ids[t]][i], one thread per element.
template <typename T>
kernel void embedding(constant EmbedArgs& a [[buffer(0)]], device const int* ids [[buffer(1)]],
                      device const T* table [[buffer(2)]], device float* out [[buffer(3)]],
                      device atomic_uint* stats [[buffer(4)]], uint2 gid [[thread_position_in_grid]]) {
  const uint i = gid.x, t = gid.y;
  if (i >= a.dim || t >= a.tokens) {
    return;
  }
  const int id = ids[t];
  if (id < 0 || uint(id) >= a.vocab) {
    if (i == 0) {
      record_error(stats, ERR_TOKEN_ID, uint(id));
    }
    return;
  }
  out[ulong(t) * a.dim + i] = float(table[ulong(id) * a.dim + i]);
}

template [[host_name("embedding_f32")]] kernel void embedding<float>(constant EmbedArgs&, device const int*,
                                                                     device const float*, device float*,
                                                                     device atomic_uint*, uint2);
template [[host_name("embedding_f16")]] kernel void embedding<half>(constant EmbedArgs&, device const int*,
                                                                    device const half*, device float*,
                                                                    device atomic_uint*, uint2);
template [[host_name("embedding_bf16")]] kernel void embedding<bf16_t>(constant EmbedArgs&, device const int*,
                                                                       device const bf16_t*, device float*,
                                                                       device atomic_uint*, uint2);

// gather_rows: out[r] = x[rows[r]] (the rows whose logits a step needs).
kernel void gather_rows(constant GatherArgs& a [[buffer(0)]], device const int* rows [[buffer(1)]],
                        device const float* x [[buffer(2)]], device float* out [[buffer(3)]],
                        uint2 gid [[thread_position_in_grid]]) {
  const uint i = gid.x, r = gid.y;
  if (i >= a.dim || r >= a.rows) {
    return;
  }
  const uint src = uint(rows[r]);
  out[ulong(r) * a.dim + i] = src < a.src_rows ? x[ulong(src) * a.dim + i] : 0.0f;
}

// silu_mul: out = silu(gate) * up.
kernel void silu_mul(constant EltArgs& a [[buffer(0)]], device const float* gate [[buffer(1)]],
                     device const float* up [[buffer(2)]], device float* out [[buffer(3)]],
                     uint i [[thread_position_in_grid]]) {
  if (i >= a.n) {
    return;
  }
  const float g = gate[i];
  out[i] = g / (1.0f + exp(-g)) * up[i];
}

// add: out = x + y (out may alias either).
kernel void add(constant EltArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                device const float* y [[buffer(2)]], device float* out [[buffer(3)]],
                uint i [[thread_position_in_grid]]) {
  if (i >= a.n) {
    return;
  }
  out[i] = x[i] + y[i];
}

// argmax: one threadgroup per row; the first index of the largest value.
kernel void argmax(constant ArgmaxArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                   device int* out [[buffer(2)]], uint row [[threadgroup_position_in_grid]],
                   ushort tid [[thread_index_in_threadgroup]], ushort ntg [[threads_per_threadgroup]],
                   ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                   ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float bufv[32];
  threadgroup uint bufi[32];
  device const float* xr = x + ulong(row) * a.n;
  float best = NEG_MAX;
  uint bi = 0xffffffffu;
  for (uint i = tid; i < a.n; i += ntg) {
    const float v = xr[i];
    if (v > best || bi == 0xffffffffu) {
      best = v;
      bi = i;
    }
  }
  uint idx;
  tg_argmax(best, bi, bufv, bufi, lane, sg, nsg, idx);
  if (tid == 0) {
    out[row] = idx == 0xffffffffu ? 0 : int(idx);
  }
}

// copy_i32: a step's token ids from the previous step's argmax, on the GPU
// (overlapped steps, bridge/metal/async.go).
kernel void copy_i32(constant EltArgs& a [[buffer(0)]], device const int* src [[buffer(1)]], device int* dst [[buffer(2)]],
                     uint i [[thread_position_in_grid]]) {
  if (i < a.n) {
    dst[i] = src[i];
  }
}
