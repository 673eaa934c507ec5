// quant.cu: GEMV/GEMM, expert GEMVs and embedding rows on packed weights
// (kernels/quant, docs/quantization.md): MLX affine at 4 and 8 bits,
// GGUF's Q8_0, Q4_0, Q4_K, Q6_K and Q2_K, the IQ grid formats (IQ2_XXS,
// IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M), and mlx's nvfp4 and mxfp8
// (NVFP4, MXFP8: a row's values, then its scales). Weights are dequantized in registers as
// they are read, never into memory. A warp takes R weight rows at once, their
// loads issued together. Affine rows (q_affine8): each lane 8 values of every
// 256, so weights (4 or 8 bytes a lane) and activations are read contiguously
// across the warp, several chunks loaded before any is used, the activations
// once for all R rows. GGUF rows: each lane 32 values at a time (a 34- or
// 18-byte Q8_0/Q4_0 block, a sub-block of a 144-byte Q4_K, a quarter of a
// 210-byte Q6_K, two sub-blocks of an 84-byte Q2_K super-block, four or
// eight grid rows of an IQ super-block, their codes from iqgrid.cu). Matrices
// that share an input share a launch (q/k/v; gate/up with SwiGLU); a single
// token's MoE router also routes, and the down projections also sum the
// experts.

#define QF_AFFINE4 0
#define QF_AFFINE8 1
#define QF_Q8_0 2
#define QF_Q4_0 3
#define QF_Q4_K 4
#define QF_Q6_K 5
#define QF_Q2_K 6
#define QF_IQ2_XXS 7
#define QF_IQ2_XS 8
#define QF_IQ2_S 9
#define QF_IQ3_XXS 10
#define QF_IQ3_S 11
#define QF_IQ1_S 12
#define QF_IQ1_M 13
#define QF_NVFP4 23
#define QF_MXFP8 24

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

// A lane's unit is 32 values in every format: for the K formats a
// sub-block (Q4_K) or two (Q6_K, Q2_K) of a super-block, so a row of 2048
// keeps all 32 lanes busy where whole 256-value super-blocks kept 8.
constexpr int QUNIT = 32;

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

// e2m1_value is an E2M1 code's value (kernels/quant E2M1Values).
__device__ __forceinline__ float e2m1_value(u32 c) {
    const float mag = (c & 6u) == 0 ? 0.5f * (float)(c & 1u) : (float)(2u + (c & 1u)) * __uint_as_float((((c >> 1) & 3u) + 125u) << 23);
    return (c & 8u) ? -mag : mag;
}

// e4m3_value is an E4M3 byte's value as mlx reads it (kernels/quant
// E4M3ToF32): its low seven bits as the top of an f16's, times 256.
__device__ __forceinline__ float e4m3_value(u32 b) {
    return f16_to_f32((u16)(((b & 0x80u) << 8) | ((b & 0x7fu) << 7))) * 256.f;
}

// e8m0_value is 2^(e−127), e = 0 the f32 subnormal 2^−127.
__device__ __forceinline__ float e8m0_value(u32 e) { return __uint_as_float(e == 0 ? 0x00400000u : e << 23); }

// NVFP4: a row's codes (mlx's order, value i in nibble i), then its E4M3
// scales, one a group of 16, from byte K/2; the kernels take g = K (the
// host's groups a row is 1). A unit is one 16-byte load and one ushort.
template <> __device__ __forceinline__ void q_unit<QF_NVFP4>(const QRow& r, int u, int g, const float* x, long xs, int cols, float* acc) {
    const uint4 v = ld_stream((const uint4*)r.w + u);
    const u32 sc = ((const u16*)(r.w + g / 2))[u];
    const u32 wd[4] = {v.x, v.y, v.z, v.w};
    // E2M1·E4M3 is exact in f32: the scales go into the values.
    const float s0 = e4m3_value(sc & 0xff), s1 = e4m3_value(sc >> 8);
    float q[32];
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = (i < 16 ? s0 : s1) * e2m1_value((wd[i / 8] >> (4 * (i % 8))) & 0xf);
    dot32(q, 1.f, x, xs, cols, acc);
}

