// flash.cu: prefill attention on tensor cores over the paged KV cache
// (FlashAttention-2's loop): causal, GQA, online softmax, bf16 operands
// and f32 accumulation. The backend runs it for steps of many tokens whose
// model has half-precision weights (ops_linux.go: flashAttention); decode
// rows of a mixed step are query tiles of one row.
//
// One block per (query tile of FA_BQ tokens of one sequence, query head);
// warp w owns the tile's rows 16w..16w+15. Keys and values go through
// shared memory FA_BK positions at a time, rounded to bf16 as they are
// read: the cached ones from the cache, the step's own from the k and v
// inputs (so the blocks that write the step's keys into the cache, those of
// the first head of each GQA group, race with no reader). Scores are kept
// in log2 units (q is scaled by scale·log2 e) so the softmax uses exp2.
// Cache layout as attention.cu: [num_blocks][kv_heads][block_size][head_dim].

#define FA_BQ 64
#define FA_BK 64
#define FA_WARPS 4
#define FA_LOG2E 1.4426950408889634f

// fa_load_kv reads keys (or values) [j0, j0+FA_BK) of KV head kh into dst
// as bf16: position j < new_start from the cache, later ones from the
// step's rows (row q0 + j - new_start of src), zeros past kend.
template <int D>
__device__ __forceinline__ void fa_load_kv(u16 (*dst)[D + 8], const float* __restrict__ cache, const float* __restrict__ src,
                                           const int* __restrict__ bt, int j0, int kend, int new_start, int q0, int kh,
                                           int KVH, int BS) {
    constexpr int PER = FA_BK * D / 4 / (FA_WARPS * 32);  // float4 a thread
    const long kvw = (long)KVH * D;
    float4 v[PER];
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int e = threadIdx.x + i * FA_WARPS * 32;
        const int r = e / (D / 4), c = (e % (D / 4)) * 4, j = j0 + r;
        v[i] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (j < kend) {
            const float* p = j >= new_start ? src + (long)(q0 + j - new_start) * kvw + kh * D + c
                                            : cache + (((long)bt[j / BS] * KVH + kh) * BS + j % BS) * D + c;
            v[i] = *(const float4*)p;
        }
    }
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int e = threadIdx.x + i * FA_WARPS * 32;
        const int r = e / (D / 4), c = (e % (D / 4)) * 4;
        *(uint2*)&dst[r][c] = make_uint2(pack_bf16(v[i].x, v[i].y), pack_bf16(v[i].z, v[i].w));
    }
}

