// quant.cu: GEMV/GEMM, expert GEMVs and embedding rows on packed weights
// (kernels/quant, docs/quantization.md): MLX affine at 4 and 8 bits and
// GGUF's Q8_0, Q4_0, Q4_K and Q6_K. Weights are dequantized in registers as
// they are read, never into memory. A warp takes QROWS weight rows; each
// lane whole units of a row (32 affine values: one or two 16-byte loads; a
// 34- or 18-byte Q8_0/Q4_0 block; a 144-byte Q4_K or 210-byte Q6_K
// super-block), the activations read through L1, up to QCOLS of them.

#define QF_AFFINE4 0
#define QF_AFFINE8 1
#define QF_Q8_0 2
#define QF_Q4_0 3
#define QF_Q4_K 4
#define QF_Q6_K 5

#define QROWS 2
#define QCOLS 4
#define QWARPS 8

// A packed row: its values, and for affine formats its scales and biases
// (sdt: 0 f32, 1 f16, 2 bf16; g groups).
struct QRow {
    const unsigned char* w;
    const unsigned char* s;
    const unsigned char* b;
    int sdt;
};

__device__ __forceinline__ float q_scale(const unsigned char* s, int i, int dt) {
    if (dt == 1) return f16_to_f32(((const u16*)s)[i]);
    if (dt == 2) return __uint_as_float(((u32)((const u16*)s)[i]) << 16);
    return ((const float*)s)[i];
}

__device__ __forceinline__ float q_half(const unsigned char* p) {
    return f16_to_f32((u16)p[0] | ((u16)p[1] << 8));
}

// Q4_K's sub-block j scale and min (ggml's get_scale_min_k4).
__device__ __forceinline__ void q4k_scale_min(int j, const unsigned char* q, float& sc, float& m) {
    if (j < 4) {
        sc = (float)(q[j] & 63);
        m = (float)(q[j + 4] & 63);
    } else {
        sc = (float)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        m = (float)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

template <int F> struct QUnit { static const int values = 32; };
template <> struct QUnit<QF_Q4_K> { static const int values = 256; };
template <> struct QUnit<QF_Q6_K> { static const int values = 256; };

// q_unit adds unit u of row's dot products with cols activation rows (x:
// the unit's first value of row 0; rows xs floats apart) into acc.
template <int F>
__device__ __forceinline__ void q_unit(const QRow& r, int u, int group, const float* x, long xs, int cols, float* acc);

template <int BITS>
__device__ __forceinline__ void q_affine(const QRow& r, int u, int group, const float* x, long xs, int cols, float* acc) {
    float q[32];
    const uint4* p = (const uint4*)(r.w + (long)u * 4 * BITS);
#pragma unroll
    for (int h = 0; h < BITS / 4; h++) {
        uint4 v = ld_stream(p + h);
        u32 wd[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 32 / BITS; j++) q[h * 16 + i * (32 / BITS) + j] = (float)((wd[i] >> (BITS * j)) & ((1u << BITS) - 1u));
    }
    int g = u * 32 / group;
    float sc = q_scale(r.s, g, r.sdt), bi = q_scale(r.b, g, r.sdt);
#pragma unroll
    for (int c = 0; c < QCOLS; c++) {
        if (c >= cols) break;
        const float4* xv = (const float4*)(x + c * xs);
        float d = 0.f, sx = 0.f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            float4 a = __ldg(xv + i);
            d += a.x * q[4 * i] + a.y * q[4 * i + 1] + a.z * q[4 * i + 2] + a.w * q[4 * i + 3];
            sx += a.x + a.y + a.z + a.w;
        }
        acc[c] += sc * d + bi * sx;
    }
}

template <> __device__ __forceinline__ void q_unit<QF_AFFINE4>(const QRow& r, int u, int g, const float* x, long xs, int cols, float* acc) {
    q_affine<4>(r, u, g, x, xs, cols, acc);
}
template <> __device__ __forceinline__ void q_unit<QF_AFFINE8>(const QRow& r, int u, int g, const float* x, long xs, int cols, float* acc) {
    q_affine<8>(r, u, g, x, xs, cols, acc);
}

// dot32 adds the 32-value dot products of q with the activations, times d.
__device__ __forceinline__ void dot32(const float* q, float d, const float* x, long xs, int cols, float* acc) {
#pragma unroll
    for (int c = 0; c < QCOLS; c++) {
        if (c >= cols) break;
        const float4* xv = (const float4*)(x + c * xs);
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            float4 a = __ldg(xv + i);
            s += a.x * q[4 * i] + a.y * q[4 * i + 1] + a.z * q[4 * i + 2] + a.w * q[4 * i + 3];
        }
        acc[c] += d * s;
    }
}

