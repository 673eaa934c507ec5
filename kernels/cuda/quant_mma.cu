// quant_mma.cu: packed weights (quant.cu's formats) in many-token steps, on
// tensor cores: a dense packed GEMM (qmma_gemm, and qmma_gemm_gu with
// SwiGLU) and the packed experts' grouped GEMMs (qmma_moe_gate_up,
// qmma_moe_down) after moe_mma.cu's routing and sort.
//
// The tiles are moe_mma.cu's: MG_BM activation rows × MG_BN weight rows ×
// MG_BK, four warps of 64 × 64, ldmatrix feeding mma.m16n8k16 (mg_tile_mma),
// f32 accumulation. Activations come in as bf16 through the same 4-stage
// cp.async pipeline. The weights are dequantized on the way in: each of the
// block's 128 threads owns one weight row of the tile and turns its MG_BK =
// 32 values (one 32-value unit in every format) into bf16 in shared memory
// (two buffers). A thread issues the loads of its next unit before the
// current slice's products and converts them after, so they are in flight
// during the tensor-core work. Weights are never copied dequantized to
// global memory (docs/quantization.md).

#define QM_SMEM (MG_SMEM / 2 + 2 * MG_BN * MG_LD * 2)

// QSrc is one weight row of a tile: its packed values, its scales and
// biases (affine), and whether the row exists (rows past the matrix stage
// zeros; their pointers are row 0's, so a fetch stays in bounds).
struct QSrc {
    const unsigned char* w;
    const unsigned char* s;
    const unsigned char* b;
    int sdt, group;
    bool ok;
};

// q_src is row n (of rows) of a packed matrix with rb bytes a row and g
// scale groups of sdt a row.
__device__ __forceinline__ QSrc q_src(const void* w, const void* s, const void* bi, int n, int rows, int rb, int g, int sdt,
                                      int group) {
    const bool ok = n < rows;
    const long r = ok ? n : 0;
    const int es = sdt == DT_F32 ? 4 : 2;
    return QSrc{(const unsigned char*)w + r * rb, (const unsigned char*)s + r * g * es, (const unsigned char*)bi + r * g * es,
                sdt, group, ok};
}

// q_store32 writes 32 values (v[i] = value i) to a bf16 row of the B tile.
__device__ __forceinline__ void q_store32(u16* dst, const float* v, bool ok) {
    u32 p[16];
#pragma unroll
    for (int i = 0; i < 16; i++) p[i] = ok ? pack_bf16(v[2 * i], v[2 * i + 1]) : 0u;
    uint4* d = (uint4*)dst;
#pragma unroll
    for (int i = 0; i < 4; i++) d[i] = make_uint4(p[4 * i], p[4 * i + 1], p[4 * i + 2], p[4 * i + 3]);
}

// q_ld16 reads 2-byte aligned bytes (GGUF's 34-, 18- and 210-byte blocks)
// into N/4 words.
template <int N>
__device__ __forceinline__ void q_ld16(u32* out, const unsigned char* p) {
    const u16* q = (const u16*)p;
#pragma unroll
    for (int i = 0; i < N / 4; i++) out[i] = (u32)__ldg(q + 2 * i) | ((u32)__ldg(q + 2 * i + 1) << 16);
}

// QRaw<F> is a thread's unit u of its row in registers: fetch issues the
// loads, store converts and writes the 32 values.
template <int F> struct QRaw;

template <> struct QRaw<QF_AFFINE4> {
    uint4 q;
    float s, b;
    __device__ __forceinline__ void fetch(const QSrc& r, int u) {
        q = __ldg((const uint4*)r.w + u);
        const int g = u * 32 / r.group;
        s = q_scale(r.s, g, r.sdt);
        b = q_scale(r.b, g, r.sdt);
    }
    __device__ __forceinline__ void store(u16* dst, bool ok) const {
        const u32 w[4] = {q.x, q.y, q.z, q.w};
        float v[32];
#pragma unroll
        for (int i = 0; i < 32; i++) v[i] = fmaf(s, (float)((w[i / 8] >> (4 * (i % 8))) & 0xfu), b);
        q_store32(dst, v, ok);
    }
};

