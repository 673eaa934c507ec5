// gemv_mma.cu: out[m][n] = half(x)[m][k] · W[n][k]ᵀ (+ bias) for steps of
// up to 16 tokens (batched decode) over bf16 or f16 weights, on tensor cores:
// the alternative to cuBLAS for those steps that Options.GemvMMA selects
// (docs/cuda.md, "Where batch-16 bf16 decode time goes", has its figures:
// slower than cuBLAS as it stands). The activations are rounded to the
// weights' type as they are staged, as the cuBLAS path's to_half does;
// products accumulate in f32.
//
// One mma.m16n8k16 does 16 rows × 8 tokens × 16 columns, where the CUDA
// cores' f32 FMAs would cost as much as the weight stream. A block owns 128
// weight rows (a 16-row tile a warp) and one of ksb slices of k. Its slice
// of x is staged once, in chunks of 512 columns, as half pairs in shared
// memory, so x costs L2 a sixteenth of the weights' bytes. With ksb > 1 each
// block writes its partial sums and the last block of a row group to finish
// adds the ksb parts in slice order (a fixed order: the same result at every
// replay).
//
// The weights are the A operand, read straight from global memory, 16 bytes
// a lane: lane quad c reads columns 8c..8c+7 of each 32-column step, so the
// mma's k order is a permutation of the step's columns, and x is staged in
// the same permutation (mma 0 takes columns 8c..8c+3 as k 2c, 2c+1, 2c+8,
// 2c+9; mma 1 takes 8c+4..8c+7). A warp's next four steps of weights are in
// flight while it multiplies the current four; the first four load before
// the wait on the kernel before, as they do not depend on it.
//
// Up to three matrices over the same x (q, k and v) share one launch, blocks
// split between them as in gemv.cu.

#define GMMA_WARPS 8
#define GMMA_ROWS (GMMA_WARPS * 16)  // weight rows a block
#define GMMA_STEP 32                 // columns a warp takes per step
#define GMMA_U 4                     // steps whose weights load together
#define GMMA_CHUNK 16                // steps of x a block stages at a time (512 columns)
#define GMMA_TOKENS 16

