// quant_int.cu: MLX affine packed GEMVs on integer dot products
// (docs/quantization.md). A block stages its activation rows once in shared
// memory as 24-bit fixed point per 32-value unit, x ≈ d·(65536·h + 256·m +
// l) with h and m int8 and l uint8 (as precise as the floats: d/2 is
// 6e-8 of the unit's largest |x|), and the unit's float sum. A lane then
// dots 32 packed values of a row with the three byte planes in 24 dp4a,
// exact in int32, and adds scale·d·Σ + bias·Σx once per unit: about two
// instructions a weight value at 4 bits (docs/cuda.md, "Where 4-bit decode
// time goes"), where widening to floats took four. Weights are read 16 bytes a lane, a warp's rows (gate and up
// rows together with SwiGLU) with eight 16-byte loads of each lane in
// flight; blocks loop over row groups so the staging is paid once a block.

#define QA_XB 8192              // activation values a block stages at a time
#define QA_UNITS (QA_XB / 32)   // their 32-value units
// |x| in units of d: at most 8355839 keeps h = (x + 2^15) >> 16 in int8;
// the margin absorbs x·(QA_LIM/max) rounding up by an ulp (1.0 here).
#define QA_LIM 8355776.f
#define QA_QMAX 8355839

// QAStage: unit u's six 16-byte vectors, plane P (h, m, l) of values
// 0..15 (vector 2P) and 16..31 (2P+1), each 8 values as two words; vector k
// at 8u + (k XOR (u & 7)), so the 8 lanes of a quarter warp reading units
// u..u+7 hit 8 different bank groups. d and Σx per unit.
struct QAStage {
    uint4 q[QA_UNITS * 8];
    float d[QA_UNITS], s[QA_UNITS];
};

__device__ __forceinline__ int qa_slot(int u, int k) { return 8 * u + (k ^ (u & 7)); }

__device__ __forceinline__ u32 qa_pack(int a, int b, int c, int d) {
    return (u32)(a & 0xff) | (u32)(b & 0xff) << 8 | (u32)(c & 0xff) << 16 | (u32)d << 24;
}