template <int D>
__device__ __forceinline__ void flash_body(float* __restrict__ out, const float* __restrict__ q, const float* __restrict__ k,
                                           const float* __restrict__ v, float* __restrict__ kc, float* __restrict__ vc,
                                           const int* __restrict__ qsl, const int* __restrict__ seq_lens,
                                           const int* __restrict__ block_table, const int* __restrict__ slot_mapping,
                                           int S, int H, int KVH, int BS, int bt_stride, int num_blocks, float scale,
                                           int* __restrict__ err) {
    __shared__ __align__(16) u16 sk[FA_BK][D + 8];  // +8: ldmatrix rows land in distinct banks
    __shared__ __align__(16) u16 sv[FA_BK][D + 8];
    pdl_wait();
    // The block's (sequence, tile): tiles of a sequence are numbered last
    // first, so the longest (causal) tiles start first.
    const int h = blockIdx.y;
    int idx = blockIdx.x, s = -1, tile = 0;
    for (int i = 0; i < S; i++) {
        const int n = (qsl[i + 1] - qsl[i] + FA_BQ - 1) / FA_BQ;
        if (idx < n) {
            s = i;
            tile = n - 1 - idx;
            break;
        }
        idx -= n;
    }
    if (s < 0) return;
    const int q0 = qsl[s], qlen = qsl[s + 1] - q0;
    const int new_start = seq_lens[s] - qlen;
    const int r0 = tile * FA_BQ, rows = min(FA_BQ, qlen - r0);
    const int group = H / KVH, kh = h / group;
    const long kvw = (long)KVH * D;
    const int* bt = block_table + (long)s * bt_stride;

    if (h % group == 0) {  // the tile's new keys and values into the cache
        for (int e = threadIdx.x; e < rows * (D / 4); e += blockDim.x) {
            const int r = e / (D / 4), c = (e % (D / 4)) * 4, t = q0 + r0 + r;
            const int slot = slot_mapping[t];
            if (slot >= 0 && slot < num_blocks * BS) {
                const long o = (((long)(slot / BS) * KVH + kh) * BS + slot % BS) * D + c;
                *(float4*)(kc + o) = *(const float4*)(k + t * kvw + kh * D + c);
                *(float4*)(vc + o) = *(const float4*)(v + t * kvw + kh * D + c);
            } else if (slot >= 0 && c == 0) {
                atomicOr(err, ERR_BAD_SLOT);
            }
        }
    }

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c2 = (lane & 3) * 2;
    const int ra = r0 + warp * 16 + g, rb = ra + 8;  // this thread's two rows, within the sequence
    const int pa = new_start + ra, pb = new_start + rb;  // their positions
    const float qs = scale * FA_LOG2E;
    u32 qf[D / 16][4];
    {
        const float* qa = q + ((long)(q0 + ra) * H + h) * D;
        const float* qb = q + ((long)(q0 + rb) * H + h) * D;
        const bool va = ra < qlen, vb = rb < qlen;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            const int c = kk * 16 + c2;
            float2 a0 = va ? *(const float2*)(qa + c) : make_float2(0.f, 0.f);
            float2 a2 = va ? *(const float2*)(qa + c + 8) : make_float2(0.f, 0.f);
            float2 b0 = vb ? *(const float2*)(qb + c) : make_float2(0.f, 0.f);
            float2 b2 = vb ? *(const float2*)(qb + c + 8) : make_float2(0.f, 0.f);
            qf[kk][0] = pack_bf16(a0.x * qs, a0.y * qs);
            qf[kk][1] = pack_bf16(b0.x * qs, b0.y * qs);
            qf[kk][2] = pack_bf16(a2.x * qs, a2.y * qs);
            qf[kk][3] = pack_bf16(b2.x * qs, b2.y * qs);
        }
    }
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float ma = NEG_INF, mb = NEG_INF, la = 0.f, lb = 0.f;

    const int kend = new_start + r0 + rows;  // keys the tile's last row sees
    const int wlast = new_start + min(r0 + warp * 16 + 15, qlen - 1);  // the warp's last position
    const int lr = lane & 7, li = lane >> 3;
    for (int j0 = 0; j0 < kend; j0 += FA_BK) {
        __syncthreads();  // the previous tile's readers are done
        fa_load_kv<D>(sk, kc, k, bt, j0, kend, new_start, q0, kh, KVH, BS);
        fa_load_kv<D>(sv, vc, v, bt, j0, kend, new_start, q0, kh, KVH, BS);
        __syncthreads();
        if (j0 > wlast) continue;  // every key of the tile is after the warp's rows

        float sc[FA_BK / 8][4];
#pragma unroll
        for (int n = 0; n < FA_BK / 8; n++) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
#pragma unroll
            for (int n = 0; n < FA_BK / 8; n += 2) {
                u32 b[4];
                ldsm_x4(b, &sk[n * 8 + lr + ((li >> 1) << 3)][kk * 16 + (li & 1) * 8]);
                mma_bf16(sc[n], qf[kk], b);
                mma_bf16(sc[n + 1], qf[kk], b + 2);
            }
        }
        // Causal mask (and keys past the tile's end), then the online softmax.
        float xa = ma, xb = mb;
