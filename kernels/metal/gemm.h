// The GEMM cores shared by the dense matmul and the MoE expert GEMMs:
// out[row][n] = sum_k a[row][k] * w[n][k] (torch Linear layout), a in f32,
// w in f32, f16 or bf16, accumulated in f32. A tile's activation rows are
// given as a map (tile row -> source row, -1 for none), so the same core
// serves contiguous rows and the rows of the tokens routed to one expert.
#ifndef MTLBENCH_GEMM_H
#define MTLBENCH_GEMM_H
#include "mtlbench.h"

// ---------------------------------------------------------------------------
// mv: simd_sum reductions, for few rows (decode). Each simdgroup computes
// mv_rows weight rows (output columns) for the tile's mv_cols activation
// rows; each weight element is read once per tile.
// ---------------------------------------------------------------------------

struct MVAcc {
  float v[MV_MAX_ROWS][MV_MAX_COLS];
};

// mv_accumulate adds lane's share of the dot products of weight rows
// n0.. (mv_rows of them, those < n) with the activation rows src[c] into acc;
// DUAL does the same for a second weight matrix w1 into acc1.
template <typename W, bool DUAL>
inline void mv_accumulate(device const float* a, const thread int* src, device const W* w0, device const W* w1,
                          uint n, uint k, uint n0, ushort lane, thread MVAcc& acc0, thread MVAcc& acc1) {
  for (int r = 0; r < mv_rows; r++) {
    for (int c = 0; c < mv_cols; c++) {
      acc0.v[r][c] = 0.0f;
      acc1.v[r][c] = 0.0f;
    }
  }
  for (uint kk = lane; kk < k; kk += 32) {
    float xv[MV_MAX_COLS];
    for (int c = 0; c < mv_cols; c++) {
      xv[c] = src[c] >= 0 ? a[ulong(src[c]) * k + kk] : 0.0f;
    }
    for (int r = 0; r < mv_rows; r++) {
      if (n0 + r >= n) {
        break;
      }
      const float wv = float(w0[ulong(n0 + r) * k + kk]);
      for (int c = 0; c < mv_cols; c++) {
        acc0.v[r][c] += wv * xv[c];
      }
      if (DUAL) {
        const float wu = float(w1[ulong(n0 + r) * k + kk]);
        for (int c = 0; c < mv_cols; c++) {
          acc1.v[r][c] += wu * xv[c];
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// mm: simdgroup_matrix 8x8 tiles. A threadgroup of mm_sgm x mm_sgn
// simdgroups computes an mm_bm x mm_bn tile; each k step stages mm_bk
// columns of the activation rows and the weight rows in threadgroup memory
// (weights widened to f32), then each simdgroup multiplies its
// (mm_bm/mm_sgm/8) x (mm_bn/mm_sgn/8) 8x8 tiles.
// ---------------------------------------------------------------------------

struct MMAcc {
  simdgroup_float8x8 t[MM_MAX_TM][MM_MAX_TN];
};

// mm_smem_floats is the threadgroup memory a tile needs, in floats.
inline uint mm_smem_floats(bool dual) { return uint(mm_bm + (dual ? 2 : 1) * mm_bn) * uint(mm_bk); }

template <typename W, bool DUAL>
inline void mm_accumulate(device const float* a, threadgroup const int* src, device const W* w0, device const W* w1,
                          uint n, uint k, uint n0, threadgroup float* smem, ushort tid, ushort ntg, ushort sg,
                          thread MMAcc& acc0, thread MMAcc& acc1) {
  const int BM = mm_bm, BN = mm_bn, BK = mm_bk;
  const int TM = BM / (8 * mm_sgm), TN = BN / (8 * mm_sgn);
  const int sgm = sg / mm_sgn, sgn = sg % mm_sgn;
  threadgroup float* As = smem;               // [BM][BK]
  threadgroup float* Bs = smem + BM * BK;     // [BN][BK]
  threadgroup float* Us = Bs + BN * BK;       // [BN][BK], DUAL only
  for (int i = 0; i < TM; i++) {
    for (int j = 0; j < TN; j++) {
      acc0.t[i][j] = make_filled_simdgroup_matrix<float, 8>(0.0f);
      acc1.t[i][j] = make_filled_simdgroup_matrix<float, 8>(0.0f);
    }
  }
  for (uint k0 = 0; k0 < k; k0 += BK) {
    for (int e = tid; e < BM * BK; e += ntg) {
      const int r = e / BK;
      const uint gk = k0 + e % BK;
      const int s = src[r];
      As[e] = (s >= 0 && gk < k) ? a[ulong(s) * k + gk] : 0.0f;
    }
    for (int e = tid; e < BN * BK; e += ntg) {
      const uint gn = n0 + e / BK, gk = k0 + e % BK;
      const bool in = gn < n && gk < k;
      Bs[e] = in ? float(w0[ulong(gn) * k + gk]) : 0.0f;
      if (DUAL) {
        Us[e] = in ? float(w1[ulong(gn) * k + gk]) : 0.0f;
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int kk = 0; kk < BK; kk += 8) {
      simdgroup_float8x8 af[MM_MAX_TM];
      simdgroup_float8x8 bf[MM_MAX_TN];
      for (int i = 0; i < TM; i++) {
        simdgroup_load(af[i], As + (sgm * TM * 8 + i * 8) * BK + kk, BK);
      }
      for (int j = 0; j < TN; j++) {
        simdgroup_load(bf[j], Bs + (sgn * TN * 8 + j * 8) * BK + kk, BK, ulong2(0, 0), true);
      }
      for (int i = 0; i < TM; i++) {
        for (int j = 0; j < TN; j++) {
          simdgroup_multiply_accumulate(acc0.t[i][j], af[i], bf[j], acc0.t[i][j]);
        }
      }
      if (DUAL) {
        for (int j = 0; j < TN; j++) {
          simdgroup_load(bf[j], Us + (sgn * TN * 8 + j * 8) * BK + kk, BK, ulong2(0, 0), true);
        }
        for (int i = 0; i < TM; i++) {
          for (int j = 0; j < TN; j++) {
            simdgroup_multiply_accumulate(acc1.t[i][j], af[i], bf[j], acc1.t[i][j]);
          }
        }
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
}

// mm_coord gives the tile-relative row and column of the first of the two
// elements lane holds of 8x8 tile (i, j) of simdgroup sg.
inline void mm_coord(ushort sg, ushort lane, int i, int j, thread int& row, thread int& col) {
  const int TM = mm_bm / (8 * mm_sgm), TN = mm_bn / (8 * mm_sgn);
  short fm, fn;
  simd_frag_coord(lane, fm, fn);
  row = (sg / mm_sgn) * TM * 8 + i * 8 + fm;
  col = (sg % mm_sgn) * TN * 8 + j * 8 + fn;
}

inline float silu(float g) { return g / (1.0f + exp(-g)); }

#endif // MTLBENCH_GEMM_H