// MXFP8: a row's E4M3 values, then its E8M0 exponents, one a group of 32,
// from byte K (g): a unit is two 16-byte loads and one byte.
template <> __device__ __forceinline__ void q_unit<QF_MXFP8>(const QRow& r, int u, int g, const float* x, long xs, int cols, float* acc) {
    const uint4* p = (const uint4*)(r.w + (long)u * 32);
    const uint4 v0 = ld_stream(p), v1 = ld_stream(p + 1);
    const u32 wd[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
    float q[32];
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = e4m3_value((wd[i / 4] >> (8 * (i % 4))) & 0xff);
    dot32(q, e8m0_value(r.w[g + u]), x, xs, cols, acc);
}

// dotm adds d·Σx·q − m·Σx over N values (a K sub-block: its scale, and
// its min where the format has one).
template <int N>
__device__ __forceinline__ void dotm(const float* q, float d, float m, const float* x, long xs, int cols, float* acc) {
#pragma unroll
    for (int c = 0; c < QCOLS; c++) {
        if (c >= cols) break;
        const float4* xv = (const float4*)(x + c * xs);
        float s = 0.f, sx = 0.f;
#pragma unroll
        for (int i = 0; i < N / 4; i++) {
            float4 a = __ldg(xv + i);
            s += a.x * q[4 * i] + a.y * q[4 * i + 1] + a.z * q[4 * i + 2] + a.w * q[4 * i + 3];
            sx += a.x + a.y + a.z + a.w;
        }
        acc[c] += d * s - m * sx;
    }
}

// Q4_K, unit u: sub-block u%8 of super-block u/8 (144 bytes: f16 d and
// dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles whose
// 32-byte chunk j holds sub-block 2j in its low nibbles, 2j+1 in its high).
template <> __device__ __forceinline__ void q_unit<QF_Q4_K>(const QRow& r, int u, int g, const float* x, long xs, int cols, float* acc) {
    const unsigned char* blk = r.w + (long)(u >> 3) * 144;
    const int c = u & 7, sh = (c & 1) * 4;
    const uint4 h = ld_stream(blk);
    const uint4* p = (const uint4*)(blk + 16 + 32 * (c >> 1));
    const uint4 q0 = ld_stream(p), q1 = ld_stream(p + 1);
    unsigned char sc[12];
    const u32 hw[3] = {h.y, h.z, h.w};
#pragma unroll
    for (int i = 0; i < 12; i++) sc[i] = (unsigned char)(hw[i / 4] >> (8 * (i % 4)));
    float s, m;
    q4k_scale_min(c, sc, s, m);
    const u32 qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    float q[32];
#pragma unroll
    for (int i = 0; i < 32; i++) q[i] = (float)((qw[i / 4] >> (8 * (i % 4) + sh)) & 0xfu);
    dotm<32>(q, f16_to_f32((u16)(h.x & 0xffff)) * s, f16_to_f32((u16)(h.x >> 16)) * m, x, xs, cols, acc);
}

// Q6_K, unit u: quarter u%4 of half (u%8)/4 of super-block u/8 (210 bytes:
// 128 of low nibbles, 64 of high bit pairs, 16 int8 scales, f16 d); in half
// n, quarter qq's value l takes ql[64n + 32·(qq&1) + l]'s low (qq < 2) or
// high nibble and bits 2qq of qh[32n + l], scale 8n + 2qq + l/16.
template <> __device__ __forceinline__ void q_unit<QF_Q6_K>(const QRow& r, int u, int g, const float* x, long xs, int cols, float* acc) {
    const unsigned char* blk = r.w + (long)(u >> 3) * 210;
    const int n = (u >> 2) & 1, qq = u & 3, lsh = qq < 2 ? 0 : 4;
    const u16* ql = (const u16*)(blk + 64 * n + 32 * (qq & 1));
    const u16* qh = (const u16*)(blk + 128 + 32 * n);
    const u32 scw = __ldg((const u16*)(blk + 192 + 8 * n + 2 * qq));
    const float d = q_half(blk + 208);
    float q[32];
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const u32 lo = __ldg(ql + i), hi = __ldg(qh + i);
#pragma unroll
        for (int b = 0; b < 2; b++) {
            const u32 lv = (lo >> (8 * b + lsh)) & 0xfu, hv = (hi >> (8 * b + 2 * qq)) & 3u;
            q[2 * i + b] = (float)((int)(lv | (hv << 4)) - 32);
        }
    }
    dotm<16>(q, d * (float)(signed char)(scw & 0xffu), 0.f, x, xs, cols, acc);
    dotm<16>(q + 16, d * (float)(signed char)(scw >> 8), 0.f, x + 16, xs, cols, acc);
}

// Q2_K, unit u: 32-value chunk c = u%8 of super-block u/8 (84 bytes: 16
// of 4-bit scales and mins, 64 of 2-bit values, f16 d and dmin); chunk
// c = 4n + j is sub-blocks 2c and 2c+1, bits 2j of bytes 16 + 32n + l.
template <> __device__ __forceinline__ void q_unit<QF_Q2_K>(const QRow& r, int u, int g, const float* x, long xs, int cols, float* acc) {
    const unsigned char* blk = r.w + (long)(u >> 3) * 84;
    const int c = u & 7, j = c & 3;
    const u32* p = (const u32*)(blk + 16 + 32 * (c >> 2));
    const u32 dmw = __ldg((const u32*)(blk + 80)), scw = __ldg((const u16*)(blk + 2 * c));
    const float d = f16_to_f32((u16)(dmw & 0xffffu)), dmin = f16_to_f32((u16)(dmw >> 16));
    float q[32];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const u32 w = __ldg(p + i);
#pragma unroll
        for (int b = 0; b < 4; b++) q[4 * i + b] = (float)((w >> (8 * b + 2 * j)) & 3u);
    }
    dotm<16>(q, d * (float)(scw & 0xfu), dmin * (float)((scw >> 4) & 0xfu), x, xs, cols, acc);
    dotm<16>(q + 16, d * (float)((scw >> 8) & 0xfu), dmin * (float)((scw >> 12) & 0xfu), x + 16, xs, cols, acc);
}

// The IQ grid formats (kernels/quant iq.go, docs/quantization.md): 256-value
// super-blocks whose 32-value units are four grid rows of 8 values (IQ2,
// IQ1) or eight of 4 (IQ3; grids in iqgrid.cu), sign masks and one or two
// 4-bit scales under the super-block's f16 d. IQRaw<F> is a unit's bytes in
// registers: fetch issues its loads (the blocks are 2-byte aligned: 66, 74,
// 82, 98, 110 and 50 bytes; IQ1_M's 56 are 8), decode turns them into 32
// codes q (exact small integers) and the scales of values 0..15 (s0) and
// 16..31 (s1): w = s·q, as IQUnit. ONE is whether s0 == s1.

// iq_ld16 and iq_ld32 read 2 and 4 bytes at a 2-byte aligned address.
__device__ __forceinline__ u32 iq_ld16(const unsigned char* p) { return __ldg((const u16*)p); }
__device__ __forceinline__ u32 iq_ld32(const unsigned char* p) {
    const u16* q = (const u16*)p;
    return (u32)__ldg(q) | ((u32)__ldg(q + 1) << 16);
}

// iq_ksign is sign mask i (quant.KSign): seven stored bits and an eighth
// that makes the count of set bits even.
__device__ __forceinline__ u32 iq_ksign(u32 i) {
    i &= 127u;
    return i | ((u32)(__popc(i) & 1) << 7);
}

// iq_grid8 writes grid row g's 8 values (byte j value j, int8) to q, value
// j negated where bit j of sign is set; iq_grid4 the same for 4.
__device__ __forceinline__ void iq_grid8(u64 g, u32 sign, float* q) {
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const float v = (float)(signed char)(u32)(g >> (8 * j));
        q[j] = (sign >> j) & 1u ? -v : v;
    }
}
__device__ __forceinline__ void iq_grid4(u32 g, u32 sign, float* q) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float v = (float)(signed char)(g >> (8 * j));
        q[j] = (sign >> j) & 1u ? -v : v;
    }
}

