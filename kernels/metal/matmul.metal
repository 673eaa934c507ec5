// Dense matmul: out[m][n] = x[m][k] * w[n][k]^T (+ bias[n]).
#include "gemm.h"

// matvec: simd_sum reductions for few activation rows. Grid:
// (ceil(n / (simdgroups * mv_rows)), ceil(m / mv_cols)).
template <typename W>
kernel void matvec(constant MatArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                   device const W* w [[buffer(2)]], device float* out [[buffer(3)]],
                   device const float* bias [[buffer(4), function_constant(has_bias)]],
                   uint2 tg [[threadgroup_position_in_grid]], ushort lane [[thread_index_in_simdgroup]],
                   ushort sg [[simdgroup_index_in_threadgroup]], ushort nsg [[simdgroups_per_threadgroup]]) {
  const uint n0 = (tg.x * nsg + sg) * uint(mv_rows);
  const uint m0 = tg.y * uint(mv_cols);
  if (n0 >= a.n) {
    return;
  }
  int src[MV_MAX_COLS];
  for (int c = 0; c < mv_cols; c++) {
    src[c] = m0 + c < a.m ? int(m0 + c) : -1;
  }
  MVAcc acc, unused;
  mv_accumulate<W, false>(x, src, w, w, a.n, a.k, n0, lane, acc, unused);
  for (int r = 0; r < mv_rows; r++) {
    for (int c = 0; c < mv_cols; c++) {
      const float s = simd_sum(acc.v[r][c]);
      if (lane == 0 && n0 + r < a.n && src[c] >= 0) {
        out[ulong(src[c]) * a.n + n0 + r] = s + (has_bias ? bias[n0 + r] : 0.0f);
      }
    }
  }
}

// matmul: simdgroup_matrix tiles. Grid: (ceil(n / mm_bn), ceil(m / mm_bm)),
// mm_sgm * mm_sgn simdgroups, mm_smem_floats(false) floats of threadgroup(0).
template <typename W>
kernel void matmul(constant MatArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                   device const W* w [[buffer(2)]], device float* out [[buffer(3)]],
                   device const float* bias [[buffer(4), function_constant(has_bias)]],
                   threadgroup float* smem [[threadgroup(0)]], uint2 tg [[threadgroup_position_in_grid]],
                   ushort tid [[thread_index_in_threadgroup]], ushort ntg [[threads_per_threadgroup]],
                   ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup int src[64];
  const uint m0 = tg.y * uint(mm_bm), n0 = tg.x * uint(mm_bn);
  for (int r = tid; r < mm_bm; r += ntg) {
    src[r] = m0 + r < a.m ? int(m0 + r) : -1;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  MMAcc acc, unused;
  mm_accumulate<W, false>(x, src, w, w, a.n, a.k, n0, smem, tid, ntg, sg, acc, unused);
  const int TM = mm_bm / (8 * mm_sgm), TN = mm_bn / (8 * mm_sgn);
  for (int i = 0; i < TM; i++) {
    for (int j = 0; j < TN; j++) {
      int r, c;
      mm_coord(sg, lane, i, j, r, c);
      const float2 v = acc.t[i][j].thread_elements();
      const uint row = m0 + r;
      for (int e = 0; e < 2; e++) {
        const uint col = n0 + c + e;
        if (row < a.m && col < a.n) {
          out[ulong(row) * a.n + col] = v[e] + (has_bias ? bias[col] : 0.0f);
        }
      }
    }
  }
}

#define INSTANTIATE_MATMUL(mv_name, mm_name, T)                                                                 \
  template [[host_name(#mv_name)]] kernel void matvec<T>(constant MatArgs&, device const float*, device const T*,    \
                                                         device float*, device const float*, uint2, ushort, ushort,  \
                                                         ushort);                                                    \
  template [[host_name(#mm_name)]] kernel void matmul<T>(constant MatArgs&, device const float*, device const T*,    \
                                                         device float*, device const float*, threadgroup float*,     \
                                                         uint2, ushort, ushort, ushort, ushort);

INSTANTIATE_MATMUL(matvec_f32, matmul_f32, float)
INSTANTIATE_MATMUL(matvec_f16, matmul_f16, half)
INSTANTIATE_MATMUL(matvec_bf16, matmul_bf16, bf16_t)
