// attention.cu: causal paged attention with the KV-cache write fused in.
//
// One block per (query token, query head, context partition). The keys and
// values of the step's own tokens are read from the k and v inputs, the
// older ones from the cache, so the blocks that store the new tokens into
// the cache (partition 0, first head of each GQA group) race with no reader.
// Each warp runs an online softmax over its share of the partition's
// positions, four at a time; the warps then merge. With more than one
// partition (split-K: decode steps use parts of 32 positions) each block
// leaves (max, sum, unnormalised output) and the last block of the (token,
// head) to finish merges them. A token's partitions count from its first
// key, 0 or with a sliding window (window > 0) pos - window + 1, so a
// launch needs only enough of them for the most keys a token reads
// (bridge/cuda attnLaunch); a partition past the token's keys exits, and
// the merge reads those its keys span (docs/cuda.md, "Limits").
// Cache layout: [num_blocks][kv_heads][block_size][head_dim], in the
// cache's dtype KT (kv_load, kv_store: common.cu); the step's own keys and
// values are read from k and v rounded as the cache stores them.

#define ATT_MAXD 256

// ATT_WARPS warps per block: 4 or 8 (kernels paged_attention_w4, _w8); a
// launch has at most 32·ATT_WARPS partitions (one merging thread each).
// With ROPE (decode steps only: one new token per sequence) the block also
// does RoPE's work on the raw q and k (QK-norm with qn/kn, rotation at the
// token's position) for the head it needs, in shared memory: one launch
// fewer per layer. q and k in memory are then left unrotated; the cache
// gets the rotated k.
template <int ATT_WARPS, bool ROPE, int KT>
__device__ __forceinline__ void paged_attention_body(
    float* __restrict__ out, const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
    void* __restrict__ kc, void* __restrict__ vc, const int* __restrict__ tok_seq, const int* __restrict__ qsl,
    const int* __restrict__ seq_lens, const int* __restrict__ block_table, const int* __restrict__ slot_mapping,
    int H, int KVH, int D, int BS, int bt_stride, int num_blocks, float scale, int part_size, int nparts,
    float* __restrict__ tmp_acc, float* __restrict__ tmp_ml, int* __restrict__ err, int* __restrict__ counters, int window,
    const float* __restrict__ qn, const float* __restrict__ kn, const int* __restrict__ positions,
    const float* __restrict__ inv_freq, float eps) {
    __shared__ float s_m[ATT_WARPS], s_l[ATT_WARPS];
    __shared__ float s_q[ROPE ? ATT_MAXD : 1], s_k[ROPE ? ATT_MAXD : 1];
    __shared__ float s_acc[ATT_WARPS][ATT_MAXD];
    __shared__ float s_f[256], s_red[32];
    __shared__ int s_last;

    const int t = blockIdx.x, h = blockIdx.y, part = blockIdx.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = H / KVH, kh = h / group;
    const int s = tok_seq[t];
    const int q0 = qsl[s], q1 = qsl[s + 1], seqlen = seq_lens[s];
    const int new_start = seqlen - (q1 - q0);  // position of the step's first token
    const int ctx = new_start + (t - q0) + 1;  // causal: positions 0..pos
    const long kvw = (long)KVH * D;
    // The token's first key and the partitions its keys span, counted from
    // it (every block of the token sees the same: a branch a block).
    const int start = window > 0 ? max(0, ctx - window) : 0;
    const int nlive = (ctx - start + part_size - 1) / part_size;
    if (part >= nlive) return;  // past the token's keys: the merge does not read it

    if (ROPE) {
        const float pos = (float)positions[t];
        if (warp == 0) rope_head(q + ((long)t * H + h) * D, s_q, qn, D, pos, inv_freq, eps);
        if (warp == 1) rope_head(k + t * kvw + kh * D, s_k, kn, D, pos, inv_freq, eps);
        __syncthreads();
    }

    if (part == 0 && h % group == 0) {
        int slot = slot_mapping[t];
        if (slot >= 0 && slot < num_blocks * BS) {
            long o = (((long)(slot / BS) * KVH + kh) * BS + slot % BS) * D;
            const float* ks = ROPE ? s_k : k + t * kvw + kh * D;
            const float* vs = v + t * kvw + kh * D;
            for (int i = threadIdx.x; i < D; i += blockDim.x) {
                kv_store<KT>(kc, o + i, ks[i]);
                kv_store<KT>(vc, o + i, vs[i]);
            }
        } else if (slot >= 0 && threadIdx.x == 0) {
            atomicOr(err, ERR_BAD_SLOT);
        }
    }

    const float* qv = ROPE ? s_q : q + ((long)t * H + h) * D;
    float qr[ATT_MAXD / 32];
#pragma unroll
    for (int j = 0; j < ATT_MAXD / 32; j++) {
        int i = lane + 32 * j;
        qr[j] = i < D ? qv[i] * scale : 0.f;
    }
    float m = NEG_INF, l = 0.f, acc[ATT_MAXD / 32];
#pragma unroll
    for (int j = 0; j < ATT_MAXD / 32; j++) acc[j] = 0.f;

    const int* bt = block_table + (long)s * bt_stride;
    const int p0 = start + part * part_size, p1 = min(ctx, p0 + part_size);
    for (int j0 = p0 + warp * 4; j0 < p1; j0 += ATT_WARPS * 4) {
        // Position j0+u's value row: the step's own (vown, f32 in v) or a
        // cached one at element offset vo of vc; vo < 0 past the partition.
        float sc[4];
        long vo[4];
        bool vown[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            int j = j0 + u;
            sc[u] = 0.f;
            vo[u] = -1;
            vown[u] = false;
            if (j < p1) {
                float d = 0.f;
                if (j >= new_start) {
                    long r = (long)(q0 + j - new_start) * kvw + kh * D;
                    const float* krow = ROPE ? s_k : k + r;  // ROPE: decode, so the row is t's
                    vo[u] = r;
                    vown[u] = true;
#pragma unroll
                    for (int jj = 0; jj < ATT_MAXD / 32; jj++) {
                        int i = lane + 32 * jj;
                        if (i < D) d += qr[jj] * kv_round<KT>(krow[i]);
                    }
                } else {
                    long o = (((long)bt[j / BS] * KVH + kh) * BS + j % BS) * D;
                    vo[u] = o;
#pragma unroll
                    for (int jj = 0; jj < ATT_MAXD / 32; jj++) {
                        int i = lane + 32 * jj;
                        if (i < D) d += qr[jj] * kv_load<KT>(kc, o + i);
                    }
                }
                sc[u] = d;
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
            for (int u = 0; u < 4; u++) sc[u] += __shfl_xor_sync(0xffffffffu, sc[u], o);
        float mx = m;
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (vo[u] >= 0) mx = fmaxf(mx, sc[u]);
        float corr = expf(m - mx);  // 0 on the first update (m = -inf)
        l *= corr;
#pragma unroll
        for (int jj = 0; jj < ATT_MAXD / 32; jj++) acc[jj] *= corr;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            if (vo[u] >= 0) {
                float p = expf(sc[u] - mx);
                l += p;
#pragma unroll
                for (int jj = 0; jj < ATT_MAXD / 32; jj++) {
                    int i = lane + 32 * jj;
                    if (i < D) acc[jj] += p * (vown[u] ? kv_round<KT>(v[vo[u] + i]) : kv_load<KT>(vc, vo[u] + i));
                }
            }
        }
        m = mx;
    }

    if (lane == 0) {
        s_m[warp] = m;
        s_l[warp] = l;
    }
#pragma unroll
    for (int jj = 0; jj < ATT_MAXD / 32; jj++) {
        int i = lane + 32 * jj;
        if (i < D) s_acc[warp][i] = acc[jj];
    }
    __syncthreads();
    float M = NEG_INF;
#pragma unroll
    for (int w = 0; w < ATT_WARPS; w++) M = fmaxf(M, s_m[w]);
    float f[ATT_WARPS], L = 0.f;
#pragma unroll
    for (int w = 0; w < ATT_WARPS; w++) {
        f[w] = s_m[w] == NEG_INF ? 0.f : expf(s_m[w] - M);
        L += s_l[w] * f[w];
    }
    const long base = (long)t * H + h;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float A = 0.f;
#pragma unroll
        for (int w = 0; w < ATT_WARPS; w++) A += s_acc[w][d] * f[w];
        if (nparts == 1) {
            out[base * D + d] = A / L;
        } else {
            tmp_acc[(base * nparts + part) * D + d] = A;
        }
    }
    if (nparts == 1) return;
    if (threadIdx.x == 0) {
        tmp_ml[(base * nparts + part) * 2] = M;
        tmp_ml[(base * nparts + part) * 2 + 1] = L;
    }
    // The last block of this (token, head) to finish merges the partitions
    // (one launch fewer than a separate reduce kernel) and resets the
    // counter for the next step.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(&counters[base], 1) == nlive - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    const float* ml = tmp_ml + base * nparts * 2;
    const int p = threadIdx.x;
    float mp = p < nlive ? __ldcg(ml + 2 * p) : NEG_INF;
    float lp = p < nlive ? __ldcg(ml + 2 * p + 1) : 0.f;
    float MM = warp_max(mp);
    if (lane == 0) s_red[warp] = MM;
    __syncthreads();
    MM = NEG_INF;
#pragma unroll
    for (int w = 0; w < ATT_WARPS; w++) MM = fmaxf(MM, s_red[w]);
    float fp = mp == NEG_INF ? 0.f : expf(mp - MM);
    s_f[p] = fp;
    float LL = block_sum(lp * fp, s_red);
    const float* acc2 = tmp_acc + base * nparts * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float A2 = 0.f;
#pragma unroll 4
        for (int q2 = 0; q2 < nlive; q2++) A2 += __ldcg(acc2 + (long)q2 * D + d) * s_f[q2];
        out[base * D + d] = A2 / LL;
    }
    if (threadIdx.x == 0) counters[base] = 0;
}