// iq1_row writes IQ1's grid row g as codes in eighths: 8·g + 1, or 8·g − 1
// where neg.
__device__ __forceinline__ void iq1_row(u64 g, bool neg, float* q) {
    const int off = neg ? -1 : 1;
#pragma unroll
    for (int j = 0; j < 8; j++) q[j] = (float)(8 * (int)(signed char)(u32)(g >> (8 * j)) + off);
}

template <int F> struct IQRaw;

// IQ2_XXS, 66 bytes: f16 d, then 8 bytes a unit: four grid indices (u32),
// then four 7-bit sign masks and the 4-bit scale in the top bits (u32);
// s = d·(0.5 + sc)/4.
template <> struct IQRaw<QF_IQ2_XXS> {
    static const int bytes = 66;
    static const bool ONE = true;
    u32 d, idx, aux;
    __device__ __forceinline__ void fetch(const unsigned char* blk, int c) {
        d = iq_ld16(blk);
        idx = iq_ld32(blk + 2 + 8 * c);
        aux = iq_ld32(blk + 6 + 8 * c);
    }
    __device__ __forceinline__ void decode(float* q, float& s0, float& s1) const {
#pragma unroll
        for (int l = 0; l < 4; l++) iq_grid8(iq2xxs_grid[(idx >> (8 * l)) & 255u], iq_ksign(aux >> (7 * l)), q + 8 * l);
        s0 = s1 = f16_to_f32((u16)d) * (0.5f + (float)(aux >> 28)) * 0.25f;
    }
};

// iq2_halves gives an IQ2_XS or IQ2_S unit's half scales: d·(0.5 + s)/4
// for the low and high nibble of its scale byte (sc's low 8 bits).
__device__ __forceinline__ void iq2_halves(float d, u32 sc, float& s0, float& s1) {
    s0 = d * (0.5f + (float)(sc & 15u)) * 0.25f;
    s1 = d * (0.5f + (float)((sc >> 4) & 15u)) * 0.25f;
}

// IQ2_XS, 74 bytes: f16 d, 64 bytes of 16-bit words (a 9-bit grid index,
// a 7-bit sign mask; four a unit), 8 bytes of scales (two nibbles a unit).
template <> struct IQRaw<QF_IQ2_XS> {
    static const int bytes = 74;
    static const bool ONE = false;
    u32 d, q01, q23, sc;
    __device__ __forceinline__ void fetch(const unsigned char* blk, int c) {
        d = iq_ld16(blk);
        q01 = iq_ld32(blk + 2 + 8 * c);
        q23 = iq_ld32(blk + 6 + 8 * c);
        sc = iq_ld16(blk + 66 + (c & ~1)) >> (8 * (c & 1));
    }
    __device__ __forceinline__ void decode(float* q, float& s0, float& s1) const {
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const u32 w = ((l < 2 ? q01 : q23) >> (16 * (l & 1))) & 0xffffu;
            iq_grid8(iq2xs_grid[w & 511u], iq_ksign(w >> 9), q + 8 * l);
        }
        iq2_halves(f16_to_f32((u16)d), sc, s0, s1);
    }
};

// IQ2_S, 82 bytes: f16 d, 32 bytes of grid indices' low 8 bits, 32 of
// sign masks (a byte a row), 8 of the indices' top 2 bits (a byte a unit),
// 8 of scales (two nibbles a unit).
template <> struct IQRaw<QF_IQ2_S> {
    static const int bytes = 82;
    static const bool ONE = false;
    u32 d, qs, sg, qh, sc;
    __device__ __forceinline__ void fetch(const unsigned char* blk, int c) {
        d = iq_ld16(blk);
        qs = iq_ld32(blk + 2 + 4 * c);
        sg = iq_ld32(blk + 34 + 4 * c);
        qh = iq_ld16(blk + 66 + (c & ~1)) >> (8 * (c & 1));
        sc = iq_ld16(blk + 74 + (c & ~1)) >> (8 * (c & 1));
    }
    __device__ __forceinline__ void decode(float* q, float& s0, float& s1) const {
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const u32 i = ((qs >> (8 * l)) & 255u) | (((qh >> (2 * l)) & 3u) << 8);
            iq_grid8(iq2s_grid[i], (sg >> (8 * l)) & 255u, q + 8 * l);
        }
        iq2_halves(f16_to_f32((u16)d), sc, s0, s1);
    }
};

// IQ3_XXS, 98 bytes: f16 d, 64 bytes of grid indices (8 rows of 4 a unit),
// 32 of a u32 a unit: four 7-bit sign masks (each for two rows) and the
// 4-bit scale; s = d·(0.5 + sc)/2.
template <> struct IQRaw<QF_IQ3_XXS> {
    static const int bytes = 98;
    static const bool ONE = true;
    u32 d, qa, qb, aux;
    __device__ __forceinline__ void fetch(const unsigned char* blk, int c) {
        d = iq_ld16(blk);
        qa = iq_ld32(blk + 2 + 8 * c);
        qb = iq_ld32(blk + 6 + 8 * c);
        aux = iq_ld32(blk + 66 + 4 * c);
    }
    __device__ __forceinline__ void decode(float* q, float& s0, float& s1) const {
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const u32 sign = iq_ksign(aux >> (7 * l)), w = (l < 2 ? qa : qb) >> (16 * (l & 1));
            iq_grid4(iq3xxs_grid[w & 255u], sign, q + 8 * l);
            iq_grid4(iq3xxs_grid[(w >> 8) & 255u], sign >> 4, q + 8 * l + 4);
        }
        s0 = s1 = f16_to_f32((u16)d) * (0.5f + (float)(aux >> 28)) * 0.5f;
    }
};

