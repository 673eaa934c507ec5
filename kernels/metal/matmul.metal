// Dense matmul: out[m][n] = x[m][k] * w[n][k]^T (+ bias[n]).
#include "gemm.h"

// matvec: simd_sum reductions for few activation rows (gemm.h's mv_tile).
// Grid: (ceil(n / (simdgroups * mv_rows)), ceil(m / mv_cols)).
template <typename W>
kernel void matvec(constant MatArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                   device const W* w [[buffer(2)]], device float* out [[buffer(3)]],
                   device const float* bias [[buffer(4), function_constant(has_bias)]],
                   uint2 tg [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                   ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                   ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float xs[MV_STAGE_FLOATS];
  const uint n0 = (tg.x * nsg + sg) * uint(mv_rows);
  const uint m0 = tg.y * uint(mv_cols);
  int src[MV_MAX_COLS];
  for (int c = 0; c < mv_cols; c++) {
    src[c] = m0 + c < a.m ? int(m0 + c) : -1;
  }
  MVAcc acc, unused;
  MVNorm nm = mv_norm_of(false, false, x, x);
  mv_tile<W, false>(x, src, w, w, a.n, a.k, n0, xs, tid, ushort(nsg * 32), lane, nm, acc, unused);
  for (int r = 0; r < mv_rows; r++) {
    for (int c = 0; c < mv_cols; c++) {
      const float s = simd_sum(acc.v[r][c]);
      if (lane == 0 && n0 + r < a.n && src[c] >= 0) {
        out[ulong(src[c]) * a.n + n0 + r] = s + (has_bias ? bias[n0 + r] : 0.0f);
      }
    }
  }
}

// matmul: simdgroup_matrix tiles (gemm.h's mm_accumulate). Grid:
// (ceil(n / mm_bn), ceil(m / mm_bm)), mm_sgm * mm_sgn simdgroups,
// mm_stages * mm_stage_bytes(1) bytes of threadgroup(0).
template <typename W>
[[max_total_threads_per_threadgroup(MM_MAX_THREADS)]]
kernel void matmul(constant MatArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                   device const W* w [[buffer(2)]], device float* out [[buffer(3)]],
                   device const float* bias [[buffer(4), function_constant(has_bias)]],
                   threadgroup float* smem [[threadgroup(0)]], uint2 tg [[threadgroup_position_in_grid]],
                   ushort tid [[thread_index_in_threadgroup]], uint2 ntgv [[threads_per_threadgroup]],
                   ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]]) {
  const ushort ntg = ushort(ntgv.x); // declared as tg is: MSL wants them alike
  threadgroup int src[64];
  const uint m0 = tg.y * uint(mm_bm), n0 = tg.x * uint(mm_bn);
  for (int r = tid; r < mm_bm; r += ntg) {
    src[r] = m0 + r < a.m ? int(m0 + r) : -1;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  MMAcc acc, unused;
  mm_accumulate<W, false>(x, src, w, w, a.n, a.k, n0, smem, tid, ntg, sg, acc, unused);
  const int TM = mm_bm / (8 * mm_sgm), TN = mm_bn / (8 * mm_sgn);
  const bool pairs = a.n % 2 == 0; // a lane's two columns are one aligned float2
  for (int i = 0; i < TM; i++) {
    for (int j = 0; j < TN; j++) {
      int r, c;
      mm_coord(sg, lane, i, j, r, c);
      float2 v = acc.t[i][j].thread_elements();
      const uint row = m0 + r, col = n0 + c;
      if (row >= a.m || col >= a.n) {
        continue;
      }
      if (has_bias) {
        v[0] += bias[col];
        if (col + 1 < a.n) {
          v[1] += bias[col + 1];
        }
      }
      if (pairs) {
        *(device float2*)(out + ulong(row) * a.n + col) = v;
      } else {
        out[ulong(row) * a.n + col] = v[0];
        if (col + 1 < a.n) {
          out[ulong(row) * a.n + col + 1] = v[1];
        }
      }
    }
  }
}

// matvec_fused: the decode step's GEMVs with what they take in
// (bridge/metal/fusion.go). Up to mv_segs weight matrices over the same
// input rows, their rows one after another on the grid (q, k and v), each
// adding its bias where mv_biases has its bit; mv_swiglu: two matrices of
// equal rows (gate, up) on the same grid rows, silu(gate + bias0)·(up +
// bias1) written to out0; mv_norm: the input rows are RMS-normalised
// with weight g as they are read (the sum of squares beside the dot
// products, one pass), or with mv_layernorm LayerNorm-ed with weight g and
// bias beta (each row's mean and 1/σ found first); mv_gelu: the output goes
// through GELU (GPT-2's c_fc); mv_residual: the output is also added into
// residual; mv_argmax (one row of x, one matrix: the LM head before a
// greedy pick, gemv_argmax) also writes the threadgroup's largest output
// and its first index to part_v and part_i[tg.x] for argmax_merge, as
// qmatvec does (docs/metal-kernels.md, "Argmax"). Grid: (ceil(tiles /
// simdgroups), ceil(m / mv_cols)), a tile being mv_rows rows of one
// segment.

template <typename W>
kernel void matvec_fused(constant FusedMVArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                         device const W* w0 [[buffer(2)]], device float* out0 [[buffer(3)]],
                         device const float* bias0 [[buffer(4), function_constant(mv_bias0)]],
                         device const W* w1 [[buffer(5), function_constant(mv_two)]],
                         device float* out1 [[buffer(6), function_constant(mv_out1)]],
                         device const float* bias1 [[buffer(7), function_constant(mv_bias1)]],
                         device const W* w2 [[buffer(8), function_constant(mv_three)]],
                         device float* out2 [[buffer(9), function_constant(mv_three)]],
                         device const float* bias2 [[buffer(10), function_constant(mv_bias2)]],
                         device const float* g [[buffer(11), function_constant(mv_norm)]],
                         device float* residual [[buffer(12), function_constant(mv_residual)]],
                         device const float* beta [[buffer(13), function_constant(mv_ln_bias)]],
                         device float* part_v [[buffer(14), function_constant(mv_argmax)]],
                         device uint* part_i [[buffer(15), function_constant(mv_argmax)]],
                         uint2 tg [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                         ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                         ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float xs[MV_STAGE_FLOATS];
  const uint R = uint(mv_rows);
  const uint t0 = (a.n0 + R - 1) / R, t1 = (a.n1 + R - 1) / R;
  uint tile = tg.x * nsg + sg;
  device const W* w = w0;
  device const W* wu = w0;
  device float* out = out0;
  device const float* bias = bias0;
  bool biased = mv_bias0;
  uint n = a.n0;
  if (mv_two && !mv_swiglu && tile >= t0) {
    tile -= t0;
    w = w1;
    out = out1;
    bias = bias1;
    biased = mv_bias1;
    n = a.n1;
    if (mv_three && tile >= t1) {
      tile -= t1;
      w = w2;
      out = out2;
      bias = bias2;
      biased = mv_bias2;
      n = a.n2;
    }
  }
  if (mv_swiglu) {
    wu = w1;
  }
  const uint n0 = tile * R; // past n: stages with the others, computes nothing
  const uint m0 = tg.y * uint(mv_cols);
  int src[MV_MAX_COLS];
  for (int c = 0; c < mv_cols; c++) {
    src[c] = m0 + c < a.m ? int(m0 + c) : -1;
  }
  MVAcc acc, accu;
  MVNorm nm = mv_norm_of(mv_norm, mv_layernorm, g, beta);
  mv_ln_rows(nm, x, src, a.k, mv_chunk(), a.eps, xs, tid, ushort(nsg * 32), lane, sg, nsg);
  if (mv_swiglu) {
    mv_tile<W, true>(x, src, w, wu, n, a.k, n0, xs, tid, ushort(nsg * 32), lane, nm, acc, accu);
  } else {
    mv_tile<W, false>(x, src, w, w, n, a.k, n0, xs, tid, ushort(nsg * 32), lane, nm, acc, accu);
  }
  float inv[MV_MAX_COLS];
  mv_norm_scale(nm, a.k, a.eps, xs, lane, sg, nsg, inv); // mv_tile is done with xs
  float am_v = NEG_MAX; // mv_argmax: this simdgroup's largest output, rows in order
  uint am_i = 0xffffffffu;
  for (int c = 0; c < mv_cols; c++) {
    for (int r = 0; r < mv_rows; r++) {
      float s = simd_sum(acc.v[r][c]) * inv[c];
      if (biased) {
        s += n0 + r < n ? bias[n0 + r] : 0.0f;
      }
      if (mv_swiglu) {
        const float u = simd_sum(accu.v[r][c]) * inv[c] + (mv_bias1 && n0 + r < n ? bias1[n0 + r] : 0.0f);
        s = silu(s) * u;
      }
      if (mv_gelu) {
        s = gelu_tanh_of(s);
      }
      if (mv_argmax && c == 0 && n0 + r < n) {
        argmax_take(s, n0 + r, am_v, am_i);
      }
      if (lane == 0 && n0 + r < n && src[c] >= 0) {
        const ulong o = ulong(src[c]) * n + n0 + r;
        out[o] = s;
        if (mv_residual) {
          residual[o] += s;
        }
      }
    }
  }
  if (mv_argmax) {
    // As in qmatvec: every lane holds the outputs (simd_sum), and xs is
    // free once every simdgroup is past mv_norm_scale.
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint idx;
    const float v = tg_argmax(am_v, am_i, xs, (threadgroup uint*)(xs + 32), lane, sg, nsg, idx);
    if (tid == 0) {
      part_v[tg.x] = v;
      part_i[tg.x] = idx;
    }
  }
}

#define INSTANTIATE_MATMUL(mv_name, mm_name, T)                                                                 \
  template [[host_name(#mv_name)]] kernel void matvec<T>(constant MatArgs&, device const float*, device const T*,    \
                                                         device float*, device const float*, uint2, ushort, ushort,  \
                                                         ushort, ushort);                                            \
  template [[host_name(#mm_name)]] kernel void matmul<T>(constant MatArgs&, device const float*, device const T*,    \
                                                         device float*, device const float*, threadgroup float*,     \
                                                         uint2, ushort, uint2, ushort, ushort);

#define INSTANTIATE_MATVEC_FUSED(name, T)                                                                      \
  template [[host_name(#name)]] kernel void matvec_fused<T>(                                                     \
      constant FusedMVArgs&, device const float*, device const T*, device float*, device const float*,          \
      device const T*, device float*, device const float*, device const T*, device float*, device const float*, \
      device const float*, device float*, device const float*, device float*, device uint*, uint2, ushort,      \
      ushort, ushort, ushort);

INSTANTIATE_MATVEC_FUSED(matvec_fused_f32, float)
INSTANTIATE_MATVEC_FUSED(matvec_fused_f16, half)
INSTANTIATE_MATVEC_FUSED(matvec_fused_bf16, bf16_t)

INSTANTIATE_MATMUL(matvec_f32, matmul_f32, float)
INSTANTIATE_MATMUL(matvec_f16, matmul_f16, half)
INSTANTIATE_MATMUL(matvec_bf16, matmul_bf16, bf16_t)
