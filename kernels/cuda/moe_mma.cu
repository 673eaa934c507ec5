// moe_mma.cu: the MoE block of a many-token step as a grouped GEMM on
// tensor cores (bf16 operands, f32 accumulation).
//
// moe_route_tokens routes every token (a warp each, across the grid);
// moe_sort lists the (token, expert) pairs by expert: expert e's pairs are
// pair_list[start[e] .. start[e]+count[e]), and tile_start[e] numbers its
// row tiles of MG_BM pairs, so a GEMM's grid walks only routed rows and an
// expert no token chose costs no block. moe_gemm_gate_up then computes, per
// (row tile, 64 columns of the intermediate), the gate and up products of
// the tile's activations (gathered by token) and writes silu(gate)·up as
// bf16; moe_gemm_down multiplies those by the expert's down projection and
// adds each row, times its routing weight, into its token's output row
// (out is zeroed first). The adds of a token's k experts land in the order
// their blocks finish, so the output may differ from the top-k-order sum
// in the last bits.
//
// Tiles: MG_BM rows × MG_BN weight rows × MG_BK, 4 warps of 64 rows × 64
// weight rows (so each ldmatrix feeds 4 mma.m16n8k16 and shared memory
// keeps up with the tensor cores), a 4-stage cp.async pipeline in dynamic
// shared memory (MG_SMEM bytes: the backend raises the kernels' limit).

#define MG_BM 128
#define MG_BN 128
#define MG_BK 32
#define MG_STAGES 4
#define MG_LD (MG_BK + 8)  // +8 halves: ldmatrix rows land in distinct banks
#define MG_THREADS 128
#define MG_SMEM (MG_STAGES * (MG_BM + MG_BN) * MG_LD * 2)

// red_add2 adds a and b into p[0] and p[1] (8-byte aligned) in one
// reduction (sm_90: red.global.add.v2.f32), not two.
__device__ __forceinline__ void red_add2(float* p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
    atomicAdd(p, a);
    atomicAdd(p + 1, b);
#endif
}

// moe_route_tokens: top-k experts and weights of every token, a warp each.
MTLB_KERNEL void __launch_bounds__(256) moe_route_tokens(const float* __restrict__ logits, int T, int E, int K,
                                                                    int norm, int* __restrict__ topk_ids,
                                                                    float* __restrict__ topk_w, int* __restrict__ stats) {
    pdl_wait();
    const int t = blockIdx.x * 8 + (threadIdx.x >> 5);
    if (t < T) route_token(logits, t, E, K, norm, topk_ids, topk_w, stats);
}

// moe_sort (one block of ROUTE_THREADS) groups the P = T·K pairs by expert
// and numbers each expert's row tiles; stats[stat_index] gets the experts
// touched.
MTLB_KERNEL void __launch_bounds__(ROUTE_THREADS) moe_sort(const int* __restrict__ topk_ids, int P, int E,
                                                                      int* __restrict__ start, int* __restrict__ count,
                                                                      int* __restrict__ tile_start,
                                                                      int* __restrict__ pair_list, int* __restrict__ stats,
                                                                      int stat_index) {
    pdl_wait();
    __shared__ int s_cnt[ROUTE_MAXE], s_base[ROUTE_MAXE], s_tmp[32];
    for (int e = threadIdx.x; e < E; e += blockDim.x) s_cnt[e] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < P; i += blockDim.x) atomicAdd(&s_cnt[topk_ids[i]], 1);
    __syncthreads();
    const int cnt = threadIdx.x < E ? s_cnt[threadIdx.x] : 0;
    int total, tiles, used;
    const int off = block_scan_excl(cnt, s_tmp, &total);
    const int toff = block_scan_excl((cnt + MG_BM - 1) / MG_BM, s_tmp, &tiles);
    block_scan_excl(cnt > 0 ? 1 : 0, s_tmp, &used);
    if (threadIdx.x < E) {
        start[threadIdx.x] = off;
        count[threadIdx.x] = cnt;
        tile_start[threadIdx.x] = toff;
        s_base[threadIdx.x] = off;
    }
    if (threadIdx.x == 0) {
        tile_start[E] = tiles;
        stats[stat_index] = used;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < P; i += blockDim.x) pair_list[atomicAdd(&s_base[topk_ids[i]], 1)] = i;
}