// IQ3_S, 110 bytes: f16 d, 64 bytes of grid indices' low 8 bits (8 rows of
// 4 a unit), 8 of their top bits (a byte a unit), 32 of sign nibbles (a
// row each), 4 of scales (a nibble a unit); s = d·(1 + 2·sc).
template <> struct IQRaw<QF_IQ3_S> {
    static const int bytes = 110;
    static const bool ONE = true;
    u32 d, qa, qb, qh, sg, sc;
    __device__ __forceinline__ void fetch(const unsigned char* blk, int c) {
        d = iq_ld16(blk);
        qa = iq_ld32(blk + 2 + 8 * c);
        qb = iq_ld32(blk + 6 + 8 * c);
        qh = iq_ld16(blk + 66 + (c & ~1)) >> (8 * (c & 1));
        sg = iq_ld32(blk + 74 + 4 * c);
        sc = iq_ld16(blk + 106 + 2 * (c >> 2)) >> (4 * (c & 3));
    }
    __device__ __forceinline__ void decode(float* q, float& s0, float& s1) const {
#pragma unroll
        for (int l = 0; l < 8; l++) {
            const u32 i = (((l < 4 ? qa : qb) >> (8 * (l & 3))) & 255u) | (((qh >> l) & 1u) << 8);
            iq_grid4(iq3s_grid[i], sg >> (4 * l), q + 4 * l);
        }
        s0 = s1 = f16_to_f32((u16)d) * (float)(1u + 2u * (sc & 15u));
    }
};

// IQ1_S, 50 bytes: f16 d, 32 bytes of grid indices' low 8 bits (four rows
// a unit), a u16 a unit: the indices' top 3 bits each, the 3-bit scale k
// and the sign of the ±1/8 offset; w = d·(2k+1)·(g ± 1/8), codes 8·g ± 1
// under d·(2k+1)/8.
template <> struct IQRaw<QF_IQ1_S> {
    static const int bytes = 50;
    static const bool ONE = true;
    u32 d, qs, qh;
    __device__ __forceinline__ void fetch(const unsigned char* blk, int c) {
        d = iq_ld16(blk);
        qs = iq_ld32(blk + 2 + 4 * c);
        qh = iq_ld16(blk + 34 + 2 * c);
    }
    __device__ __forceinline__ void decode(float* q, float& s0, float& s1) const {
#pragma unroll
        for (int l = 0; l < 4; l++)
            iq1_row(iq1s_grid[((qs >> (8 * l)) & 255u) | (((qh >> (3 * l)) & 7u) << 8)], (qh & 0x8000u) != 0, q + 8 * l);
        s0 = s1 = f16_to_f32((u16)d) * (float)(2u * ((qh >> 12) & 7u) + 1u) * 0.125f;
    }
};

// IQ1_M, 56 bytes: 32 bytes of grid indices' low 8 bits (four rows a
// unit), a u16 a unit of nibbles (a row's top 3 index bits and its offset's
// sign), four u16 of 3-bit scales (two a unit) whose top nibbles hold the
// f16 d, least significant first.
template <> struct IQRaw<QF_IQ1_M> {
    static const int bytes = 56;
    static const bool ONE = false;
    u32 qs, qh, s01, s23;
    int c;
    __device__ __forceinline__ void fetch(const unsigned char* blk, int cc) {
        c = cc;
        qs = __ldg((const u32*)(blk + 4 * c));
        qh = iq_ld16(blk + 32 + 2 * c);
        s01 = __ldg((const u32*)(blk + 48));
        s23 = __ldg((const u32*)(blk + 52));
    }
    __device__ __forceinline__ void decode(float* q, float& s0, float& s1) const {
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const u32 nib = (qh >> (4 * l)) & 15u;
            iq1_row(iq1s_grid[((qs >> (8 * l)) & 255u) | ((nib & 7u) << 8)], (nib & 8u) != 0, q + 8 * l);
        }
        const u32 dh = ((s01 >> 12) & 0xfu) | ((s01 >> 24) & 0xf0u) | ((s23 >> 4) & 0xf00u) | ((s23 >> 16) & 0xf000u);
        const float d = f16_to_f32((u16)dh);
        const u32 s = (c < 4 ? s01 : s23) >> (16 * ((c >> 1) & 1) + 6 * (c & 1));
        s0 = d * (float)(2u * (s & 7u) + 1u) * 0.125f;
        s1 = d * (float)(2u * ((s >> 3) & 7u) + 1u) * 0.125f;
    }
};

// iq_fetch loads unit u of a row of IQ format F (unit u%8 of super-block
// u/8).
template <int F>
__device__ __forceinline__ IQRaw<F> iq_fetch(const unsigned char* row, int u) {
    IQRaw<F> raw;
    raw.fetch(row + (long)(u >> 3) * IQRaw<F>::bytes, u & 7);
    return raw;
}

// iq_unit: q_unit for the IQ formats.
template <int F>
__device__ __forceinline__ void iq_unit(const QRow& r, int u, const float* x, long xs, int cols, float* acc) {
    const IQRaw<F> raw = iq_fetch<F>(r.w, u);
    float q[32], s0, s1;
    raw.decode(q, s0, s1);
    if (IQRaw<F>::ONE) {
        dot32(q, s0, x, xs, cols, acc);
        return;
    }
#pragma unroll
    for (int c = 0; c < QCOLS; c++) {
        if (c >= cols) break;
        const float4* xv = (const float4*)(x + c * xs);
        float a = 0.f, b = 0.f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float4 p = __ldg(xv + i), h = __ldg(xv + 4 + i);
            a += p.x * q[4 * i] + p.y * q[4 * i + 1] + p.z * q[4 * i + 2] + p.w * q[4 * i + 3];
            b += h.x * q[16 + 4 * i] + h.y * q[16 + 4 * i + 1] + h.z * q[16 + 4 * i + 2] + h.w * q[16 + 4 * i + 3];
        }
        acc[c] += s0 * a + s1 * b;
    }
}

#define IQ_Q_UNIT(F)                                                                                                   \
    template <> __device__ __forceinline__ void q_unit<F>(const QRow& r, int u, int g, const float* x, long xs, int cols, \
                                                          float* acc) {                                                \
        iq_unit<F>(r, u, x, xs, cols, acc);                                                                            \
    }
IQ_Q_UNIT(QF_IQ2_XXS)
IQ_Q_UNIT(QF_IQ2_XS)
IQ_Q_UNIT(QF_IQ2_S)
IQ_Q_UNIT(QF_IQ3_XXS)
IQ_Q_UNIT(QF_IQ3_S)
IQ_Q_UNIT(QF_IQ1_S)
IQ_Q_UNIT(QF_IQ1_M)