// dp4a: c + the four byte products of a (unsigned with UA, else signed) and
// b (unsigned with UB, else signed).
template <bool UA, bool UB>
__device__ __forceinline__ int qa_dp4a(u32 a, u32 b, int c) {
    int d;
    if (UA && UB)
        asm("dp4a.u32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    else if (UA)
        asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    else
        asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// QANorm is an RMSNorm folded into a GEMV's staging (rmsnorm_gemv): the
// staged rows are (x·inv[c])·w, as rms_norm computes them, and the first
// block of grid x stores them to h, for whatever reads the norm's output.
// With red set, the staging call takes the whole row in one pass of the
// block (one row of k values, at most 8 a thread) and finds its 1/rms from
// the values it holds, over red (32 floats); else inv holds each row's.
struct QANorm {
    const float* w;
    float* h;
    const float* inv;  // per staged row, in shared memory
    float* red;
    int k;
    float eps;
};

// qa_put stores plane P of 8 values (chunk j of unit u) as two words of
// vector 2P + j/2: evens then odds at 4 bits, in order at 8.
template <int BITS>
__device__ __forceinline__ void qa_put(QAStage& st, int u, int j, int P, const int (&b)[8]) {
    const uint2 w = BITS == 4 ? make_uint2(qa_pack(b[0], b[2], b[4], b[6]), qa_pack(b[1], b[3], b[5], b[7]))
                              : make_uint2(qa_pack(b[0], b[1], b[2], b[3]), qa_pack(b[4], b[5], b[6], b[7]));
    ((uint2*)&st.q[qa_slot(u, 2 * P + j / 2)])[j % 2] = w;
}

// qa_quantize stages 8 values (p0, p1), chunk v of activation row c, as
// chunk v & 3 of unit c·ucap + v/4: the unit's largest |x| and sum over
// its four chunks' threads (consecutive lanes), then the three planes, d
// and Σx. Every thread of the unit calls it (the shuffles); only those
// with ok store.
template <int BITS>
__device__ __forceinline__ void qa_quantize(QAStage& st, float4 p0, float4 p1, bool ok, int c, int ucap, int v) {
    const float a[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
    float m = 0.f, s = 0.f;
#pragma unroll
    for (int e = 0; e < 8; e++) m = fmaxf(m, fabsf(a[e])), s += a[e];
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    if (!ok) return;
    const float inv = m > 0.f ? QA_LIM / m : 0.f;
    // q = 65536·h + 256·m + l: h rounds q to a multiple of 65536, and
    // what is left is q's low 16 bits, signed. One plane at a time keeps
    // few registers live (a GEMV holds its first loads across this).
    int q[8], b[8];
#pragma unroll
    for (int e = 0; e < 8; e++) q[e] = max(min(__float2int_rn(a[e] * inv), QA_QMAX), -QA_QMAX);
    const int u = c * ucap + v / 4, j = v & 3;
#pragma unroll
    for (int e = 0; e < 8; e++) b[e] = (q[e] + 32768) >> 16;
    qa_put<BITS>(st, u, j, 0, b);
#pragma unroll
    for (int e = 0; e < 8; e++) b[e] = (int)(short)q[e] >> 8;
    qa_put<BITS>(st, u, j, 1, b);
#pragma unroll
    for (int e = 0; e < 8; e++) b[e] = q[e] & 255;
    qa_put<BITS>(st, u, j, 2, b);
    if (j == 0) {
        st.d[u] = m / QA_LIM;
        st.s[u] = s;
    }
}

// qa_stage stages values [k0, k0+n) (n a multiple of 32) of cols activation
// rows, xs floats apart, row c from staged unit c·ucap. Every thread of the
// block calls it; four consecutive threads take a unit, 8 values each. The
// byte order follows the packing: a 4-bit word holds values 0..7 as nibbles,
// dotted as the even ones (w & 0x0f0f0f0f) and the odd ones (w >> 4 & ...),
// so each plane stores evens then odds; an 8-bit word holds values 0..3.
template <int BITS>
__device__ __forceinline__ void qa_stage(QAStage& st, const float* __restrict__ x, long xs, int cols, int k0, int n, int ucap,
                                         QANorm norm = {}) {
    const int per = n / 8, total = cols * per;
    for (int base = 0; base < total; base += blockDim.x) {
        const int i = base + threadIdx.x;
        const bool ok = i < total;
        const int c = ok ? i / per : 0, v = ok ? i - c * per : 0;
        float4 p0 = make_float4(0.f, 0.f, 0.f, 0.f), p1 = p0;
        if (ok) {
            const float4* p = (const float4*)(x + c * xs + k0 + 8 * v);
            p0 = p[0], p1 = p[1];
        }
        if (norm.w) {
            float inv;
            if (norm.red) {
                const float ss = block_sum(p0.x * p0.x + p0.y * p0.y + p0.z * p0.z + p0.w * p0.w + p1.x * p1.x +
                                               p1.y * p1.y + p1.z * p1.z + p1.w * p1.w,
                                           norm.red);
                inv = (float)(1.0 / sqrt((double)ss / norm.k + (double)norm.eps));
            } else {
                inv = norm.inv[c];
            }
            if (ok) {
                const float4* w = (const float4*)(norm.w + k0 + 8 * v);
                p0 = norm4(p0, __ldg(w), inv), p1 = norm4(p1, __ldg(w + 1), inv);
                if (norm.h && blockIdx.x == 0) {
                    float4* o = (float4*)(norm.h + c * xs + k0 + 8 * v);
                    o[0] = p0, o[1] = p1;
                }
            }
        }
        qa_quantize<BITS>(st, p0, p1, ok, c, ucap, v);
    }
}

// qa_dot is a row's 32 values (w) dotted with a staged unit's six vectors,
// as 65536·Σh + 256·Σm + Σl (the first two exact in int32).
template <int BITS>
__device__ __forceinline__ float qa_dot(const uint4 (&w)[BITS / 4], const uint4 (&xq)[6]) {
    int ih = 0, im = 0, il = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const uint4 &H = xq[j / 2], &M = xq[2 + j / 2], &L = xq[4 + j / 2];
        const u32 h0 = j % 2 ? H.z : H.x, h1 = j % 2 ? H.w : H.y;
        const u32 m0 = j % 2 ? M.z : M.x, m1 = j % 2 ? M.w : M.y;
        const u32 l0 = j % 2 ? L.z : L.x, l1 = j % 2 ? L.w : L.y;
        u32 a0, a1;
        if (BITS == 4) {
            const u32 wd = (&w[0].x)[j];
            a0 = wd & 0x0f0f0f0fu, a1 = (wd >> 4) & 0x0f0f0f0fu;
        } else {
            a0 = (&w[j / 2].x)[2 * (j % 2)], a1 = (&w[j / 2].x)[2 * (j % 2) + 1];
        }
        ih = qa_dp4a<true, false>(a0, h0, ih);
        ih = qa_dp4a<true, false>(a1, h1, ih);
        im = qa_dp4a<true, false>(a0, m0, im);
        im = qa_dp4a<true, false>(a1, m1, im);
        il = qa_dp4a<true, true>(a0, l0, il);
        il = qa_dp4a<true, true>(a1, l1, il);
    }
    return (float)(ih * 256 + im) * 256.f + (float)il;
}

// qa_scale is scale or bias i of a row, of type SDT (bridge.DType's codes:
// f32, f16, bf16): the kernels switch on the runtime type once, so the inner
// loops carry no type test.
template <int SDT>
__device__ __forceinline__ float qa_scale(const unsigned char* p, int i) {
    if (SDT == DT_F32) return __ldg((const float*)p + i);
    const u16 h = __ldg((const unsigned short*)p + i);
    return SDT == DT_BF16 ? __uint_as_float((u32)h << 16) : f16_to_f32(h);
}

// qa_gsh is log2 of a group's 32-value units (qaFits keeps it a power of
// two), so a unit's group is a shift.
__device__ __forceinline__ int qa_gsh(int group) { return __ffs(group / 32) - 1; }

// QAMat is a row source of qa_rows: R consecutive rows of A from row0 and,
// with GU, the same rows of B (rows past last repeat it, unwritten); unit v
// of the chunk is unit ub+v of the row. Each row's offsets into the values
// and the scales are found once, when the row group is set, and shared by
// A and B.
template <int BITS, int R, bool GU, int SDT>
struct QAMat {
    const unsigned char *wA, *sA, *bA, *wB, *sB, *bB;
    long woff[R];
    int soff[R];
    int ub, gsh;
    __device__ __forceinline__ QAMat(const QMat& A, const QMat& B, int row0, int last, int rowBytes, int sz, int gsh_)
        : wA(A.w), sA(A.s), bA(A.b), wB(B.w), sB(B.s), bB(B.b), ub(0), gsh(gsh_) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int n = min(row0 + r, last);
            woff[r] = (long)n * rowBytes, soff[r] = n * sz;
        }
    }
    __device__ __forceinline__ bool at(int r, int v, const uint4*& p, float& sc, float& bi) const {
        const bool up = GU && r >= R;
        const int i = up ? r - R : r, uu = ub + v, g = uu >> gsh;
        p = (const uint4*)((up ? wB : wA) + woff[i]) + uu * (BITS / 4);
        sc = qa_scale<SDT>((up ? sB : sA) + soff[i], g);
        bi = qa_scale<SDT>((up ? bB : bA) + soff[i], g);
        return true;
    }
};

