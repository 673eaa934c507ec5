// decode.cu: paged attention for decode steps (one new token per sequence,
// token t of sequence t), with the KV-cache write and, optionally, RoPE and
// QK-norm fused in.
//
// One block per (sequence, KV head, context partition); warp w serves query
// head w of the KV head's GQA group (at most DEC_WARPS heads), so the keys
// and values are read once per group, into shared memory, 32 positions at a
// time: lane j scores position j against the warp's query, then the lanes
// split the head dimensions for the value sum. A decode step's latency is a
// chain of dependent memory round trips, so the chain is kept short:
//  - The cached keys and values of earlier steps, the block table and the
//    RoPE angles depend on nothing this step computes: they are fetched
//    (cp.async into shared memory, as many chunks as there are buffers)
//    before pdl_wait, while the kernel before (the q/k/v projection) still
//    runs.
//  - After the wait only this token's q, k and v are read.
//  - With a half cache a block keeps two chunk buffers: the next chunk's
//    copy is in flight while one is used.
//  - Each lane's score and the value sums run as several chains of FMAs:
//    at long contexts the kernel is bound by its per-chunk latency and
//    issue rate more than by its bytes (docs/cuda.md).
//  - Partitions are merged by the last block of the (sequence, KV head) to
//    finish, not by another launch; beyond mgroup partitions in two levels
//    (the last block of each group of mgroup merges it, the last of those
//    the groups), as one block's reads from L2 bound the merge.
// A token's partitions count from its first key, 0 or with a sliding
// window (window > 0) the window's, ctx - window, so a launch needs only
// enough of them for the most keys a token reads (bridge/cuda attnLaunch),
// and the merge takes those its keys span (docs/cuda.md, "Limits").
// The new token's key and value (position seq_len-1) never go through the
// cache within the step: the block whose partition holds that position keeps
// them in shared memory and is the only writer of their cache slot.
// Cache layout as attention.cu: [num_blocks][kv_heads][block_size][head_dim],
// in the cache's dtype KT: rows go to shared memory as stored (16-byte
// cp.async of 4 f32 or 8 half values) and are widened as they are used; the
// step's token is rounded to KT before it is used or stored.

#define DEC_WARPS 8
#define DEC_CHUNK 32  // positions per shared-memory chunk: one per lane
#define DEC_MAXD 128  // head sizes up to this (a float4 of dims per lane)
// Row stride in elements: 16 bytes of padding, so the 16-byte reads of 8
// lanes at 8 consecutive rows hit 32 distinct banks (rows of 528 or 272 bytes).
template <int KT> struct DecRow { enum { STRIDE = DEC_MAXD + 16 / (int)sizeof(typename KVElem<KT>::T) }; };
#define DEC_MAXPARTS 256  // partitions a launch may have (decodeConfig: they follow the context)

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
#else
    *(float4*)smem = *(const float4*)gmem;
#endif
}

// dec_load_chunk starts the copy of the cached keys and values of positions
// [c0, c1) (all older than the step's token) into rows 0.. of sk and sv.
template <int KT, typename E = typename KVElem<KT>::T>
__device__ __forceinline__ void dec_load_chunk(E (*sk)[DecRow<KT>::STRIDE], E (*sv)[DecRow<KT>::STRIDE],
                                               const E* __restrict__ kc, const E* __restrict__ vc,
                                               const int* __restrict__ bt, int c0, int c1, int kh, int KVH, int BS, int D) {
    constexpr int EPC = 16 / sizeof(E);  // elements per 16-byte copy
    const int dc = D / EPC, n = (c1 - c0) * dc;
    for (int e = threadIdx.x; e < n; e += blockDim.x) {
        const int j = e / dc, c = (e - j * dc) * EPC, p = c0 + j;
        const long o = (((long)bt[p / BS] * KVH + kh) * BS + p % BS) * D + c;
        cp_async16(&sk[j][c], kc + o);
        cp_async16(&sv[j][c], vc + o);
    }
}

// dec_dot is the dot product of D query values (f32, shared memory) with a
// cached key row of shared memory in KT.
template <int KT, typename E = typename KVElem<KT>::T>
__device__ __forceinline__ float dec_dot(const float* __restrict__ q, const E* __restrict__ kr, int D) {
    // Four sums, so the FMAs form four short chains, not one of D.
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    if (KT == DT_F32) {
#pragma unroll 8
        for (int i = 0; i < D; i += 4) {
            const float4 a = *(const float4*)(q + i), b = *(const float4*)((const float*)kr + i);
            d0 += a.x * b.x, d1 += a.y * b.y, d2 += a.z * b.z, d3 += a.w * b.w;
        }
    } else {
#pragma unroll 4
        for (int i = 0; i < D; i += 8) {
            float b[8];
            widen8<KT == DT_BF16 ? DT_BF16 : DT_F16>(*(const uint4*)((const u16*)kr + i), b);
            const float4 a0 = *(const float4*)(q + i), a1 = *(const float4*)(q + i + 4);
            d0 += a0.x * b[0] + a0.y * b[1], d1 += a0.z * b[2] + a0.w * b[3];
            d2 += a1.x * b[4] + a1.y * b[5], d3 += a1.z * b[6] + a1.w * b[7];
        }
    }
    return (d0 + d1) + (d2 + d3);
}