// q_rows adds unit u of R rows' dot products with cols (<= C) activation rows
// (x: the unit's first value of activation row 0; rows xs floats apart) into
// acc, each row's unit read as q_unit reads it; the rows are independent, so
// their loads are in flight together. (Affine rows take q_affine8 instead.)
template <int F, int R, int C>
struct QRows {
    static __device__ __forceinline__ void run(const QRow (&rw)[R], int u, int group, const float* x, long xs, int cols,
                                               float (&acc)[R][C]) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            float a[QCOLS];
#pragma unroll
            for (int c = 0; c < QCOLS; c++) a[c] = 0.f;
            q_unit<F>(rw[r], u, group, x, xs, min(cols, C), a);
#pragma unroll
            for (int c = 0; c < C; c++) acc[r][c] += a[c];
        }
    }
};

// ld_stream32 and ld_stream64 are ld_stream for 4 and 8 bytes.
__device__ __forceinline__ u32 ld_stream32(const void* p) {
    u32 v;
    asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ uint2 ld_stream64(const void* p) {
    uint2 v;
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}

// q_affine8 adds values [i, i+8) of R affine rows' dot products with cols
// (<= C) activation rows (x: value i of activation row 0; rows xs apart)
// into acc. Lane l takes values 8l.. of each 256, so a warp's weight loads
// (4 or 8 bytes a lane) and activation loads are contiguous. A value becomes
// a float without a conversion instruction: masked in place in its 16-bit
// half word and OR-ed into 2^23's bits, it is 2^23 + q·2^(BITS·j) exactly;
// minus 2^23 it is q·2^(BITS·j), and the activation it multiplies is scaled
// by 2^-(BITS·j) (exact) instead of the value being shifted down.
template <int BITS, int R, int C, int NCH>
__device__ __forceinline__ void q_affine8(const QRow (&rw)[R], int i, int step, int group, const float* x, long xs,
                                          int cols, float (&acc)[R][C]) {
    constexpr int NW = BITS / 4, PH = 16 / BITS;  // words a lane; values a half word
    // NCH chunks (step values apart) of every row are loaded before any is used.
    u32 w[NCH][R][NW];
    float sc[NCH][R], bi[NCH][R];
#pragma unroll
    for (int n = 0; n < NCH; n++) {
        const int in = i + n * step, g = in / group;
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (BITS == 4) {
                w[n][r][0] = ld_stream32(rw[r].w + in / 2);
            } else {
                uint2 v = ld_stream64(rw[r].w + in);
                w[n][r][0] = v.x, w[n][r][NW - 1] = v.y;
            }
            sc[n][r] = q_scale(rw[r].s, g, rw[r].sdt);
            bi[n][r] = q_scale(rw[r].b, g, rw[r].sdt);
        }
    }
#pragma unroll
    for (int c = 0; c < C; c++) {
        if (c >= cols) break;
#pragma unroll
        for (int n = 0; n < NCH; n++) {
            const float4* xv = (const float4*)(x + c * xs + n * step);
            const float4 a = __ldg(xv), b = __ldg(xv + 1);
            float xr[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
            const float sx = ((a.x + a.y) + (a.z + a.w)) + ((b.x + b.y) + (b.z + b.w));
#pragma unroll
            for (int v = 0; v < 8; v++) xr[v] *= __uint_as_float((u32)(127 - BITS * (v % PH)) << 23);
#pragma unroll
            for (int r = 0; r < R; r++) {
                float d = 0.f;
#pragma unroll
                for (int k = 0; k < NW; k++) {
                    const u32 lo = w[n][r][k], hi = w[n][r][k] >> 16;
#pragma unroll
                    for (int j = 0; j < PH; j++) {
                        const u32 m = ((1u << BITS) - 1u) << (BITS * j);
                        d += xr[k * 2 * PH + j] * (__uint_as_float((lo & m) | 0x4b000000u) - 8388608.f);
                        d += xr[k * 2 * PH + PH + j] * (__uint_as_float((hi & m) | 0x4b000000u) - 8388608.f);
                    }
                }
                acc[r][c] += sc[n][r] * d + bi[n][r] * sx;
            }
        }
    }
}

// q_dots adds R rows' dot products over k with cols (<= C) activation rows
// (xs apart) into acc: this warp's share, the kp-th of ks warps splitting k.
template <int F, int R, int C>
__device__ __forceinline__ void q_dots(const QRow (&rw)[R], const float* __restrict__ x, int K, long xs, int cols, int group,
                                       int kp, int ks, int lane, float (&acc)[R][C]) {
    if (F == QF_AFFINE4 || F == QF_AFFINE8) {
        constexpr int B = F == QF_AFFINE8 ? 8 : 4, N = C > 1 ? 2 : 4;
        const int step = 256 * ks;
        int i = (kp * 32 + lane) * 8;
        for (; i + (N - 1) * step < K; i += N * step) q_affine8<B, R, C, N>(rw, i, step, group, x + i, xs, cols, acc);
        if (N > 2 && i + step < K) {
            q_affine8<B, R, C, 2>(rw, i, step, group, x + i, xs, cols, acc);
            i += 2 * step;
        }
        if (i < K) q_affine8<B, R, C, 1>(rw, i, step, group, x + i, xs, cols, acc);
    } else {
        const int U = QUNIT, nu = K / U;
#pragma unroll 2
        for (int u = kp * 32 + lane; u < nu; u += 32 * ks) QRows<F, R, C>::run(rw, u, group, x + (long)u * U, xs, cols, acc);
    }
}

// QMat is one packed matrix of a launch: values, scales, biases (the values'
// pointer where there are none), an optional f32 bias, the output, rows.
struct QMat {
    const unsigned char* w;
    const unsigned char* s;
    const unsigned char* b;
    const float* bias;
    float* out;
    int n;
};

// q_block: a block's rows of A (and with GU the same rows of B) against cols
// (<= C) activation rows x (K apart), out rows ostride apart. Each warp takes R
// rows; ks warps share them, each every ks-th 32 units of k (split-K inside
// the block, for matrices with too few rows to fill the GPU). Outputs:
// A.out = x·Aᵀ + A.bias; with GU, A.out = silu(x·Aᵀ + A.bias)·(x·Bᵀ +
// B.bias) and, when B.out is set, B.out = x·Bᵀ + B.bias. wsum: acc is scaled by it and the warp's sums
// added into *wsum's caller (MoE down: see qmoe_down_sum).
template <int F, int R, int C, bool GU>
__device__ __forceinline__ void q_block(const QMat& A, const QMat& B, const float* __restrict__ x, int cols, int K,
                                        long ostride, int rowBytes, int groups, int sdt, int blk, int ks) {
    __shared__ float red[QWARPS][GU ? 2 : 1][R][C];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, kp = warp % ks;
    const int row0 = (blk * (QWARPS / ks) + warp / ks) * R;
    const int sz = groups * (sdt == 0 ? 4 : 2), group = K / groups;
    // With GU the gate rows and the up rows are one set of 2R, so all their
    // loads are in flight together.
    constexpr int RR = GU ? 2 * R : R;
    float acc[R][C], acc2[R][C], all[RR][C];
#pragma unroll
    for (int r = 0; r < RR; r++)
#pragma unroll
        for (int c = 0; c < C; c++) all[r][c] = 0.f;
    if (row0 < A.n) {
        QRow rw[RR];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const long n = min(row0 + r, A.n - 1);  // rows past the end repeat the last, unwritten
            rw[r] = {A.w + n * rowBytes, A.s + n * sz, A.b + n * sz, sdt};
            if (GU) rw[RR - R + r] = {B.w + n * rowBytes, B.s + n * sz, B.b + n * sz, sdt};
        }
        q_dots<F, RR, C>(rw, x, K, K, cols, group, kp, ks, lane, all);
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < C; c++) acc[r][c] = all[r][c], acc2[r][c] = all[RR - R + r][c];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < C; c++) {
            if (c < cols) {
                acc[r][c] = warp_sum(acc[r][c]);
                if (GU) acc2[r][c] = warp_sum(acc2[r][c]);
            }
        }
    if (ks > 1) {
        if (lane == 0) {
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int c = 0; c < C; c++) {
                    red[warp][0][r][c] = acc[r][c];
                    if (GU) red[warp][GU ? 1 : 0][r][c] = acc2[r][c];
                }
        }
        __syncthreads();
        if (kp == 0 && lane == 0) {
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int c = 0; c < C; c++) {
                    float s = 0.f, s2 = 0.f;
                    for (int j = 0; j < ks; j++) {
                        s += red[warp + j][0][r][c];
                        if (GU) s2 += red[warp + j][GU ? 1 : 0][r][c];
                    }
                    acc[r][c] = s, acc2[r][c] = s2;
                }
        }
    }
    // Lane 0 of each row group's first warp writes; no thread returns
    // (qrouter_route1 syncs the block after).
    const bool writer = kp == 0 && lane == 0 && row0 < A.n;
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < C; c++) {
            const int n = row0 + r;
            if (!writer || c >= cols || n >= A.n) continue;
            const long o = (long)c * ostride + n;
            if (GU) {
                const float gv = acc[r][c] + (A.bias ? A.bias[n] : 0.f), uv = acc2[r][c] + (B.bias ? B.bias[n] : 0.f);
                A.out[o] = silu(gv) * uv;
                if (B.out) B.out[o] = uv;
            } else {
                A.out[o] = acc[r][c] + (A.bias ? A.bias[n] : 0.f);
            }
        }
}