template <> struct QRaw<QF_AFFINE8> {
    uint4 q0, q1;
    float s, b;
    __device__ __forceinline__ void fetch(const QSrc& r, int u) {
        q0 = __ldg((const uint4*)r.w + 2 * u);
        q1 = __ldg((const uint4*)r.w + 2 * u + 1);
        const int g = u * 32 / r.group;
        s = q_scale(r.s, g, r.sdt);
        b = q_scale(r.b, g, r.sdt);
    }
    __device__ __forceinline__ void store(u16* dst, bool ok) const {
        const u32 w[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
        float v[32];
#pragma unroll
        for (int i = 0; i < 32; i++) v[i] = fmaf(s, (float)((w[i / 4] >> (8 * (i % 4))) & 0xffu), b);
        q_store32(dst, v, ok);
    }
};

// Q8_0: a 34-byte block, f16 d then 32 int8; w = d·q.
template <> struct QRaw<QF_Q8_0> {
    u32 q[8];
    u32 d;
    __device__ __forceinline__ void fetch(const QSrc& r, int u) {
        const unsigned char* blk = r.w + (long)u * 34;
        d = __ldg((const u16*)blk);
        q_ld16<32>(q, blk + 2);
    }
    __device__ __forceinline__ void store(u16* dst, bool ok) const {
        const float dd = f16_to_f32((u16)d);
        float v[32];
#pragma unroll
        for (int i = 0; i < 32; i++) v[i] = dd * (float)(signed char)((q[i / 4] >> (8 * (i % 4))) & 0xffu);
        q_store32(dst, v, ok);
    }
};

// Q4_0: an 18-byte block, f16 d then 16 bytes; value j is byte j's low
// nibble, value j+16 its high one; w = d·(q-8).
template <> struct QRaw<QF_Q4_0> {
    u32 q[4];
    u32 d;
    __device__ __forceinline__ void fetch(const QSrc& r, int u) {
        const unsigned char* blk = r.w + (long)u * 18;
        d = __ldg((const u16*)blk);
        q_ld16<16>(q, blk + 2);
    }
    __device__ __forceinline__ void store(u16* dst, bool ok) const {
        const float dd = f16_to_f32((u16)d);
        float v[32];
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const u32 byte = (q[j / 4] >> (8 * (j % 4))) & 0xffu;
            v[j] = dd * (float)((int)(byte & 0xfu) - 8);
            v[j + 16] = dd * (float)((int)(byte >> 4) - 8);
        }
        q_store32(dst, v, ok);
    }
};

// Q4_K: unit u is sub-block u%8 of super-block u/8 (144 bytes: f16 d and
// dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles whose 32-byte
// chunk c holds sub-block 2c in its low nibbles and 2c+1 in its high ones);
// w = d·sc·q - dmin·m.
template <> struct QRaw<QF_Q4_K> {
    uint4 h, q0, q1;
    int j;
    __device__ __forceinline__ void fetch(const QSrc& r, int u) {
        const uint4* p = (const uint4*)(r.w + (long)(u >> 3) * 144);
        j = u & 7;
        h = __ldg(p);
        q0 = __ldg(p + 1 + 2 * (j >> 1));
        q1 = __ldg(p + 2 + 2 * (j >> 1));
    }
    __device__ __forceinline__ void store(u16* dst, bool ok) const {
        unsigned char sc[12];
        const u32 hw[3] = {h.y, h.z, h.w};
#pragma unroll
        for (int i = 0; i < 12; i++) sc[i] = (unsigned char)(hw[i / 4] >> (8 * (i % 4)));
        float s, m;
        q4k_scale_min(j, sc, s, m);
        const float d = f16_to_f32((u16)(h.x & 0xffff)) * s, dm = f16_to_f32((u16)(h.x >> 16)) * m;
        const u32 qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
        const int sh = (j & 1) * 4;
        float v[32];
#pragma unroll
        for (int i = 0; i < 32; i++) v[i] = d * (float)((qw[i / 4] >> (8 * (i % 4) + sh)) & 0xfu) - dm;
        q_store32(dst, v, ok);
    }
};