// mg_tile_expert is the expert whose row tiles hold grid tile x:
// tile_start[e] <= x < tile_start[e+1].
__device__ __forceinline__ int mg_tile_expert(int x, const int* __restrict__ tile_start, int E) {
    int lo = 0, hi = E - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (tile_start[mid] <= x) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// mg_a_rows points a thread's A chunks (4 of 16 bytes a stage) at rows
// row(r) of a (bf16, kdim apart), r < rows; chunks of rows past them are
// zero-filled.
template <typename RowOf>
__device__ __forceinline__ void mg_a_rows(const u16* (&ap)[MG_BM * 4 / MG_THREADS], bool (&aok)[MG_BM * 4 / MG_THREADS],
                                          const u16* __restrict__ a, int kdim, int rows, RowOf row) {
#pragma unroll
    for (int i = 0; i < MG_BM * 4 / MG_THREADS; i++) {
        const int r = (threadIdx.x + i * MG_THREADS) >> 2;
        aok[i] = r < rows;
        ap[i] = a + (long)(aok[i] ? row(r) : 0) * kdim + ((threadIdx.x & 3) << 3);
    }
}

// mg_load_a starts the copies of a thread's A chunks (mg_a_rows) of the k
// step at k0 into one stage of the A tile.
__device__ __forceinline__ void mg_load_a(u16 (*sa)[MG_LD], const u16* const (&ap)[MG_BM * 4 / MG_THREADS],
                                          const bool (&aok)[MG_BM * 4 / MG_THREADS], int k0) {
#pragma unroll
    for (int i = 0; i < MG_BM * 4 / MG_THREADS; i++) {
        const int c = threadIdx.x + i * MG_THREADS;
        cp_async16z(&sa[c >> 2][(c & 3) << 3], ap[i] + k0, aok[i]);
    }
}

// mg_zero clears a warp's accumulators.
__device__ __forceinline__ void mg_zero(float (&acc)[4][8][4]) {
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
}

// mg_tile_mma adds one MG_BK slice of a tile's products into acc: warp
// (wm, wn) takes A rows wm·64.. and 64 B rows, wn·64.. or with GU 32 gate
// rows (wn·32..) and the 32 up rows MG_BN/2 after them.
template <bool GU>
__device__ __forceinline__ void mg_tile_mma(float (&acc)[4][8][4], const u16 (*sa)[MG_LD], const u16 (*sb)[MG_LD], int wm,
                                            int wn, int lane) {
    const int lr = lane & 7, li = lane >> 3;
#pragma unroll
    for (int kk = 0; kk < MG_BK / 16; kk++) {
        u32 af[4][4];
#pragma unroll
        for (int mi = 0; mi < 4; mi++) ldsm_x4(af[mi], &sa[wm * 64 + mi * 16 + (lane & 15)][kk * 16 + (lane >> 4) * 8]);
#pragma unroll
        for (int nj = 0; nj < 4; nj++) {
            const int j = nj * 2;
            const int brow = GU ? (j < 4 ? wn * 32 + j * 8 : MG_BN / 2 + wn * 32 + (j - 4) * 8) : wn * 64 + j * 8;
            u32 b[4];
            ldsm_x4(b, &sb[brow + lr + ((li >> 1) << 3)][kk * 16 + (li & 1) * 8]);
#pragma unroll
            for (int mi = 0; mi < 4; mi++) {
                mma_bf16(acc[mi][j], af[mi], b);
                mma_bf16(acc[mi][j + 1], af[mi], b + 2);
            }
        }
    }
}

// mg_store_experts writes a grouped tile's results: with GU silu(gate)·up
// as bf16 into h's pair rows (column tile blockIdx.y of MG_BN/2), else
// each pair's row times its routing weight added into its token's row of
// out (column tile blockIdx.y of MG_BN).
template <bool GU>
__device__ __forceinline__ void mg_store_experts(const float (&acc)[4][8][4], const int* __restrict__ pl, int rows, int wm,
                                                 int wn, int lane, u16* __restrict__ hout, int I, float* __restrict__ out,
                                                 const float* __restrict__ topk_w, int K, int H) {
    const int g = lane >> 2, c2 = (lane & 3) * 2;
#pragma unroll
    for (int mi = 0; mi < 4; mi++) {
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int r = wm * 64 + mi * 16 + g + hr * 8;
            if (r >= rows) continue;
            const int p = pl[r];
            if (GU) {
                u16* dst = hout + (long)p * I + blockIdx.y * (MG_BN / 2) + wn * 32 + c2;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float g0 = acc[mi][j][hr * 2], g1 = acc[mi][j][hr * 2 + 1];
                    const float u0 = acc[mi][j + 4][hr * 2], u1 = acc[mi][j + 4][hr * 2 + 1];
                    *(u32*)(dst + j * 8) = pack_bf16(silu(g0) * u0, silu(g1) * u1);
                }
            } else {
                const float wt = topk_w[p];
                float* dst = out + (long)(p / K) * H + blockIdx.y * MG_BN + wn * 64 + c2;
#pragma unroll
                for (int j = 0; j < 8; j++) red_add2(dst + j * 8, wt * acc[mi][j][hr * 2], wt * acc[mi][j][hr * 2 + 1]);
            }
        }
    }
}