// QAExperts is the row source of qa_moe_down_sum: row row0+r of the K
// experts' down projections one after another; unit v of the staged chunk
// is unit ub+v of the concatenation, in expert j = (ub+v) / upe, scaled by
// the pair's routing weight (pointers and weights from the block's shared
// table; a bad expert adds nothing).
#define QA_MAXK 64
template <int BITS, int R, int SDT>
struct QAExperts {
    const unsigned char* const* w;
    const unsigned char* const* s;
    const unsigned char* const* b;
    const float* wt;
    int upe, gsh, ub;  // ub: the chunk's first unit of the concatenation
    float inv;         // 1/upe
    long woff[R];
    int soff[R];
    __device__ __forceinline__ void rows(int row0, int last, int rowBytes, int sz) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int n = min(row0 + r, last);
            woff[r] = (long)n * rowBytes, soff[r] = n * sz;
        }
    }
    __device__ __forceinline__ bool at(int r, int v, const uint4*& p, float& sc, float& bi) const {
        v += ub;
        const int j = __float2int_rz(((float)v + 0.5f) * inv), uu = v - j * upe, g = uu >> gsh;
        const unsigned char* base = w[j];
        if (!base) return false;
        p = (const uint4*)(base + woff[r]) + uu * (BITS / 4);
        const float m = wt[j];
        sc = m * qa_scale<SDT>(s[j] + soff[r], g);
        bi = m * qa_scale<SDT>(b[j] + soff[r], g);
        return true;
    }
};

// QALoads is one pass of a lane's weight loads: U units of NR rows, with
// their scales and biases (zero past the chunk's units, or where the source
// has no row).
template <int BITS, int NR, int U>
struct QALoads {
    uint4 w[U][NR][BITS / 4];
    float sc[U][NR], bi[U][NR];
    template <class Src>
    __device__ __forceinline__ void load(const Src& src, int u, int nu) {
#pragma unroll
        for (int h = 0; h < U; h++) {
#pragma unroll
            for (int r = 0; r < NR; r++) {
                const uint4* p = 0;
                sc[h][r] = bi[h][r] = 0.f;
                if (u + 32 * h < nu && src.at(r, u + 32 * h, p, sc[h][r], bi[h][r])) {
#pragma unroll
                    for (int k = 0; k < BITS / 4; k++) w[h][r][k] = ld_stream(p + k);
                } else {
#pragma unroll
                    for (int k = 0; k < BITS / 4; k++) w[h][r][k] = make_uint4(0, 0, 0, 0);
                }
            }
        }
    }
};

// qa_rows adds NR rows' dot products with C staged activation rows into acc:
// the chunk's units [0, nu), column c's staged from unit su0 + c·ucap, the
// rows' units where src puts them. Lane l takes units l, l+32, ..., U at a
// time, so U·NR 16-byte weight loads (twice as many at 8 bits) are in
// flight together. With loaded, L already holds the first pass (issued
// before the kernel's wait: weights do not depend on the kernel before).
template <int BITS, int NR, int C, int U, class Src>
__device__ __forceinline__ void qa_rows(const Src& src, int nu, const QAStage& st, int su0, int ucap, int cols, int lane,
                                        float (&acc)[NR][C], QALoads<BITS, NR, U>& L, bool loaded = false) {
    for (int u = lane; u < nu; u += 32 * U) {
        if (!loaded || u != lane) L.load(src, u, nu);
#pragma unroll
        for (int h = 0; h < U; h++) {
            if (u + 32 * h >= nu) break;
#pragma unroll
            for (int c = 0; c < C; c++) {
                if (c >= cols) break;
                const int su = su0 + c * ucap + u + 32 * h;
                uint4 xq[6];
#pragma unroll
                for (int k = 0; k < 6; k++) xq[k] = st.q[qa_slot(su, k)];
                const float d = st.d[su], sx = st.s[su];
#pragma unroll
                for (int r = 0; r < NR; r++) {
                    const float S = qa_dot<BITS>(L.w[h][r], xq);
                    acc[r][c] += L.sc[h][r] * d * S + L.bi[h][r] * sx;
                }
            }
        }
    }
}

// QA_LOADS is the 16-byte loads a lane keeps in flight: U units of NR rows,
// half as many with HALF (a GEMV of four or more row-by-column dot
// products: they and its three matrices take the registers, and the whole
// set would spill).
#define QA_LOADS 8
#define QA_U(BITS, NR, HALF) (QA_LOADS * 4 / (BITS) / (NR) / ((HALF) ? 2 : 1) > 0 ? QA_LOADS * 4 / (BITS) / (NR) / ((HALF) ? 2 : 1) : 1)

// qa_prefetch_row asks for a row of bytes in L2, 16 KiB a request.
__device__ __forceinline__ void qa_prefetch_row(const unsigned char* p, int bytes) {
    for (int off = 0; off < bytes; off += 16384) prefetch_l2(p + off, (unsigned)min(bytes - off, 16384));
}

// QAShared is what a qa kernel's block keeps in shared memory: the staged
// activations, each staged row's 1/rms and a reduction's partials, for
// qa_moe_down_sum the token's experts, and for a qa_moe_gate_up that routes
// its token's expert ids and weights. The kernels declare it once, outside
// the scale-type switch, so the three instantiations share it.
struct QAShared {
    QAStage st;
    float inv[4], red[32];
    const unsigned char *w[QA_MAXK], *s[QA_MAXK], *b[QA_MAXK];
    float wt[QA_MAXK];
    int ids[QA_MAXK];
};