// Q6_K: unit u is quarter u%4 of half (u%8)/4 of super-block u/8 (210 bytes:
// 128 bytes of low nibbles, 64 of high bit pairs, 16 int8 scales, f16 d);
// in half n, quarter qq's value l takes ql[64n + 32·(qq&1) + l]'s low
// (qq < 2) or high nibble and bits 2qq of qh[32n + l], scale 8n + 2qq +
// l/16; w = d·sc·(q-32).
template <> struct QRaw<QF_Q6_K> {
    u32 ql[8], qh[8];
    u32 sc, d;
    int qq;
    __device__ __forceinline__ void fetch(const QSrc& r, int u) {
        const unsigned char* blk = r.w + (long)(u >> 3) * 210;
        const int n = (u >> 2) & 1;
        qq = u & 3;
        q_ld16<32>(ql, blk + 64 * n + 32 * (qq & 1));
        q_ld16<32>(qh, blk + 128 + 32 * n);
        sc = __ldg((const u16*)(blk + 192 + 8 * n + 2 * qq));
        d = __ldg((const u16*)(blk + 208));
    }
    __device__ __forceinline__ void store(u16* dst, bool ok) const {
        const float dd = f16_to_f32((u16)d);
        const float s0 = dd * (float)(signed char)(sc & 0xffu), s1 = dd * (float)(signed char)(sc >> 8);
        const int lsh = qq < 2 ? 0 : 4, hsh = 2 * qq;
        float v[32];
#pragma unroll
        for (int l = 0; l < 32; l++) {
            const u32 lo = (ql[l / 4] >> (8 * (l % 4) + lsh)) & 0xfu;
            const u32 hi = (qh[l / 4] >> (8 * (l % 4) + hsh)) & 3u;
            v[l] = (l < 16 ? s0 : s1) * (float)((int)(lo | (hi << 4)) - 32);
        }
        q_store32(dst, v, ok);
    }
};

// Q2_K: unit u is 32-value chunk c = u%8 of super-block u/8 (84 bytes: 16
// of 4-bit scales and mins, 64 of 2-bit values, f16 d and dmin); chunk
// c = 4n + j is sub-blocks 2c and 2c+1, bits 2j of bytes 16 + 32n + l;
// w = d·sc·q − dmin·m.
template <> struct QRaw<QF_Q2_K> {
    u32 q[8];
    u32 sc, dm;
    int j;
    __device__ __forceinline__ void fetch(const QSrc& r, int u) {
        const unsigned char* blk = r.w + (long)(u >> 3) * 84;
        const int c = u & 7;
        j = c & 3;
        q_ld16<32>(q, blk + 16 + 32 * (c >> 2));
        sc = __ldg((const u16*)(blk + 2 * c));
        dm = __ldg((const u32*)(blk + 80));
    }
    __device__ __forceinline__ void store(u16* dst, bool ok) const {
        const float d = f16_to_f32((u16)(dm & 0xffffu)), dmin = f16_to_f32((u16)(dm >> 16));
        const float d0 = d * (float)(sc & 0xfu), m0 = dmin * (float)((sc >> 4) & 0xfu);
        const float d1 = d * (float)((sc >> 8) & 0xfu), m1 = dmin * (float)((sc >> 12) & 0xfu);
        float v[32];
#pragma unroll
        for (int l = 0; l < 32; l++) {
            const float q2 = (float)((q[l / 4] >> (8 * (l % 4) + 2 * j)) & 3u);
            v[l] = l < 16 ? d0 * q2 - m0 : d1 * q2 - m1;
        }
        q_store32(dst, v, ok);
    }
};

// The IQ formats: quant.cu's IQRaw, fetched with the unit's loads and
// decoded to s·q as the values are stored.
template <int F> struct QRawIQ {
    IQRaw<F> raw;
    __device__ __forceinline__ void fetch(const QSrc& r, int u) { raw = iq_fetch<F>(r.w, u); }
    __device__ __forceinline__ void store(u16* dst, bool ok) const {
        float q[32], s0, s1;
        raw.decode(q, s0, s1);
#pragma unroll
        for (int l = 0; l < 32; l++) q[l] *= l < 16 ? s0 : s1;
        q_store32(dst, q, ok);
    }
};
// NVFP4: 16 bytes of a row's codes (value i in nibble i) and the ushort
// of their two E4M3 scales, which follow the row's K/2 bytes of codes
// (group: K).
template <> struct QRaw<QF_NVFP4> {
    uint4 q;
    u32 sc;
    __device__ __forceinline__ void fetch(const QSrc& r, int u) {
        q = __ldg((const uint4*)r.w + u);
        sc = __ldg((const u16*)(r.w + r.group / 2) + u);
    }
    __device__ __forceinline__ void store(u16* dst, bool ok) const {
        const float s0 = e4m3_value(sc & 0xffu), s1 = e4m3_value(sc >> 8);
        const u32 w[4] = {q.x, q.y, q.z, q.w};
        float v[32];
#pragma unroll
        for (int i = 0; i < 32; i++) v[i] = (i < 16 ? s0 : s1) * e2m1_value((w[i / 8] >> (4 * (i % 8))) & 0xfu);
        q_store32(dst, v, ok);
    }
};