template <> __device__ __forceinline__ void q_unit<QF_Q8_0>(const QRow& r, int u, int g, const float* x, long xs, int cols, float* acc) {
    const unsigned char* blk = r.w + (long)u * 34;
    const u16* p = (const u16*)(blk + 2);
    float q[32];
#pragma unroll
    for (int i = 0; i < 16; i++) {
        u16 v = p[i];
        q[2 * i] = (float)(signed char)(v & 0xff);
        q[2 * i + 1] = (float)(signed char)(v >> 8);
    }
    dot32(q, q_half(blk), x, xs, cols, acc);
}

template <> __device__ __forceinline__ void q_unit<QF_Q4_0>(const QRow& r, int u, int g, const float* x, long xs, int cols, float* acc) {
    const unsigned char* blk = r.w + (long)u * 18;
    const u16* p = (const u16*)(blk + 2);
    float q[32];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        u16 v = p[i];
        q[2 * i] = (float)((int)(v & 0xf) - 8);
        q[2 * i + 16] = (float)((int)((v >> 4) & 0xf) - 8);
        q[2 * i + 1] = (float)((int)((v >> 8) & 0xf) - 8);
        q[2 * i + 17] = (float)((int)(v >> 12) - 8);
    }
    dot32(q, q_half(blk), x, xs, cols, acc);
}

template <> __device__ __forceinline__ void q_unit<QF_Q4_K>(const QRow& r, int u, int g, const float* x, long xs, int cols, float* acc) {
    const uint4* p = (const uint4*)(r.w + (long)u * 144);
    uint4 h = ld_stream(p);
    float d = f16_to_f32((u16)(h.x & 0xffff)), dmin = f16_to_f32((u16)(h.x >> 16));
    unsigned char sc[12];
    u32 hw[3] = {h.y, h.z, h.w};
#pragma unroll
    for (int i = 0; i < 12; i++) sc[i] = (unsigned char)(hw[i / 4] >> (8 * (i % 4)));
#pragma unroll
    for (int j = 0; j < 4; j++) {
        uint4 q0 = ld_stream(p + 1 + 2 * j), q1 = ld_stream(p + 2 + 2 * j);
        u32 qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
        float lo[32], hi[32];
#pragma unroll
        for (int i = 0; i < 32; i++) {
            u32 byte = (qw[i / 4] >> (8 * (i % 4))) & 0xffu;
            lo[i] = (float)(byte & 0xfu);
            hi[i] = (float)(byte >> 4);
        }
        float s1, m1, s2, m2;
        q4k_scale_min(2 * j, sc, s1, m1);
        q4k_scale_min(2 * j + 1, sc, s2, m2);
        float t[QCOLS], t2[QCOLS];
#pragma unroll
        for (int c = 0; c < QCOLS; c++) t[c] = t2[c] = 0.f;
        dot32(lo, d * s1, x + 64 * j, xs, cols, t);
        dot32(hi, d * s2, x + 64 * j + 32, xs, cols, t2);
#pragma unroll
        for (int c = 0; c < QCOLS; c++) {
            if (c >= cols) break;
            const float4* xv = (const float4*)(x + c * xs + 64 * j);
            float sl = 0.f, sh = 0.f;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                float4 a = __ldg(xv + i), b = __ldg(xv + 8 + i);
                sl += a.x + a.y + a.z + a.w;
                sh += b.x + b.y + b.z + b.w;
            }
            acc[c] += t[c] + t2[c] - dmin * (m1 * sl + m2 * sh);
        }
    }
}

