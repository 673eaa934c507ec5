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
// rows. The threadgroup stages the activation rows in threadgroup memory a
// chunk of k at a time (float4 loads), so device memory serves them once
// per threadgroup rather than once per simdgroup, and each lane reads its
// weights 16 bytes at a time (eight f16/bf16 or four f32 elements), as
// the decode GEMVs of docs/metal-kernels.md are measured.
// ---------------------------------------------------------------------------

struct MVAcc {
  float v[MV_MAX_ROWS][MV_MAX_COLS];
};

// MV_STAGE_FLOATS is the threadgroup memory the staged activations take
// (16 KiB), mv_chunk() the columns of k one chunk holds per row: a multiple
// of 256 (a simdgroup's 32 lanes of 8 elements).
#define MV_STAGE_FLOATS 4096
inline uint mv_chunk() { return uint(MV_STAGE_FLOATS / mv_cols) / 256u * 256u; }

// load8 widens eight consecutive weights (16-byte aligned) to f32.
inline void load8(device const float* p, thread float* v) {
  const float4 a = *(device const float4*)p, b = *((device const float4*)p + 1);
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
  v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}
inline void load8(device const half* p, thread float* v) {
  const uint4 u = *(device const uint4*)p;
  const uint w[4] = {u.x, u.y, u.z, u.w};
  for (int i = 0; i < 4; i++) {
    const half2 h = as_type<half2>(w[i]);
    v[2 * i] = float(h.x);
    v[2 * i + 1] = float(h.y);
  }
}
inline void load8(device const bf16_t* p, thread float* v) {
  const uint4 u = *(device const uint4*)p;
  const uint w[4] = {u.x, u.y, u.z, u.w};
  for (int i = 0; i < 4; i++) {
    v[2 * i] = as_type<float>(w[i] << 16);
    v[2 * i + 1] = as_type<float>(w[i] & 0xffff0000u);
  }
}

// mv_tile adds the dot products of weight rows n0.. (mv_rows of them,
// those < n; a simdgroup with n0 >= n computes nothing but stages and
// waits with the others) with the activation rows src[c] into acc0, and
// with w1's rows into acc1 when DUAL. With norm, each activation is
// multiplied by g[kk] as it is staged and ss[c] gathers the thread's part
// of row c's sum of squares (the caller reduces it over the threadgroup).
// xs is MV_STAGE_FLOATS floats of threadgroup memory; every thread of the
// threadgroup must call it.
template <typename W, bool DUAL>
inline void mv_tile(device const float* a, const thread int* src, device const W* w0, device const W* w1, uint n,
                    uint k, uint n0, threadgroup float* xs, ushort tid, ushort ntg, ushort lane, bool norm,
                    device const float* g, thread float* ss, thread MVAcc& acc0, thread MVAcc& acc1) {
  for (int r = 0; r < mv_rows; r++) {
    for (int c = 0; c < mv_cols; c++) {
      acc0.v[r][c] = 0.0f;
      acc1.v[r][c] = 0.0f;
    }
  }
  for (int c = 0; c < mv_cols; c++) {
    ss[c] = 0.0f;
  }
  const uint KC = mv_chunk();
  const bool vec = k % 8 == 0; // rows start 16-byte aligned
  for (uint k0 = 0; k0 < k; k0 += KC) {
    const uint kc = min(KC, k - k0);
    if (vec) {
      const uint q = kc / 4;
      for (uint i = tid; i < uint(mv_cols) * q; i += ntg) {
        const uint c = i / q, j = 4 * (i % q);
        float4 x = 0.0f;
        if (src[c] >= 0) {
          x = *(device const float4*)(a + ulong(src[c]) * k + k0 + j);
          if (norm) {
            ss[c] += dot(x, x);
            x *= *(device const float4*)(g + k0 + j);
          }
        }
        *(threadgroup float4*)(xs + c * KC + j) = x;
      }
    } else {
      for (uint i = tid; i < uint(mv_cols) * kc; i += ntg) {
        const uint c = i / kc, j = i % kc;
        float x = 0.0f;
        if (src[c] >= 0) {
          x = a[ulong(src[c]) * k + k0 + j];
          if (norm) {
            ss[c] += x * x;
            x *= g[k0 + j];
          }
        }
        xs[c * KC + j] = x;
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int r = 0; r < mv_rows && n0 + r < n; r++) {
      device const W* p0 = w0 + ulong(n0 + r) * k + k0;
      device const W* p1 = w1 + ulong(n0 + r) * k + k0;
      uint j = lane * 8;
      for (; vec && j + 8 <= kc; j += 256) {
        float wv[8], uv[8];
        load8(p0 + j, wv);
        if (DUAL) {
          load8(p1 + j, uv);
        }
        for (int c = 0; c < mv_cols; c++) {
          threadgroup const float4* xv = (threadgroup const float4*)(xs + c * KC + j);
          const float4 x0 = xv[0], x1 = xv[1];
          acc0.v[r][c] += dot(float4(wv[0], wv[1], wv[2], wv[3]), x0) + dot(float4(wv[4], wv[5], wv[6], wv[7]), x1);
          if (DUAL) {
            acc1.v[r][c] += dot(float4(uv[0], uv[1], uv[2], uv[3]), x0) + dot(float4(uv[4], uv[5], uv[6], uv[7]), x1);
          }
        }
      }
      if (!vec) { // unaligned rows: element by element
        for (uint e = lane; e < kc; e += 32) {
          const float wv = float(p0[e]);
          const float uv = DUAL ? float(p1[e]) : 0.0f;
          for (int c = 0; c < mv_cols; c++) {
            acc0.v[r][c] += wv * xs[c * KC + e];
            if (DUAL) {
              acc1.v[r][c] += uv * xs[c * KC + e];
            }
          }
        }
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
}

// mv_inv_rms reduces each row's sum of squares over the threadgroup and
// returns 1/rms (RMSNorm with eps) in inv[c]; buf is 32 floats of
// threadgroup memory.
inline void mv_inv_rms(thread float* ss, uint k, float eps, threadgroup float* buf, ushort lane, ushort sg, ushort nsg,
                       thread float* inv) {
  for (int c = 0; c < mv_cols; c++) {
    const float t = tg_sum(ss[c], buf, lane, sg, nsg);
    inv[c] = 1.0f / sqrt(t / float(k) + eps);
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
