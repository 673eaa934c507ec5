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

// moe_sum_rows is the tail of the decode step's MoE sum kernels
// (moe_mv_sum, qmoe_mv_sum): simdgroup j's sums of its R rows of row group
// gi (acc[r][0], R = mv_rows) go into xs (the kernel is done with its
// chunks), then each row group's first simdgroup adds its rows' K sums in
// top-k order under the routing weights, a lane a row, into out (and the
// residual with moe_residual); the token's first threadgroup clears its
// experts' flags, as moe_combine does, for the ids in range. j >= K: a
// simdgroup that only staged.
inline void moe_sum_rows(thread const float (*acc)[MV_MAX_COLS], threadgroup float* xs, uint K, uint G,
                         uint j, uint gi, uint t, uint n0, uint n, device const int* ids,
                         device const float* weights, device atomic_uint* flags, uint experts, device float* out,
                         device float* residual, uint tgx, ushort tid, ushort lane) {
  const uint R = uint(mv_rows), RG = G * R, p0 = t * K;
  for (uint r = 0; r < R; r++) {
    const float y = simd_sum(acc[r][0]);
    if (j < K && lane == 0) {
      xs[j * RG + gi * R + r] = y;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (j == 0 && lane < R && n0 + lane < n) {
    float s = 0.0f;
    for (uint jj = 0; jj < K; jj++) {
      s += weights[p0 + jj] * xs[jj * RG + gi * R + lane];
    }
    const ulong o = ulong(t) * n + n0 + lane;
    out[o] = s;
    if (moe_residual) {
      residual[o] += s;
    }
  }
  if (tgx == 0 && tid < K) {
    const int id = ids[p0 + tid];
    if (id >= 0 && uint(id) < experts) {
      atomic_store_explicit(&flags[uint(id)], 0u, memory_order_relaxed);
    }
  }
}

// mv_rows_dot adds, for weight rows n0.. of w0 (mv_rows of them, those
// < n; rows of k values) and of w1 when DUAL, their dot products over
// chunk [k0, k0+kc) with cols staged activation rows (xs, KC floats apart)
// into acc0 and acc1: 16-byte weight loads where rows start 16-byte
// aligned (vec), element by element where not.
template <typename W, bool DUAL>
inline void mv_rows_dot(device const W* w0, device const W* w1, uint n, uint k, uint n0, uint k0, uint kc, uint KC,
                        bool vec, threadgroup const float* xs, ushort lane, int cols, thread MVAcc& acc0,
                        thread MVAcc& acc1) {
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
      for (int c = 0; c < cols; c++) {
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
        for (int c = 0; c < cols; c++) {
          acc0.v[r][c] += wv * xs[c * KC + e];
          if (DUAL) {
            acc1.v[r][c] += uv * xs[c * KC + e];
          }
        }
      }
    }
  }
}

// mv_tile adds the dot products of weight rows n0.. (mv_rows of them,
// those < n; a simdgroup with n0 >= n computes nothing but stages and
// waits with the others) with the activation rows src[c] into acc0, and
// with w1's rows into acc1 when DUAL. Each activation goes through the
// folded norm nm (mtlbench.h's MVNorm, when on) as it is staged. xs is
// MV_STAGE_FLOATS floats of threadgroup memory; every thread of the
// threadgroup must call it.
template <typename W, bool DUAL>
inline void mv_tile(device const float* a, const thread int* src, device const W* w0, device const W* w1, uint n,
                    uint k, uint n0, threadgroup float* xs, ushort tid, ushort ntg, ushort lane, thread MVNorm& nm,
                    thread MVAcc& acc0, thread MVAcc& acc1) {
  for (int r = 0; r < mv_rows; r++) {
    for (int c = 0; c < mv_cols; c++) {
      acc0.v[r][c] = 0.0f;
      acc1.v[r][c] = 0.0f;
    }
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
          if (nm.on) {
            x = mv_norm4(nm, int(c), k0 + j, x);
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
          if (nm.on) {
            x = mv_norm1(nm, int(c), k0 + j, x);
          }
        }
        xs[c * KC + j] = x;
      }
    }
    mv_ln_staged(nm, xs, src, k, KC, vec, tid, ntg, lane);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    mv_rows_dot<W, DUAL>(w0, w1, n, k, n0, k0, kc, KC, vec, xs, lane, mv_cols, acc0, acc1);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
}