template <> __device__ __forceinline__ void q_unit<QF_Q6_K>(const QRow& r, int u, int g, const float* x, long xs, int cols, float* acc) {
    const unsigned char* blk = r.w + (long)u * 210;
    const u16* ps = (const u16*)blk;
    float d = q_half(blk + 208);
    float scl[16];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        u16 v = ps[96 + i];
        scl[2 * i] = (float)(signed char)(v & 0xff);
        scl[2 * i + 1] = (float)(signed char)(v >> 8);
    }
#pragma unroll
    for (int n = 0; n < 2; n++) {
        unsigned char ql[64], qh[32];
#pragma unroll
        for (int i = 0; i < 32; i++) {
            u16 v = ps[32 * n + i];
            ql[2 * i] = (unsigned char)(v & 0xff);
            ql[2 * i + 1] = (unsigned char)(v >> 8);
        }
#pragma unroll
        for (int i = 0; i < 16; i++) {
            u16 v = ps[64 + 16 * n + i];
            qh[2 * i] = (unsigned char)(v & 0xff);
            qh[2 * i + 1] = (unsigned char)(v >> 8);
        }
#pragma unroll
        for (int qq = 0; qq < 4; qq++) {
            float q0[16], q1[16];
#pragma unroll
            for (int l = 0; l < 32; l++) {
                u32 lq = (qq & 1) ? ql[l + 32] : ql[l];
                u32 lo = qq < 2 ? (lq & 0xfu) : (lq >> 4);
                float v = (float)((int)(lo | (((u32)qh[l] >> (2 * qq)) & 3u) << 4) - 32);
                if (l < 16) q0[l] = v; else q1[l - 16] = v;
            }
            const float* xq = x + 128 * n + 32 * qq;
            float s0 = d * scl[8 * n + 2 * qq], s1 = d * scl[8 * n + 2 * qq + 1];
#pragma unroll
            for (int c = 0; c < QCOLS; c++) {
                if (c >= cols) break;
                const float4* xv = (const float4*)(xq + c * xs);
                float a0 = 0.f, a1 = 0.f;
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    float4 a = __ldg(xv + i), b = __ldg(xv + 4 + i);
                    a0 += a.x * q0[4 * i] + a.y * q0[4 * i + 1] + a.z * q0[4 * i + 2] + a.w * q0[4 * i + 3];
                    a1 += b.x * q1[4 * i] + b.y * q1[4 * i + 1] + b.z * q1[4 * i + 2] + b.w * q1[4 * i + 3];
                }
                acc[c] += s0 * a0 + s1 * a1;
            }
        }
    }
}

// q_row_dots: the warp's dot products of row (values w, scales s, biases b)
// with cols activation rows x (k apart), reduced over the warp.
template <int F>
__device__ __forceinline__ void q_row_dots(const QRow& r, const float* x, int k, int group, int cols, int lane, float* acc) {
    const int U = QUnit<F>::values;
    for (int u = lane; u < k / U; u += 32) q_unit<F>(r, u, group, x + (long)u * U, k, cols, acc);
#pragma unroll
    for (int c = 0; c < QCOLS; c++) acc[c] = warp_sum(acc[c]);
}