// dec_rope_angles computes, before the wait, what RoPE needs of lane's
// dims i = lane + 32·j of the first half: cos, sin and the QK-norm weights.
struct DecRope {
    float c[2], s[2], wa[2], wb[2];
};

__device__ __forceinline__ DecRope dec_rope_angles(const float* __restrict__ nw, const float* __restrict__ inv_freq, int D,
                                                   float pos) {
    DecRope r;
    const int lane = threadIdx.x & 31, half = D / 2;
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int i = lane + 32 * j;
        r.c[j] = 1.f, r.s[j] = 0.f, r.wa[j] = r.wb[j] = 1.f;
        if (i < half) {
            rope_sincos(pos, inv_freq[i], &r.s[j], &r.c[j]);
            if (nw) r.wa[j] = nw[i], r.wb[j] = nw[i + half];
        }
    }
    return r;
}

// dec_step_angles is dec_rope_angles at token t's position with ROPE, and
// the identity without.
template <bool ROPE>
__device__ __forceinline__ DecRope dec_step_angles(const float* __restrict__ nw, const float* __restrict__ inv_freq,
                                                   int D, const int* __restrict__ positions, int t) {
    if (!ROPE) return DecRope{};
    return dec_rope_angles(nw, inv_freq, D, (float)positions[t]);
}

// dec_rope_head (one warp) writes head src (D values) to dst, QK-normed
// when norm is set, rotated when rope is, and multiplied by mul: the same
// arithmetic, in the same order, as rope_head (common.cu).
__device__ __forceinline__ void dec_rope_head(const float* __restrict__ src, float* dst, const DecRope& r, bool norm,
                                              bool rope, int D, float eps, float mul) {
    const int lane = threadIdx.x & 31, half = D / 2;
    float a[2], b[2];
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int i = lane + 32 * j;
        a[j] = i < half ? src[i] : 0.f;
        b[j] = i < half ? src[i + half] : 0.f;
    }
    if (norm) {
        float ss = 0.f;
#pragma unroll
        for (int j = 0; j < 2; j++) ss += a[j] * a[j] + b[j] * b[j];
        ss = warp_sum(ss);
        const float inv = (float)(1.0 / sqrt((double)ss / D + (double)eps));
#pragma unroll
        for (int j = 0; j < 2; j++) a[j] = a[j] * inv * r.wa[j], b[j] = b[j] * inv * r.wb[j];
    }
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int i = lane + 32 * j;
        if (i < half) {
            float x = a[j], y = b[j];
            if (rope) x = a[j] * r.c[j] - b[j] * r.s[j], y = b[j] * r.c[j] + a[j] * r.s[j];
            dst[i] = x * mul;
            dst[i + half] = y * mul;
        }
    }
}

// dec_step_key (one warp) writes the step's key kr to snk (shared memory):
// QK-normed (when kn is set) and rotated with ROPE, else as it is.
template <bool ROPE>
__device__ __forceinline__ void dec_step_key(const float* __restrict__ kr, float* snk, const DecRope& rk,
                                             const float* __restrict__ kn, int D, float eps) {
    if (ROPE) {
        dec_rope_head(kr, snk, rk, kn != 0, true, D, eps, 1.f);
    } else {
        for (int i = threadIdx.x & 31; i < D; i += 32) snk[i] = kr[i];
    }
    __syncwarp();
}