// qa_pick is row group rg's matrix and its group index within it, among
// g0 groups of m0, g1 of m1, then m2's (selected by value: a pointer to one
// of three would put them in local memory).
__device__ __forceinline__ QMat qa_pick(int& g, int g0, int g1, const QMat& m0, const QMat& m1, const QMat& m2) {
    if (g < g0) return m0;
    g -= g0;
    if (g < g1) return m1;
    g -= g1;
    return m2;
}

// QAArgmax is where qagemv_am puts its activation row's largest output's
// index (the argmax after a decode step's LM head, folded into its
// launch): each block's best goes to keys[row] by an atomic max on a key
// that orders values and then lower indices first, and the last block to
// finish writes out[row] and clears keys and count for the next launch.
struct QAArgmax {
    int* out;
    unsigned long long* keys;
    int* count;
};

// QAArgmaxShared is a qagemv_am block's: each warp's best key, and whether
// the block finished last.
struct QAArgmaxShared {
    unsigned long long key[QWARPS];
    int last;
};

// qa_argmax_key orders (v, i) as ArgmaxOp does: larger values first, then
// lower indices; -0 is +0, and a NaN or -inf gets 0, the least key (neither
// ever wins: a row of nothing else gives -1, bridge.NoToken).
__device__ __forceinline__ unsigned long long qa_argmax_key(float v, int i) {
    if (v != v || v == NEG_INF) return 0ull;
    if (v == 0.f) v = 0.f;
    const u32 b = __float_as_uint(v), ord = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    return ((unsigned long long)ord << 32) | (u32)~(u32)i;
}

// qa_argmax follows qa_gemv<BITS, R, 1, ...> of one matrix of N rows in
// qagemv_am: the block reads back the outputs its warps wrote (its row
// groups, as qa_gemv hands them out), its best key joins its activation
// row's, and the block that finishes last turns the M rows' keys into
// indices. Reading back, rather than keeping the best in the GEMV's loop,
// leaves that loop's registers as they are.
template <int R>
__device__ __forceinline__ void qa_argmax(QAArgmaxShared& sh, const QAArgmax& am, const float* out, int M, int N) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int total = (N + R - 1) / R, stride = gridDim.x * QWARPS;
    const float* o = out + (long)blockIdx.y * N;
    __syncthreads();  // the block's outputs are written
    unsigned long long k = 0;
    for (int base = blockIdx.x * QWARPS; base < total; base += stride) {
        const int hi = min((base + QWARPS) * R, N);
        for (int n = base * R + threadIdx.x; n < hi; n += blockDim.x) k = max(k, qa_argmax_key(o[n], n));
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) k = max(k, __shfl_xor_sync(0xffffffffu, k, d));
    if (lane == 0) sh.key[warp] = k;
    __syncthreads();
    if (threadIdx.x == 0) {
#pragma unroll
        for (int w = 0; w < QWARPS; w++) k = max(k, sh.key[w]);
        if (k) atomicMax(am.keys + blockIdx.y, k);
        __threadfence();
        sh.last = atomicAdd(am.count, 1) == (int)(gridDim.x * gridDim.y) - 1;
    }
    __syncthreads();
    if (!sh.last) return;
    __threadfence();
    for (int r = threadIdx.x; r < M; r += blockDim.x) {
        const unsigned long long key = atomicExch(am.keys + r, 0ull);
        am.out[r] = key ? (int)~(u32)key : -1;
    }
    if (threadIdx.x == 0) *am.count = 0;
}