// moe_gemm_body: GU (gate_up) or down, for the block's (expert, row tile,
// column tile). A rows are pairs: row p of A is a + (p / a_div)·kdim (bf16);
// B is the expert's [n][kdim] matrix (for GU, gate and up: 64 rows of each).
template <bool GU>
__device__ __forceinline__ void moe_gemm_body(const u16* __restrict__ a, int a_div, int kdim,
                                              const u64* __restrict__ wtab, const u64* __restrict__ wtab2, int E,
                                              const int* __restrict__ start, const int* __restrict__ count,
                                              const int* __restrict__ tile_start, const int* __restrict__ pair_list,
                                              u16* __restrict__ hout, int I, float* __restrict__ out,
                                              const float* __restrict__ topk_w, int K, int H) {
    extern __shared__ __align__(16) u16 mg_smem[];
    u16(*sa)[MG_BM][MG_LD] = (u16(*)[MG_BM][MG_LD])mg_smem;
    u16(*sb)[MG_BN][MG_LD] = (u16(*)[MG_BN][MG_LD])(mg_smem + MG_STAGES * MG_BM * MG_LD);
    pdl_wait();
    const int x = blockIdx.x;
    if (x >= tile_start[E]) return;
    const int e = mg_tile_expert(x, tile_start, E), m0 = (x - tile_start[e]) * MG_BM;
    const int rows = min(MG_BM, count[e] - m0);
    const int* pl = pair_list + start[e] + m0;
    const int tid = threadIdx.x;

    // Each thread copies 4 A chunks and 4 B chunks of 16 bytes a stage.
    constexpr int AC = MG_BM * 4 / MG_THREADS;
    const u16* ap[AC];
    bool aok[AC];
    mg_a_rows(ap, aok, a, kdim, rows, [&](int r) { return pl[r] / a_div; });
    const u16* bp[4];
    {
        const u16* w = (const u16*)wtab[e];
        const u16* w2 = GU ? (const u16*)wtab2[e] : w;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = (tid >> 2) + 32 * i;  // B row of the tile
            long n;
            const u16* m = w;
            if (GU) {
                n = (long)blockIdx.y * (MG_BN / 2) + (r & (MG_BN / 2 - 1));
                m = r < MG_BN / 2 ? w : w2;
            } else {
                n = (long)blockIdx.y * MG_BN + r;
            }
            bp[i] = m + n * kdim + ((tid & 3) << 3);
        }
    }
    auto load = [&](int stage, int k0) {
        mg_load_a(sa[stage], ap, aok, k0);
#pragma unroll
        for (int i = 0; i < 4; i++) cp_async16z(&sb[stage][(tid >> 2) + 32 * i][(tid & 3) << 3], bp[i] + k0, true);
    };

    const int warp = tid >> 5, lane = tid & 31, wm = warp >> 1, wn = warp & 1;
    float acc[4][8][4];
    mg_zero(acc);

    const int KT = kdim / MG_BK;
#pragma unroll
    for (int s = 0; s < MG_STAGES - 1; s++) {
        if (s < KT) load(s, s * MG_BK);
        cp_async_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_async_wait_n<MG_STAGES - 2>();
        __syncthreads();
        {
            const int nk = kt + MG_STAGES - 1;
            if (nk < KT) load(nk % MG_STAGES, nk * MG_BK);
            cp_async_commit();
        }
        const int st = kt % MG_STAGES;
        mg_tile_mma<GU>(acc, sa[st], sb[st], wm, wn, lane);
    }
    cp_async_wait_n<0>();

    mg_store_experts<GU>(acc, pl, rows, wm, wn, lane, hout, I, out, topk_w, K, H);
}

// moe_gemm_gate_up: grid (row tiles bound, I / 64); h[pair] = silu(x·gateᵀ)·(x·upᵀ).
MTLB_KERNEL void __launch_bounds__(MG_THREADS) moe_gemm_gate_up_bf16(
    const u16* __restrict__ xh, const u64* __restrict__ gate, const u64* __restrict__ up, const int* __restrict__ start,
    const int* __restrict__ count, const int* __restrict__ tile_start, const int* __restrict__ pair_list,
    u16* __restrict__ h, int E, int K, int H, int I) {
    moe_gemm_body<true>(xh, K, H, gate, up, E, start, count, tile_start, pair_list, h, I, 0, 0, K, H);
}

// moe_gemm_down: grid (row tiles bound, H / 128); out[token] += w·(h[pair]·downᵀ).
MTLB_KERNEL void __launch_bounds__(MG_THREADS) moe_gemm_down_bf16(
    const u16* __restrict__ h, const u64* __restrict__ down, const int* __restrict__ start,
    const int* __restrict__ count, const int* __restrict__ tile_start, const int* __restrict__ pair_list,
    const float* __restrict__ topk_w, float* __restrict__ out, int E, int K, int H, int I) {
    moe_gemm_body<false>(h, 1, I, down, down, E, start, count, tile_start, pair_list, 0, I, out, topk_w, K, H);
}

// zero_f32 clears n floats (n a multiple of 4, p 16-byte aligned).
MTLB_KERNEL void zero_f32(float* __restrict__ p, long n) {
    pdl_wait();
    for (long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * 4; i < n; i += (long)gridDim.x * blockDim.x * 4)
        *(float4*)(p + i) = make_float4(0.f, 0.f, 0.f, 0.f);
}