// MXFP8: 32 bytes of a row's E4M3 values and their E8M0 exponent, which
// follows the row's K values (group: K).
template <> struct QRaw<QF_MXFP8> {
    uint4 q0, q1;
    u32 e;
    __device__ __forceinline__ void fetch(const QSrc& r, int u) {
        const uint4* p = (const uint4*)(r.w + (long)u * 32);
        q0 = __ldg(p);
        q1 = __ldg(p + 1);
        e = __ldg(r.w + r.group + u);
    }
    __device__ __forceinline__ void store(u16* dst, bool ok) const {
        const float d = e8m0_value(e);
        const u32 w[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
        float v[32];
#pragma unroll
        for (int i = 0; i < 32; i++) v[i] = d * e4m3_value((w[i / 4] >> (8 * (i % 4))) & 0xffu);
        q_store32(dst, v, ok);
    }
};

template <> struct QRaw<QF_IQ2_XXS> : QRawIQ<QF_IQ2_XXS> {};
template <> struct QRaw<QF_IQ2_XS> : QRawIQ<QF_IQ2_XS> {};
template <> struct QRaw<QF_IQ2_S> : QRawIQ<QF_IQ2_S> {};
template <> struct QRaw<QF_IQ3_XXS> : QRawIQ<QF_IQ3_XXS> {};
template <> struct QRaw<QF_IQ3_S> : QRawIQ<QF_IQ3_S> {};
template <> struct QRaw<QF_IQ1_S> : QRawIQ<QF_IQ1_S> {};
template <> struct QRaw<QF_IQ1_M> : QRawIQ<QF_IQ1_M> {};

// qmma_mainloop accumulates a tile's products over k (kdim, a multiple of
// MG_BK): A rows ap[i] (bf16, kdim apart, aok false for rows past the
// tile's), the thread's weight row src dequantized into the B tile.
template <int F, bool GU>
__device__ __forceinline__ void qmma_mainloop(float (&acc)[4][8][4], const u16* const (&ap)[MG_BM * 4 / MG_THREADS],
                                              const bool (&aok)[MG_BM * 4 / MG_THREADS], const QSrc& src, int kdim) {
    extern __shared__ __align__(16) u16 mg_smem[];
    u16(*sa)[MG_BM][MG_LD] = (u16(*)[MG_BM][MG_LD])mg_smem;
    u16(*sb)[MG_BN][MG_LD] = (u16(*)[MG_BN][MG_LD])(mg_smem + MG_STAGES * MG_BM * MG_LD);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wm = warp >> 1, wn = warp & 1;
    auto load = [&](int stage, int k0) { mg_load_a(sa[stage], ap, aok, k0); };
    mg_zero(acc);

    const int KT = kdim / MG_BK;
#pragma unroll
    for (int s = 0; s < MG_STAGES - 1; s++) {
        if (s < KT) load(s, s * MG_BK);
        cp_async_commit();
    }
    QRaw<F> raw;
    raw.fetch(src, 0);
    raw.store(&sb[0][tid][0], src.ok);
    for (int kt = 0; kt < KT; kt++) {
        const bool more = kt + 1 < KT;
        if (more) raw.fetch(src, kt + 1);
        cp_async_wait_n<MG_STAGES - 2>();
        __syncthreads();
        {
            const int nk = kt + MG_STAGES - 1;
            if (nk < KT) load(nk % MG_STAGES, nk * MG_BK);
            cp_async_commit();
        }
        mg_tile_mma<GU>(acc, sa[kt % MG_STAGES], sb[kt & 1], wm, wn, lane);
        // sb[(kt+1)&1] was last read by slice kt-1, which every thread
        // finished before this slice's barrier.
        if (more) raw.store(&sb[(kt + 1) & 1][tid][0], src.ok);
    }
    cp_async_wait_n<0>();
}

// qmma_gemm: out[M][N] = xh[M][K]·wᵀ (+ bias), grid (M tiles, N tiles of
// MG_BN). With GU (qmma_gemm_gu), w is the gate and w2 the up projection,
// both [N][K], and out[M][N] = silu(xh·wᵀ + bias)·(xh·w2ᵀ + bias2), grid (M
// tiles, N tiles of MG_BN/2).
template <int F, bool GU>
__device__ __forceinline__ void qmma_gemm_body(const u16* __restrict__ xh, int M, int K, const void* w, const void* ws,
                                               const void* wb, const void* w2, const void* ws2, const void* wb2, int N,
                                               int rb, int g, int sdt, int group, const float* __restrict__ bias,
                                               const float* __restrict__ bias2, float* __restrict__ out) {
    pdl_wait();
    const int m0 = blockIdx.x * MG_BM, tid = threadIdx.x;
    const u16* ap[MG_BM * 4 / MG_THREADS];
    bool aok[MG_BM * 4 / MG_THREADS];
    mg_a_rows(ap, aok, xh, K, min(MG_BM, M - m0), [&](int r) { return m0 + r; });
    QSrc src;
    if (GU) {
        const bool up = tid >= MG_BN / 2;
        const int n = blockIdx.y * (MG_BN / 2) + (tid & (MG_BN / 2 - 1));
        src = up ? q_src(w2, ws2, wb2, n, N, rb, g, sdt, group) : q_src(w, ws, wb, n, N, rb, g, sdt, group);
    } else {
        src = q_src(w, ws, wb, blockIdx.y * MG_BN + tid, N, rb, g, sdt, group);
    }
    float acc[4][8][4];
    qmma_mainloop<F, GU>(acc, ap, aok, src, K);

    const int warp = tid >> 5, lane = tid & 31, wm = warp >> 1, wn = warp & 1, gr = lane >> 2, c2 = (lane & 3) * 2;
#pragma unroll
    for (int mi = 0; mi < 4; mi++) {
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int m = m0 + wm * 64 + mi * 16 + gr + hr * 8;
            if (m >= M) continue;
            float* dst = out + (long)m * N;
            if (GU) {
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int n = blockIdx.y * (MG_BN / 2) + wn * 32 + j * 8 + c2;
                    float g0 = acc[mi][j][hr * 2], g1 = acc[mi][j][hr * 2 + 1];
                    float u0 = acc[mi][j + 4][hr * 2], u1 = acc[mi][j + 4][hr * 2 + 1];
                    if (bias && n < N) g0 += bias[n];
                    if (bias && n + 1 < N) g1 += bias[n + 1];
                    if (bias2 && n < N) u0 += bias2[n];
                    if (bias2 && n + 1 < N) u1 += bias2[n + 1];
                    if (n < N) dst[n] = silu(g0) * u0;
                    if (n + 1 < N) dst[n + 1] = silu(g1) * u1;
                }
            } else {
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const int n = blockIdx.y * MG_BN + wn * 64 + j * 8 + c2;
                    if (n < N) dst[n] = acc[mi][j][hr * 2] + (bias ? bias[n] : 0.f);
                    if (n + 1 < N) dst[n + 1] = acc[mi][j][hr * 2 + 1] + (bias ? bias[n + 1] : 0.f);
                }
            }
        }
    }
}