// dec_merge (one warp, lane owning dims lane*4..+3 when lane < D/4) merges
// n partial softmax sums: (max, sum) pairs at ml[2i] and value sums at
// acc + i*D, into M, L (every lane) and A (its lane's dims), unnormalised
// like each partial. sf holds the warp's n factors.
__device__ __forceinline__ void dec_merge(const float* ml, const float* acc, int n, int D, float* sf, float& M, float& L,
                                          float4& A) {
    const int lane = threadIdx.x & 31, d4 = D / 4;
    // Every (max, sum) pair in one round of loads (a lane's share in
    // registers), not one round trip to L2 per 32.
    float mv[DEC_MAXPARTS / 32], lv[DEC_MAXPARTS / 32];
    M = NEG_INF;
#pragma unroll
    for (int u = 0; u < DEC_MAXPARTS / 32; u++) {
        const int i = lane + 32 * u;
        const float2 x = i < n ? __ldcg((const float2*)(ml + 2 * i)) : make_float2(NEG_INF, 0.f);
        mv[u] = x.x, lv[u] = x.y;
        M = fmaxf(M, x.x);
    }
    M = warp_max(M);
    L = 0.f;
#pragma unroll
    for (int u = 0; u < DEC_MAXPARTS / 32; u++) {
        const int i = lane + 32 * u;
        if (i < n) {
            const float f = expf(mv[u] - M);
            sf[i] = f;
            L += f * lv[u];
        }
    }
    L = warp_sum(L);
    __syncwarp();
    A = make_float4(0.f, 0.f, 0.f, 0.f);
    if (lane < d4) {
        // Four partial sums, so 16 partials' loads are in flight at once:
        // with a hundred partitions the merge is otherwise a chain of
        // round trips to L2.
        float4 B[4];
#pragma unroll
        for (int u = 0; u < 4; u++) B[u] = make_float4(0.f, 0.f, 0.f, 0.f);
        const float* ap = acc + lane * 4;
        int i = 0;
#pragma unroll 4
        for (; i + 4 <= n; i += 4) {
            float4 b[4];
#pragma unroll
            for (int u = 0; u < 4; u++) b[u] = __ldcg((const float4*)(ap + (long)(i + u) * D));
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const float f = sf[i + u];
                B[u].x += f * b[u].x, B[u].y += f * b[u].y, B[u].z += f * b[u].z, B[u].w += f * b[u].w;
            }
        }
        for (; i < n; i++) {
            const float4 b = __ldcg((const float4*)(ap + (long)i * D));
            const float f = sf[i];
            B[0].x += f * b.x, B[0].y += f * b.y, B[0].z += f * b.z, B[0].w += f * b.w;
        }
        A = make_float4(B[0].x + B[1].x + B[2].x + B[3].x, B[0].y + B[1].y + B[2].y + B[3].y,
                        B[0].z + B[1].z + B[2].z + B[3].z, B[0].w + B[1].w + B[2].w + B[3].w);
    }
    __syncwarp();  // sf is rewritten by the next merge
}

// dec_finish ends a block of its (sequence t, KV head kh, partition part)
// of nlive partitions: warp w < group holds head kh·group+w's max score m
// (natural-log units), its sum l and its value sums acc (unnormalised; the
// lane's dims lane·4..+3). With one partition it writes the output; else
// the partition's partials, and the last block of the (sequence, KV head)
// to finish merges them (in two levels beyond mgroup partitions). sf is
// DEC_WARPS·DEC_MAXPARTS floats of shared memory, s_last a shared flag.
__device__ __forceinline__ void dec_finish(float* __restrict__ out, int t, int kh, int part, int nlive, int H, int KVH,
                                           int D, int mgroup, float m, float l, float4 acc, float* __restrict__ tmp_acc,
                                           float* __restrict__ tmp_ml, int* __restrict__ counters, float* sfb,
                                           int* s_last_p) {
    int& s_last = *s_last_p;
    float(*sf)[DEC_MAXPARTS] = (float(*)[DEC_MAXPARTS])sfb;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = H / KVH, h = kh * group + warp, d4 = D / 4;
    const long base = (long)t * H + h;
    if (nlive == 1) {
        if (warp < group && lane < d4) {
            const float il = 1.f / l;
            *(float4*)(out + base * D + lane * 4) = make_float4(acc.x * il, acc.y * il, acc.z * il, acc.w * il);
        }
        return;
    }
    // Partials and merged groups share a head's slots: partitions at
    // [0, nparts), the first level's groups after them.
    const int nparts = gridDim.z, mg = mgroup >= 1 ? min(mgroup, nparts) : nparts, maxg = (nparts + mg - 1) / mg, NS = nparts + maxg;
    const int ng = (nlive + mg - 1) / mg;  // live groups: one level when 1
    float* ml_h = tmp_ml + base * NS * 2;
    float* acc_h = tmp_acc + base * NS * D;
    if (warp < group) {
        if (lane < d4) *(float4*)(acc_h + (long)part * D + lane * 4) = acc;
        if (lane == 0) ml_h[part * 2] = m, ml_h[part * 2 + 1] = l;
    }
    __threadfence();
    __syncthreads();
    if (ng > 1) {
        // The last block of the partition's group merges the group into
        // slot nparts + g, so no block reads more than mg partials' sums
        // (the merge is bound by one SM's reads from L2).
        const int g = part / mg, gl = min(mg, nlive - g * mg);
        int* gc = counters + (long)gridDim.x * KVH + ((long)t * KVH + kh) * maxg + g;
        if (threadIdx.x == 0) s_last = atomicAdd(gc, 1) == gl - 1;
        __syncthreads();
        if (!s_last) return;
        __threadfence();
        if (threadIdx.x == 0) *gc = 0;
        if (warp < group) {
            float M, L;
            float4 A;
            dec_merge(ml_h + g * mg * 2, acc_h + (long)g * mg * D, gl, D, sf[warp], M, L, A);
            if (lane < d4) *(float4*)(acc_h + (long)(nparts + g) * D + lane * 4) = A;
            if (lane == 0) ml_h[(nparts + g) * 2] = M, ml_h[(nparts + g) * 2 + 1] = L;
        }
        __threadfence();
        __syncthreads();
    }
    // The last block of the (sequence, KV head) merges the partitions (or
    // the groups) and resets the counter for the next step.
    int* counter = counters + (long)t * KVH + kh;
    if (threadIdx.x == 0) s_last = atomicAdd(counter, 1) == (ng > 1 ? ng : nlive) - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    if (threadIdx.x == 0) *counter = 0;
    if (warp >= group) return;
    const int first = ng > 1 ? nparts : 0;
    float M, L;
    float4 A;
    dec_merge(ml_h + first * 2, acc_h + (long)first * D, ng > 1 ? ng : nlive, D, sf[warp], M, L, A);
    if (lane < d4) {
        const float il = 1.f / L;
        *(float4*)(out + base * D + lane * 4) = make_float4(A.x * il, A.y * il, A.z * il, A.w * il);
    }

}