// qa_gemv: out = x[M][K]·wᵀ (+ bias) for up to three affine matrices of one
// format reading the same x (q, k, v), or with GU gate and up: out0 =
// silu(x·gateᵀ + bias0)·(x·upᵀ + bias1) and out1 = x·upᵀ + bias1 when
// set. With ra, a lone matrix's output is added into that residual (the
// host makes out the residual itself). Grid y: C activation rows a block; grid x: blocks looping over row
// groups of R rows a warp, each warp's next group prefetched into L2 while
// it reads the current one. K over QA_XB/C values is staged a chunk at a
// time. A warp's first pass of weight loads is issued before the wait on
// the kernel before (pdl_wait, called here), so their latency passes while
// that kernel ends and x is staged.
template <int BITS, int R, int C, bool GU, int SDT>
__device__ __forceinline__ void qa_gemv(QAShared& sh, const float* __restrict__ x, int M, int K, int rowBytes, int groups,
                                        const QMat& m0, const QMat& m1, const QMat& m2, const float* __restrict__ nw,
                                        float* __restrict__ nh, float eps, const float* ra = 0) {
    QAStage& st = sh.st;
    constexpr int NR = GU ? 2 * R : R;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int c0 = blockIdx.y * C, cols = min(C, M - c0);
    const int ucap = QA_UNITS / C, kcap = ucap * 32, group = K / groups, sz = groups * (SDT == DT_F32 ? 4 : 2);
    const float* xc = x + (long)c0 * K;
    const int g0 = (m0.n + R - 1) / R, g1 = GU ? 0 : (m1.n + R - 1) / R, g2 = GU ? 0 : (m2.n + R - 1) / R;
    const int total = g0 + g1 + g2, stride = gridDim.x * QWARPS;
    const int nchunks = (K + kcap - 1) / kcap;
    constexpr int U = QA_U(BITS, NR, NR * C >= 4);
    // Not for six or more rows' 16-byte loads a lane (8-bit rows three at
    // a time, 4-bit gate/up rows three): held across the staging, they
    // would spill (TestPackedKernelsKeepToRegisters).
    constexpr bool PRE = NR * BITS / 4 < 6;
    QALoads<BITS, NR, U> L;
    const int first = blockIdx.x * QWARPS + warp;
    if (PRE && first < total) {
        int g = first;
        const QMat m = GU ? m0 : qa_pick(g, g0, g1, m0, m1, m2);
        L.load(QAMat<BITS, R, GU, SDT>(m, m1, g * R, max(m.n - 1, 0), rowBytes, sz, qa_gsh(group)), lane,
               min(kcap, K) / 32);
    }
    pdl_wait();
    // One row of at most 8 values a thread: the norm's sum of squares comes
    // from the staging pass itself.
    const bool onepass = nw && cols == 1 && nchunks == 1 && K <= 8 * (int)blockDim.x;
    QANorm norm = {nw, nh ? nh + (long)c0 * K : 0, sh.inv, onepass ? sh.red : 0, K, eps};
    if (nw && !onepass) {
        // The norm's 1/rms of each staged row, over all of K.
        for (int c = 0; c < cols; c++) {
            float ss = 0.f;
            for (int i = threadIdx.x * 4; i < K; i += blockDim.x * 4) {
                const float4 v = __ldg((const float4*)(xc + (long)c * K + i));
                ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
            }
            ss = block_sum(ss, sh.red);
            if (threadIdx.x == 0) sh.inv[c] = (float)(1.0 / sqrt((double)ss / K + (double)eps));
        }
        __syncthreads();
    }
    if (nchunks == 1) {
        qa_stage<BITS>(st, xc, K, cols, 0, K, ucap, norm);
        __syncthreads();
    }
    for (int base = blockIdx.x * QWARPS; base < total; base += stride) {
        const int rg = base + warp;
        const bool active = rg < total;
        if (rg + stride < total && lane < NR) {
            int gn = rg + stride;
            const QMat mn = GU ? (lane >= R ? m1 : m0) : qa_pick(gn, g0, g1, m0, m1, m2);
            qa_prefetch_row(mn.w + (long)min(gn * R + lane % R, mn.n - 1) * rowBytes, rowBytes);
        }
        int g = rg;
        const QMat m = GU ? m0 : qa_pick(g, g0, g1, m0, m1, m2);
        QAMat<BITS, R, GU, SDT> src(m, m1, g * R, max(m.n - 1, 0), rowBytes, sz, qa_gsh(group));
        float acc[NR][C];
#pragma unroll
        for (int r = 0; r < NR; r++)
#pragma unroll
            for (int c = 0; c < C; c++) acc[r][c] = 0.f;
        for (int k0 = 0; k0 < K; k0 += kcap) {
            const int kc = min(kcap, K - k0);
            if (nchunks > 1) {
                __syncthreads();
                qa_stage<BITS>(st, xc, K, cols, k0, kc, ucap, norm);
                __syncthreads();
            }
            src.ub = k0 / 32;
            if (active) qa_rows<BITS, NR, C, U>(src, kc / 32, st, 0, ucap, cols, lane, acc, L, PRE && rg == first && k0 == 0);
        }
        if (!active) continue;
#pragma unroll
        for (int r = 0; r < NR; r++)
#pragma unroll
            for (int c = 0; c < C; c++) acc[r][c] = warp_sum(acc[r][c]);
        if (lane != 0) continue;
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int n = g * R + r;
            if (n >= m.n) break;
#pragma unroll
            for (int c = 0; c < C; c++) {
                if (c >= cols) break;
                const long o = (long)(c0 + c) * m.n + n;
                if (GU) {
                    const float gv = acc[r][c] + (m0.bias ? m0.bias[n] : 0.f);
                    const float uv = acc[R + r][c] + (m1.bias ? m1.bias[n] : 0.f);
                    m0.out[o] = silu(gv) * uv;
                    if (m1.out) m1.out[o] = uv;
                } else {
                    // ra (the residual, maybe m.out itself) is added
                    // after the bias, as the unfused add would.
                    float y = acc[r][c] + (m.bias ? m.bias[n] : 0.f);
                    if (ra) y += ra[o];
                    m.out[o] = y;
                }
            }
        }
    }
}

// qa_gemv_prefetch: before the wait on the kernel before, the first row
// group of each warp heads for L2 (weights do not depend on that kernel).
template <int R, bool GU>
__device__ __forceinline__ void qa_gemv_prefetch(int rowBytes, const QMat& m0, const QMat& m1) {
    constexpr int NR = GU ? 2 * R : R;
    const int rg = blockIdx.x * QWARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (rg < (m0.n + R - 1) / R && lane < NR) {
        const QMat& m = (GU && lane >= R) ? m1 : m0;
        qa_prefetch_row(m.w + (long)min(rg * R + lane % R, m0.n - 1) * rowBytes, rowBytes);
    }
}

// QARoute is a single token's routing, done by qa_moe_gate_up itself from
// the router's logits (a plain GEMV before it): every block routes the
// token (one warp, while the others stage x) and block 0 stores the ids,
// weights and expert slots for the kernels after it, as moe_route1 does.
// Routing in the consumer spares the router kernel a last-block tail (a
// fence, an atomic and a second read of the logits) on the step's path.
struct QARoute {
    const float* logits;
    int norm, stat_index;
    float* wts;
    int *slot_expert, *slot_start, *slot_count, *pair_list;
};