// qgemv: out = x[M][K]·wᵀ (+ bias) for up to three packed matrices of one
// format that read the same x (q, k and v): the grid's x blocks are split
// between them, its y blocks take C activation rows each. With gu, matrices
// 0 and 1 are gate and up: out0 = silu(x·gateᵀ + bias0)·(x·upᵀ + bias1),
// out1 = x·upᵀ + bias1.
template <int F, int R, int C>
__device__ __forceinline__ void qgemv(const float* __restrict__ x, int M, int K, int rowBytes, int groups, int sdt, int ks,
                                      int gu, const QMat& m0, const QMat& m1, const QMat& m2) {
    pdl_wait();
    const int rows = (QWARPS / ks) * R, c0 = blockIdx.y * C, cols = min(C, M - c0);
    const float* xc = x + (long)c0 * K;
    int b = blockIdx.x;
    const int nb0 = (m0.n + rows - 1) / rows, nb1 = (m1.n + rows - 1) / rows;
    if (gu) {
        QMat a = m0, u = m1;
        a.out += (long)c0 * m0.n;
        u.out += (long)c0 * m0.n;
        q_block<F, R, C, true>(a, u, xc, cols, K, m0.n, rowBytes, groups, sdt, b, ks);
        return;
    }
    const QMat* m = &m0;
    if (b >= nb0) {
        b -= nb0;
        m = &m1;
        if (b >= nb1) {
            b -= nb1;
            m = &m2;
        }
    }
    QMat a = *m;
    a.out += (long)c0 * a.n;
    q_block<F, R, C, false>(a, a, xc, cols, K, a.n, rowBytes, groups, sdt, b, ks);
}

// qmoe_mat: expert e's matrix i (0 gate, 1 up, 2 down) from the table of
// the experts' pointers: values, scales and biases of gate (E each), up,
// then down.
__device__ __forceinline__ QMat qmoe_mat(const u64* __restrict__ tab, int i, int e, int E, float* out, int n) {
    return {(const unsigned char*)tab[i * E + e], (const unsigned char*)tab[(3 + i) * E + e],
            (const unsigned char*)tab[(6 + i) * E + e], 0, out, n};
}

// qmoe_gate_up: per (token, expert) pair p (grid y), h[p] =
// silu(x·gateᵀ)·(x·upᵀ) for the pair's expert ids[p], QMOE_R rows of gate and
// up a warp, QMOE_KS warps splitting k (an expert has few rows).
#define QMOE_R 2
#define QMOE_KS 2
template <int F>
__device__ __forceinline__ void qmoe_gate_up(const float* __restrict__ x, float* __restrict__ h, const u64* __restrict__ tab,
                                             const int* __restrict__ ids, int H, int I, int K, int E, int rowBytes,
                                             int groups, int sdt, int* __restrict__ stats) {
    pdl_wait();
    const int p = blockIdx.y, e = ids[p];
    if (e < 0 || e >= E) {
        if (threadIdx.x == 0) atomicOr(stats, ERR_BAD_EXPERT);
        return;
    }
    QMat g = qmoe_mat(tab, 0, e, E, h + (long)p * I, I), u = qmoe_mat(tab, 1, e, E, 0, I);
    q_block<F, QMOE_R, 1, true>(g, u, x + (long)(p / K) * H, 1, H, I, rowBytes, groups, sdt, blockIdx.x, QMOE_KS);
}

