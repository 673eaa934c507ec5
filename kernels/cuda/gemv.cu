// gemv.cu: out[m][n] = x[m][k] · W[n][k]ᵀ (+ bias) for the small m of decode
// steps: bandwidth bound, each weight row is streamed once per pass of M
// tokens and each warp owns R rows. Up to three matrices that share x (the
// q, k and v projections) run in one launch: blocks are split between them.

#define GEMV_WARPS 8

// gelu_tanh1 is GELU with the tanh approximation (GPT-2's gelu_new): the
// GEMV epilogue of GPT-2's c_fc, and gpt2.cu's gelu_tanh kernel.
__device__ __forceinline__ float gelu_tanh1(float v) {
    return 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}

// Each block has GEMV_WARPS warps; ks of them share a row group, each
// taking every ks-th slice of k (split-K inside the block, for matrices with
// too few rows to fill the GPU otherwise), so a block covers
// (GEMV_WARPS/ks)·R rows. With GU the block computes the same rows of W0
// (gate) and W1 (up) and writes silu(gate)·up to Y0 and up to Y1, each
// with its bias (bias, bias2) added first, as the unfused matmuls would. With SX
// x is in shared memory (the _norm kernels' normalised row); with RA
// non-null each output is also added into RA (the residual stream); with
// GELU each output (bias added) goes through gelu_tanh1.
template <int DT, int M, int R, bool VEC, bool GU, bool SX = false>
__device__ __forceinline__ void gemv_block(const void* __restrict__ W, const void* __restrict__ W2,
                                           const float* __restrict__ X, float* __restrict__ Y, float* __restrict__ Y2,
                                           const float* __restrict__ bias, int n, int k, int m, int b, int ks,
                                           float* __restrict__ RA = 0, bool GELU = false,
                                           const float* __restrict__ bias2 = 0) {
    __shared__ float red[GEMV_WARPS][M][R][GU ? 2 : 1];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int kp = warp % ks;
    const int row0 = (b * (GEMV_WARPS / ks) + warp / ks) * R;
    const bool active = row0 < n;
    if (ks == 1 && !active) return;
    // The residual the outputs are added into is read now, off the tail,
    // where it is a few registers (one pass of few rows).
    float ra[M][R];
    const bool raEarly = RA && M * R <= 4 && m <= M && active && kp == 0 && lane == 0;
    if (M * R <= 4 && raEarly) {
#pragma unroll
        for (int t = 0; t < M; t++)
#pragma unroll
            for (int r = 0; r < R; r++) ra[t][r] = t < m && row0 + r < n ? RA[(long)t * n + row0 + r] : 0.f;
    }
    for (int t0 = 0; t0 < m; t0 += M) {
        float acc[M][R], acc2[M][R];
#pragma unroll
        for (int t = 0; t < M; t++)
#pragma unroll
            for (int r = 0; r < R; r++) acc[t][r] = acc2[t][r] = 0.f;
        if (active) {
            if (VEC) {
                // Deep unrolling keeps more loads in flight where each pass
                // reads few tokens; larger M has enough work per load.
#pragma unroll(M <= 2 ? 4 : 1)
                for (int i = (kp * 32 + lane) * 8; i < k; i += 256 * ks) {
                    float w[R][8], w2[R][8];
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        if (row0 + r < n) {
                            load8<DT>(W, (long)(row0 + r) * k + i, w[r]);
                            if (GU) load8<DT>(W2, (long)(row0 + r) * k + i, w2[r]);
                        } else {
#pragma unroll
                            for (int j = 0; j < 8; j++) w[r][j] = w2[r][j] = 0.f;
                        }
                    }
#pragma unroll
                    for (int t = 0; t < M; t++) {
                        if (t0 + t < m) {
                            float4 a, c;
                            if (SX) {
                                const float4* xp = (const float4*)(X + i);
                                a = xp[0], c = xp[1];
                            } else {
                                const float4* xp = (const float4*)(X + (long)(t0 + t) * k + i);
                                a = __ldg(xp), c = __ldg(xp + 1);
                            }
#pragma unroll
                            for (int r = 0; r < R; r++) {
                                acc[t][r] += dot8(w[r], a, c);
                                if (GU) acc2[t][r] += dot8(w2[r], a, c);
                            }
                        }
                    }
                }
            } else {
                for (int i = kp * 32 + lane; i < k; i += 32 * ks) {
                    float w[R], w2[R];
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        w[r] = row0 + r < n ? load1<DT>(W, (long)(row0 + r) * k + i) : 0.f;
                        w2[r] = GU && row0 + r < n ? load1<DT>(W2, (long)(row0 + r) * k + i) : 0.f;
                    }
#pragma unroll
                    for (int t = 0; t < M; t++) {
                        if (t0 + t < m) {
                            float xv = X[(long)(t0 + t) * k + i];
#pragma unroll
                            for (int r = 0; r < R; r++) {
                                acc[t][r] += w[r] * xv;
                                if (GU) acc2[t][r] += w2[r] * xv;
                            }
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int t = 0; t < M; t++)
#pragma unroll
            for (int r = 0; r < R; r++) {
                acc[t][r] = warp_sum(acc[t][r]);
                if (GU) acc2[t][r] = warp_sum(acc2[t][r]);
            }
        if (ks > 1) {
            if (lane == 0) {
#pragma unroll
                for (int t = 0; t < M; t++)
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        red[warp][t][r][0] = acc[t][r];
                        if (GU) red[warp][t][r][GU ? 1 : 0] = acc2[t][r];
                    }
            }
            __syncthreads();
            if (kp == 0 && lane == 0) {
#pragma unroll
                for (int t = 0; t < M; t++)
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        float s = 0.f, s2 = 0.f;
                        for (int j = 0; j < ks; j++) {
                            s += red[warp + j][t][r][0];
                            if (GU) s2 += red[warp + j][t][r][GU ? 1 : 0];
                        }
                        acc[t][r] = s;
                        acc2[t][r] = s2;
                    }
            }
            __syncthreads();
        }
        if (active && kp == 0 && lane == 0) {
#pragma unroll
            for (int t = 0; t < M; t++)
#pragma unroll
                for (int r = 0; r < R; r++)
                    if (t0 + t < m && row0 + r < n) {
                        long o = (long)(t0 + t) * n + row0 + r;
                        if (GU) {
                            const float gv = acc[t][r] + (bias ? bias[row0 + r] : 0.f);
                            const float uv = acc2[t][r] + (bias2 ? bias2[row0 + r] : 0.f);
                            Y[o] = silu(gv) * uv;
                            Y2[o] = uv;
                        } else {
                            float y = acc[t][r] + (bias ? bias[row0 + r] : 0.f);
                            if (GELU) y = gelu_tanh1(y);
                            Y[o] = y;
                            if (M * R <= 4 && raEarly) {
                                RA[o] = ra[t][r] + y;
                            } else if (RA) {
                                RA[o] += y;
                            }
                        }
                    }
        }
    }
}