// qgemv: out[m][n] = x[m][k]·wᵀ (+ bias) for packed w: QCOLS rows of x a
// block (grid y), QROWS weight rows a warp (grid x).
template <int F>
__device__ void qgemv(const float* __restrict__ x, const unsigned char* __restrict__ w, const unsigned char* __restrict__ s,
                      const unsigned char* __restrict__ b, const float* __restrict__ bias, float* __restrict__ out, int M, int N,
                      int K, int rowBytes, int groups, int sdt) {
    pdl_wait();
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int m0 = blockIdx.y * QCOLS, cols = min(QCOLS, M - m0);
    int sz = groups * (sdt == 0 ? 4 : 2), group = K / groups;
    for (int rr = 0; rr < QROWS; rr++) {
        int n = (blockIdx.x * QWARPS + warp) * QROWS + rr;
        if (n >= N) return;
        QRow r = {w + (long)n * rowBytes, s + (long)n * sz, b + (long)n * sz, sdt};
        float acc[QCOLS];
#pragma unroll
        for (int c = 0; c < QCOLS; c++) acc[c] = 0.f;
        q_row_dots<F>(r, x + (long)m0 * K, K, group, cols, lane, acc);
        if (lane == 0) {
            for (int c = 0; c < cols; c++) out[(long)(m0 + c) * N + n] = acc[c] + (bias ? bias[n] : 0.f);
        }
    }
}

