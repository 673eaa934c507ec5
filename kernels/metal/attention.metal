// Paged attention over the cache [num_blocks][kv_heads][block_size][head_dim]
// with vLLM's metadata (block table, full sequence lengths, query start
// locations, slot mapping), and the KV write through the slot mapping.
//
// paged_attention handles every query token of a step, decode or (chunked)
// prefill: query token t of sequence s sits at position
// seq_lens[s] - query_len + (t - query_start[s]) and attends causally to the
// keys before it, or with a.window > 0 the last window of them (a sliding
// window: keys p - window < j <= p; keys and key steps wholly before it are
// skipped, not masked, and split-K partitions count from its first key).
// A key row is read by LPK lanes of E consecutive elements each
// (attn_lane_elems: 4 a lane in one vector load, 8 in two at heads of 256),
// so a simdgroup load covers KPL = 32 / LPK keys (4 at heads of 32, 2 at
// 64, 1 from 96; docs/metal-kernels.md, "Decode attention's lane layout").
// Each simdgroup runs an online softmax over its own run of the keys, KPL
// at a time; the simdgroups' partial results meet in threadgroup memory. A
// threadgroup serves QH query heads of one GQA group, so their K and V are
// read once.
//
// The cache holds KV (float, half or bf16_t: the model's dtype, f32 on
// request); kernels are instantiated per head size and KV type, and keys the
// attention takes from k/v are rounded as the cache would store them, so a
// result does not depend on which path a key came by.
//
// Two ways to write the new keys (attn_new_kv):
// - false: seed 004's two-phase fused decode, kv_write then paged_attention
//   in one command buffer, the attention reading every key from the cache;
// - true: one dispatch, the attention reads the step's new keys from k and v
//   and one threadgroup per (token, kv head) also stores them in the cache.
// Split-K (attn_partitioned): each threadgroup covers partition_size keys
// and writes unnormalised partials, which paged_attention_reduce combines.
//
// paged_attention_prefill is the tiled form for long queries (prefill and
// chunked prefill): flash attention with simdgroup_matrix products over
// tiles of 8 query tokens, the K and V tiles of a KV head staged once per
// threadgroup for all its query heads, keys from the cache (after
// kv_write).
#include "mtlbench.h"

#define REDUCE_CHUNK 256 // partitions of a head paged_attention_reduce weighs at a time (ops.MetalAttnReduceChunk)

inline ulong cache_offset(constant AttnArgs& a, uint block, uint kvh, uint off) {
  return ((ulong(block) * a.kv_heads + kvh) * a.block_size + off) * a.head_dim;
}

// kv_write: one thread per (element, kv head, token) of the new k and v.
template <typename KV>
kernel void kv_write(constant AttnArgs& a [[buffer(0)]], device const float* k [[buffer(1)]],
                     device const float* v [[buffer(2)]], device KV* kc [[buffer(3)]], device KV* vc [[buffer(4)]],
                     device const int* slot_mapping [[buffer(5)]], device atomic_uint* stats [[buffer(6)]],
                     uint3 gid [[thread_position_in_grid]]) {
  const uint d = gid.x, h = gid.y, t = gid.z;
  if (d >= a.head_dim || h >= a.kv_heads || t >= a.num_tokens) {
    return;
  }
  const int slot = slot_mapping[t];
  if (slot < 0) {
    return; // padding: no cache write
  }
  if (uint(slot) >= a.num_blocks * a.block_size) {
    if (d == 0) {
      record_error(stats, ERR_SLOT, uint(slot));
    }
    return;
  }
  const ulong o = cache_offset(a, uint(slot) / a.block_size, h, uint(slot) % a.block_size) + d;
  const ulong i = (ulong(t) * a.kv_heads + h) * a.head_dim + d;
  kv_store(kc + o, k[i]);
  kv_store(vc + o, v[i]);
}