// gemv3 splits the grid between up to three matrices that read the same x;
// RA, the residual add, and GELU apply to the first (the host gives them
// alone).
template <int DT, int M, int R, bool VEC, bool SX>
__device__ __forceinline__ void gemv3(const float* X, int k, int m,
                                      const void* W0, float* Y0, const float* B0, int n0,
                                      const void* W1, float* Y1, const float* B1, int n1,
                                      const void* W2, float* Y2, const float* B2, int n2, int ks,
                                      float* RA, bool GELU) {
    const int rows = (GEMV_WARPS / ks) * R;
    int b = blockIdx.x;
    int nb0 = (n0 + rows - 1) / rows, nb1 = (n1 + rows - 1) / rows;
    if (b < nb0) {
        gemv_block<DT, M, R, VEC, false, SX>(W0, 0, X, Y0, 0, B0, n0, k, m, b, ks, RA, GELU);
    } else if ((b -= nb0) < nb1) {
        gemv_block<DT, M, R, VEC, false, SX>(W1, 0, X, Y1, 0, B1, n1, k, m, b, ks);
    } else {
        gemv_block<DT, M, R, VEC, false, SX>(W2, 0, X, Y2, 0, B2, n2, k, m, b - nb1, ks);
    }
}

// GEMV_NORM_MAXK bounds the hidden size of the _norm kernels, whose block
// keeps the normalised row in shared memory (24 KB: 8 blocks still fit an
// SM).
#define GEMV_NORM_MAXK 6144