template <bool ROPE, int KT>
__device__ __forceinline__ void paged_decode_body(
    float* __restrict__ out, const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
    void* __restrict__ kcv, void* __restrict__ vcv, const int* __restrict__ seq_lens, const int* __restrict__ block_table,
    const int* __restrict__ slot_mapping, const int* __restrict__ positions, int H, int KVH, int D, int BS, int bt_stride,
    int num_blocks, float scale, int chunks, int mgroup, float* __restrict__ tmp_acc, float* __restrict__ tmp_ml,
    int* __restrict__ err, int* __restrict__ counters, const float* __restrict__ qn, const float* __restrict__ kn,
    const float* __restrict__ inv_freq, float eps, int window) {
    typedef typename KVElem<KT>::T E;
    constexpr int STRIDE = DecRow<KT>::STRIDE;
    E* __restrict__ kc = (E*)kcv;
    E* __restrict__ vc = (E*)vcv;
    // NBUF chunk buffers of keys and values: with a half cache two fit
    // in the 48 KiB of static shared memory, and the next chunk streams in
    // while one is used. The merge's factors (sf) reuse them.
    constexpr int NBUF = sizeof(E) == 2 ? 2 : 1;
    __shared__ __align__(16) E skv[NBUF][2][DEC_CHUNK][STRIDE];
    __shared__ __align__(16) float sq[DEC_WARPS][DEC_MAXD];
    __shared__ __align__(16) float snk[DEC_MAXD], snv[DEC_MAXD];
    __shared__ int s_last;
    static_assert(sizeof(skv) >= sizeof(float) * DEC_WARPS * DEC_MAXPARTS, "sf does not fit in the chunk buffers");
    float(*sf)[DEC_MAXPARTS] = (float(*)[DEC_MAXPARTS])&skv[0][0][0][0];

    const int t = blockIdx.x, kh = blockIdx.y, part = blockIdx.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = H / KVH, h = kh * group + warp;
    const int ctx = seq_lens[t], cur = ctx - 1;  // cur: the step's token
    // The token's first key (the window's with one); partition part holds
    // the keys [p0, p1) from it, the last of the nlive its keys span the
    // step's token.
    const int start = window > 0 ? max(0, ctx - window) : 0;
    const int plen = chunks * DEC_CHUNK, p0 = start + part * plen;
    if (p0 >= ctx) return;  // past this token's keys
    const int p1 = min(ctx, p0 + plen), nlive = (ctx - start + plen - 1) / plen;
    const int* bt = block_table + (long)t * bt_stride;

    // Before the wait: the first NBUF chunks' cached rows (a commit group
    // each, empty past the partition), the RoPE angles.
#pragma unroll
    for (int u = 0; u < NBUF; u++) {
        const int c0 = p0 + u * DEC_CHUNK;
        if (c0 < p1) dec_load_chunk<KT>(skv[u][0], skv[u][1], kc, vc, bt, c0, min(min(p1, cur), c0 + DEC_CHUNK), kh, KVH, BS, D);
        cp_async_commit();
    }
    const DecRope rq = dec_step_angles<ROPE>(qn, inv_freq, D, positions, t),
                  rk = dec_step_angles<ROPE>(kn, inv_freq, D, positions, t);
    pdl_wait_early();

    const bool mine = cur < p1;  // this block holds the step's token
    if (warp < group)
        dec_rope_head(q + ((long)t * H + h) * D, sq[warp], rq, ROPE && qn, ROPE, D, eps, scale);
    if (mine && warp == DEC_WARPS - 1) {
        const float* vr = v + ((long)t * KVH + kh) * D;
        dec_step_key<ROPE>(k + ((long)t * KVH + kh) * D, snk, rk, kn, D, eps);
        // As the cache stores them: the step's token is used as it will
        // be read in the steps after.
        for (int i = lane; i < D; i += 32) {
            snk[i] = kv_round<KT>(snk[i]);
            snv[i] = kv_round<KT>(vr[i]);
        }
        __syncwarp();
        const int slot = slot_mapping[t];
        if (slot >= 0 && slot < num_blocks * BS) {
            const long o = (((long)(slot / BS) * KVH + kh) * BS + slot % BS) * D;
            for (int i = lane; i < D; i += 32) {
                kv_store<KT>(kc, o + i, snk[i]);
                kv_store<KT>(vc, o + i, snv[i]);
            }
        } else if (slot >= 0 && lane == 0) {
            atomicOr(err, ERR_BAD_SLOT);
        }
    }

    float m = NEG_INF, l = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    const int d4 = D / 4;
    for (int c0 = p0, it = 0; c0 < p1; c0 += DEC_CHUNK, it++) {
        const int b = NBUF == 2 ? it & 1 : 0;
        if (NBUF == 2) {
            // Chunk it and it+1 are in flight (the latter maybe an empty
            // group): wait for this one only.
            cp_async_wait_n<1>();
        } else {
            if (c0 > p0) dec_load_chunk<KT>(skv[0][0], skv[0][1], kc, vc, bt, c0, min(min(p1, cur), c0 + DEC_CHUNK), kh, KVH, BS, D);
            cp_async_commit();
            cp_async_wait_n<0>();
        }
        __syncthreads();
        if (warp < group) {
            const E(*sk)[STRIDE] = skv[b][0];
            const E(*sv)[STRIDE] = skv[b][1];
            const int n = min(DEC_CHUNK, p1 - c0);
            const int nc = min(n, cur - c0);  // rows in sv: the step's token, if here, is row nc
            float s = NEG_INF;
            if (lane < n) s = lane == nc ? dec_dot<DT_F32>(sq[warp], snk, D) : dec_dot<KT>(sq[warp], sk[lane], D);
            const float mx = fmaxf(m, warp_max(s));
            const float corr = expf(m - mx);  // 0 on the first chunk (m = -inf)
            const float p = lane < n ? expf(s - mx) : 0.f;
            l = l * corr + warp_sum(p);
            // Two sums over alternate rows, for two chains of FMAs.
            float4 a0 = make_float4(acc.x * corr, acc.y * corr, acc.z * corr, acc.w * corr);
            float4 a1 = make_float4(0.f, 0.f, 0.f, 0.f);
            int j = 0;
#pragma unroll 4
            for (; j + 1 < nc; j += 2) {
                const float p0j = __shfl_sync(0xffffffffu, p, j), p1j = __shfl_sync(0xffffffffu, p, j + 1);
                if (lane < d4) {
                    const float4 x = kv_load4<KT>(sv[j], lane * 4), y = kv_load4<KT>(sv[j + 1], lane * 4);
                    a0.x += p0j * x.x, a0.y += p0j * x.y, a0.z += p0j * x.z, a0.w += p0j * x.w;
                    a1.x += p1j * y.x, a1.y += p1j * y.y, a1.z += p1j * y.z, a1.w += p1j * y.w;
                }
            }
            for (; j < n; j++) {  // an odd row, and the step's token
                const float pj = __shfl_sync(0xffffffffu, p, j);
                if (lane < d4) {
                    const float4 x = j == nc ? *(const float4*)(snv + lane * 4) : kv_load4<KT>(sv[j], lane * 4);
                    a0.x += pj * x.x, a0.y += pj * x.y, a0.z += pj * x.z, a0.w += pj * x.w;
                }
            }
            acc = make_float4(a0.x + a1.x, a0.y + a1.y, a0.z + a1.z, a0.w + a1.w);
            m = mx;
        }
        __syncthreads();  // this buffer is refilled (or holds sf)
        if (NBUF == 2) {
            // Chunk it+2 into the buffer just used.
            const int c2 = c0 + 2 * DEC_CHUNK;
            if (c2 < p1) dec_load_chunk<KT>(skv[b][0], skv[b][1], kc, vc, bt, c2, min(min(p1, cur), c2 + DEC_CHUNK), kh, KVH, BS, D);
            cp_async_commit();
        }
    }

    dec_finish(out, t, kh, part, nlive, H, KVH, D, mgroup, m, l, acc, tmp_acc, tmp_ml, counters, &sf[0][0], &s_last);
}