#pragma unroll
        for (int n = 0; n < FA_BK / 8; n++) {
            const int j = j0 + n * 8 + c2;
            if (j > pa) sc[n][0] = NEG_INF;
            if (j + 1 > pa) sc[n][1] = NEG_INF;
            if (j > pb) sc[n][2] = NEG_INF;
            if (j + 1 > pb) sc[n][3] = NEG_INF;
            xa = fmaxf(xa, fmaxf(sc[n][0], sc[n][1]));
            xb = fmaxf(xb, fmaxf(sc[n][2], sc[n][3]));
        }
        xa = fmaxf(xa, __shfl_xor_sync(0xffffffffu, xa, 1));
        xa = fmaxf(xa, __shfl_xor_sync(0xffffffffu, xa, 2));
        xb = fmaxf(xb, __shfl_xor_sync(0xffffffffu, xb, 1));
        xb = fmaxf(xb, __shfl_xor_sync(0xffffffffu, xb, 2));
        // A row that has seen no key yet keeps max -inf: use 0 so exp2 gives 0, not NaN.
        const float ua = xa == NEG_INF ? 0.f : xa, ub = xb == NEG_INF ? 0.f : xb;
        const float fa = exp2f(ma - ua), fb = exp2f(mb - ub);
        ma = xa;
        mb = xb;
        la *= fa;
        lb *= fb;
#pragma unroll
        for (int i = 0; i < D / 8; i++) {
            o[i][0] *= fa;
            o[i][1] *= fa;
            o[i][2] *= fb;
            o[i][3] *= fb;
        }
        u32 pf[FA_BK / 16][4];
#pragma unroll
        for (int n = 0; n < FA_BK / 8; n++) {
            const float p0 = exp2f(sc[n][0] - ua), p1 = exp2f(sc[n][1] - ua);
            const float p2 = exp2f(sc[n][2] - ub), p3 = exp2f(sc[n][3] - ub);
            la += p0 + p1;
            lb += p2 + p3;
            pf[n >> 1][(n & 1) * 2] = pack_bf16(p0, p1);
            pf[n >> 1][(n & 1) * 2 + 1] = pack_bf16(p2, p3);
        }
#pragma unroll
        for (int kb = 0; kb < FA_BK / 16; kb++) {
#pragma unroll
            for (int d = 0; d < D / 8; d += 2) {
                u32 b[4];
                ldsm_x4_t(b, &sv[kb * 16 + lr + (li & 1) * 8][d * 8 + (li >> 1) * 8]);
                mma_bf16(o[d], pf[kb], b);
                mma_bf16(o[d + 1], pf[kb], b + 2);
            }
        }
    }
    la += __shfl_xor_sync(0xffffffffu, la, 1);
    la += __shfl_xor_sync(0xffffffffu, la, 2);
    lb += __shfl_xor_sync(0xffffffffu, lb, 1);
    lb += __shfl_xor_sync(0xffffffffu, lb, 2);
    const float ia = la > 0.f ? 1.f / la : 0.f, ib = lb > 0.f ? 1.f / lb : 0.f;
    float* oa = out + ((long)(q0 + ra) * H + h) * D;
    float* ob = out + ((long)(q0 + rb) * H + h) * D;
#pragma unroll
    for (int d = 0; d < D / 8; d++) {
        if (ra < qlen) *(float2*)(oa + d * 8 + c2) = make_float2(o[d][0] * ia, o[d][1] * ia);
        if (rb < qlen) *(float2*)(ob + d * 8 + c2) = make_float2(o[d][2] * ib, o[d][3] * ib);
    }
}

#define FLASH(D)                                                                                                        \
    extern "C" __global__ void __launch_bounds__(FA_WARPS * 32) flash_attention_d##D(                                  \
        float* __restrict__ out, const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v, \
        float* __restrict__ kc, float* __restrict__ vc, const int* __restrict__ qsl, const int* __restrict__ seq_lens,  \
        const int* __restrict__ block_table, const int* __restrict__ slot_mapping, int S, int H, int KVH, int BS,       \
        int bt_stride, int num_blocks, float scale, int* __restrict__ err) {                                           \
        flash_body<D>(out, q, k, v, kc, vc, qsl, seq_lens, block_table, slot_mapping, S, H, KVH, BS, bt_stride,        \
                      num_blocks, scale, err);                                                                          \
    }
FLASH(64)
FLASH(128)