// ---------------------------------------------------------------------------
// mm: simdgroup_matrix 8x8 tiles, for many rows (prefill; MoE tiles of one
// expert's rows). A threadgroup of mm_sgm x mm_sgn simdgroups computes an
// mm_bm x mm_bn tile of the output; each simdgroup owns TM x TN 8x8
// accumulators. Each k step stages mm_bk columns of the activation rows
// (f32) and of the weight rows (kept in their own dtype: mtlbench.h's stage_t) in
// threadgroup memory, every thread loading 16 bytes at a time; rows are
// padded by 16 bytes so the simdgroup loads of one k column do not fall in
// one bank. With mm_stages == 2 the staging is double buffered: the next
// step's loads are issued into registers before this step's multiplies and
// stored into the other buffer after them, one barrier per k step
// (docs/metal-kernels.md, "The tiled GEMM"). The host sizes threadgroup(0)
// as mm_smem_bytes.
// ---------------------------------------------------------------------------

#define MM_PAD_A 4  // floats after each staged activation row (16 bytes)
#define MM_MAX_VEC 8 // 16-byte vectors a thread stages per matrix per k step

struct MMAcc {
  simdgroup_float8x8 t[MM_MAX_TM][MM_MAX_TN];
};

// The staged rows' strides, in elements: BK plus 16 bytes.
inline int mm_lda() { return mm_bk + MM_PAD_A; }
template <typename S>
inline int mm_ldb() { return mm_bk + 16 / int(sizeof(S)); }

// mm_stage_bytes is one stage's threadgroup memory: the activation rows and
// mats weight matrices (bridge/metal and kernels/ops compute the same).
template <typename S>
inline int mm_stage_bytes(int mats) { return 4 * mm_bm * mm_lda() + mats * mm_bn * mm_ldb<S>() * int(sizeof(S)); }

// MMRegs holds one k step's 16-byte vectors of a thread on their way from
// device to threadgroup memory.
struct MMRegs {
  float4 a[MM_MAX_VEC];
  uint4 w0[MM_MAX_VEC];
  uint4 w1[MM_MAX_VEC];
};

// mm_fetch loads k step k0's vectors of this thread into r: activation row
// src[r] (zeros for -1), weight rows n0.. (zeros past n). Rows hold k % 8 ==
// 0 elements, so a vector is wholly in or out of k.
template <typename W, bool DUAL>
inline void mm_fetch(device const float* a, threadgroup const int* src, device const W* w0, device const W* w1, uint n,
                     uint k, uint n0, uint k0, ushort tid, thread MMRegs& r) {
  const int NT = 32 * mm_sgm * mm_sgn;
  const int CA = mm_bk / 4, NA = mm_bm * CA;
  const int VW = 16 / int(sizeof(W)), CB = mm_bk / VW, NB = mm_bn * CB;
  for (int v = 0; v < (NA + NT - 1) / NT; v++) {
    const int i = int(tid) + v * NT;
    float4 x = 0.0f;
    if (i < NA) {
      const int s = src[i / CA];
      const uint gk = k0 + uint(i % CA) * 4;
      if (s >= 0 && gk < k) {
        x = *(device const float4*)(a + ulong(s) * k + gk);
      }
    }
    r.a[v] = x;
  }
  for (int v = 0; v < (NB + NT - 1) / NT; v++) {
    const int i = int(tid) + v * NT;
    uint4 x0 = 0, x1 = 0;
    if (i < NB) {
      const uint gn = n0 + uint(i / CB), gk = k0 + uint(i % CB) * uint(VW);
      if (gn < n && gk < k) {
        x0 = *(device const uint4*)(w0 + ulong(gn) * k + gk);
        if (DUAL) {
          x1 = *(device const uint4*)(w1 + ulong(gn) * k + gk);
        }
      }
    }
    r.w0[v] = x0;
    r.w1[v] = x1;
  }
}