// qa_moe_gate_up: h[p] = silu(x·gateᵀ)·(x·upᵀ) for each (token, expert)
// pair p of token blockIdx.y, the token's x staged once a block and its
// pairs' row groups shared among the blocks of grid x. With route.logits
// set (one token) the kernel routes first and stores ids.
template <int BITS, int R, int SDT>
__device__ __forceinline__ void qa_moe_gate_up(QAShared& sh, const float* __restrict__ x, float* __restrict__ h,
                                               const u64* __restrict__ tab, int* ids, int H, int I, int K, int E,
                                               int rowBytes, int groups, int* __restrict__ stats, const QARoute& route) {
    QAStage& st = sh.st;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = blockIdx.y;
    const int group = H / groups, sz = groups * (SDT == DT_F32 ? 4 : 2), per = (I + R - 1) / R, total = K * per;
    const int stride = gridDim.x * QWARPS;
    if (route.logits && warp == 0) route_token(route.logits, 0, E, K, route.norm, sh.ids, sh.wt, stats);
    qa_stage<BITS>(st, x + (long)t * H, H, 1, 0, H, QA_UNITS);
    if (!route.logits) {
        for (int j = threadIdx.x; j < K; j += blockDim.x) sh.ids[j] = ids[t * K + j];
    }
    __syncthreads();
    if (route.logits && blockIdx.x == 0) {
        for (int j = threadIdx.x; j < K; j += blockDim.x) {
            ids[j] = route.slot_expert[j] = sh.ids[j];
            route.wts[j] = sh.wt[j];
            route.slot_start[j] = j, route.slot_count[j] = 1, route.pair_list[j] = j;
        }
        if (threadIdx.x == 0) stats[route.stat_index] = K;
    }
    {
        // The first row group's rows head for L2 once the ids are known.
        const int rg = blockIdx.x * QWARPS + warp;
        if (rg < total && lane < 2 * R) {
            const int j = rg / per, e = sh.ids[j];
            if (e >= 0 && e < E)
                qa_prefetch_row((const unsigned char*)tab[(lane / R) * E + e] + (long)min((rg - j * per) * R + lane % R, I - 1) * rowBytes,
                                rowBytes);
        }
    }
    for (int rg = blockIdx.x * QWARPS + warp; rg < total; rg += stride) {
        if (rg + stride < total && lane < 2 * R) {
            const int jn = (rg + stride) / per, en = sh.ids[jn];
            if (en >= 0 && en < E)
                qa_prefetch_row((const unsigned char*)tab[(lane / R) * E + en] +
                                    (long)min((rg + stride - jn * per) * R + lane % R, I - 1) * rowBytes,
                                rowBytes);
        }
        const int j = rg / per, row0 = (rg - j * per) * R, p = t * K + j, e = sh.ids[j];
        if (e < 0 || e >= E) {
            if (lane == 0) atomicOr(stats, ERR_BAD_EXPERT);
            continue;
        }
        const QMat gm = qmoe_mat(tab, 0, e, E, h + (long)p * I, I), um = qmoe_mat(tab, 1, e, E, 0, I);
        const QAMat<BITS, R, true, SDT> src(gm, um, row0, I - 1, rowBytes, sz, qa_gsh(group));
        float acc[2 * R][1];
#pragma unroll
        for (int r = 0; r < 2 * R; r++) acc[r][0] = 0.f;
        QALoads<BITS, 2 * R, QA_U(BITS, 2 * R, false)> L;
        qa_rows<BITS, 2 * R, 1, QA_U(BITS, 2 * R, false)>(src, H / 32, st, 0, QA_UNITS, 1, lane, acc, L);
#pragma unroll
        for (int r = 0; r < 2 * R; r++) acc[r][0] = warp_sum(acc[r][0]);
        if (lane == 0) {
#pragma unroll
            for (int r = 0; r < R; r++)
                if (row0 + r < I) gm.out[row0 + r] = silu(acc[r][0]) * acc[R + r][0];
        }
    }
}

// qa_moe_down_sum: out[t] = Σ_j w[t·K+j] · h[t·K+j]·downᵀ of the pair's
// expert (+ res[t], the residual, when set: out may be res), token
// blockIdx.y: its K rows of h (contiguous, K·I values) staged once a block,
// or with CHUNKED (more than QA_XB values: Mixtral's 2·14336) a chunk at a
// time for each row group; a warp's R output rows dotted with all of them
// at once (QAExperts), so every expert's loads are in flight together. The
// experts' table is in sh (qa_moe_experts).
template <int BITS, int R, int SDT, bool CHUNKED>
__device__ __forceinline__ void qa_moe_down_sum(QAShared& sh, const float* __restrict__ h, float* out, int H, int I, int K,
                                                int rowBytes, int groups, const float* res) {
    QAStage& st = sh.st;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = blockIdx.y;
    const int upe = I / 32, nu = K * upe, total = (H + R - 1) / R, stride = gridDim.x * QWARPS;
    const float* ht = h + (long)t * K * I;
    if (!CHUNKED) {
        qa_stage<BITS>(st, ht, K * I, 1, 0, K * I, QA_UNITS);
        __syncthreads();
    }
    QAExperts<BITS, R, SDT> src;
    src.w = sh.w, src.s = sh.s, src.b = sh.b, src.wt = sh.wt;
    src.upe = upe, src.gsh = qa_gsh(I / groups), src.inv = 1.f / (float)upe, src.ub = 0;
    const int sz = groups * (SDT == DT_F32 ? 4 : 2);
    // Chunked, every round stages between barriers, so a block's warps go
    // round together (block-uniform), those past the rows idle.
    for (int base = blockIdx.x * QWARPS; base < total; base += stride) {
        const int rg = base + warp;
        const bool active = rg < total;
        if (!CHUNKED && !active) break;
        for (int i = lane; i < K * R && rg + stride < total; i += 32)
            if (sh.w[i / R]) qa_prefetch_row(sh.w[i / R] + (long)min((rg + stride) * R + i % R, H - 1) * rowBytes, rowBytes);
        const int row0 = rg * R;
        src.rows(row0, H - 1, rowBytes, sz);
        float acc[R][1];
#pragma unroll
        for (int r = 0; r < R; r++) acc[r][0] = 0.f;
        QALoads<BITS, R, QA_U(BITS, R, false)> L;
        if (CHUNKED) {
            for (int u0 = 0; u0 < nu; u0 += QA_UNITS) {
                const int n = min(QA_UNITS, nu - u0);
                __syncthreads();
                qa_stage<BITS>(st, ht, K * I, 1, 32 * u0, 32 * n, QA_UNITS);
                __syncthreads();
                src.ub = u0;
                if (active) qa_rows<BITS, R, 1, QA_U(BITS, R, false)>(src, n, st, 0, QA_UNITS, 1, lane, acc, L);
            }
            if (!active) continue;
        } else {
            qa_rows<BITS, R, 1, QA_U(BITS, R, false)>(src, nu, st, 0, QA_UNITS, 1, lane, acc, L);
        }
#pragma unroll
        for (int r = 0; r < R; r++) acc[r][0] = warp_sum(acc[r][0]);
        if (lane == 0) {
#pragma unroll
            for (int r = 0; r < R; r++)
                if (row0 + r < H) {
                    const long o = (long)t * H + row0 + r;
                    out[o] = acc[r][0] + (res ? res[o] : 0.f);
                }
        }
    }
}

