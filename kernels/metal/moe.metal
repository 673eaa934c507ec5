// Sparse MoE: router softmax + top-k (+ renormalisation), grouping of the
// (token, expert) pairs by expert (counts, offsets, a tile list, as
// llama.cpp's mul_mm_id and MLX's gather_mm), expert GEMMs that read only
// the routed experts' weights, and the weighted combine. The experts of a
// layer lie in one buffer: expert e's gate, up and down matrices at
// e * expert_stride + w_offset (and w2_offset, the up of gate/up) elements,
// side by side per expert or stacked per matrix (bridge/metal layoutOf).
#include "gemm.h"

// route_token: softmax over a token's expert logits (in p, experts floats
// of threadgroup memory, overwritten by the probabilities), top-k by
// repeated argmax (first index on ties, as torch.topk; NaN ranks as
// route_key says, and is reported in err), weights renormalised over the k
// when norm_topk. Each expert chosen for the first time in the call bumps
// the call's distinct-expert count in stats[stats_slot].
inline void route_token(constant RouteArgs& a, threadgroup float* p, threadgroup float* bufv, threadgroup uint* bufi,
                        threadgroup float* selv, threadgroup uint* seli, uint t, device int* ids, device float* weights,
                        device atomic_uint* flags, device atomic_uint* stats, device atomic_uint* err, ushort tid,
                        ushort ntg, ushort lane, ushort sg, ushort nsg) {
  const uint E = a.experts, K = a.top_k;
  float mx = NEG_MAX;
  for (uint e = tid; e < E; e += ntg) {
    mx = max(mx, p[e]);
  }
  mx = tg_max(mx, bufv, lane, sg, nsg);
  float s = 0.0f;
  for (uint e = tid; e < E; e += ntg) {
    const float ev = exp(p[e] - mx);
    p[e] = ev;
    s += ev;
  }
  s = tg_sum(s, bufv, lane, sg, nsg);
  for (uint e = tid; e < E; e += ntg) {
    p[e] = p[e] / s;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float sum = 0.0f;
  bool nan = false;
  for (uint j = 0; j < K; j++) {
    float bv = NEG_MAX;
    uint bi = 0xffffffffu;
    for (uint e = tid; e < E; e += ntg) {
      const float v = route_key(p[e]);
      if (v > bv) {
        bv = v;
        bi = e;
      }
    }
    uint sel;
    tg_argmax(bv, bi, bufv, bufi, lane, sg, nsg, sel);
    sel = min(sel, E - 1);
    if (tid == 0) {
      selv[j] = p[sel];
      seli[j] = sel;
      p[sel] = ROUTE_TAKEN;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    sum += selv[j];
    nan = nan || is_nan(selv[j]);
  }
  if (tid == 0 && nan) {
    record_error(err, ERR_ROUTE_NAN, t);
  }
  if (tid < K) {
    const uint e = seli[tid];
    ids[ulong(t) * K + tid] = int(e);
    weights[ulong(t) * K + tid] = a.norm_topk ? selv[tid] / sum : selv[tid];
    count_expert(flags, stats, a.stats_slot, e);
  }
}

// zero_row clears row t of out (hidden floats), which moe_mm_down then adds
// each of the token's experts into.
inline void zero_row(device float* out, uint t, uint hidden, ushort tid, ushort ntg) {
  device float* o = out + ulong(t) * hidden;
  if (hidden % 4 == 0) {
    for (uint i = tid; i < hidden / 4; i += ntg) {
      *(device float4*)(o + 4 * i) = 0.0f;
    }
  } else {
    for (uint i = tid; i < hidden; i += ntg) {
      o[i] = 0.0f;
    }
  }
}

// moe_route: one threadgroup per token, routing the router's logits
// (threadgroup(0): experts floats); with moe_zero_out it clears the token's
// output row.
kernel void moe_route(constant RouteArgs& a [[buffer(0)]], device const float* logits [[buffer(1)]],
                      device int* ids [[buffer(2)]], device float* weights [[buffer(3)]],
                      device atomic_uint* flags [[buffer(4)]], device atomic_uint* stats [[buffer(5)]],
                      device float* out [[buffer(7), function_constant(moe_zero_out)]],
                      device atomic_uint* err [[buffer(8)]],
                      threadgroup float* p [[threadgroup(0)]], uint t [[threadgroup_position_in_grid]],
                      ushort tid [[thread_index_in_threadgroup]], ushort ntg [[threads_per_threadgroup]],
                      ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                      ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float bufv[32];
  threadgroup uint bufi[32];
  threadgroup float selv[32];
  threadgroup uint seli[32];
  device const float* l = logits + ulong(t) * a.experts;
  for (uint e = tid; e < a.experts; e += ntg) {
    p[e] = l[e];
  }
  if (moe_zero_out) {
    zero_row(out, t, a.hidden, tid, ntg);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  route_token(a, p, bufv, bufi, selv, seli, t, ids, weights, flags, stats, err, tid, ntg, lane, sg, nsg);
}

// moe_router_route: the router GEMV and the routing in one threadgroup per
// token, for decode steps (bridge/metal/fusion.go): each simdgroup computes
// the logits of every nsg-th expert into threadgroup(0) (experts floats),
// then the threadgroup routes them as moe_route does. x is [tokens][hidden],
// router [experts][hidden].
template <typename W>
kernel void moe_router_route(constant RouteArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                             device const W* router [[buffer(6)]], device int* ids [[buffer(2)]],
                             device float* weights [[buffer(3)]], device atomic_uint* flags [[buffer(4)]],
                             device atomic_uint* stats [[buffer(5)]],
                             device float* out [[buffer(7), function_constant(moe_zero_out)]],
                             device atomic_uint* err [[buffer(8)]], threadgroup float* p [[threadgroup(0)]],
                             uint t [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                             ushort ntg [[threads_per_threadgroup]], ushort lane [[thread_index_in_simdgroup]],
                             ushort sg [[simdgroup_index_in_threadgroup]], ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float bufv[32];
  threadgroup uint bufi[32];
  threadgroup float selv[32];
  threadgroup uint seli[32];
  const uint H = a.hidden;
  device const float* xr = x + ulong(t) * H;
  for (uint e = sg; e < a.experts; e += nsg) {
    device const W* wr = router + ulong(e) * H;
    float d = 0.0f;
    for (uint kk = lane; kk < H; kk += 32) {
      d += float(wr[kk]) * xr[kk];
    }
    d = simd_sum(d);
    if (lane == 0) {
      p[e] = d;
    }
  }
  if (moe_zero_out) {
    zero_row(out, t, H, tid, ntg);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  route_token(a, p, bufv, bufi, selv, seli, t, ids, weights, flags, stats, err, tid, ntg, lane, sg, nsg);
}

template [[host_name("moe_router_route_f32")]] kernel void moe_router_route<float>(
    constant RouteArgs&, device const float*, device const float*, device int*, device float*, device atomic_uint*,
    device atomic_uint*, device float*, device atomic_uint*, threadgroup float*, uint, ushort, ushort, ushort, ushort,
    ushort);
template [[host_name("moe_router_route_f16")]] kernel void moe_router_route<half>(
    constant RouteArgs&, device const float*, device const half*, device int*, device float*, device atomic_uint*,
    device atomic_uint*, device float*, device atomic_uint*, threadgroup float*, uint, ushort, ushort, ushort, ushort,
    ushort);
template [[host_name("moe_router_route_bf16")]] kernel void moe_router_route<bf16_t>(
    constant RouteArgs&, device const float*, device const bf16_t*, device int*, device float*, device atomic_uint*,
    device atomic_uint*, device float*, device atomic_uint*, threadgroup float*, uint, ushort, ushort, ushort, ushort,
    ushort);

// moe_group: one threadgroup per chunk of pairs (the strategy: chunks of 1
// pair are the loop, one chunk of all pairs is grouped). It sorts its
// chunk's pairs by expert into perm (a counting sort: per-expert counts and
// offsets in threadgroup(0), 4 * experts uints) and lists the chunk's GEMM
// tiles, at most tile_rows rows of one expert each, in its tiles_per_chunk
// slots (unused slots get expert -1).
kernel void moe_group(constant GroupArgs& a [[buffer(0)]], device const int* ids [[buffer(1)]],
                      device int* perm [[buffer(2)]], device MoETile* tiles [[buffer(3)]],
                      threadgroup uint* smem [[threadgroup(0)]], uint c [[threadgroup_position_in_grid]],
                      ushort tid [[thread_index_in_threadgroup]], ushort ntg [[threads_per_threadgroup]]) {
  threadgroup uint total;
  const uint E = a.experts;
  threadgroup atomic_uint* cnt = (threadgroup atomic_uint*)smem;
  threadgroup atomic_uint* cur = (threadgroup atomic_uint*)(smem + E);
  threadgroup uint* offs = smem + 2 * E;
  threadgroup uint* toff = smem + 3 * E;
  const uint p0 = c * a.chunk, p1 = min(p0 + a.chunk, a.pairs);
  for (uint e = tid; e < E; e += ntg) {
    atomic_store_explicit(&cnt[e], 0u, memory_order_relaxed);
    atomic_store_explicit(&cur[e], 0u, memory_order_relaxed);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint i = p0 + tid; i < p1; i += ntg) {
    atomic_fetch_add_explicit(&cnt[uint(ids[i])], 1u, memory_order_relaxed);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid == 0) {
    uint o = 0, to = 0;
    for (uint e = 0; e < E; e++) {
      const uint n = atomic_load_explicit(&cnt[e], memory_order_relaxed);
      offs[e] = o;
      toff[e] = to;
      o += n;
      to += (n + a.tile_rows - 1) / a.tile_rows;
    }
    total = to;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint i = p0 + tid; i < p1; i += ntg) {
    const uint e = uint(ids[i]);
    const uint r = atomic_fetch_add_explicit(&cur[e], 1u, memory_order_relaxed);
    perm[p0 + offs[e] + r] = int(i);
  }
  device MoETile* tl = tiles + ulong(c) * a.tiles_per_chunk;
  for (uint e = tid; e < E; e += ntg) {
    const uint n = atomic_load_explicit(&cnt[e], memory_order_relaxed);
    for (uint t = 0; t * a.tile_rows < n; t++) {
      MoETile x;
      x.expert = int(e);
      x.row0 = int(p0 + offs[e] + t * a.tile_rows);
      x.rows = int(min(a.tile_rows, n - t * a.tile_rows));
      x._pad0 = 0;
      tl[toff[e] + t] = x;
    }
  }
  for (uint s = total + tid; s < a.tiles_per_chunk; s += ntg) {
    MoETile x;
    x.expert = -1;
    x.row0 = 0;
    x.rows = 0;
    x._pad0 = 0;
    tl[s] = x;
  }
}

// moe_mv_gate_up: h[row] = silu(x[token] * gate^T) * (x[token] * up^T) for
// the rows of one tile (at most mv_cols), simd_sum reductions over the
// tile's activations staged once per threadgroup (gemm.h's mv_tile); with
// mv_norm x is the input of the RMSNorm before the block (weights g),
// normalised as it is staged. Grid: (ceil(inter / (simdgroups * mv_rows)),
// tile slots).
template <typename W>
kernel void moe_mv_gate_up(constant MoEGemmArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                           device const W* w [[buffer(2)]], device const int* perm [[buffer(3)]],
                           device const MoETile* tiles [[buffer(4)]], device float* h [[buffer(5)]],
                           device const float* g [[buffer(6), function_constant(mv_norm)]],
                           uint2 tg [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                           ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                           ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float xs[MV_STAGE_FLOATS];
  const MoETile tile = simd_tile(tiles, tg.y, lane);
  const uint n0 = (tg.x * nsg + sg) * uint(mv_rows);
  if (tile.expert < 0 || uint(tile.expert) >= a.experts || tg.x * nsg * uint(mv_rows) >= a.n) {
    return; // the whole threadgroup: an unused tile slot or past the rows
  }
  device const W* base = w + ulong(tile.expert) * a.expert_stride;
  // Lane c reads row c's pair; the simdgroup shares them.
  const int mine = int(lane) < min(tile.rows, mv_cols) ? perm[tile.row0 + lane] / int(a.top_k) : -1;
  int src[MV_MAX_COLS];
  for (int c = 0; c < mv_cols; c++) {
    src[c] = simd_broadcast(mine, ushort(c));
  }
  MVAcc gacc, uacc;
  MVNorm nm = mv_norm_of(mv_norm, false, g, g);
  mv_tile<W, true>(x, src, base + a.w_offset, base + a.w2_offset, a.n, a.k, n0, xs, tid, ushort(nsg * 32), lane, nm, gacc,
                   uacc);
  float inv[MV_MAX_COLS];
  mv_norm_scale(nm, a.k, a.eps, xs, lane, sg, nsg, inv); // mv_tile is done with xs
  for (int r = 0; r < mv_rows; r++) {
    for (int c = 0; c < mv_cols; c++) {
      const float gs = simd_sum(gacc.v[r][c]) * inv[c];
      const float us = simd_sum(uacc.v[r][c]) * inv[c];
      if (lane == 0 && n0 + r < a.n && c < tile.rows) {
        h[ulong(tile.row0 + c) * a.n + n0 + r] = silu(gs) * us;
      }
    }
  }
}

// moe_mv_down: y[pair] = h[row] * down^T, scattered back to pair order.
template <typename W>
kernel void moe_mv_down(constant MoEGemmArgs& a [[buffer(0)]], device const float* h [[buffer(1)]],
                        device const W* w [[buffer(2)]], device const int* perm [[buffer(3)]],
                        device const MoETile* tiles [[buffer(4)]], device float* y [[buffer(5)]],
                        uint2 tg [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                        ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                        ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float xs[MV_STAGE_FLOATS];
  const MoETile tile = simd_tile(tiles, tg.y, lane);
  const uint n0 = (tg.x * nsg + sg) * uint(mv_rows);
  if (tile.expert < 0 || uint(tile.expert) >= a.experts || tg.x * nsg * uint(mv_rows) >= a.n) {
    return;
  }
  device const W* base = w + ulong(tile.expert) * a.expert_stride;
  int src[MV_MAX_COLS];
  for (int c = 0; c < mv_cols; c++) {
    src[c] = c < tile.rows ? tile.row0 + c : -1;
  }
  MVAcc acc, unused;
  MVNorm nm = mv_norm_of(false, false, h, h);
  mv_tile<W, false>(h, src, base + a.w_offset, base + a.w_offset, a.n, a.k, n0, xs, tid, ushort(nsg * 32), lane, nm, acc,
                    unused);
  const int dst = int(lane) < min(tile.rows, mv_cols) ? perm[tile.row0 + lane] : 0;
  for (int r = 0; r < mv_rows; r++) {
    for (int c = 0; c < mv_cols; c++) {
      const float s = simd_sum(acc.v[r][c]);
      const int pc = simd_broadcast(dst, ushort(c));
      if (lane == 0 && n0 + r < a.n && c < tile.rows) {
        y[ulong(pc) * a.n + n0 + r] = s;
      }
    }
  }
}

// moe_mm_gate_up: the simdgroup_matrix version (gemm.h's mm_accumulate,
// gate and up staged together over one activation tile), tiles of up to
// mm_bm rows of one expert; SwiGLU in the epilogue. Grid: (ceil(inter /
// mm_bn), tile slots); mm_stages * mm_stage_bytes(2) bytes of
// threadgroup(0).
template <typename W>
[[max_total_threads_per_threadgroup(MM_MAX_THREADS)]]
kernel void moe_mm_gate_up(constant MoEGemmArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                           device const W* w [[buffer(2)]], device const int* perm [[buffer(3)]],
                           device const MoETile* tiles [[buffer(4)]], device float* h [[buffer(5)]],
                           threadgroup float* smem [[threadgroup(0)]], uint2 tg [[threadgroup_position_in_grid]],
                           ushort tid [[thread_index_in_threadgroup]], uint2 ntgv [[threads_per_threadgroup]],
                           ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]]) {
  const ushort ntg = ushort(ntgv.x); // declared as tg is: MSL wants them alike
  threadgroup int src[64];
  const MoETile tile = tiles[tg.y];
  if (tile.expert < 0 || uint(tile.expert) >= a.experts) {
    return;
  }
  const uint n0 = tg.x * uint(mm_bn);
  for (int r = tid; r < mm_bm; r += ntg) {
    src[r] = r < tile.rows ? perm[tile.row0 + r] / int(a.top_k) : -1;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  device const W* base = w + ulong(tile.expert) * a.expert_stride;
  MMAcc g, u;
  mm_accumulate<W, true>(x, src, base + a.w_offset, base + a.w2_offset, a.n, a.k, n0, smem, tid, ntg, sg, g, u);
  const int TM = mm_bm / (8 * mm_sgm), TN = mm_bn / (8 * mm_sgn);
  const bool pairs = a.n % 2 == 0;
  for (int i = 0; i < TM; i++) {
    for (int j = 0; j < TN; j++) {
      int r, c;
      mm_coord(sg, lane, i, j, r, c);
      const float2 gv = g.t[i][j].thread_elements();
      const float2 uv = u.t[i][j].thread_elements();
      const uint col = n0 + c;
      if (r >= tile.rows || col >= a.n) {
        continue;
      }
      const float2 v = float2(silu(gv[0]) * uv[0], silu(gv[1]) * uv[1]);
      device float* o = h + ulong(tile.row0 + r) * a.n + col;
      if (pairs) {
        *(device float2*)o = v;
      } else {
        o[0] = v[0];
        if (col + 1 < a.n) {
          o[1] = v[1];
        }
      }
    }
  }
}

// moe_mm_down: out[token] += weight(pair) * (h[row] * down^T), the weighted
// scatter-add of every routed expert's rows into their tokens' output rows
// (cleared by the routing kernel, moe_zero_out), also into residual with
// moe_residual; it clears its expert's flag for the next call (what
// moe_combine does on the matvec path). The adds are atomic, so their order,
// and the output's last bits, vary from run to run.
template <typename W>
[[max_total_threads_per_threadgroup(MM_MAX_THREADS)]]
kernel void moe_mm_down(constant MoEGemmArgs& a [[buffer(0)]], device const float* h [[buffer(1)]],
                        device const W* w [[buffer(2)]], device const int* perm [[buffer(3)]],
                        device const MoETile* tiles [[buffer(4)]], device float* out [[buffer(5)]],
                        device const float* weights [[buffer(6)]], device atomic_uint* flags [[buffer(7)]],
                        device float* residual [[buffer(8), function_constant(moe_residual)]],
                        threadgroup float* smem [[threadgroup(0)]], uint2 tg [[threadgroup_position_in_grid]],
                        ushort tid [[thread_index_in_threadgroup]], uint2 ntgv [[threads_per_threadgroup]],
                        ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]]) {
  const ushort ntg = ushort(ntgv.x); // declared as tg is: MSL wants them alike
  threadgroup int src[64];
  threadgroup int tok[64];
  threadgroup float wt[64];
  const MoETile tile = tiles[tg.y];
  if (tile.expert < 0 || uint(tile.expert) >= a.experts) {
    return;
  }
  const uint n0 = tg.x * uint(mm_bn);
  for (int r = tid; r < mm_bm; r += ntg) {
    const int pair = r < tile.rows ? perm[tile.row0 + r] : -1;
    src[r] = pair >= 0 ? tile.row0 + r : -1;
    tok[r] = pair >= 0 ? pair / int(a.top_k) : 0;
    wt[r] = pair >= 0 ? weights[pair] : 0.0f;
  }
  if (tg.x == 0 && tid == 0) {
    atomic_store_explicit(&flags[tile.expert], 0u, memory_order_relaxed);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  device const W* base = w + ulong(tile.expert) * a.expert_stride;
  MMAcc acc, unused;
  mm_accumulate<W, false>(h, src, base + a.w_offset, base + a.w_offset, a.n, a.k, n0, smem, tid, ntg, sg, acc,
                          unused);
  const int TM = mm_bm / (8 * mm_sgm), TN = mm_bn / (8 * mm_sgn);
  for (int i = 0; i < TM; i++) {
    for (int j = 0; j < TN; j++) {
      int r, c;
      mm_coord(sg, lane, i, j, r, c);
      const float2 v = acc.t[i][j].thread_elements();
      if (r >= tile.rows) {
        continue;
      }
      const ulong o = ulong(tok[r]) * a.n;
      for (int e = 0; e < 2; e++) {
        const uint col = n0 + c + e;
        if (col < a.n) {
          const float y = wt[r] * v[e];
          atomic_fetch_add_explicit((device atomic_float*)(out + o + col), y, memory_order_relaxed);
          if (moe_residual) {
            atomic_fetch_add_explicit((device atomic_float*)(residual + o + col), y, memory_order_relaxed);
          }
        }
      }
    }
  }
}

// moe_mv_pair: a decode step's gate/up with SwiGLU, h[p] =
// silu(x[t]·gateᵀ)·(x[t]·upᵀ), one (token, expert) pair a threadgroup
// column (grid y: pairs) with no grouping: simdgroup 0 routes the pair's
// token from the router's logits (moe_route_pair) and the pair's first
// threadgroup writes its expert, its weight and the distinct-expert count,
// as moe_route would; with mv_norm x is the input of the RMSNorm before the
// block (weights g), normalised as it is staged. The float experts' side of
// docs/metal-kernels.md's "The MoE block in a decode step".
template <typename W>
kernel void moe_mv_pair(constant MoEGemmArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                        device const W* w [[buffer(2)]], device int* ids [[buffer(3)]], device float* h [[buffer(4)]],
                        device const float* logits [[buffer(5)]], device float* weights [[buffer(6)]],
                        device atomic_uint* flags [[buffer(7)]], device atomic_uint* counts [[buffer(8)]],
                        device const float* g [[buffer(9), function_constant(mv_norm)]],
                        device atomic_uint* err [[buffer(10)]], uint2 tg [[threadgroup_position_in_grid]],
                        ushort tid [[thread_index_in_threadgroup]], ushort lane [[thread_index_in_simdgroup]],
                        ushort sg [[simdgroup_index_in_threadgroup]], ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float xs[MV_STAGE_FLOATS];
  threadgroup uint routed[1];
  const uint p = tg.y;
  if (sg == 0) {
    uint e;
    bool nan;
    const float wt = moe_route_pair(logits + ulong(p / a.top_k) * a.experts, a.experts, a.top_k, a.norm_topk != 0u,
                                    p % a.top_k, lane, e, nan);
    if (lane == 0) {
      routed[0] = e;
      if (tg.x == 0) {
        if (nan) {
          record_error(err, ERR_ROUTE_NAN, p / a.top_k);
        }
        ids[p] = int(e);
        weights[p] = wt;
        count_expert(flags, counts, a.stats_slot, e);
      }
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  device const W* base = w + ulong(routed[0]) * a.expert_stride;
  int src[MV_MAX_COLS];
  for (int c = 0; c < MV_MAX_COLS; c++) {
    src[c] = c == 0 ? int(p / a.top_k) : -1;
  }
  const uint n0 = (tg.x * nsg + sg) * uint(mv_rows);
  MVAcc gacc, uacc;
  MVNorm nm = mv_norm_of(mv_norm, false, g, g);
  mv_tile<W, true>(x, src, base + a.w_offset, base + a.w2_offset, a.n, a.k, n0, xs, tid, ushort(nsg * 32), lane, nm, gacc,
                   uacc);
  float inv[MV_MAX_COLS];
  mv_norm_scale(nm, a.k, a.eps, xs, lane, sg, nsg, inv); // mv_tile is done with xs
  for (int r = 0; r < mv_rows; r++) {
    const float gs = simd_sum(gacc.v[r][0]) * inv[0];
    const float us = simd_sum(uacc.v[r][0]) * inv[0];
    if (lane == 0 && n0 + r < a.n) {
      h[ulong(p) * a.n + n0 + r] = silu(gs) * us;
    }
  }
}

// moe_mv_sum: a decode step's down projections of a token's experts summed
// under their routing weights (grid y: tokens), what moe_mv_down and
// moe_combine compute: out[t] = Σ_j weights[t·K+j]·(h[t·K+j]·down_eᵀ), j
// in top-k order, also added into residual with moe_residual; the token's
// first threadgroup clears its experts' flags. As quant.metal's
// qmoe_mv_sum: simdgroup s dots pair s / G's rows of row group s % G (G =
// simdgroups / K), the K pairs' chunks of h staged side by side
// (MV_STAGE_FLOATS / K values each, at least 256).
template <typename W>
kernel void moe_mv_sum(constant MoEGemmArgs& a [[buffer(0)]], device const float* hs [[buffer(1)]],
                       device const W* w [[buffer(2)]], device const int* ids [[buffer(3)]],
                       device const float* weights [[buffer(4)]], device atomic_uint* flags [[buffer(5)]],
                       device float* out [[buffer(6)]], device float* residual [[buffer(7), function_constant(moe_residual)]],
                       uint2 tg [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                       ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                       ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float xs[MV_STAGE_FLOATS];
  const uint K = a.top_k, G = max(1u, uint(nsg) / K), R = uint(mv_rows);
  const uint j = sg / G, gi = sg % G; // j >= K: a simdgroup that only stages
  const uint t = tg.y, p0 = t * K;
  const uint n0 = (tg.x * G + gi) * R;
  const uint KC = uint(MV_STAGE_FLOATS) / K / 256u * 256u;
  const ushort ntg = nsg * 32;
  const bool vec = a.k % 8 == 0;
  uint e = 0;
  if (j < K) {
    e = uint(simd_broadcast_first(lane == 0 ? ids[p0 + j] : 0));
  }
  device const W* base = w + ulong(e) * a.expert_stride + a.w_offset;
  MVAcc acc, unused;
  for (int r = 0; r < MV_MAX_ROWS; r++) {
    for (int c = 0; c < MV_MAX_COLS; c++) {
      acc.v[r][c] = 0.0f;
    }
  }
  for (uint k0 = 0; k0 < a.k; k0 += KC) {
    const uint kc = min(KC, a.k - k0);
    if (vec) {
      const uint q = kc / 4;
      for (uint i = tid; i < K * q; i += ntg) {
        const uint jj = i / q, c = 4 * (i % q);
        *(threadgroup float4*)(xs + jj * KC + c) = *(device const float4*)(hs + ulong(p0 + jj) * a.k + k0 + c);
      }
    } else {
      for (uint i = tid; i < K * kc; i += ntg) {
        const uint jj = i / kc, c = i % kc;
        xs[jj * KC + c] = hs[ulong(p0 + jj) * a.k + k0 + c];
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (j < K) {
      mv_rows_dot<W, false>(base, base, a.n, a.k, n0, k0, kc, KC, vec, xs + j * KC, lane, 1, acc, unused);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  moe_sum_rows(acc.v, xs, K, G, j, gi, t, n0, a.n, ids, weights, flags, a.experts, out, residual, tg.x, tid, lane);
}

#define INSTANTIATE_MOE(sfx, T)                                                                                  \
  template [[host_name(MTL_STR(moe_mv_gate_up_##sfx))]] kernel void moe_mv_gate_up<T>(                                  \
      constant MoEGemmArgs&, device const float*, device const T*, device const int*, device const MoETile*,      \
      device float*, device const float*, uint2, ushort, ushort, ushort, ushort);                                \
  template [[host_name(MTL_STR(moe_mv_down_##sfx))]] kernel void moe_mv_down<T>(                                        \
      constant MoEGemmArgs&, device const float*, device const T*, device const int*, device const MoETile*,      \
      device float*, uint2, ushort, ushort, ushort, ushort);                                                     \
  template [[host_name(MTL_STR(moe_mm_gate_up_##sfx))]] kernel void moe_mm_gate_up<T>(                                  \
      constant MoEGemmArgs&, device const float*, device const T*, device const int*, device const MoETile*,      \
      device float*, threadgroup float*, uint2, ushort, uint2, ushort, ushort);                                  \
  template [[host_name(MTL_STR(moe_mm_down_##sfx))]] kernel void moe_mm_down<T>(                                        \
      constant MoEGemmArgs&, device const float*, device const T*, device const int*, device const MoETile*,      \
      device float*, device const float*, device atomic_uint*, device float*, threadgroup float*, uint2, ushort,  \
      uint2, ushort, ushort);                                                                                  \
  template [[host_name(MTL_STR(moe_mv_pair_##sfx))]] kernel void moe_mv_pair<T>(                                        \
      constant MoEGemmArgs&, device const float*, device const T*, device int*, device float*,                   \
      device const float*, device float*, device atomic_uint*, device atomic_uint*, device const float*,          \
      device atomic_uint*, uint2, ushort, ushort, ushort, ushort);                                               \
  template [[host_name(MTL_STR(moe_mv_sum_##sfx))]] kernel void moe_mv_sum<T>(                                          \
      constant MoEGemmArgs&, device const float*, device const T*, device const int*, device const float*,       \
      device atomic_uint*, device float*, device float*, uint2, ushort, ushort, ushort, ushort);

INSTANTIATE_MOE(f32, float)
INSTANTIATE_MOE(f16, half)
INSTANTIATE_MOE(bf16, bf16_t)

// moe_combine: out[t] = sum_j weights[t][j] * y[t*top_k + j], in top-k
// order, also added into residual with moe_residual; it clears the token's
// experts' flags for the next call.
kernel void moe_combine(constant CombineArgs& a [[buffer(0)]], device const float* y [[buffer(1)]],
                        device const float* weights [[buffer(2)]], device const int* ids [[buffer(3)]],
                        device atomic_uint* flags [[buffer(4)]], device float* out [[buffer(5)]],
                        device float* residual [[buffer(6), function_constant(moe_residual)]],
                        uint t [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                        ushort ntg [[threads_per_threadgroup]]) {
  const uint K = a.top_k, H = a.hidden;
  for (uint i = tid; i < H; i += ntg) {
    float s = 0.0f;
    for (uint j = 0; j < K; j++) {
      s += weights[ulong(t) * K + j] * y[(ulong(t) * K + j) * H + i];
    }
    out[ulong(t) * H + i] = s;
    if (moe_residual) {
      residual[ulong(t) * H + i] += s;
    }
  }
  if (tid < K) {
    atomic_store_explicit(&flags[uint(ids[ulong(t) * K + tid])], 0u, memory_order_relaxed);
  }
}