// qmoe_down: y[p] = h[p]·downᵀ for the pair's expert (grid y: pairs).
template <int F>
__device__ __forceinline__ void qmoe_down(const float* __restrict__ h, float* __restrict__ y, const u64* __restrict__ tab,
                                          const int* __restrict__ ids, int H, int I, int E, int rowBytes, int groups,
                                          int sdt, int* __restrict__ stats) {
    pdl_wait();
    const int p = blockIdx.y, e = ids[p];
    if (e < 0 || e >= E) {
        if (threadIdx.x == 0) atomicOr(stats, ERR_BAD_EXPERT);
        return;
    }
    QMat d = qmoe_mat(tab, 2, e, E, y + (long)p * H, H);
    q_block<F, QMOE_R, 1, false>(d, d, h + (long)p * I, 1, I, H, rowBytes, groups, sdt, blockIdx.x, 1);
}

// qmoe_down_sum: out[t] = Σ_j w[t·K+j] · h[t·K+j]·downᵀ of the pair's expert,
// the down projections and moe_combine's weighted sum in one launch (grid:
// QMOE_DR rows a block, tokens). Warp v takes pairs j = v, v+QWARPS, ... of
// the block's rows, so the experts' loads are in flight together; the warps'
// sums are added in warp order (the same every run).
#define QMOE_DR 4
template <int F>
__device__ __forceinline__ void qmoe_down_sum(const float* __restrict__ h, float* __restrict__ out,
                                              const u64* __restrict__ tab, const int* __restrict__ ids,
                                              const float* __restrict__ wts, int H, int I, int K, int E, int rowBytes,
                                              int groups, int sdt, int* __restrict__ stats) {
    __shared__ float red[QWARPS][QMOE_DR];
    pdl_wait();
    const int t = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row0 = blockIdx.x * QMOE_DR;
    const int sz = groups * (sdt == 0 ? 4 : 2), group = I / groups;
    float acc[QMOE_DR][1];
#pragma unroll
    for (int r = 0; r < QMOE_DR; r++) acc[r][0] = 0.f;
    for (int j = warp; j < K; j += QWARPS) {
        const int p = t * K + j, e = ids[p];
        const float wt = wts[p];
        if (e < 0 || e >= E) {
            if (lane == 0) atomicOr(stats, ERR_BAD_EXPERT);
            continue;
        }
        const unsigned char *w = (const unsigned char*)tab[2 * E + e], *s = (const unsigned char*)tab[5 * E + e],
                            *b = (const unsigned char*)tab[8 * E + e];
        QRow rw[QMOE_DR];
#pragma unroll
        for (int r = 0; r < QMOE_DR; r++) {
            const long n = min(row0 + r, H - 1);
            rw[r] = {w + n * rowBytes, s + n * sz, b + n * sz, sdt};
        }
        float a[QMOE_DR][1];
#pragma unroll
        for (int r = 0; r < QMOE_DR; r++) a[r][0] = 0.f;
        q_dots<F, QMOE_DR, 1>(rw, h + (long)p * I, I, I, 1, group, 0, 1, lane, a);
#pragma unroll
        for (int r = 0; r < QMOE_DR; r++) acc[r][0] += wt * a[r][0];
    }
#pragma unroll
    for (int r = 0; r < QMOE_DR; r++) acc[r][0] = warp_sum(acc[r][0]);
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < QMOE_DR; r++) red[warp][r] = acc[r][0];
    }
    __syncthreads();
    if (threadIdx.x < QMOE_DR && row0 + threadIdx.x < H) {
        float s = 0.f;
        for (int v = 0; v < QWARPS; v++) s += red[v][threadIdx.x];
        out[(long)t * H + row0 + threadIdx.x] = s;
    }
}