// mm_put stores the vectors mm_fetch loaded into one stage.
template <typename W, bool DUAL>
inline void mm_put(thread const MMRegs& r, threadgroup float* As, threadgroup typename stage_t<W>::type* Bs,
                   threadgroup typename stage_t<W>::type* Us, ushort tid) {
  typedef typename stage_t<W>::type S;
  const int NT = 32 * mm_sgm * mm_sgn;
  const int CA = mm_bk / 4, NA = mm_bm * CA;
  const int VW = 16 / int(sizeof(W)), CB = mm_bk / VW, NB = mm_bn * CB;
  const int LDA = mm_lda(), LDB = mm_ldb<S>();
  for (int v = 0; v < (NA + NT - 1) / NT; v++) {
    const int i = int(tid) + v * NT;
    if (i < NA) {
      *(threadgroup float4*)(As + (i / CA) * LDA + (i % CA) * 4) = r.a[v];
    }
  }
  for (int v = 0; v < (NB + NT - 1) / NT; v++) {
    const int i = int(tid) + v * NT;
    if (i < NB) {
      const int o = (i / CB) * LDB + (i % CB) * VW;
      put16(Bs + o, r.w0[v], W());
      if (DUAL) {
        put16(Us + o, r.w1[v], W());
      }
    }
  }
}

// mm_stage_scalar stages k step k0 element by element, for rows whose k is
// not a multiple of 8 (not 16-byte aligned).
template <typename W, bool DUAL>
inline void mm_stage_scalar(device const float* a, threadgroup const int* src, device const W* w0, device const W* w1,
                            uint n, uint k, uint n0, uint k0, threadgroup float* As,
                            threadgroup typename stage_t<W>::type* Bs, threadgroup typename stage_t<W>::type* Us,
                            ushort tid, ushort ntg) {
  typedef typename stage_t<W>::type S;
  const int BK = mm_bk, LDA = mm_lda(), LDB = mm_ldb<S>();
  for (int e = tid; e < mm_bm * BK; e += ntg) {
    const int s = src[e / BK];
    const uint gk = k0 + uint(e % BK);
    As[(e / BK) * LDA + e % BK] = (s >= 0 && gk < k) ? a[ulong(s) * k + gk] : 0.0f;
  }
  for (int e = tid; e < mm_bn * BK; e += ntg) {
    const uint gn = n0 + uint(e / BK), gk = k0 + uint(e % BK);
    const bool in = gn < n && gk < k;
    const int o = (e / BK) * LDB + e % BK;
    Bs[o] = in ? S(float(w0[ulong(gn) * k + gk])) : S(0.0f);
    if (DUAL) {
      Us[o] = in ? S(float(w1[ulong(gn) * k + gk])) : S(0.0f);
    }
  }
}