// qmma_moe_body: a grouped tile of the packed experts (moe_mma.cu's
// moe_gemm_body with its B tile dequantized): GU the gate and up rows of
// column tile blockIdx.y, else the down rows.
template <int F, bool GU>
__device__ __forceinline__ void qmma_moe_body(const u16* __restrict__ a, int a_div, int kdim, const u64* __restrict__ tab,
                                              int E, int rows_n, int rb, int g, int sdt, int group,
                                              const int* __restrict__ start, const int* __restrict__ count,
                                              const int* __restrict__ tile_start, const int* __restrict__ pair_list,
                                              u16* __restrict__ hout, int I, float* __restrict__ out,
                                              const float* __restrict__ topk_w, int K, int H) {
    pdl_wait();
    const int x = blockIdx.x;
    if (x >= tile_start[E]) return;
    const int e = mg_tile_expert(x, tile_start, E), m0 = (x - tile_start[e]) * MG_BM;
    const int rows = min(MG_BM, count[e] - m0);
    const int* pl = pair_list + start[e] + m0;
    const int tid = threadIdx.x;
    const u16* ap[MG_BM * 4 / MG_THREADS];
    bool aok[MG_BM * 4 / MG_THREADS];
    mg_a_rows(ap, aok, a, kdim, rows, [&](int r) { return pl[r] / a_div; });
    // tab (bridge/cuda qmoeTable): data of gate, up and down (E entries
    // each), then their scales, then their biases.
    const int m = GU ? (tid >= MG_BN / 2 ? 1 : 0) : 2;
    const int n = GU ? blockIdx.y * (MG_BN / 2) + (tid & (MG_BN / 2 - 1)) : blockIdx.y * MG_BN + tid;
    const QSrc src = q_src((const void*)tab[m * E + e], (const void*)tab[(3 + m) * E + e], (const void*)tab[(6 + m) * E + e],
                           n, rows_n, rb, g, sdt, group);
    float acc[4][8][4];
    qmma_mainloop<F, GU>(acc, ap, aok, src, kdim);
    mg_store_experts<GU>(acc, pl, rows, tid >> 6, (tid >> 5) & 1, tid & 31, hout, I, out, topk_w, K, H);
}

