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

// argmax_scan returns the largest of xr[lo, hi) over the threadgroup and,
// in idx, its first index (0xffffffff: none, every value NaN). lead is how
// many values xr sits past a 16-byte boundary: the values before the first
// aligned four are read one a thread, then float4 at a time, then the tail.
inline float argmax_scan(device const float* xr, uint lead, uint lo, uint hi, threadgroup float* bufv,
                         threadgroup uint* bufi, ushort tid, ushort ntg, ushort lane, ushort sg, ushort nsg,
                         thread uint& idx) {
  float best = NEG_MAX;
  uint bi = 0xffffffffu;
  const uint v0 = min(hi, lo + (4u - (lead + lo) % 4u) % 4u);
  const uint h4 = v0 + (hi - v0) / 4u * 4u;
  if (lo + tid < v0) {
    argmax_take(xr[lo + tid], lo + tid, best, bi);
  }
  for (uint j = v0 + 4u * tid; j < h4; j += 4u * ntg) {
    const float4 v = *(device const float4*)(xr + j);
    for (uint c = 0; c < 4; c++) {
      argmax_take(v[c], j + c, best, bi);
    }
  }
  if (h4 + tid < hi) {
    argmax_take(xr[h4 + tid], h4 + tid, best, bi);
  }
  return tg_argmax(best, bi, bufv, bufi, lane, sg, nsg, idx);
}

// argmax: a threadgroup a row (grid x), the first index of its largest
// value, when a row is one partition; -1 where none is taken (every value
// NaN or -inf: bridge.NoToken, the engine's sign of non-finite logits).
kernel void argmax(constant ArgmaxArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                   device int* out [[buffer(2)]], uint row [[threadgroup_position_in_grid]],
                   ushort tid [[thread_index_in_threadgroup]], ushort ntg [[threads_per_threadgroup]],
                   ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                   ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float bufv[32];
  threadgroup uint bufi[32];
  uint idx;
  argmax_scan(x + ulong(row) * a.n, (a.lead + row * a.n) % 4u, 0, a.n, bufv, bufi, tid, ntg, lane, sg, nsg, idx);
  if (tid == 0) {
    out[row] = idx == 0xffffffffu ? -1 : int(idx);
  }
}

// argmax_part: a threadgroup a partition of part values of a row (grid x
// the row, y the partition), its largest value and first index into
// part_v and part_i for argmax_merge: a long row (a vocabulary of 151,936)
// is read by many cores, not one (docs/metal-kernels.md, "Argmax").
kernel void argmax_part(constant ArgmaxArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                        device float* part_v [[buffer(2)]], device uint* part_i [[buffer(3)]],
                        uint2 tg [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                        ushort2 tpg [[threads_per_threadgroup]], ushort lane [[thread_index_in_simdgroup]],
                        ushort sg [[simdgroup_index_in_threadgroup]],
                        ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float bufv[32];
  threadgroup uint bufi[32];
  const uint lo = tg.y * a.part, hi = min(lo + a.part, a.n);
  uint idx;
  const float v = argmax_scan(x + ulong(tg.x) * a.n, (a.lead + tg.x * a.n) % 4u, lo, hi, bufv, bufi, tid, tpg.x, lane,
                              sg, nsg, idx);
  if (tid == 0) {
    part_v[tg.x * a.parts + tg.y] = v;
    part_i[tg.x * a.parts + tg.y] = idx;
  }
}

// merge_take keeps partition maximum v at index i if it is larger than
// best, or equal at a lower index; a partition of none (i all ones, every
// value NaN) is passed over.
inline void merge_take(float v, uint i, thread float& best, thread uint& bi) {
  if (i != 0xffffffffu && (v > best || (v == best && i < bi))) {
    best = v;
    bi = i;
  }
}

// argmax_merge: a threadgroup a row, the largest of its partitions' maxima,
// the lowest index on ties; partitions of none (all NaN) are passed over,
// and a row of none gives -1, as argmax's. The partitions are
// argmax_part's or, folded into the LM head (qmatvec's and matvec_fused's
// mv_argmax), one a GEMV threadgroup: thousands for a long vocabulary, so
// the merge may run more than a simdgroup, and reads four partitions a
// load.
kernel void argmax_merge(constant ArgmaxArgs& a [[buffer(0)]], device const float* part_v [[buffer(1)]],
                         device const uint* part_i [[buffer(2)]], device int* out [[buffer(3)]],
                         uint row [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                         ushort ntg [[threads_per_threadgroup]], ushort lane [[thread_index_in_simdgroup]],
                         ushort sg [[simdgroup_index_in_threadgroup]], ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float bufv[32];
  threadgroup uint bufi[32];
  float best = NEG_MAX;
  uint bi = 0xffffffffu;
  // A row's units: its head one partition each up to a 16-byte boundary,
  // then four a unit, then its tail one each; a lane takes every ntg-th
  // unit, so none issues more loads than the units it takes.
  const uint base = row * a.parts;
  const uint head = min((4u - base % 4u) % 4u, a.parts);
  const uint n4 = (a.parts - head) / 4u, units = head + n4 + (a.parts - head) % 4u;
  device const float4* v4 = (device const float4*)(part_v + base + head);
  device const uint4* i4 = (device const uint4*)(part_i + base + head);
  for (uint u = tid; u < units; u += ntg) {
    if (u >= head && u < head + n4) {
      const float4 v = v4[u - head];
      const uint4 i = i4[u - head];
      merge_take(v.x, i.x, best, bi);
      merge_take(v.y, i.y, best, bi);
      merge_take(v.z, i.z, best, bi);
      merge_take(v.w, i.w, best, bi);
    } else {
      const uint p = u < head ? u : u + 3u * n4;
      merge_take(part_v[base + p], part_i[base + p], best, bi);
    }
  }
  uint idx;
  if (nsg == 1) {
    const float m = simd_max(best);
    idx = simd_min(best == m ? bi : 0xffffffffu);
  } else {
    tg_argmax(best, bi, bufv, bufi, lane, sg, nsg, idx);
  }
  if (tid == 0) {
    out[row] = idx == 0xffffffffu ? -1 : int(idx);
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