// qmoe_gate_up: per (token, expert) pair p (grid y), h[p] = silu(x·gateᵀ)·(x·upᵀ)
// for the pair's expert (ids[p]); experts' pointers in tab: values, scales
// and biases of gate (E each), up, then down.
template <int F>
__device__ void qmoe_gate_up(const float* __restrict__ x, float* __restrict__ h, const u64* __restrict__ tab,
                             const int* __restrict__ ids, int H, int I, int K, int E, int rowBytes, int groups, int sdt,
                             int* __restrict__ stats) {
    pdl_wait();
    int p = blockIdx.y, e = ids[p];
    if (e < 0 || e >= E) {
        if (threadIdx.x == 0) atomicOr(stats, ERR_BAD_EXPERT);
        return;
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int sz = groups * (sdt == 0 ? 4 : 2), group = H / groups;
    const float* xt = x + (long)(p / K) * H;
    for (int rr = 0; rr < QROWS; rr++) {
        int n = (blockIdx.x * QWARPS + warp) * QROWS + rr;
        if (n >= I) return;
        QRow g = {(const unsigned char*)tab[e] + (long)n * rowBytes, (const unsigned char*)tab[3 * E + e] + (long)n * sz,
                  (const unsigned char*)tab[6 * E + e] + (long)n * sz, sdt};
        QRow u = {(const unsigned char*)tab[E + e] + (long)n * rowBytes, (const unsigned char*)tab[4 * E + e] + (long)n * sz,
                  (const unsigned char*)tab[7 * E + e] + (long)n * sz, sdt};
        float a[QCOLS] = {0.f}, c[QCOLS] = {0.f};
        q_row_dots<F>(g, xt, H, group, 1, lane, a);
        q_row_dots<F>(u, xt, H, group, 1, lane, c);
        if (lane == 0) h[(long)p * I + n] = a[0] / (1.f + __expf(-a[0])) * c[0];
    }
}

// qmoe_down: y[p] = h[p]·downᵀ for the pair's expert.
template <int F>
__device__ void qmoe_down(const float* __restrict__ h, float* __restrict__ y, const u64* __restrict__ tab,
                          const int* __restrict__ ids, int H, int I, int E, int rowBytes, int groups, int sdt,
                          int* __restrict__ stats) {
    pdl_wait();
    int p = blockIdx.y, e = ids[p];
    if (e < 0 || e >= E) {
        if (threadIdx.x == 0) atomicOr(stats, ERR_BAD_EXPERT);
        return;
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int sz = groups * (sdt == 0 ? 4 : 2), group = I / groups;
    for (int rr = 0; rr < QROWS; rr++) {
        int n = (blockIdx.x * QWARPS + warp) * QROWS + rr;
        if (n >= H) return;
        QRow d = {(const unsigned char*)tab[2 * E + e] + (long)n * rowBytes, (const unsigned char*)tab[5 * E + e] + (long)n * sz,
                  (const unsigned char*)tab[8 * E + e] + (long)n * sz, sdt};
        float a[QCOLS] = {0.f};
        q_row_dots<F>(d, h + (long)p * I, I, group, 1, lane, a);
        if (lane == 0) y[(long)p * H + n] = a[0];
    }
}

// q_values: the 32 values of row r from value i0 (a multiple of 32).
template <int F> __device__ __forceinline__ void q_values(const QRow& r, int i0, int group, float* v);
template <int BITS> __device__ __forceinline__ void q_affine_values(const QRow& r, int i0, int group, float* v) {
    const uint4* p = (const uint4*)(r.w + (long)(i0 / 32) * 4 * BITS);
    int g = i0 / group;
    float sc = q_scale(r.s, g, r.sdt), bi = q_scale(r.b, g, r.sdt);
    for (int h = 0; h < BITS / 4; h++) {
        uint4 x = p[h];
        u32 wd[4] = {x.x, x.y, x.z, x.w};
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 32 / BITS; j++) v[h * 16 + i * (32 / BITS) + j] = sc * (float)((wd[i] >> (BITS * j)) & ((1u << BITS) - 1u)) + bi;
    }
}
template <> __device__ __forceinline__ void q_values<QF_AFFINE4>(const QRow& r, int i0, int g, float* v) { q_affine_values<4>(r, i0, g, v); }
template <> __device__ __forceinline__ void q_values<QF_AFFINE8>(const QRow& r, int i0, int g, float* v) { q_affine_values<8>(r, i0, g, v); }
template <> __device__ __forceinline__ void q_values<QF_Q8_0>(const QRow& r, int i0, int g, float* v) {
    const unsigned char* blk = r.w + (long)(i0 / 32) * 34;
    float d = q_half(blk);
    for (int i = 0; i < 32; i++) v[i] = d * (float)(signed char)blk[2 + i];
}
template <> __device__ __forceinline__ void q_values<QF_Q4_0>(const QRow& r, int i0, int g, float* v) {
    const unsigned char* blk = r.w + (long)(i0 / 32) * 18;
    float d = q_half(blk);
    for (int i = 0; i < 16; i++) {
        v[i] = d * (float)((int)(blk[2 + i] & 0xf) - 8);
        v[i + 16] = d * (float)((int)(blk[2 + i] >> 4) - 8);
    }
}
template <> __device__ __forceinline__ void q_values<QF_Q4_K>(const QRow& r, int i0, int g, float* v) {
    const unsigned char* blk = r.w + (long)(i0 / 256) * 144;
    int j = (i0 % 256) / 64, hi = (i0 % 64) / 32;
    float s, m;
    q4k_scale_min(2 * j + hi, blk + 4, s, m);
    float d = q_half(blk) * s, dm = q_half(blk + 2) * m;
    for (int l = 0; l < 32; l++) {
        u32 b = blk[16 + 32 * j + l];
        v[l] = d * (float)(hi ? b >> 4 : b & 0xfu) - dm;
    }
}
template <> __device__ __forceinline__ void q_values<QF_Q6_K>(const QRow& r, int i0, int g, float* v) {
    const unsigned char* blk = r.w + (long)(i0 / 256) * 210;
    int n = (i0 % 256) / 128, qq = (i0 % 128) / 32;
    float d = q_half(blk + 208);
    const unsigned char* ql = blk + 64 * n;
    const unsigned char* qh = blk + 128 + 32 * n;
    for (int l = 0; l < 32; l++) {
        u32 lq = (qq & 1) ? ql[l + 32] : ql[l];
        u32 lo = qq < 2 ? (lq & 0xfu) : (lq >> 4);
        int x = (int)(lo | (((u32)qh[l] >> (2 * qq)) & 3u) << 4) - 32;
        v[l] = d * (float)(signed char)blk[192 + 8 * n + 2 * qq + l / 16] * (float)x;
    }
}

// qembed: out[t] = row ids[t] of the packed table; a warp a token.
template <int F>
__device__ void qembed(float* __restrict__ out, const int* __restrict__ ids, const unsigned char* __restrict__ w,
                       const unsigned char* __restrict__ s, const unsigned char* __restrict__ b, int T, int V, int K,
                       int rowBytes, int groups, int sdt, int* __restrict__ err) {
    pdl_wait();
    int t = blockIdx.x * QWARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (t >= T) return;
    int id = ids[t];
    float* o = out + (long)t * K;
    if (id < 0 || id >= V) {
        if (lane == 0) atomicOr(err, ERR_BAD_TOKEN);
        for (int i = lane; i < K; i += 32) o[i] = 0.f;
        return;
    }
    int sz = groups * (sdt == 0 ? 4 : 2);
    QRow r = {w + (long)id * rowBytes, s + (long)id * sz, b + (long)id * sz, sdt};
    for (int i0 = 32 * lane; i0 < K; i0 += 32 * 32) {
        float v[32];
        q_values<F>(r, i0, K / groups, v);
        for (int i = 0; i < 32; i++) o[i0 + i] = v[i];
    }
}

#define QKERNELS(F, S)                                                                                                  \
    extern "C" __global__ void __launch_bounds__(QWARPS * 32) qgemv_##S(                                              \
        const float* __restrict__ x, const unsigned char* __restrict__ w, const unsigned char* __restrict__ s,          \
        const unsigned char* __restrict__ b, const float* __restrict__ bias, float* __restrict__ out, int M, int N,      \
        int K, int rowBytes, int groups, int sdt) {                                                                     \
        qgemv<F>(x, w, s, b, bias, out, M, N, K, rowBytes, groups, sdt);                                               \
    }                                                                                                                   \
    extern "C" __global__ void __launch_bounds__(QWARPS * 32) qmoe_gate_up_##S(                                       \
        const float* __restrict__ x, float* __restrict__ h, const u64* __restrict__ tab, const int* __restrict__ ids,   \
        int H, int I, int K, int E, int rowBytes, int groups, int sdt, int* __restrict__ stats) {                        \
        qmoe_gate_up<F>(x, h, tab, ids, H, I, K, E, rowBytes, groups, sdt, stats);                                     \
    }                                                                                                                   \
    extern "C" __global__ void __launch_bounds__(QWARPS * 32) qmoe_down_##S(                                          \
        const float* __restrict__ h, float* __restrict__ y, const u64* __restrict__ tab, const int* __restrict__ ids,   \
        int H, int I, int E, int rowBytes, int groups, int sdt, int* __restrict__ stats) {                               \
        qmoe_down<F>(h, y, tab, ids, H, I, E, rowBytes, groups, sdt, stats);                                           \
    }                                                                                                                   \
    extern "C" __global__ void __launch_bounds__(QWARPS * 32) qembed_##S(                                             \
        float* __restrict__ out, const int* __restrict__ ids, const unsigned char* __restrict__ w,                      \
        const unsigned char* __restrict__ s, const unsigned char* __restrict__ b, int T, int V, int K, int rowBytes,     \
        int groups, int sdt, int* __restrict__ err) {                                                                   \
        qembed<F>(out, ids, w, s, b, T, V, K, rowBytes, groups, sdt, err);                                             \
    }

QKERNELS(QF_AFFINE4, affine4)
QKERNELS(QF_AFFINE8, affine8)
QKERNELS(QF_Q8_0, q8_0)
QKERNELS(QF_Q4_0, q4_0)
QKERNELS(QF_Q4_K, q4_k)
QKERNELS(QF_Q6_K, q6_k)