// ---- paged_decode_mma: the same step on tensor cores ----
// With a half cache, at long contexts paged_decode is bound by its issue
// rate: each cache byte costs a GQA group of 8 about four FMAs, with their
// shared-memory reads and widening (docs/cuda.md). paged_decode_mma takes
// the same launch (grid, partitions, dec_finish) for half caches, head
// sizes 64 and 128 and groups of at most 8, and computes the scores and
// value sums as mma.sync products with the heads on the n (8) side, so no
// part of a tile is padding: warp w takes positions [16w, 16w+16) of the
// partition, S^T = K·Q^T (16 positions × 8 heads) and O^T += V^T·P^T
// (head dims × 8 heads). The block loads its whole partition (at most POS
// positions: 256 for a whole short context, which then needs no merge, in
// a block of 16 warps; 128; or 32 for one-chunk partitions, whose smaller
// shared memory lets more blocks share an SM) before the wait, and
// combines its warps' softmax sums in shared memory before dec_finish.
// Operands are half; the f32 kernel's accuracy is kept by splitting q (in
// log2 units) in three half parts (hi + mid + lo: 24 bits of mantissa) and
// each probability in two, one product per part: a part is exact in half,
// and the tensor cores accumulate in f32.
#define DEC_MMA_OSTRIDE (DEC_MAXD + 4)  // a head's value sums: 132 floats, so the quads' writes hit distinct banks
#define DEC_LOG2E 1.4426950408889634f
#define DEC_LN2 0.6931471805599453f
// Dynamic shared memory for POS positions: their keys and values (rows of
// DecRow<DT_BF16>::STRIDE halves), later the working warps' sums and (max,
// sum) pairs and dec_finish's factors (bridge/cuda: decodeMMASmem).
#define DEC_MMA_KV(POS) (2 * (POS) * (DEC_MAXD + 8) * 2)
// A block's warps: DEC_WARPS, or one for each 16 positions of POS.
#define DEC_MMA_WARPS(POS) ((POS) / 16 > DEC_WARPS ? (POS) / 16 : DEC_WARPS)
#define DEC_MMA_SUMS(POS) ((POS) / 16 * 8 * (DEC_MMA_OSTRIDE * 4 + 8) + DEC_WARPS * DEC_MAXPARTS * 4)