// gemv_layer_norm is gemv_norm's LayerNorm (GPT-2): the mean, then the
// variance about it, as gpt2.cu's layer_norm computes them, then weight and
// bias nb.
__device__ __forceinline__ void gemv_layer_norm(const float* __restrict__ x, const float* __restrict__ w,
                                                const float* __restrict__ nb, float* __restrict__ h, int k, float eps,
                                                float* xn) {
    __shared__ float red[32];
    float s = 0.f;
    for (int i = threadIdx.x * 4; i < k; i += blockDim.x * 4) {
        float4 v = __ldg((const float4*)(x + i));
        *(float4*)(xn + i) = v;
        s += v.x + v.y + v.z + v.w;
    }
    const float mean = block_sum(s, red) / k;
    float ss = 0.f;
    for (int i = threadIdx.x * 4; i < k; i += blockDim.x * 4) {
        float4 v = *(float4*)(xn + i);
        float a = v.x - mean, b = v.y - mean, c = v.z - mean, d = v.w - mean;
        ss += a * a + b * b + c * c + d * d;
    }
    const float inv = (float)(1.0 / sqrt((double)block_sum(ss, red) / k + (double)eps));
    for (int i = threadIdx.x * 4; i < k; i += blockDim.x * 4) {
        float4 v = *(float4*)(xn + i), g = __ldg((const float4*)(w + i)), bb = __ldg((const float4*)(nb + i));
        v.x = (v.x - mean) * inv * g.x + bb.x;
        v.y = (v.y - mean) * inv * g.y + bb.y;
        v.z = (v.z - mean) * inv * g.z + bb.z;
        v.w = (v.w - mean) * inv * g.w + bb.w;
        *(float4*)(xn + i) = v;
        if (blockIdx.x == 0) *(float4*)(h + i) = v;
    }
    __syncthreads();
}