// qa_moe_experts fills sh's table of token blockIdx.y's K experts' down
// pointers and routing weights (a bad expert: no pointer, flagged) and
// prefetches the first row group of each warp. The ids are read after the
// wait; they come from the router, two kernels back.
template <int R>
__device__ __forceinline__ void qa_moe_experts(QAShared& sh, const u64* __restrict__ tab, const int* __restrict__ ids,
                                               const float* __restrict__ wts, int H, int K, int E, int rowBytes,
                                               int* __restrict__ stats) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = blockIdx.y;
    if (threadIdx.x < K) {
        const int p = t * K + threadIdx.x, e = ids[p];
        const bool ok = e >= 0 && e < E;
        if (!ok) atomicOr(stats, ERR_BAD_EXPERT);
        sh.w[threadIdx.x] = ok ? (const unsigned char*)tab[2 * E + e] : 0;
        sh.s[threadIdx.x] = ok ? (const unsigned char*)tab[5 * E + e] : 0;
        sh.b[threadIdx.x] = ok ? (const unsigned char*)tab[8 * E + e] : 0;
        sh.wt[threadIdx.x] = ok ? wts[p] : 0.f;
    }
    __syncthreads();
    const int rg = blockIdx.x * QWARPS + warp;
    for (int i = lane; i < K * R && rg < (H + R - 1) / R; i += 32)
        if (sh.w[i / R]) qa_prefetch_row(sh.w[i / R] + (long)min(rg * R + i % R, H - 1) * rowBytes, rowBytes);
}

// QA_SDT runs BODY with the scale type sdt as the template constant SDT.
#define QA_SDT(sdt, BODY)                          \
    switch (sdt) {                                 \
    case DT_BF16: {                                \
        constexpr int SDT = DT_BF16;               \
        BODY;                                      \
        break;                                     \
    }                                              \
    case DT_F16: {                                 \
        constexpr int SDT = DT_F16;                \
        BODY;                                      \
        break;                                     \
    }                                              \
    default: {                                     \
        constexpr int SDT = DT_F32;                \
        BODY;                                      \
    }                                              \
    }

#define QA_GEMV_PARAMS                                                                                                 \
    const float *__restrict__ x, int M, int K, int rowBytes, int groups, int sdt, const unsigned char *w0,             \
        const unsigned char *s0, const unsigned char *b0, const float *bias0, float *out0, int n0,                     \
        const unsigned char *w1, const unsigned char *s1, const unsigned char *b1, const float *bias1, float *out1,    \
        int n1, const unsigned char *w2, const unsigned char *s2, const unsigned char *b2, const float *bias2,         \
        float *out2, int n2, const float *nw, float *nh, float eps, int *am_out, unsigned long long *am_keys,   \
        int *am_count, const float *ra
#define QA_GEMV_KERNEL(BITS, S, NAME, C, R, GU)                                                                      \
    MTLB_KERNEL void __launch_bounds__(QWARPS * 32, 2) NAME##_##S##_c##C##_r##R(QA_GEMV_PARAMS) {                      \
        __shared__ QAShared sh;                                                                                        \
        QMat m0 = {w0, s0, b0, bias0, out0, n0}, m1 = {w1, s1, b1, bias1, out1, n1}, m2 = {w2, s2, b2, bias2, out2, n2}; \
        qa_gemv_prefetch<R, GU>(rowBytes, m0, m1);                                                                     \
        QA_SDT(sdt, (qa_gemv<BITS, R, C, GU, SDT>(sh, x, M, K, rowBytes, groups, m0, m1, m2, nw, nh, eps, ra)))        \
    }

// QA_GEMV_AM_KERNEL: qagemv_am, a lone matrix's single-row GEMV with the
// argmax of its output folded in (QAArgmax).
#define QA_GEMV_AM_KERNEL(BITS, S, R)                                                                                  \
    MTLB_KERNEL void __launch_bounds__(QWARPS * 32, 2) qagemv_am_##S##_c1_r##R(QA_GEMV_PARAMS) {                       \
        __shared__ QAShared sh;                                                                                        \
        __shared__ QAArgmaxShared ash;                                                                                 \
        QMat m0 = {w0, s0, b0, bias0, out0, n0}, m1 = {w1, s1, b1, bias1, out1, n1}, m2 = {w2, s2, b2, bias2, out2, n2}; \
        qa_gemv_prefetch<R, false>(rowBytes, m0, m1);                                                                  \
        QA_SDT(sdt, (qa_gemv<BITS, R, 1, false, SDT>(sh, x, M, K, rowBytes, groups, m0, m1, m2, nw, nh, eps, ra)))     \
        qa_argmax<R>(ash, QAArgmax{am_out, am_keys, am_count}, out0, M, n0);                                           \
    }