// half_split writes x as N parts of KT (their bits) that sum to x: each
// part is what remains after the ones before, rounded to KT.
template <int KT, int N>
__device__ __forceinline__ void half_split(float x, u16* parts) {
#pragma unroll
    for (int i = 0; i < N; i++) {
        const u16 b = KT == DT_BF16 ? f32_to_bf16(x) : f32_to_f16(x);
        parts[i] = b;
        x -= KT == DT_BF16 ? __uint_as_float(((u32)b) << 16) : f16_to_f32(b);
    }
}

template <bool ROPE, int KT, int D, int POS>
__device__ __forceinline__ void paged_decode_mma_body(
    float* __restrict__ out, const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
    void* __restrict__ kcv, void* __restrict__ vcv, const int* __restrict__ seq_lens, const int* __restrict__ block_table,
    const int* __restrict__ slot_mapping, const int* __restrict__ positions, int H, int KVH, int BS, int bt_stride,
    int num_blocks, float scale, int chunks, int mgroup, float* __restrict__ tmp_acc, float* __restrict__ tmp_ml,
    int* __restrict__ err, int* __restrict__ counters, const float* __restrict__ qn, const float* __restrict__ kn,
    const float* __restrict__ inv_freq, float eps, int window) {
    constexpr int STRIDE = DecRow<KT>::STRIDE, W = DEC_MMA_WARPS(POS);
    extern __shared__ __align__(16) u16 dm_smem[];
    u16(*sk)[STRIDE] = (u16(*)[STRIDE])dm_smem;
    u16(*sv)[STRIDE] = (u16(*)[STRIDE])(dm_smem + POS * STRIDE);
    __shared__ __align__(16) float sq[DEC_WARPS][DEC_MAXD];
    __shared__ __align__(16) float snk[DEC_MAXD];
    // A warp's probabilities as [part][head][position]: the B operand of
    // O^T += V^T·P^T, whose fragments lie across the lanes from S^T's.
    __shared__ __align__(16) u16 sp[W][2][8][16];
    __shared__ int s_last;

    const int t = blockIdx.x, kh = blockIdx.y, part = blockIdx.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = H / KVH, h = kh * group + warp;
    const int ctx = seq_lens[t], cur = ctx - 1;
    // Partitions count from the token's first key, as paged_decode's; row
    // r is position p0 + r, and a partition holds n >= 1 rows.
    const int start = window > 0 ? max(0, ctx - window) : 0;
    const int plen = chunks * DEC_CHUNK, p0 = start + part * plen;
    if (p0 >= ctx) return;
    const int p1 = min(ctx, p0 + plen), nlive = (ctx - start + plen - 1) / plen, n = p1 - p0;
    const int* bt = block_table + (long)t * bt_stride;

    // Before the wait: the partition's cached rows, zeros in the rows
    // after it up to the warp's 16 (a probability of 0 times a stale NaN
    // would be NaN), the RoPE angles.
    dec_load_chunk<KT>(sk, sv, (const u16*)kcv, (const u16*)vcv, bt, p0, min(p1, cur), kh, KVH, BS, D);
    cp_async_commit();
    for (int e = threadIdx.x; e < (((n + 15) & ~15) - n) * (D / 8); e += blockDim.x) {
        const int r = n + e / (D / 8), c = (e % (D / 8)) * 8;
        *(uint4*)&sk[r][c] = make_uint4(0u, 0u, 0u, 0u);
        *(uint4*)&sv[r][c] = make_uint4(0u, 0u, 0u, 0u);
    }
    const DecRope rq = dec_step_angles<ROPE>(qn, inv_freq, D, positions, t),
                  rk = dec_step_angles<ROPE>(kn, inv_freq, D, positions, t);
    pdl_wait_early();

    if (warp < group)
        dec_rope_head(q + ((long)t * H + h) * D, sq[warp], rq, ROPE && qn, ROPE, D, eps, scale * DEC_LOG2E);
    if (cur < p1 && warp == W - 1) {  // the step's token: into the cache and row cur-p0
        const float* vr = v + ((long)t * KVH + kh) * D;
        dec_step_key<ROPE>(k + ((long)t * KVH + kh) * D, snk, rk, kn, D, eps);
        const int slot = slot_mapping[t];
        const bool ok = slot >= 0 && slot < num_blocks * BS;
        const long o = ok ? (((long)(slot / BS) * KVH + kh) * BS + slot % BS) * D : 0;
        for (int i = lane; i < D; i += 32) {
            kv_store<KT>(kcv, o + i, snk[i]), kv_store<KT>(vcv, o + i, vr[i]);
            kv_store<KT>(sk[cur - p0], i, snk[i]), kv_store<KT>(sv[cur - p0], i, vr[i]);
        }
        if (!ok && slot >= 0 && lane == 0) atomicOr(err, ERR_BAD_SLOT);
    }
    cp_async_wait_n<0>();
    __syncthreads();

    const int g = lane >> 2, c2 = (lane & 3) * 2, r0 = warp * 16;  // r0 < n only within POS
    float o[D / 16][4];
    float mx[2] = {NEG_INF, NEG_INF}, ls[2] = {0.f, 0.f};  // heads c2, c2+1
    if (r0 < n) {
        // Q^T's fragments (the lane's head g, dims kk·16 + c2, +1, +8, +9),
        // in three parts.
        u32 qb[3][D / 16][2];
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const int c = kk * 16 + c2 + j * 8;
                u16 a[3], b[3];
                half_split<KT, 3>(g < group ? sq[g][c] : 0.f, a);
                half_split<KT, 3>(g < group ? sq[g][c + 1] : 0.f, b);
#pragma unroll
                for (int u = 0; u < 3; u++) qb[u][kk][j] = (u32)a[u] | ((u32)b[u] << 16);
            }
        }
        // Scores in log2 units: s[0], s[1] position r0+g, heads c2, c2+1;
        // s[2], s[3] position r0+g+8.
        float s[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            u32 a[4];
            ldsm_x4(a, &sk[r0 + (lane & 15)][kk * 16 + (lane >> 4) * 8]);
#pragma unroll
            for (int u = 0; u < 3; u++) mma_half<KT>(s, a, qb[u][kk]);
        }
        if (r0 + g >= n) s[0] = s[1] = NEG_INF;
        if (r0 + g + 8 >= n) s[2] = s[3] = NEG_INF;
        // Row r0 is live, so each head's max is finite.