// qrouter_route1 is the packed router's GEMV and moe_route1 in one launch for
// a single token (as moe.cu's router_route1_body): a warp a logit, and the
// last block to finish routes (moe.cu's route1_tail). counter is zero
// between steps.
template <int F>
__device__ __forceinline__ void qrouter_route1(const float* __restrict__ x, const unsigned char* __restrict__ w,
                                               const unsigned char* __restrict__ s, const unsigned char* __restrict__ b,
                                               float* __restrict__ logits, int H, int E, int rowBytes, int groups, int sdt) {
    pdl_wait();
    QMat m = {w, s, b, 0, logits, E};
    q_block<F, 1, 1, false>(m, m, x, 1, H, E, rowBytes, groups, sdt, blockIdx.x, 1);
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
template <> __device__ __forceinline__ void q_values<QF_NVFP4>(const QRow& r, int i0, int g, float* v) {
    const unsigned char* c = r.w + i0 / 2;
    for (int i = 0; i < 32; i++) v[i] = e4m3_value(r.w[g / 2 + (i0 + i) / 16]) * e2m1_value((c[i / 2] >> (4 * (i % 2))) & 0xf);
}
template <> __device__ __forceinline__ void q_values<QF_MXFP8>(const QRow& r, int i0, int g, float* v) {
    const float d = e8m0_value(r.w[g + i0 / 32]);
    for (int i = 0; i < 32; i++) v[i] = e4m3_value(r.w[i0 + i]) * d;
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
template <> __device__ __forceinline__ void q_values<QF_Q2_K>(const QRow& r, int i0, int g, float* v) {
    const unsigned char* blk = r.w + (long)(i0 / 256) * 84;
    int c = (i0 % 256) / 32, n = c / 4, j = c % 4;
    float d = q_half(blk + 80), dmin = q_half(blk + 82);
    for (int h = 0; h < 2; h++) {
        u32 sc = blk[2 * c + h];
        float dl = d * (float)(sc & 0xfu), ml = dmin * (float)(sc >> 4);
        for (int l = 0; l < 16; l++) v[16 * h + l] = dl * (float)(((u32)blk[16 + 32 * n + 16 * h + l] >> (2 * j)) & 3u) - ml;
    }
}

// The IQ formats' values: IQRaw's codes times their scales, as IQUnit.
template <int F> __device__ __forceinline__ void iq_values(const QRow& r, int i0, float* v) {
    const IQRaw<F> raw = iq_fetch<F>(r.w, i0 / 32);
    float q[32], s0, s1;
    raw.decode(q, s0, s1);
#pragma unroll
    for (int l = 0; l < 32; l++) v[l] = (l < 16 ? s0 : s1) * q[l];
}
#define IQ_Q_VALUES(F)                                                                                                 \
    template <> __device__ __forceinline__ void q_values<F>(const QRow& r, int i0, int g, float* v) { iq_values<F>(r, i0, v); }
IQ_Q_VALUES(QF_IQ2_XXS)
IQ_Q_VALUES(QF_IQ2_XS)
IQ_Q_VALUES(QF_IQ2_S)
IQ_Q_VALUES(QF_IQ3_XXS)
IQ_Q_VALUES(QF_IQ3_S)
IQ_Q_VALUES(QF_IQ1_S)
IQ_Q_VALUES(QF_IQ1_M)

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

#define QGEMV_PARAMS                                                                                                   \
    const float *__restrict__ x, int M, int K, int rowBytes, int groups, int sdt, int ks, int gu,                      \
        const unsigned char *w0, const unsigned char *s0, const unsigned char *b0, const float *bias0, float *out0,    \
        int n0, const unsigned char *w1, const unsigned char *s1, const unsigned char *b1, const float *bias1,         \
        float *out1, int n1, const unsigned char *w2, const unsigned char *s2, const unsigned char *b2,                \
        const float *bias2, float *out2, int n2
#define QGEMV_KERNEL(F, S, R, C)                                                                                       \
    MTLB_KERNEL void __launch_bounds__(QWARPS * 32) qgemv_##S##_c##C##_r##R(QGEMV_PARAMS) {                 \
        QMat m0 = {w0, s0, b0, bias0, out0, n0}, m1 = {w1, s1, b1, bias1, out1, n1}, m2 = {w2, s2, b2, bias2, out2, n2}; \
        qgemv<F, R, C>(x, M, K, rowBytes, groups, sdt, ks, gu, m0, m1, m2);                                            \
    }

#define QKERNELS(F, S)                                                                                                  \
    QGEMV_KERNEL(F, S, 1, 1)                                                                                            \
    QGEMV_KERNEL(F, S, 2, 1)                                                                                            \
    QGEMV_KERNEL(F, S, 4, 1)                                                                                            \
    QGEMV_KERNEL(F, S, 2, 4)                                                                                            \
    MTLB_KERNEL void __launch_bounds__(QWARPS * 32) qmoe_gate_up_##S(                                       \
        const float* __restrict__ x, float* __restrict__ h, const u64* __restrict__ tab, const int* __restrict__ ids,   \
        int H, int I, int K, int E, int rowBytes, int groups, int sdt, int* __restrict__ stats) {                        \
        qmoe_gate_up<F>(x, h, tab, ids, H, I, K, E, rowBytes, groups, sdt, stats);                                     \
    }                                                                                                                   \
    MTLB_KERNEL void __launch_bounds__(QWARPS * 32) qmoe_down_##S(                                          \
        const float* __restrict__ h, float* __restrict__ y, const u64* __restrict__ tab, const int* __restrict__ ids,   \
        int H, int I, int E, int rowBytes, int groups, int sdt, int* __restrict__ stats) {                               \
        qmoe_down<F>(h, y, tab, ids, H, I, E, rowBytes, groups, sdt, stats);                                           \
    }                                                                                                                   \
    MTLB_KERNEL void __launch_bounds__(QWARPS * 32) qmoe_down_sum_##S(                                      \
        const float* __restrict__ h, float* __restrict__ out, const u64* __restrict__ tab, const int* __restrict__ ids, \
        const float* __restrict__ wts, int H, int I, int K, int E, int rowBytes, int groups, int sdt,                   \
        int* __restrict__ stats) {                                                                                      \
        qmoe_down_sum<F>(h, out, tab, ids, wts, H, I, K, E, rowBytes, groups, sdt, stats);                             \
    }                                                                                                                   \
    MTLB_KERNEL void __launch_bounds__(QWARPS * 32) qrouter_route1_##S(                                     \
        const float* __restrict__ x, const unsigned char* __restrict__ w, const unsigned char* __restrict__ s,          \
        const unsigned char* __restrict__ b, float* __restrict__ logits, int H, int E, int K, int norm, int rowBytes,    \
        int groups, int sdt, int* __restrict__ topk_ids, float* __restrict__ topk_w, int* __restrict__ slot_expert,     \
        int* __restrict__ slot_start, int* __restrict__ slot_count, int* __restrict__ pair_list,                         \
        int* __restrict__ stats, int stat_index, int* __restrict__ counter) {                                           \
        qrouter_route1<F>(x, w, s, b, logits, H, E, rowBytes, groups, sdt);                                             \
        route1_tail(logits, E, K, norm, topk_ids, topk_w, slot_expert, slot_start, slot_count, pair_list, stats,       \
                    stat_index, counter);                                                                               \
    }                                                                                                                   \
    MTLB_KERNEL void __launch_bounds__(QWARPS * 32) qembed_##S(                                             \
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
QKERNELS(QF_Q2_K, q2_k)
QKERNELS(QF_IQ2_XXS, iq2_xxs)
QKERNELS(QF_IQ2_XS, iq2_xs)
QKERNELS(QF_IQ2_S, iq2_s)
QKERNELS(QF_IQ3_XXS, iq3_xxs)
QKERNELS(QF_IQ3_S, iq3_s)
QKERNELS(QF_IQ1_S, iq1_s)
QKERNELS(QF_IQ1_M, iq1_m)
QKERNELS(QF_NVFP4, nvfp4)
QKERNELS(QF_MXFP8, mxfp8)