// QA_DOWN_KERNEL: a token's expert down projections and weighted sum; with
// CHUNKED (k·I over QA_XB) a kernel of its own, so the one-stage kernel
// keeps its registers.
#define QA_DOWN_KERNEL(BITS, S, NAME, CHUNKED)                                                                         \
    MTLB_KERNEL void __launch_bounds__(QWARPS * 32, 2) NAME##_##S(                                                      \
        const float* __restrict__ h, float* out, const u64* __restrict__ tab, const int* __restrict__ ids,              \
        const float* __restrict__ wts, int H, int I, int K, int E, int rowBytes, int groups, int sdt,                   \
        int* __restrict__ stats, const float* res) {                                                                    \
        __shared__ QAShared sh;                                                                                         \
        pdl_wait();                                                                                                     \
        qa_moe_experts<1>(sh, tab, ids, wts, H, K, E, rowBytes, stats);                                                 \
        QA_SDT(sdt, (qa_moe_down_sum<BITS, 1, SDT, CHUNKED>(sh, h, out, H, I, K, rowBytes, groups, res)))               \
    }

// QA_GATE_UP_KERNEL: qamoe_gate_up with R gate and up rows a warp.
#define QA_GATE_UP_KERNEL(BITS, S, R)                                                                                  \
    MTLB_KERNEL void __launch_bounds__(QWARPS * 32, 2) qamoe_gate_up_##S##_r##R(                                       \
        const float* __restrict__ x, float* __restrict__ h, const u64* __restrict__ tab, int* ids, int H, int I, int K,  \
        int E, int rowBytes, int groups, int sdt, int* __restrict__ stats, const float* logits, int norm,               \
        float* wts, int* slot_expert, int* slot_start, int* slot_count, int* pair_list, int stat_index) {                \
        __shared__ QAShared sh;                                                                                         \
        const QARoute route = {logits, norm, stat_index, wts, slot_expert, slot_start, slot_count, pair_list};          \
        pdl_wait();                                                                                                     \
        QA_SDT(sdt, (qa_moe_gate_up<BITS, R, SDT>(sh, x, h, tab, ids, H, I, K, E, rowBytes, groups, stats, route)))    \
    }

// Variants: one activation row a block (decode) with 1, 2 or 4 rows a warp
// (the host takes the most that still gives every SM 16 warps), with 1
// or 4 the argmax after them folded in (qagemv_am: the LM head; 2 rows
// spill), gate/up
// pairs with 1, 2 or 3 (the fewest rounds of the resident warps: one
// round of 3 rows beats two of 2); four activation rows a block with 1 or
// 2. qamoe_gate_up takes 2 or 3 by the same rule.
#define QA_KERNELS(BITS, S)                                                                                             \
    QA_GEMV_KERNEL(BITS, S, qagemv, 1, 1, false)                                                                        \
    QA_GEMV_KERNEL(BITS, S, qagemv, 1, 2, false)                                                                        \
    QA_GEMV_KERNEL(BITS, S, qagemv, 1, 4, false)                                                                        \
    QA_GEMV_KERNEL(BITS, S, qagemv, 4, 1, false)                                                                        \
    QA_GEMV_KERNEL(BITS, S, qagemv, 4, 2, false)                                                                        \
    QA_GEMV_AM_KERNEL(BITS, S, 1)                                                                                      \
    QA_GEMV_AM_KERNEL(BITS, S, 4)                                                                                      \
    QA_GEMV_KERNEL(BITS, S, qagemv_gu, 1, 1, true)                                                                      \
    QA_GEMV_KERNEL(BITS, S, qagemv_gu, 1, 2, true)                                                                      \
    QA_GEMV_KERNEL(BITS, S, qagemv_gu, 1, 3, true)                                                                      \
    QA_GEMV_KERNEL(BITS, S, qagemv_gu, 4, 1, true)                                                                      \
    QA_GATE_UP_KERNEL(BITS, S, 2)                                                                                       \
    QA_GATE_UP_KERNEL(BITS, S, 3)                                                                                       \
    QA_DOWN_KERNEL(BITS, S, qamoe_down_sum, false)                                                                      \
    QA_DOWN_KERNEL(BITS, S, qamoe_down_chunks, true)                                                                    \
    MTLB_KERNEL void __launch_bounds__(QWARPS * 32, 2) qarouter_route1_##S(                                            \
        const float* __restrict__ x, const unsigned char* __restrict__ w, const unsigned char* __restrict__ s,          \
        const unsigned char* __restrict__ b, float* __restrict__ logits, int H, int E, int K, int norm, int rowBytes,    \
        int groups, int sdt, int* __restrict__ topk_ids, float* __restrict__ topk_w, int* __restrict__ slot_expert,     \
        int* __restrict__ slot_start, int* __restrict__ slot_count, int* __restrict__ pair_list,                         \
        int* __restrict__ stats, int stat_index, int* __restrict__ counter, const float* nw, float* nh, float eps) {     \
        __shared__ QAShared sh;                                                                                         \
        QMat m = {w, s, b, 0, logits, E}, none = {w, s, b, 0, 0, 0};                                                    \
        qa_gemv_prefetch<1, false>(rowBytes, m, none);                                                                  \
        QA_SDT(sdt, (qa_gemv<BITS, 1, 1, false, SDT>(sh, x, 1, H, rowBytes, groups, m, none, none, nw, nh, eps)))       \
        route1_tail(logits, E, K, norm, topk_ids, topk_w, slot_expert, slot_start, slot_count, pair_list, stats,       \
                    stat_index, counter);                                                                               \
    }

QA_KERNELS(4, affine4)
QA_KERNELS(8, affine8)