#pragma unroll
        for (int j = 0; j < 2; j++) {
            float x = fmaxf(s[j], s[j + 2]);
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 8));
            mx[j] = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 16));
        }
        float p[4];
#pragma unroll
        for (int i = 0; i < 4; i++) p[i] = exp2f(s[i] - mx[i & 1]);
#pragma unroll
        for (int j = 0; j < 2; j++) {
            float x = p[j] + p[j + 2];
            x += __shfl_xor_sync(0xffffffffu, x, 4);
            x += __shfl_xor_sync(0xffffffffu, x, 8);
            ls[j] = x + __shfl_xor_sync(0xffffffffu, x, 16);
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            u16 b[2];
            half_split<KT, 2>(p[i], b);
            sp[warp][0][c2 + (i & 1)][g + (i >> 1) * 8] = b[0];
            sp[warp][1][c2 + (i & 1)][g + (i >> 1) * 8] = b[1];
        }
        __syncwarp();
        u32 pb[2][2];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            pb[u][0] = *(const u32*)&sp[warp][u][g][c2];
            pb[u][1] = *(const u32*)&sp[warp][u][g][c2 + 8];
        }
#pragma unroll
        for (int dt = 0; dt < D / 16; dt++) {
            o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;
            u32 a[4];
            ldsm_x4_t(a, &sv[r0 + ((lane >> 4) << 3) + (lane & 7)][dt * 16 + ((lane >> 3) & 1) * 8]);
            mma_half<KT>(o[dt], a, pb[0]);
            mma_half<KT>(o[dt], a, pb[1]);
        }
    }
    __syncthreads();  // the keys and values are read: their memory takes the warps' sums

    float* so = (float*)dm_smem;                                // [warp][head][DEC_MMA_OSTRIDE], POS/16 warps
    float2* sml = (float2*)(so + POS / 16 * 8 * DEC_MMA_OSTRIDE);   // [warp][head]: (max, sum)
    float* sf = (float*)(sml + POS / 16 * 8);                       // dec_finish's factors
    if (r0 < n) {
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int hh = c2 + j;
            if (hh < group) {
                float* dst = so + (warp * 8 + hh) * DEC_MMA_OSTRIDE + g;
#pragma unroll
                for (int dt = 0; dt < D / 16; dt++) dst[dt * 16] = o[dt][j], dst[dt * 16 + 8] = o[dt][j + 2];
                if (g == 0) sml[warp * 8 + hh] = make_float2(mx[j], ls[j]);
            }
        }
    }
    __syncthreads();
    float m = NEG_INF, l = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (warp < group) {
        const int nw = (n + 15) / 16;
        float M = NEG_INF;
        for (int w = 0; w < nw; w++) M = fmaxf(M, sml[w * 8 + warp].x);
        for (int w = 0; w < nw; w++) {
            const float2 e = sml[w * 8 + warp];
            const float f = exp2f(e.x - M);
            l += f * e.y;
            if (lane < D / 4) {
                const float4 x = *(const float4*)(so + (w * 8 + warp) * DEC_MMA_OSTRIDE + lane * 4);
                acc.x += f * x.x, acc.y += f * x.y, acc.z += f * x.z, acc.w += f * x.w;
            }
        }
        m = M * DEC_LN2;
    }
    dec_finish(out, t, kh, part, nlive, H, KVH, D, mgroup, m, l, acc, tmp_acc, tmp_ml, counters, sf, &s_last);
}