// gmma_pack rounds two f32 activations to the weights' half type as one pair
// (the lower index in the lower half).
template <int DT>
__device__ __forceinline__ u32 gmma_pack(float lo, float hi) {
    if (DT == DT_BF16) return pack_bf16(lo, hi);
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// gmma_load_w loads the GMMA_U steps from s0 (those before end) of a warp's
// rows g and g+8.
__device__ __forceinline__ void gmma_load_w(uint4 (*w)[2], const u16* wa, const u16* wb, int s0, int end) {
#pragma unroll
    for (int u = 0; u < GMMA_U; u++) {
        const int s = s0 + u;
        if (s < end) {
            w[u][0] = ld_stream(wa + s * GMMA_STEP);
            w[u][1] = ld_stream(wb + s * GMMA_STEP);
        } else {
            w[u][0] = w[u][1] = make_uint4(0, 0, 0, 0);
        }
    }
}

// gmma_block is one block's work on one matrix: row group rg (GMMA_ROWS
// rows), slice kb of ksb of k (a multiple of GMMA_STEP). P holds the ksb
// partial sums ([ksb][GMMA_TOKENS][n]) and counter counts the row group's
// finished blocks, left zero by the last.
template <int DT>
__device__ __forceinline__ void gmma_block(const float* __restrict__ X, const u16* __restrict__ W,
                                           float* __restrict__ Y, const float* __restrict__ bias, int n, int k,
                                           int m, int rg, int kb, int ksb, float* __restrict__ P,
                                           int* __restrict__ counter) {
    __shared__ __align__(16) u32 xs[GMMA_CHUNK][GMMA_TOKENS][GMMA_STEP / 2];
    __shared__ int s_last;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const int row0 = rg * GMMA_ROWS + warp * 16, steps = k / GMMA_STEP;
    const int per = (steps + ksb - 1) / ksb, sBeg = kb * per, sEnd = min(steps, sBeg + per);
    // Rows past n read row n-1 (their sums are never stored); a tile wholly
    // past n computes nothing but still stages x and meets the barriers.
    const bool live = row0 < n;
    const u16* wa = W + (long)min(row0 + g, n - 1) * k + 8 * c;
    const u16* wb = W + (long)min(row0 + g + 8, n - 1) * k + 8 * c;
    float acc[2][4];
#pragma unroll
    for (int j = 0; j < 2; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    uint4 wc[GMMA_U][2], wn[GMMA_U][2];
    if (live) gmma_load_w(wc, wa, wb, sBeg, sEnd);
    pdl_wait();
    for (int c0 = sBeg; c0 < sEnd; c0 += GMMA_CHUNK) {
        const int cEnd = min(sEnd, c0 + GMMA_CHUNK);
        if (c0 != sBeg) __syncthreads();  // the last chunk is read
        // Stage x[0..16)[steps c0..cEnd) as half pairs, eight columns a
        // thread at a time; tokens past m are zeros.
        const int groups = (cEnd - c0) * 4;  // 8-column groups a token
        for (int e = threadIdx.x; e < GMMA_TOKENS * groups; e += blockDim.x) {
            const int t = e / groups, q = e - t * groups;
            uint4 v = make_uint4(0, 0, 0, 0);
            if (t < m) {
                const float4* xp = (const float4*)(X + (long)t * k + (long)c0 * GMMA_STEP + 8 * q);
                const float4 a = __ldg(xp), b = __ldg(xp + 1);
                v = make_uint4(gmma_pack<DT>(a.x, a.y), gmma_pack<DT>(a.z, a.w), gmma_pack<DT>(b.x, b.y),
                               gmma_pack<DT>(b.z, b.w));
            }
            *(uint4*)&xs[q >> 2][t][4 * (q & 3)] = v;
        }
        __syncthreads();
        for (int s0 = c0; s0 < cEnd; s0 += GMMA_U) {
            if (live && s0 + GMMA_U < sEnd) gmma_load_w(wn, wa, wb, s0 + GMMA_U, sEnd);
            if (live) {
#pragma unroll
                for (int u = 0; u < GMMA_U; u++) {
                    if (s0 + u < cEnd) {
                        const u32 a0[4] = {wc[u][0].x, wc[u][1].x, wc[u][0].y, wc[u][1].y};
                        const u32 a1[4] = {wc[u][0].z, wc[u][1].z, wc[u][0].w, wc[u][1].w};
#pragma unroll
                        for (int j = 0; j < 2; j++) {
                            const uint4 b = *(const uint4*)&xs[s0 + u - c0][8 * j + g][4 * c];
                            const u32 b0[2] = {b.x, b.y}, b1[2] = {b.z, b.w};
                            mma_half<DT>(acc[j], a0, b0);
                            mma_half<DT>(acc[j], a1, b1);
                        }
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < GMMA_U; u++) wc[u][0] = wn[u][0], wc[u][1] = wn[u][1];
        }
    }
    // acc[j]: c0,c1 = row g, tokens 8j+2c, 8j+2c+1; c2,c3 = row g+8.
    if (ksb == 1) {
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int row = row0 + g + (i >= 2 ? 8 : 0), t = 8 * j + 2 * c + (i & 1);
                if (live && row < n && t < m) Y[(long)t * n + row] = acc[j][i] + (bias ? bias[row] : 0.f);
            }
        return;
    }
    if (live) {
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int row = row0 + g + (i >= 2 ? 8 : 0), t = 8 * j + 2 * c + (i & 1);
                if (row < n && t < m) P[((long)kb * GMMA_TOKENS + t) * n + row] = acc[j][i];
            }
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(counter, 1) == ksb - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    const int rows = min(GMMA_ROWS, n - rg * GMMA_ROWS);
    for (int e = threadIdx.x; e < m * rows; e += blockDim.x) {
        const int t = e / rows, row = rg * GMMA_ROWS + e - t * rows;
        float s = 0.f;
        for (int p = 0; p < ksb; p++) s += __ldcg(P + ((long)p * GMMA_TOKENS + t) * n + row);
        Y[(long)t * n + row] = s + (bias ? bias[row] : 0.f);
    }
    if (threadIdx.x == 0) *counter = 0;
}

// The launch's blocks take the row groups of W0, then of W1, then of W2,
// ksb blocks (slices of k) a row group; Pi and the counters Ci are each
// matrix's.
#define GMMA_PARAMS                                                                                            \
    const float *X, int k, int m, const u16 *W0, float *Y0, const float *B0, int n0, float *P0, int *C0,        \
        const u16 *W1, float *Y1, const float *B1, int n1, float *P1, int *C1, const u16 *W2, float *Y2,        \
        const float *B2, int n2, float *P2, int *C2, int ksb

template <int DT>
__device__ __forceinline__ void gmma3(GMMA_PARAMS) {
    const int nb0 = (n0 + GMMA_ROWS - 1) / GMMA_ROWS * ksb, nb1 = (n1 + GMMA_ROWS - 1) / GMMA_ROWS * ksb;
    int b = blockIdx.x;
    if (b < nb0) {
        gmma_block<DT>(X, W0, Y0, B0, n0, k, m, b / ksb, b % ksb, ksb, P0, C0 + b / ksb);
    } else if ((b -= nb0) < nb1) {
        gmma_block<DT>(X, W1, Y1, B1, n1, k, m, b / ksb, b % ksb, ksb, P1, C1 + b / ksb);
    } else {
        b -= nb1;
        gmma_block<DT>(X, W2, Y2, B2, n2, k, m, b / ksb, b % ksb, ksb, P2, C2 + b / ksb);
    }
}

#define GMMA_KERNEL(NAME, DT)                                                                         \
    MTLB_KERNEL void __launch_bounds__(GMMA_WARPS * 32) NAME(GMMA_PARAMS) {                            \
        gmma3<DT>(X, k, m, W0, Y0, B0, n0, P0, C0, W1, Y1, B1, n1, P1, C1, W2, Y2, B2, n2, P2, C2, ksb); \
    }

GMMA_KERNEL(gemv_mma_bf16, DT_BF16)
GMMA_KERNEL(gemv_mma_f16, DT_F16)