#define PAGED_ATTENTION_PARAMS                                                                                      \
    float *__restrict__ out, const float *__restrict__ q, const float *__restrict__ k, const float *__restrict__ v, \
        void *__restrict__ kc, void *__restrict__ vc, const int *__restrict__ tok_seq, const int *__restrict__ qsl,   \
        const int *__restrict__ seq_lens, const int *__restrict__ block_table, const int *__restrict__ slot_mapping,   \
        int H, int KVH, int D, int BS, int bt_stride, int num_blocks, float scale, int part_size, int nparts,           \
        float *__restrict__ tmp_acc, float *__restrict__ tmp_ml, int *__restrict__ err, int *__restrict__ counters, int window
#define PAGED_ATTENTION_ARGS                                                                                        \
    out, q, k, v, kc, vc, tok_seq, qsl, seq_lens, block_table, slot_mapping, H, KVH, D, BS, bt_stride, num_blocks, \
        scale, part_size, nparts, tmp_acc, tmp_ml, err, counters, window
#define ROPE_PARAMS \
    const float *__restrict__ qn, const float *__restrict__ kn, const int *__restrict__ positions, const float *__restrict__ inv_freq, float eps

// One kernel per warps per block, RoPE or not, and cache dtype (suffix
// f32, f16, bf16: the Go side's kernel names).
#define PAGED_ATTENTION(KT, SFX)                                                                                           \
    MTLB_KERNEL void __launch_bounds__(128) paged_attention_w4_##SFX(PAGED_ATTENTION_PARAMS) {               \
        pdl_wait_early();                                                                                                   \
        paged_attention_body<4, false, KT>(PAGED_ATTENTION_ARGS, 0, 0, 0, 0, 0.f);                                         \
    }                                                                                                                       \
    MTLB_KERNEL void __launch_bounds__(256) paged_attention_w8_##SFX(PAGED_ATTENTION_PARAMS) {               \
        pdl_wait_early();                                                                                                   \
        paged_attention_body<8, false, KT>(PAGED_ATTENTION_ARGS, 0, 0, 0, 0, 0.f);                                         \
    }                                                                                                                       \
    MTLB_KERNEL void __launch_bounds__(128) paged_attention_rope_w4_##SFX(PAGED_ATTENTION_PARAMS, ROPE_PARAMS) { \
        pdl_wait_early();                                                                                                   \
        paged_attention_body<4, true, KT>(PAGED_ATTENTION_ARGS, qn, kn, positions, inv_freq, eps);                         \
    }                                                                                                                       \
    MTLB_KERNEL void __launch_bounds__(256) paged_attention_rope_w8_##SFX(PAGED_ATTENTION_PARAMS, ROPE_PARAMS) { \
        pdl_wait_early();                                                                                                   \
        paged_attention_body<8, true, KT>(PAGED_ATTENTION_ARGS, qn, kn, positions, inv_freq, eps);                         \
    }
PAGED_ATTENTION(DT_F32, f32)
PAGED_ATTENTION(DT_F16, f16)
PAGED_ATTENTION(DT_BF16, bf16)