#define QMMA_KERNELS(sfx, F)                                                                                           \
    MTLB_KERNEL void __launch_bounds__(MG_THREADS) qmma_gemm_##sfx(                                          \
        const u16* __restrict__ xh, int M, int K, const void* w, const void* ws, const void* wb, int N, int rb, int g,   \
        int sdt, int group, const float* __restrict__ bias, float* __restrict__ out) {                                  \
        qmma_gemm_body<F, false>(xh, M, K, w, ws, wb, w, ws, wb, N, rb, g, sdt, group, bias, 0, out);                   \
    }                                                                                                                  \
    MTLB_KERNEL void __launch_bounds__(MG_THREADS) qmma_gemm_gu_##sfx(                                       \
        const u16* __restrict__ xh, int M, int K, const void* w, const void* ws, const void* wb, const void* w2,        \
        const void* ws2, const void* wb2, int N, int rb, int g, int sdt, int group, const float* __restrict__ bias,    \
        const float* __restrict__ bias2, float* __restrict__ out) {                                                    \
        qmma_gemm_body<F, true>(xh, M, K, w, ws, wb, w2, ws2, wb2, N, rb, g, sdt, group, bias, bias2, out);             \
    }                                                                                                                  \
    MTLB_KERNEL void __launch_bounds__(MG_THREADS) qmma_moe_gate_up_##sfx(                                   \
        const u16* __restrict__ xh, const u64* __restrict__ tab, const int* __restrict__ start,                         \
        const int* __restrict__ count, const int* __restrict__ tile_start, const int* __restrict__ pair_list,          \
        u16* __restrict__ h, int E, int K, int H, int I, int rb, int g, int sdt, int group) {                          \
        qmma_moe_body<F, true>(xh, K, H, tab, E, I, rb, g, sdt, group, start, count, tile_start, pair_list, h, I, 0,    \
                               0, K, H);                                                                               \
    }                                                                                                                  \
    MTLB_KERNEL void __launch_bounds__(MG_THREADS) qmma_moe_down_##sfx(                                      \
        const u16* __restrict__ h, const u64* __restrict__ tab, const int* __restrict__ start,                          \
        const int* __restrict__ count, const int* __restrict__ tile_start, const int* __restrict__ pair_list,          \
        const float* __restrict__ topk_w, float* __restrict__ out, int E, int K, int H, int I, int rb, int g, int sdt,  \
        int group) {                                                                                                   \
        qmma_moe_body<F, false>(h, 1, I, tab, E, H, rb, g, sdt, group, start, count, tile_start, pair_list, 0, I, out,  \
                                topk_w, K, H);                                                                         \
    }

QMMA_KERNELS(affine4, QF_AFFINE4)
QMMA_KERNELS(affine8, QF_AFFINE8)
QMMA_KERNELS(q8_0, QF_Q8_0)
QMMA_KERNELS(q4_0, QF_Q4_0)
QMMA_KERNELS(q4_k, QF_Q4_K)
QMMA_KERNELS(q6_k, QF_Q6_K)
QMMA_KERNELS(q2_k, QF_Q2_K)
QMMA_KERNELS(iq2_xxs, QF_IQ2_XXS)
QMMA_KERNELS(iq2_xs, QF_IQ2_XS)
QMMA_KERNELS(iq2_s, QF_IQ2_S)
QMMA_KERNELS(iq3_xxs, QF_IQ3_XXS)
QMMA_KERNELS(iq3_s, QF_IQ3_S)
QMMA_KERNELS(iq1_s, QF_IQ1_S)
QMMA_KERNELS(iq1_m, QF_IQ1_M)
QMMA_KERNELS(nvfp4, QF_NVFP4)
QMMA_KERNELS(mxfp8, QF_MXFP8)