#define PAGED_DECODE_PARAMS                                                                                              \
    float *__restrict__ out, const float *__restrict__ q, const float *__restrict__ k, const float *__restrict__ v,      \
        void *__restrict__ kc, void *__restrict__ vc, const int *__restrict__ seq_lens,                                  \
        const int *__restrict__ block_table, const int *__restrict__ slot_mapping, const int *__restrict__ positions,     \
        int H, int KVH, int D, int BS, int bt_stride, int num_blocks, float scale, int chunks, int mgroup,                \
        float *__restrict__ tmp_acc,                                                                                     \
        float *__restrict__ tmp_ml, int *__restrict__ err, int *__restrict__ counters, const float *__restrict__ qn,      \
        const float *__restrict__ kn, const float *__restrict__ inv_freq, float eps, int window
#define PAGED_DECODE_ARGS                                                                                             \
    out, q, k, v, kc, vc, seq_lens, block_table, slot_mapping, positions, H, KVH, D, BS, bt_stride, num_blocks, scale, \
        chunks, mgroup, tmp_acc, tmp_ml, err, counters, qn, kn, inv_freq, eps, window

// paged_decode_* takes q and k as they are; paged_decode_rope_* applies
// QK-norm (when qn, kn are set) and RoPE at positions[t] first. The suffix
// is the cache's dtype.
#define PAGED_DECODE(KT, SFX)                                                                                   \
    MTLB_KERNEL void __launch_bounds__(DEC_WARPS * 32) paged_decode_##SFX(PAGED_DECODE_PARAMS) {      \
        paged_decode_body<false, KT>(PAGED_DECODE_ARGS);                                                        \
    }                                                                                                           \
    MTLB_KERNEL void __launch_bounds__(DEC_WARPS * 32) paged_decode_rope_##SFX(PAGED_DECODE_PARAMS) { \
        paged_decode_body<true, KT>(PAGED_DECODE_ARGS);                                                         \
    }
PAGED_DECODE(DT_F32, f32)
PAGED_DECODE(DT_F16, f16)
PAGED_DECODE(DT_BF16, bf16)

// paged_decode_mma_[rope_]d<D>_p<POS>_<cache dtype>: paged_decode's
// parameters (D must equal the kernel's, and a partition hold at most POS
// positions), on tensor cores.
#define PAGED_DECODE_MMA_POS(KT, D, POS, SFX)                                                                        \
    static_assert(DEC_MMA_SUMS(POS) <= DEC_MMA_KV(POS), "the sums overflow the key and value rows");                 \
    MTLB_KERNEL void __launch_bounds__(DEC_MMA_WARPS(POS) * 32, 2 * DEC_WARPS / DEC_MMA_WARPS(POS))          \
        paged_decode_mma_d##D##_p##POS##_##SFX(PAGED_DECODE_PARAMS) {                                                 \
        paged_decode_mma_body<false, KT, D, POS>(out, q, k, v, kc, vc, seq_lens, block_table, slot_mapping, positions, \
                                                 H, KVH, BS, bt_stride, num_blocks, scale, chunks, mgroup, tmp_acc,    \
                                                 tmp_ml, err, counters, qn, kn, inv_freq, eps, window);                \
    }                                                                                                                 \
    MTLB_KERNEL void __launch_bounds__(DEC_MMA_WARPS(POS) * 32, 2 * DEC_WARPS / DEC_MMA_WARPS(POS))          \
        paged_decode_mma_rope_d##D##_p##POS##_##SFX(PAGED_DECODE_PARAMS) {                                            \
        paged_decode_mma_body<true, KT, D, POS>(out, q, k, v, kc, vc, seq_lens, block_table, slot_mapping, positions,  \
                                                H, KVH, BS, bt_stride, num_blocks, scale, chunks, mgroup, tmp_acc,     \
                                                tmp_ml, err, counters, qn, kn, inv_freq, eps, window);                 \
    }
#define PAGED_DECODE_MMA(KT, D, SFX)         \
    PAGED_DECODE_MMA_POS(KT, D, 32, SFX)     \
    PAGED_DECODE_MMA_POS(KT, D, 128, SFX)    \
    PAGED_DECODE_MMA_POS(KT, D, 256, SFX)
PAGED_DECODE_MMA(DT_F16, 64, f16)
PAGED_DECODE_MMA(DT_F16, 128, f16)
PAGED_DECODE_MMA(DT_BF16, 64, bf16)
PAGED_DECODE_MMA(DT_BF16, 128, bf16)