#define INSTANTIATE_KV_WRITE(KV, S)                                                                              \
  template [[host_name(MTL_STR(kv_write_##S))]] kernel void kv_write<KV>(constant AttnArgs&, device const float*,          \
                                                                 device const float*, device KV*, device KV*,     \
                                                                 device const int*, device atomic_uint*, uint3);

INSTANTIATE_KV_WRITE(float, f32)
INSTANTIATE_KV_WRITE(half, f16)
INSTANTIATE_KV_WRITE(bf16_t, bf16)

// attn_lane_elems(D) is how the decode attention's lanes hold a head of
// D: E = attn_lane_elems(D) consecutive elements a lane, LPK = D / E lanes
// a key row, KPL = 32 / LPK keys a simdgroup load. E is 4 (a half4, float4
// or 4 bf16 load) up to heads of 128, so heads of 32 and 64 read 4 and 2
// keys a load; heads of 96 leave 8 lanes idle rather than load 3 elements
// one at a time.
constexpr int attn_lane_elems(int D) { return D >= 128 ? D / 32 : 4; }

// key_sum adds x over the LPK lanes of a key row (all 32, idle ones
// holding zeros, when a load covers one key); keys_max and keys_sum
// combine the KPL keys of a load across the lanes holding them.
template <int KPL, int LPK>
inline float key_sum(float x) {
  if (KPL == 1) {
    return simd_sum(x);
  }
  for (ushort o = LPK / 2; o > 0; o /= 2) {
    x += simd_shuffle_xor(x, o);
  }
  return x;
}

template <int KPL, int LPK>
inline float keys_max(float x) {
  for (ushort o = LPK; KPL > 1 && o < 32; o *= 2) {
    x = max(x, simd_shuffle_xor(x, o));
  }
  return x;
}

template <int KPL, int LPK>
inline float keys_sum(float x) {
  for (ushort o = LPK; KPL > 1 && o < 32; o *= 2) {
    x += simd_shuffle_xor(x, o);
  }
  return x;
}

// rope_lane gives a lane's elements (d0 + e, those below the head size D;
// zeros past it) of head x after QK-norm (weight nw, when attn_qk_norm) and
// RoPE at pos, as rope_qk computes them: attention with attn_rope takes
// the step's RoPE in (decode steps only, where the new key is the query
// token's own). Every key's lanes of a simdgroup compute the same values.
constant bool attn_qk_norm = attn_rope && has_qk_norm;

template <int E, int KPL, int LPK>
inline void rope_lane(device const float* x, device const float* nw, device const float* inv_freq, float pos, float eps,
                      uint d0, uint D, thread float* r) {
  const uint H = D / 2;
  float inv = 1.0f;
  if (attn_qk_norm) {
    float ss = 0.0f;
    for (int e = 0; e < E; e++) {
      const uint d = d0 + e;
      const float u = d < D ? x[d] : 0.0f;
      ss += u * u;
    }
    inv = 1.0f / sqrt(key_sum<KPL, LPK>(ss) / float(D) + eps);
  }
  for (int e = 0; e < E; e++) {
    const uint d = d0 + e, i = d % H;
    if (d >= D) {
      r[e] = 0.0f;
      continue;
    }
    float u = x[i], v = x[i + H];
    if (attn_qk_norm) {
      u = u * inv * nw[i];
      v = v * inv * nw[i + H];
    }
    const float2 cs = rope_cos_sin(pos, inv_freq[i]);
    r[e] = d < H ? u * cs.x - v * cs.y : v * cs.x + u * cs.y;
  }
}

// kv_lane reads a lane's E elements d0.. of a key or value row at p, zeros
// past the head size hd: one vector load where the row's elements are
// aligned to E (every head of the kernel's size, and a padded one
// (attn_padded) whose size is a multiple of E), else element by element.
template <int E, typename KV>
inline void kv_lane(device const KV* p, uint d0, uint hd, thread float* r) {
  if (!attn_padded || hd % E == 0) {
    if (d0 < hd) {
      kv_read<E>(p + d0, r);
    } else {
      for (int e = 0; e < E; e++) {
        r[e] = 0.0f;
      }
    }
    return;
  }
  for (int e = 0; e < E; e++) {
    const uint d = d0 + e;
    r[e] = 0.0f;
    if (d < hd) {
      kv_read<1>(p + d, r + e);
    }
  }
}

// attn_span gives query token t's position p (its sequence's length less
// the step's keys after it) and the keys its partition part covers, kbeg..
// kend, from kbase, the first key of its window (0 without one). Partitions
// count from kbase, so a windowed step launches only those its window spans
// (docs/metal-kernels.md, "Sliding windows").
inline void attn_span(constant AttnArgs& a, int p, uint part, thread int& pos, thread int& kbase, thread int& kbeg,
                      thread int& kend) {
  pos = p;
  kbase = a.window > 0 ? max(0, p + 1 - int(a.window)) : 0;
  kbeg = kbase;
  kend = p + 1;
  if (attn_partitioned) {
    kbeg = kbase + int(part * a.partition_size);
    kend = min(kend, kbeg + int(a.partition_size));
  }
}

// paged_attention: grid (tokens, heads / QH, partitions), nsg simdgroups,
// the threadgroup(0) floats ops.MetalAttnMemory gives: a.merge_slots slots
// of QH * (hd + 2), then the scaled query heads (QH * hd) and the words
// simdgroup 0 shares (ops.MetalAttnShared), over which, with fewer slots
// than simdgroups, the rounds' running result (QH * (hd + 4)) goes later.
// D is the head size the lanes hold (attn_lane_elems); with attn_padded
// the head is a.head_dim < D elements and the lanes past it idle.
template <int D, int QH, typename KV>
kernel void paged_attention(constant AttnArgs& a [[buffer(0)]], device const float* q [[buffer(1)]],
                            device const float* k [[buffer(2)]], device const float* v [[buffer(3)]],
                            device KV* kc [[buffer(4)]], device KV* vc [[buffer(5)]],
                            device const int* block_table [[buffer(6)]], device const int* seq_lens [[buffer(7)]],
                            device const int* query_start [[buffer(8)]], device const int* token_seq [[buffer(9)]],
                            device const int* slot_mapping [[buffer(10)]], device float* out [[buffer(11)]],
                            device float* part_ml [[buffer(12), function_constant(attn_partitioned)]],
                            device atomic_uint* stats [[buffer(13)]],
                            device const float* inv_freq [[buffer(14), function_constant(attn_rope)]],
                            device const float* qn [[buffer(15), function_constant(attn_qk_norm)]],
                            device const float* kn [[buffer(16), function_constant(attn_qk_norm)]],
                            device const int* token_pos [[buffer(17)]],
                            threadgroup float* smem [[threadgroup(0)]],
                            uint3 tg [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                            uint3 ntgv [[threads_per_threadgroup]], ushort lane [[thread_index_in_simdgroup]],
                            ushort sg [[simdgroup_index_in_threadgroup]],
                            ushort nsg [[simdgroups_per_threadgroup]]) {
  const ushort ntg = ushort(ntgv.x); // declared as tg is: MSL wants them alike
  constexpr int E = attn_lane_elems(D), LPK = D / E, KPL = 32 / LPK;
  // The lane's key of a load (sub) and its first element (d0): lanes past
  // KPL * LPK (heads of 96) hold none, d0 = D.
  const bool act = lane < KPL * LPK;
  const ushort sub = act ? lane / LPK : 0;
  const uint d0 = act ? uint(lane % LPK) * E : uint(D);
  const uint hd = attn_padded ? a.head_dim : uint(D);
  const uint t = tg.x, h0 = tg.y * QH, part = tg.z;
  const uint group = a.heads / a.kv_heads;
  const uint kvh = h0 / group;
  const uint kvw = a.kv_heads * hd;
  // The token's sequence data and its partition's first 32 block numbers
  // are read once a threadgroup, by simdgroup 0, and shared through
  // threadgroup memory past the query heads (ops.MetalAttnShared) with the
  // barrier the query heads take: the other simdgroups issue no narrow
  // load of them (docs/metal-kernels.md, "Decode attention's lane
  // layout"). They sit past the merge's slots, where a later round's
  // running result goes (written only after the first round's barrier), so
  // no slot overwrites them before every simdgroup has read them.
  const uint stride = hd + 2;
  const ushort slots = ushort(clamp(a.merge_slots, 1u, uint(nsg)));
  threadgroup float* qs = smem + (uint(slots) * QH * stride + 3) / 4 * 4; // float4-aligned
  threadgroup int* meta = (threadgroup int*)(qs + QH * hd); // s, q0, qlen, new0, then 32 block numbers
  const bool early = sg == 0;
  // The other simdgroups that stage query heads (with attn_rope, those
  // rotating heads sg, sg + nsg, ...) learn the token's position before the
  // barrier by one lane's load of token_pos where they need it: to rotate,
  // or to stage nothing in a partition past the token's keys (a shorter
  // sequence's, the grid sized for the longest), which leaves at the
  // barrier (docs/metal-kernels.md, "Decode attention's lane layout").
  const uint qwords = attn_padded ? QH * hd : uint(QH * D / 4); // the staging's floats, float4s unpadded
  const bool stager = attn_rope ? sg < QH : (nsg == 1 || (sg > 0 && uint(sg - 1) * 32 < qwords));
  const bool placed = !early && stager && (attn_rope || (attn_partitioned && part > 0));
  int s = 0, mv = 0;
  if (early) {
    // The sequence by one lane; then its query start, the next one and
    // its length in one load of three lanes (a pointer a lane).
    s = simd_broadcast_first(lane == 0 ? token_seq[t] : 0);
    device const int* mp = lane == 2 ? seq_lens + s : query_start + s + min(lane, ushort(1));
    mv = lane < 3 ? *mp : 0;
  }
  int q0 = simd_shuffle(mv, ushort(0));
  int qlen = simd_shuffle(mv, ushort(1)) - q0;
  int new0 = simd_shuffle(mv, ushort(2)) - qlen; // position of the step's first key
  int pos = 0, kbase = 0, kbeg = 0, kend = 0;
  if (placed) {
    attn_span(a, simd_broadcast_first(lane == 0 ? token_pos[t] : 0), part, pos, kbase, kbeg, kend);
  } else {
    attn_span(a, new0 + int(t) - q0, part, pos, kbase, kbeg, kend);
  }
  // Whether the partition holds keys of the token, where known before the
  // barrier; the first partition always does.
  const bool holds = early || placed ? kbeg < kend : true;
  device const int* bt = block_table + ulong(s) * a.max_blocks;
  if (sg == 0) {
    // The partition's first 32 blocks, one a lane, up to its last key
    // the cache holds.
    const int cend = attn_new_kv ? min(kend, new0) : kend;
    const int b = kbeg / int(a.block_size) + int(lane);
    int e = -1;
    if (kbeg < cend && b <= (cend - 1) / int(a.block_size) && uint(b) < a.max_blocks) {
      e = bt[b];
    }
    meta[4 + lane] = e;
    if (lane == 0) {
      meta[0] = s;
      meta[1] = q0;
      meta[2] = qlen;
      meta[3] = new0;
    }
  }

  // The QH query heads, pre-scaled (and rotated, with attn_rope: simdgroup
  // g does heads g, g + nsg, ...), read from device memory once per
  // threadgroup into smem, which later holds the partial results. Without
  // RoPE simdgroup 0, which reads the sequence data, stages none of them.
  // A partition without keys of the token stages none.
  if (attn_rope) {
    if (holds) {
      for (int h = sg; h < QH; h += nsg) {
        float r[E];
        rope_lane<E, KPL, LPK>(q + (ulong(t) * a.heads + h0 + h) * hd, qn, inv_freq, float(pos), a.eps, d0, hd, r);
        for (int e = 0; e < E; e++) {
          if (sub == 0 && d0 + e < hd) {
            qs[h * hd + d0 + e] = r[e] * a.scale;
          }
        }
      }
    }
  } else {
    const uint qt = nsg > 1 ? uint(tid) - 32u : uint(tid), qstep = nsg > 1 ? uint(ntg) - 32u : uint(ntg);
    if (stager && holds) {
      if (!attn_padded) {
        device const float4* q4 = (device const float4*)(q + (ulong(t) * a.heads + h0) * D);
        for (uint i = qt; i < uint(QH * D / 4); i += qstep) {
          ((threadgroup float4*)qs)[i] = q4[i] * a.scale;
        }
      } else {
        device const float* q1 = q + (ulong(t) * a.heads + h0) * hd;
        for (uint i = qt; i < QH * hd; i += qstep) {
          qs[i] = q1[i] * a.scale;
        }
      }
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (!early) {
    s = meta[0];
    q0 = meta[1];
    qlen = meta[2];
    new0 = meta[3];
    attn_span(a, new0 + int(t) - q0, part, pos, kbase, kbeg, kend);
    bt = block_table + ulong(s) * a.max_blocks;
  }
  // The block table is read 32 entries at a time, one a lane (tb the
  // first's block index, tblk the lane's entry), and each key's block comes
  // by a shuffle: no lane waits on another's load of the table. The
  // partition's first 32 come from simdgroup 0's load.
  int tb = kbeg / int(a.block_size), tblk = meta[4 + lane];

  // Each simdgroup walks its own run of the partition's keys, a multiple
  // of KPL long, so a block's table entry is looked up once a simdgroup.
  const int run = ((kend - kbeg + nsg - 1) / nsg + KPL - 1) / KPL * KPL;
  const int jbeg = kbeg + int(sg) * run, jend = min(kend, jbeg + run);

  // The cache write of this token's key and value, once per kv head, by
  // the last simdgroup (simdgroup 0 read the sequence data) of the
  // partition holding it, a vector load a lane of each.
  const ushort writer = nsg - 1;
  const bool writes = attn_new_kv && h0 % group == 0 && sg == writer &&
                      (!attn_partitioned || uint(pos - kbase) / a.partition_size == part);

  // With attn_rope, the token's own key rotated here (k holds it as the
  // projection wrote it), in the simdgroups that use it: the one that
  // writes it to the cache and the one whose run holds it (the last of
  // every partition rotated it, docs/metal-kernels.md, "Decode attention
  // at short contexts").
  float krot[E];
  if (attn_rope && (writes || (pos >= jbeg && pos < jend))) {
    rope_lane<E, KPL, LPK>(k + ulong(t) * kvw + kvh * hd, kn, inv_freq, float(pos), a.eps, d0, hd, krot);
  }
  if (writes) {
    const int slot = slot_mapping[t];
    if (slot >= 0 && uint(slot) >= a.num_blocks * a.block_size) {
      if (lane == 0) {
        record_error(stats, ERR_SLOT, uint(slot));
      }
    } else if (slot >= 0 && sub == 0) {
      const ulong o = cache_offset(a, uint(slot) / a.block_size, kvh, uint(slot) % a.block_size);
      const ulong i = ulong(t) * kvw + kvh * hd;
      float kw[E], vw[E];
      if (!attn_rope) {
        kv_lane<E, float>(k + i, d0, hd, kw);
      }
      kv_lane<E, float>(v + i, d0, hd, vw);
      for (int e = 0; e < E; e++) {
        const uint d = d0 + e;
        if (d >= hd) {
          break;
        }
        kv_store(kc + o + d, attn_rope ? krot[e] : kw[e]);
        kv_store(vc + o + d, vw[e]);
      }
    }
  }
  if (kbeg >= kend) {
    return; // a partition past this token's keys, which the reduce does not read
  }
  float qr[QH][E], o[QH][E], m[QH], l[QH];
  for (int h = 0; h < QH; h++) {
    for (int e = 0; e < E; e++) {
      const uint d = d0 + e;
      qr[h][e] = d < hd ? qs[h * hd + d] : 0.0f;
      o[h][e] = 0.0f;
    }
    m[h] = NEG_MAX;
    l[h] = 0.0f;
  }
  const int blast = (jend - 1) / int(a.block_size); // the run's last block
  for (int j0 = jbeg; j0 < jend; j0 += KPL) {
    const int j = j0 + int(sub); // this lane's key
    bool valid = j < jend;
    const bool fresh = attn_new_kv && j >= new0;
    // The load's blocks, when any key of it comes from the cache (uniform).
    if (!(attn_new_kv && j0 >= new0)) {
      const int bl = (min(j0 + KPL, jend) - 1) / int(a.block_size);
      if (bl >= tb + 32) {
        tb = j0 / int(a.block_size);
        const int b = tb + int(lane);
        tblk = b <= blast && uint(b) < a.max_blocks ? bt[b] : -1;
      }
    }
    const int blk = simd_shuffle(tblk, ushort(clamp(j / int(a.block_size) - tb, 0, 31)));
    if (valid && !fresh && (blk < 0 || uint(blk) >= a.num_blocks)) {
      if (act && d0 == 0) {
        record_error(stats, ERR_BLOCK, uint(blk));
      }
      valid = false;
    }
    float kr[E], vr[E];
    if (!valid) {
      for (int e = 0; e < E; e++) {
        kr[e] = 0.0f;
        vr[e] = 0.0f;
      }
    } else if (fresh) {
      // The step's own keys, from k/v, rounded as the cache stores them.
      // One vector load a lane where the rows are aligned to E, as kv_lane.
      const ulong r = ulong(q0 + (j - new0)) * kvw + kvh * hd;
      const bool own = attn_rope && j == pos;
      float kn4[E];
      kv_lane<E, float>(k + r, d0, hd, kn4);
      kv_lane<E, float>(v + r, d0, hd, vr);
      for (int e = 0; e < E; e++) {
        const bool in = d0 + e < hd;
        kr[e] = in ? kv_round(own ? krot[e] : kn4[e], KV()) : 0.0f;
        vr[e] = in ? kv_round(vr[e], KV()) : 0.0f;
      }
    } else {
      const ulong off = cache_offset(a, uint(blk), kvh, uint(j) % a.block_size);
      kv_lane<E, KV>(kc + off, d0, hd, kr);
      kv_lane<E, KV>(vc + off, d0, hd, vr);
    }
    // One online softmax step over the load's keys: their scores share the
    // running maximum, and each lane adds its own key's weighted value.
    for (int h = 0; h < QH; h++) {
      float d = 0.0f;
      for (int e = 0; e < E; e++) {
        d += qr[h][e] * kr[e];
      }
      d = key_sum<KPL, LPK>(d);
      const float mn = max(m[h], keys_max<KPL, LPK>(valid ? d : NEG_MAX));
      const float cf = exp(m[h] - mn);
      const float pe = valid ? exp(d - mn) : 0.0f;
      l[h] = l[h] * cf + keys_sum<KPL, LPK>(pe);
      for (int e = 0; e < E; e++) {
        o[h][e] = o[h][e] * cf + pe * vr[e];
      }
      m[h] = mn;
    }
  }
  // The KPL keys' lanes of each head element hold parts of one sum.
  for (int h = 0; h < QH; h++) {
    for (int e = 0; e < E; e++) {
      o[h][e] = keys_sum<KPL, LPK>(o[h][e]);
    }
  }

  // The simdgroups' (o, m, l) meet in threadgroup memory, a.merge_slots of
  // them a round (ops.MetalAttnMemory). With more simdgroups than slots the
  // rounds fold into a running (O, M, L) past the slots, M and L in halves by
  // the round's parity: a round reads the last one's while writing its own.
  // One round sums exactly as a single merge of every simdgroup does.
  const ushort rounds = (nsg + slots - 1) / slots;
  threadgroup float* acc = smem + uint(slots) * QH * stride; // O: QH * hd, then M[2][QH], L[2][QH]
  threadgroup float* acc_m = acc + QH * hd;
  threadgroup float* acc_l = acc_m + 2 * QH;
  for (ushort r = 0; r < rounds; r++) {
    const ushort g0 = r * slots, g1 = min(ushort(g0 + slots), nsg);
    if (sg >= g0 && sg < g1) {
      threadgroup float* mine = smem + uint(sg - g0) * QH * stride;
      for (int h = 0; h < QH; h++) {
        for (int e = 0; e < E; e++) {
          if (sub == 0 && d0 + e < hd) {
            mine[h * stride + d0 + e] = o[h][e];
          }
        }
        if (lane == 0) {
          mine[h * stride + hd] = m[h];
          mine[h * stride + hd + 1] = l[h];
        }
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const bool last = r + 1 == rounds;
    const uint was = uint(r & 1) * QH, next = uint((r + 1) & 1) * QH;
    for (uint idx = tid; idx < QH * hd; idx += ntg) {
      const uint h = idx / hd, d = idx % hd;
      const float M0 = r == 0 ? NEG_MAX : acc_m[was + h];
      float M = M0;
      for (ushort g = 0; g < g1 - g0; g++) {
        M = max(M, smem[(g * QH + h) * stride + hd]);
      }
      float Ls = 0.0f, O = 0.0f;
      if (r > 0) {
        const float f = exp(M0 - M);
        Ls = f * acc_l[was + h];
        O = f * acc[idx];
      }
      for (ushort g = 0; g < g1 - g0; g++) {
        threadgroup const float* rg = smem + (g * QH + h) * stride;
        if (rg[hd] == NEG_MAX) {
          continue; // a simdgroup that saw no key
        }
        const float f = exp(rg[hd] - M);
        Ls += f * rg[hd + 1];
        O += f * rg[d];
      }
      if (!last) {
        acc[idx] = O;
        if (d == 0) {
          acc_m[next + h] = M;
          acc_l[next + h] = Ls;
        }
      } else if (!attn_partitioned) {
        out[(ulong(t) * a.heads + h0 + h) * hd + d] = O / Ls;
      } else {
        const ulong pi = (ulong(t) * a.heads + h0 + h) * a.num_partitions + part;
        out[pi * hd + d] = O;
        if (d == 0) {
          part_ml[2 * pi] = M;
          part_ml[2 * pi + 1] = Ls;
        }
      }
    }
    if (!last) {
      threadgroup_barrier(mem_flags::mem_threadgroup); // the slots are rewritten
    }
  }
}

#define INSTANTIATE_ATTN(D, QH, KV, S)                                                                            \
  template [[host_name(MTL_STR(paged_attention_d##D##_q##QH##_##S))]] kernel void paged_attention<D, QH, KV>(       \
      constant AttnArgs&, device const float*, device const float*, device const float*, device KV*, device KV*, \
      device const int*, device const int*, device const int*, device const int*, device const int*,             \
      device float*, device float*, device atomic_uint*, device const float*, device const float*,               \
      device const float*, device const int*, threadgroup float*, uint3, ushort, uint3, ushort, ushort, ushort);

#define INSTANTIATE_ATTN_KV(D, KV, S)                                                                             \
  INSTANTIATE_ATTN(D, 1, KV, S)                                                                                   \
  INSTANTIATE_ATTN(D, 2, KV, S)                                                                                   \
  INSTANTIATE_ATTN(D, 4, KV, S)                                                                                   \
  INSTANTIATE_ATTN(D, 8, KV, S)

#define INSTANTIATE_ATTN_D(D)                                                                                     \
  INSTANTIATE_ATTN_KV(D, float, f32)                                                                            \
  INSTANTIATE_ATTN_KV(D, half, f16)                                                                             \
  INSTANTIATE_ATTN_KV(D, bf16_t, bf16)

INSTANTIATE_ATTN_D(32)
INSTANTIATE_ATTN_D(64)
INSTANTIATE_ATTN_D(96)
INSTANTIATE_ATTN_D(128)
INSTANTIATE_ATTN_D(256)

// paged_attention_reduce combines the partitions of split-K attention: one
// threadgroup per (token, HR heads), HR = threads / (head_dim rounded up to
// 32) (ops.MetalAttnReduceHeads), a thread per head element. Only the
// partitions that hold keys of the token's context are read: with a
// sliding window, those its window spans, counted from the window's first
// key.
kernel void paged_attention_reduce(constant AttnArgs& a [[buffer(0)]], device const float* part_o [[buffer(1)]],
                                   device const float* part_ml [[buffer(2)]],
                                   device const int* token_pos [[buffer(3)]], device float* out [[buffer(4)]],
                                   threadgroup float2* pairs [[threadgroup(0)]],
                                   uint2 tg [[threadgroup_position_in_grid]],
                                   ushort tid [[thread_index_in_threadgroup]],
                                   uint2 ntgv [[threads_per_threadgroup]]) {
  const uint D = a.head_dim, DP = (D + 31) / 32 * 32, ntg = ntgv.x, HR = ntg / DP;
  const uint t = tg.x, j = tid / DP, d = tid % DP, h = tg.y * HR + j;
  // The token's keys, from its position (every thread the same word).
  const uint ctx = uint(token_pos[t]) + 1;
  const uint keys = a.window > 0 ? min(ctx, a.window) : ctx;
  const uint np = min((keys + a.partition_size - 1) / a.partition_size, a.num_partitions);
  const uint hn = min(HR, a.heads - tg.y * HR); // the heads of this threadgroup
  // The heads' (m, l) pairs come a lane a (head, partition) pair,
  // REDUCE_CHUNK partitions of each head at a time, into threadgroup
  // memory, in halves by the chunk's parity, so one barrier a chunk parts
  // its writes from every thread's reads. Each thread folds a chunk into
  // its head's running maximum and sums, partitions in order: one chunk
  // (REDUCE_CHUNK partitions and fewer) weighs every partition by the
  // overall maximum (docs/metal-kernels.md, "Decode attention at short
  // contexts").
  const uint cw = min(np, uint(REDUCE_CHUNK)); // a half's pairs a head
  float M = NEG_MAX, Ls = 0.0f, O = 0.0f;
  for (uint c0 = 0, c = 0; c0 < np; c0 += REDUCE_CHUNK, c ^= 1) {
    const uint n = min(uint(REDUCE_CHUNK), np - c0);
    threadgroup float2* cur = pairs + c * HR * cw;
    for (uint i = tid; i < hn * n; i += ntg) {
      const uint hi = i / n, p = i % n;
      cur[hi * cw + p] = ((device const float2*)part_ml)[(ulong(t) * a.heads + tg.y * HR + hi) * a.num_partitions + c0 + p];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (j < hn) {
      threadgroup const float2* mine = cur + j * cw;
      float mn = M;
      for (uint p = 0; p < n; p++) {
        mn = max(mn, mine[p].x);
      }
      const float r = exp(M - mn);
      Ls *= r;
      O *= r;
      const ulong base = (ulong(t) * a.heads + h) * a.num_partitions + c0;
      for (uint p = 0; p < n; p++) {
        const float f = exp(mine[p].x - mn);
        Ls += f * mine[p].y;
        if (d < D) {
          O += f * part_o[(base + p) * D + d];
        }
      }
      M = mn;
    }
  }
  if (j < hn && d < D) {
    out[(ulong(t) * a.heads + h) * D + d] = O / Ls;
  }
}

// prefill_stage stages keys [j0, j0 + attn_keys) of one sequence and KV
// head in Ks and Vs (rows of D elements of stage_t<KV>, ld apart), 16 bytes
// a thread at a time; keys at or past kend are zeros. bt is the sequence's
// block table row; bi and blk cache the thread's last block lookup.
template <typename KV, typename S>
inline void prefill_stage(constant AttnArgs& a, device const KV* kc, device const KV* vc, device const int* bt, int j0,
                          int kend, uint kvh, threadgroup S* Ks, threadgroup S* Vs, int D, int ld, ushort tid,
                          ushort ntg, device atomic_uint* stats, thread int& bi, thread int& blk) {
  const int VE = 16 / int(sizeof(KV)), VR = D / VE;
  for (int i = tid; i < attn_keys * VR; i += ntg) {
    const int r = i / VR, c = (i % VR) * VE, j = j0 + r;
    uint4 kv = 0, vv = 0;
    if (j < kend) {
      const int b = j / int(a.block_size);
      if (b != bi) {
        bi = b;
        blk = uint(b) < a.max_blocks ? bt[b] : -1;
      }
      if (blk < 0 || uint(blk) >= a.num_blocks) {
        record_error(stats, ERR_BLOCK, uint(blk));
      } else {
        const ulong off = cache_offset(a, uint(blk), kvh, uint(j) % a.block_size) + c;
        kv = *(device const uint4*)(kc + off);
        vv = *(device const uint4*)(vc + off);
      }
    }
    put16(Ks + r * ld + c, kv, KV());
    put16(Vs + r * ld + c, vv, KV());
  }
}

// paged_attention_prefill: flash attention over the paged cache for long
// queries (prefill, chunked prefill). One threadgroup per (tile of up to
// 8 * attn_qblocks query tokens of one sequence, slice of heads_per_group
// query heads of one KV head), one simdgroup per (query head, block of 8
// of the tile's queries): the threadgroup stages each step of attn_keys
// keys of its KV head once in threadgroup memory, K and V in the cache's
// dtype with rows padded by 16 bytes (two stages when attn_stages == 2: the
// next step is staged after this one's products, one barrier a step), and
// every simdgroup works from them, each only up to the keys its own queries
// see. S = Q K^T and O += P V in 8x8 simdgroup_matrix tiles, online softmax
// per query row, causal. Keys past the tile's last query (so past the
// sequence) are staged as zeros: a value left in an unused cache slot, NaN
// included, never meets a zero probability. tiles[i] is the first token of
// tile i. Grid: (num_tiles, kv_heads * slices), heads_per_group *
// attn_qblocks simdgroups; threadgroup(0) holds attn_stages * 2 * attn_keys
// rows of D + 16 / sizeof(stage_t<KV>::type) elements.
template <int D, typename KV>
kernel void paged_attention_prefill(constant AttnArgs& a [[buffer(0)]], device const float* q [[buffer(1)]],
                                    device const KV* kc [[buffer(2)]], device const KV* vc [[buffer(3)]],
                                    device const int* block_table [[buffer(4)]],
                                    device const int* seq_lens [[buffer(5)]],
                                    device const int* query_start [[buffer(6)]],
                                    device const int* token_seq [[buffer(7)]], device const int* tiles [[buffer(8)]],
                                    device float* out [[buffer(9)]], device atomic_uint* stats [[buffer(10)]],
                                    threadgroup float* smem [[threadgroup(0)]],
                                    uint2 tg [[threadgroup_position_in_grid]],
                                    ushort tid [[thread_index_in_threadgroup]],
                                    ushort lane [[thread_index_in_simdgroup]],
                                    ushort sg [[simdgroup_index_in_threadgroup]],
                                    ushort nsg [[simdgroups_per_threadgroup]]) {
  typedef typename stage_t<KV>::type S;
  constexpr int DC = D / 8; // 8x8 tiles along head_dim
  constexpr int LD = D + 16 / int(sizeof(S));
  const int BK = attn_keys;
  const ushort ntg = ushort(nsg * 32);
  const uint group = a.heads / a.kv_heads;
  const uint slices = group / a.heads_per_group;
  const uint kvh = tg.y / slices;
  const uint h = kvh * group + (tg.y % slices) * a.heads_per_group + sg % a.heads_per_group;
  const int t0 = tiles[tg.x];
  const int s = token_seq[t0];
  const int q0 = query_start[s], q1 = query_start[s + 1];
  const int rows = min(8 * attn_qblocks, q1 - t0);
  const int pos0 = seq_lens[s] - (q1 - q0) + (t0 - q0); // position of the tile's first query
  const int kend = pos0 + rows;
  // This simdgroup's queries: rows r0.. of the tile (none when brows <= 0),
  // which see keys up to kmine.
  const int r0 = 8 * int(sg / a.heads_per_group);
  const int brows = rows - r0;
  const int kmine = brows > 0 ? min(kend, pos0 + r0 + 8) : 0;
  device const int* bt = block_table + ulong(s) * a.max_blocks;
  threadgroup S* st = (threadgroup S*)smem; // stage i: K at st + 2*i*BK*LD, V after it

  // This lane's elements of the query fragments (row fm, columns fn and
  // fn+1), pre-scaled, straight from device memory; rows past the
  // sequence are zero.
  short fm, fn;
  simd_frag_coord(lane, fm, fn);
  simdgroup_float8x8 qf[DC], of[DC];
  for (int c = 0; c < DC; c++) {
    float2 v = 0.0f;
    if (fm < brows) {
      v = *(device const float2*)(q + (ulong(t0 + r0 + fm) * a.heads + h) * D + c * 8 + fn) * a.scale;
    }
    qf[c] = make_filled_simdgroup_matrix<float, 8>(0.0f);
    thread auto& qe = qf[c].thread_elements();
    qe[0] = v.x;
    qe[1] = v.y;
    of[c] = make_filled_simdgroup_matrix<float, 8>(0.0f);
  }
  const int qpos = pos0 + r0 + fm;
  float m = NEG_MAX, l = 0.0f; // row fm's running max and sum
  // A sliding window: the tile's steps start at the step holding its first
  // query's first key, this simdgroup's key groups at its first row's, and
  // row fm sees keys past qlo (masked only in groups that cross it).
  int step0 = 0, gmin = -8, qlo = -1; // no window: no group skipped or masked
  if (a.window > 0) {
    step0 = max(0, pos0 + 1 - int(a.window)) / BK;
    gmin = pos0 + r0 + 1 - int(a.window);
    qlo = qpos - int(a.window);
  }

  int bi = -1, blk = -1;
  const int steps = (kend + BK - 1) / BK;
  if (attn_stages == 2) {
    threadgroup S* K0 = st + 2 * (step0 & 1) * BK * LD;
    prefill_stage<KV, S>(a, kc, vc, bt, step0 * BK, kend, kvh, K0, K0 + BK * LD, D, LD, tid, ntg, stats, bi, blk);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  for (int step = step0; step < steps; step++) {
    const int cur = attn_stages == 2 ? (step & 1) : 0;
    threadgroup S* Ks = st + 2 * cur * BK * LD;
    threadgroup S* Vs = Ks + BK * LD;
    if (attn_stages == 1) {
      prefill_stage<KV, S>(a, kc, vc, bt, step * BK, kend, kvh, Ks, Vs, D, LD, tid, ntg, stats, bi, blk);
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (int g = 0; g < BK && step * BK + g < kmine; g += 8) {
      const int j0 = step * BK + g;
      if (j0 + 8 <= gmin) {
        continue; // before every row's window
      }
      simdgroup_float8x8 sf = make_filled_simdgroup_matrix<float, 8>(0.0f);
      for (int c = 0; c < DC; c++) {
        simdgroup_matrix<S, 8, 8> kt;
        simdgroup_load(kt, Ks + g * LD + c * 8, LD, ulong2(0, 0), true);
        simdgroup_multiply_accumulate(sf, qf[c], kt, sf);
      }
      // Causal mask, then the online softmax of row fm: its four lanes
      // (lane bits 0 and 3) hold its eight scores.
      thread auto& se = sf.thread_elements();
      float s0 = j0 + fn <= qpos ? se[0] : NEG_MAX;
      float s1 = j0 + fn + 1 <= qpos ? se[1] : NEG_MAX;
      if (j0 < gmin + 8) { // the group crosses a row's window start
        s0 = j0 + fn > qlo ? s0 : NEG_MAX;
        s1 = j0 + fn + 1 > qlo ? s1 : NEG_MAX;
      }
      float rmax = max(s0, s1);
      rmax = max(rmax, simd_shuffle_xor(rmax, 1));
      rmax = max(rmax, simd_shuffle_xor(rmax, 8));
      const float mn = max(m, rmax);
      const bool none = mn == NEG_MAX; // a row past the sequence
      const float p0 = none ? 0.0f : exp(s0 - mn);
      const float p1 = none ? 0.0f : exp(s1 - mn);
      float ps = p0 + p1;
      ps += simd_shuffle_xor(ps, 1);
      ps += simd_shuffle_xor(ps, 8);
      const float cf = none ? 1.0f : exp(m - mn);
      l = l * cf + ps;
      m = mn;
      se[0] = p0;
      se[1] = p1;
      for (int c = 0; c < DC; c++) {
        of[c].thread_elements() *= cf;
        simdgroup_matrix<S, 8, 8> vf;
        simdgroup_load(vf, Vs + g * LD + c * 8, LD);
        simdgroup_multiply_accumulate(of[c], sf, vf, of[c]);
      }
    }
    const bool next = attn_stages == 2 && step + 1 < steps;
    if (next) { // the other stage: last read in the step before, ahead of its barrier
      threadgroup S* Kn = st + 2 * (1 - cur) * BK * LD;
      prefill_stage<KV, S>(a, kc, vc, bt, (step + 1) * BK, kend, kvh, Kn, Kn + BK * LD, D, LD, tid, ntg, stats, bi, blk);
    }
    if (attn_stages == 1 || next) {
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
  }
  if (fm < brows) {
    const float inv = 1.0f / l;
    device float* o = out + (ulong(t0 + r0 + fm) * a.heads + h) * D + fn;
    for (int c = 0; c < DC; c++) {
      *(device float2*)(o + c * 8) = float2(of[c].thread_elements()) * inv;
    }
  }
}

#define INSTANTIATE_PREFILL_KV(D, KV, S)                                                                          \
  template [[host_name(MTL_STR(paged_attention_prefill_d##D##_##S))]] kernel void paged_attention_prefill<D, KV>( \
      constant AttnArgs&, device const float*, device const KV*, device const KV*, device const int*,            \
      device const int*, device const int*, device const int*, device const int*, device float*,                 \
      device atomic_uint*, threadgroup float*, uint2, ushort, ushort, ushort, ushort);

#define INSTANTIATE_PREFILL(D)                                                                                    \
  INSTANTIATE_PREFILL_KV(D, float, f32)                                                                           \
  INSTANTIATE_PREFILL_KV(D, half, f16)                                                                            \
  INSTANTIATE_PREFILL_KV(D, bf16_t, bf16)

INSTANTIATE_PREFILL(16)
INSTANTIATE_PREFILL(32)
INSTANTIATE_PREFILL(48)
INSTANTIATE_PREFILL(64)
INSTANTIATE_PREFILL(80)
INSTANTIATE_PREFILL(96)
INSTANTIATE_PREFILL(128)
INSTANTIATE_PREFILL(256)