// gemv_norm folds the RMSNorm before a single-token GEMV into it: every
// block normalises the row x[k] itself into xn (shared; 8 KB from L2 for a
// hidden size of 2048, less than a kernel boundary costs), and block 0 also
// stores it to h, for whatever reads it later. With nb non-null it folds
// GPT-2's LayerNorm instead, nb its bias.
__device__ __forceinline__ void gemv_norm(const float* __restrict__ x, const float* __restrict__ w,
                                          const float* __restrict__ nb, float* __restrict__ h, int k, float eps,
                                          float* xn) {
    if (nb) {
        gemv_layer_norm(x, w, nb, h, k, eps, xn);
        return;
    }
    __shared__ float red[32];
    float ss = 0.f;
    for (int i = threadIdx.x * 4; i < k; i += blockDim.x * 4) {
        float4 v = __ldg((const float4*)(x + i));
        *(float4*)(xn + i) = v;
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    ss = block_sum(ss, red);
    const float inv = (float)(1.0 / sqrt((double)ss / k + (double)eps));
    for (int i = threadIdx.x * 4; i < k; i += blockDim.x * 4) {
        float4 v = norm4(*(float4*)(xn + i), __ldg((const float4*)(w + i)), inv);
        *(float4*)(xn + i) = v;
        if (blockIdx.x == 0) *(float4*)(h + i) = v;
    }
    __syncthreads();
}

// gemv3_prefetch (with flag bit 0) has warp 0 of the block prefetch the
// block's weight rows into L2 before pdl_wait: they do not depend on the
// kernel before, so their fetch overlaps it.
template <int DT, int R>
__device__ __forceinline__ void gemv3_prefetch(int k, const void* W0, int n0, const void* W1, int n1, const void* W2,
                                               int n2, int ks, int flags) {
    if (!(flags & 1) || threadIdx.x >= 32) return;
    const int rows = (GEMV_WARPS / ks) * R, es = DT == DT_F32 ? 4 : 2;
    int b = blockIdx.x;
    int nb0 = (n0 + rows - 1) / rows, nb1 = (n1 + rows - 1) / rows;
    if (b < nb0) {
        prefetch_rows(W0, b * rows, rows, n0, k, es);
    } else if ((b -= nb0) < nb1) {
        prefetch_rows(W1, b * rows, rows, n1, k, es);
    } else {
        prefetch_rows(W2, (b - nb1) * rows, rows, n2, k, es);
    }
}

// RA: add the (single) output into this residual; NX, NW, NH, eps (the
// _norm kernels): x is RMSNorm(NX)·NW, also stored to NH, or with NB set
// LayerNorm(NX)·NW + NB; flags bit 1: GELU on the (single) output.
#define GEMV_PARAMS                                                                    \
    const float *X, int k, int m, const void *W0, float *Y0, const float *B0, int n0,   \
        const void *W1, float *Y1, const float *B1, int n1, const void *W2, float *Y2,   \
        const float *B2, int n2, int ks, int flags, float *RA, const float *NX,          \
        const float *NW, float *NH, float eps, const float *NB
#define GEMV_ARGS X, k, m, W0, Y0, B0, n0, W1, Y1, B1, n1, W2, Y2, B2, n2, ks, RA, (flags & 2) != 0

#define GEMV_KERNEL(NAME, DT, M, R, VEC)                                            \
    MTLB_KERNEL void __launch_bounds__(GEMV_WARPS * 32) NAME(GEMV_PARAMS) { \
        gemv3_prefetch<DT, R>(k, W0, n0, W1, n1, W2, n2, ks, flags);                  \
        pdl_wait();                                                                   \
        gemv3<DT, M, R, VEC, false>(GEMV_ARGS);                                       \
    }
#define GEMV_NORM_KERNEL(NAME, DT, R)                                                                 \
    MTLB_KERNEL void __launch_bounds__(GEMV_WARPS * 32) NAME(GEMV_PARAMS) {                   \
        __shared__ __align__(16) float xn[GEMV_NORM_MAXK];                                              \
        gemv3_prefetch<DT, R>(k, W0, n0, W1, n1, W2, n2, ks, flags);                                    \
        pdl_wait();                                                                                     \
        gemv_norm(NX, NW, NB, NH, k, eps, xn);                                                          \
        gemv3<DT, 1, R, true, true>(xn, k, m, W0, Y0, B0, n0, W1, Y1, B1, n1, W2, Y2, B2, n2, ks, RA,   \
                                    (flags & 2) != 0);                                                  \
    }

// The gate/up pair of a dense MLP with the SwiGLU activation fused in: the
// same parameters as gemv (segments 0 and 1 are gate and up, of equal n,
// each with its bias or none).
#define GEMV_GU_PREFETCH(DT)                                              \
    if ((flags & 1) && threadIdx.x < 32) {                              \
        const int rows = GEMV_WARPS / ks, es = DT == DT_F32 ? 4 : 2;    \
        prefetch_rows(W0, blockIdx.x * rows, rows, n0, k, es);          \
        prefetch_rows(W1, blockIdx.x * rows, rows, n0, k, es);          \
    }
#define GEMV_GU_KERNEL(NAME, DT, M, VEC)                                                \
    MTLB_KERNEL void __launch_bounds__(GEMV_WARPS * 32) NAME(GEMV_PARAMS) {     \
        GEMV_GU_PREFETCH(DT)                                                              \
        pdl_wait();                                                                       \
        gemv_block<DT, M, 1, VEC, true>(W0, W1, X, Y0, Y1, B0, n0, k, m, blockIdx.x, ks, 0, false, B1);   \
    }
#define GEMV_GU_NORM_KERNEL(NAME, DT)                                                            \
    MTLB_KERNEL void __launch_bounds__(GEMV_WARPS * 32) NAME(GEMV_PARAMS) {              \
        __shared__ __align__(16) float xn[GEMV_NORM_MAXK];                                         \
        GEMV_GU_PREFETCH(DT)                                                                       \
        pdl_wait();                                                                                \
        gemv_norm(NX, NW, NB, NH, k, eps, xn);                                                     \
        gemv_block<DT, 1, 1, true, true, true>(W0, W1, xn, Y0, Y1, B0, n0, k, m, blockIdx.x, ks, 0, false, B1);    \
    }

// Every dtype has R = 1 (with split-K for short matrices); bf16, the
// dtype of real models, also has R = 2 and 4 for tall ones.
#define GEMV_DT(SUF, DT)                                     \
    GEMV_KERNEL(gemv_##SUF##_m1_r1, DT, 1, 1, true)          \
    GEMV_KERNEL(gemv_##SUF##_m2_r1, DT, 2, 1, true)          \
    GEMV_KERNEL(gemv_##SUF##_m4_r1, DT, 4, 1, true)          \
    GEMV_KERNEL(gemv_##SUF##_m8_r1, DT, 8, 1, true)          \
    GEMV_KERNEL(gemv_##SUF##_m16_r1, DT, 16, 1, true)        \
    GEMV_KERNEL(gemv_##SUF##_scalar, DT, 1, 1, false)        \
    GEMV_GU_KERNEL(gemv_gu_##SUF##_m1, DT, 1, true)          \
    GEMV_GU_KERNEL(gemv_gu_##SUF##_m2, DT, 2, true)          \
    GEMV_GU_KERNEL(gemv_gu_##SUF##_m4, DT, 4, true)          \
    GEMV_GU_KERNEL(gemv_gu_##SUF##_m8, DT, 8, true)          \
    GEMV_GU_KERNEL(gemv_gu_##SUF##_m16, DT, 16, true)        \
    GEMV_GU_KERNEL(gemv_gu_##SUF##_scalar, DT, 1, false)

// The single-token kernels also come with the RMSNorm before them folded in.
#define GEMV_NORM_DT(SUF, DT)                     \
    GEMV_NORM_KERNEL(gemv_##SUF##_m1_r1_norm, DT, 1) \
    GEMV_GU_NORM_KERNEL(gemv_gu_##SUF##_m1_norm, DT)

GEMV_DT(f32, DT_F32)
GEMV_DT(f16, DT_F16)
GEMV_DT(bf16, DT_BF16)
GEMV_NORM_DT(f32, DT_F32)
GEMV_NORM_DT(f16, DT_F16)
GEMV_NORM_DT(bf16, DT_BF16)
// No R = 4 kernel takes the norm in: those are the tallest matrices (LM
// heads), where TinyLlama's step was 10 µs slower with it (H100).
GEMV_NORM_KERNEL(gemv_bf16_m1_r2_norm, DT_BF16, 2)
GEMV_KERNEL(gemv_bf16_m1_r2, DT_BF16, 1, 2, true)
GEMV_KERNEL(gemv_bf16_m1_r4, DT_BF16, 1, 4, true)
GEMV_KERNEL(gemv_bf16_m2_r2, DT_BF16, 2, 2, true)
GEMV_KERNEL(gemv_bf16_m2_r4, DT_BF16, 2, 4, true)
GEMV_KERNEL(gemv_bf16_m4_r2, DT_BF16, 4, 2, true)
GEMV_KERNEL(gemv_bf16_m4_r4, DT_BF16, 4, 4, true)
GEMV_KERNEL(gemv_bf16_m8_r2, DT_BF16, 8, 2, true)
GEMV_KERNEL(gemv_bf16_m16_r2, DT_BF16, 16, 2, true)

// to_half rounds f32 activations to bf16 or f16 for cuBLAS (hi), and with
// lo non-null also keeps the rest (hi + lo = x to about 16 bits): W·hi +
// W·lo keeps the f32 activations' precision one rounding would lose.
MTLB_KERNEL void to_half(const float* __restrict__ x, u16* __restrict__ hi, u16* __restrict__ lo, long n, int dt) {
    pdl_wait();
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        float v = x[i];
        if (dt == DT_BF16) {
            u16 h = f32_to_bf16(v);
            hi[i] = h;
            if (lo) lo[i] = f32_to_bf16(v - __uint_as_float(((u32)h) << 16));
        } else {
            u16 h = f32_to_f16(v);
            hi[i] = h;
            if (lo) lo[i] = f32_to_f16(v - f16_to_f32(h));
        }
    }
}

// add_bias adds b[n] to every row of y[rows][n].
MTLB_KERNEL void add_bias(float* __restrict__ y, const float* __restrict__ b, long total, int n) {
    pdl_wait();
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < total; i += stride) y[i] += b[i % n];
}