// mm_accumulate computes the tile's products over all of k into acc0 (w0)
// and, when DUAL, acc1 (w1: gate and up share the activation tile). smem is
// threadgroup(0), mm_stages stages of mm_stage_bytes(DUAL ? 2 : 1) bytes;
// every thread of the threadgroup must call it, after src is written and a
// barrier.
template <typename W, bool DUAL>
inline void mm_accumulate(device const float* a, threadgroup const int* src, device const W* w0, device const W* w1,
                          uint n, uint k, uint n0, threadgroup float* smem, ushort tid, ushort ntg, ushort sg,
                          thread MMAcc& acc0, thread MMAcc& acc1) {
  typedef typename stage_t<W>::type S;
  const int BM = mm_bm, BN = mm_bn, BK = mm_bk;
  const int TM = BM / (8 * mm_sgm), TN = BN / (8 * mm_sgn);
  const int LDA = mm_lda(), LDB = mm_ldb<S>();
  const int mats = DUAL ? 2 : 1;
  const int sgm = sg / mm_sgn, sgn = sg % mm_sgn;
  // Stage s: As[s] = smem + s*BM*LDA floats; weights after every stage's
  // activations, mats matrices per stage.
  threadgroup float* A0 = smem;
  threadgroup S* W0 = (threadgroup S*)(smem + mm_stages * BM * LDA);
  for (int i = 0; i < TM; i++) {
    for (int j = 0; j < TN; j++) {
      acc0.t[i][j] = make_filled_simdgroup_matrix<float, 8>(0.0f);
      acc1.t[i][j] = make_filled_simdgroup_matrix<float, 8>(0.0f);
    }
  }
  const bool vec = k % 8 == 0;
  const uint steps = (k + uint(BK) - 1) / uint(BK);
  MMRegs r;
  if (mm_stages == 2) { // prologue: step 0 into stage 0
    if (vec) {
      mm_fetch<W, DUAL>(a, src, w0, w1, n, k, n0, 0, tid, r);
      mm_put<W, DUAL>(r, A0, W0, W0 + BN * LDB, tid);
    } else {
      mm_stage_scalar<W, DUAL>(a, src, w0, w1, n, k, n0, 0, A0, W0, W0 + BN * LDB, tid, ntg);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  for (uint s = 0; s < steps; s++) {
    const int cur = mm_stages == 2 ? int(s & 1) : 0;
    threadgroup float* As = A0 + cur * BM * LDA;
    threadgroup S* Bs = W0 + cur * mats * BN * LDB;
    threadgroup S* Us = Bs + BN * LDB;
    const bool next = mm_stages == 2 && s + 1 < steps;
    if (mm_stages == 1) {
      if (vec) {
        mm_fetch<W, DUAL>(a, src, w0, w1, n, k, n0, s * uint(BK), tid, r);
        mm_put<W, DUAL>(r, As, Bs, Us, tid);
      } else {
        mm_stage_scalar<W, DUAL>(a, src, w0, w1, n, k, n0, s * uint(BK), As, Bs, Us, tid, ntg);
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
    } else if (next && vec) {
      mm_fetch<W, DUAL>(a, src, w0, w1, n, k, n0, (s + 1) * uint(BK), tid, r); // in flight during the multiplies
    }
    for (int kk = 0; kk < BK; kk += 8) {
      simdgroup_float8x8 af[MM_MAX_TM];
      simdgroup_matrix<S, 8, 8> bf[MM_MAX_TN];
      for (int i = 0; i < TM; i++) {
        simdgroup_load(af[i], As + (sgm * TM * 8 + i * 8) * LDA + kk, LDA);
      }
      for (int j = 0; j < TN; j++) {
        simdgroup_load(bf[j], Bs + (sgn * TN * 8 + j * 8) * LDB + kk, LDB, ulong2(0, 0), true);
      }
      for (int i = 0; i < TM; i++) {
        for (int j = 0; j < TN; j++) {
          simdgroup_multiply_accumulate(acc0.t[i][j], af[i], bf[j], acc0.t[i][j]);
        }
      }
      if (DUAL) {
        for (int j = 0; j < TN; j++) {
          simdgroup_load(bf[j], Us + (sgn * TN * 8 + j * 8) * LDB + kk, LDB, ulong2(0, 0), true);
        }
        for (int i = 0; i < TM; i++) {
          for (int j = 0; j < TN; j++) {
            simdgroup_multiply_accumulate(acc1.t[i][j], af[i], bf[j], acc1.t[i][j]);
          }
        }
      }
    }
    if (next) { // the other stage: last read in step s-1, before its barrier
      threadgroup float* An = A0 + (1 - cur) * BM * LDA;
      threadgroup S* Bn = W0 + (1 - cur) * mats * BN * LDB;
      if (vec) {
        mm_put<W, DUAL>(r, An, Bn, Bn + BN * LDB, tid);
      } else {
        mm_stage_scalar<W, DUAL>(a, src, w0, w1, n, k, n0, (s + 1) * uint(BK), An, Bn, Bn + BN * LDB, tid, ntg);
      }
    }
    if (mm_stages == 1 || next) {
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
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

#endif // MTLBENCH_GEMM_H
