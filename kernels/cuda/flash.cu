// flash.cu: prefill attention on tensor cores over the paged KV cache
// (FlashAttention-2's loop): causal, GQA, online softmax, bf16 operands
// and f32 accumulation. The backend runs it for steps of many tokens whose
// model has half-precision weights (ops_linux.go: flashAttention); decode
// rows of a mixed step are query tiles of one row.
//
// One block per (query tile of FA_BQ tokens of one sequence, query head);
// warp w owns the tile's rows 16w..16w+15. Keys and values go through
// shared memory as bf16, FA_BK positions at a time in two buffers (the next
// tile streams in while one is used): the step's own from bf16 copies of
// its k and v inputs (cp.async), cached ones from the cache: as they are
// (cp.async) from a bf16 cache, rounded to bf16 as they are read from an
// f32 or f16 one; so the blocks that write the step's keys into the cache,
// those of the first head of each GQA group, race with no reader. Scores
// are kept in log2 units (q is scaled by scale·log2 e) so softmax uses exp2.
// Cache layout as attention.cu: [num_blocks][kv_heads][block_size][head_dim],
// in the cache's dtype KT (kernels flash_attention_d<D>_<dtype>).
// With a sliding window (window > 0) row p sees keys p - window < j <= p:
// a block starts at the key tile holding its first row's first key, a warp
// skips the tiles wholly before its rows' windows, and keys are masked by
// the window only then.

#define FA_BQ 64
#define FA_BK 64
#define FA_WARPS 4
#define FA_LOG2E 1.4426950408889634f

// fa_issue starts the copy of keys and values [j0, j0+FA_BK) of KV head kh
// into sk and sv as bf16: the step's own rows (j >= new_start) from kb and
// vb (bf16 copies of the step's k and v) with cp.async, cached ones from
// the cache (cp.async from a bf16 one, else rounded here); zeros past kend.
template <int D, int KT>
__device__ __forceinline__ void fa_issue(u16 (*sk)[D + 8], u16 (*sv)[D + 8], const void* __restrict__ kc,
                                         const void* __restrict__ vc, const u16* __restrict__ kb,
                                         const u16* __restrict__ vb, const int* __restrict__ bt, int j0, int kend,
                                         int new_start, int q0, int kh, int KVH, int BS) {
    constexpr int PER = FA_BK * D / 8 / (FA_WARPS * 32);  // 16-byte chunks a thread, of K and of V
    const long kvw = (long)KVH * D;
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int e = threadIdx.x + i * FA_WARPS * 32;
        const int r = e / (D / 8), c = (e % (D / 8)) * 8, j = j0 + r;
        if (j >= new_start || j >= kend) {
            const long o = (long)(q0 + j - new_start) * kvw + kh * D + c;
            const bool ok = j < kend;
            cp_async16z(&sk[r][c], ok ? kb + o : kb, ok);
            cp_async16z(&sv[r][c], ok ? vb + o : vb, ok);
        } else {
            const long o = (((long)bt[j / BS] * KVH + kh) * BS + j % BS) * D + c;
            if (KT == DT_BF16) {
                cp_async16z(&sk[r][c], (const u16*)kc + o, true);
                cp_async16z(&sv[r][c], (const u16*)vc + o, true);
            } else {
                const float4 k0 = kv_load4<KT>(kc, o), k1 = kv_load4<KT>(kc, o + 4);
                const float4 v0 = kv_load4<KT>(vc, o), v1 = kv_load4<KT>(vc, o + 4);
                *(uint4*)&sk[r][c] = make_uint4(pack_bf16(k0.x, k0.y), pack_bf16(k0.z, k0.w), pack_bf16(k1.x, k1.y), pack_bf16(k1.z, k1.w));
                *(uint4*)&sv[r][c] = make_uint4(pack_bf16(v0.x, v0.y), pack_bf16(v0.z, v0.w), pack_bf16(v1.x, v1.y), pack_bf16(v1.z, v1.w));
            }
        }
    }
}

template <int D, int KT>
__device__ __forceinline__ void flash_body(float* __restrict__ out, const float* __restrict__ q, const float* __restrict__ k,
                                           const float* __restrict__ v, void* __restrict__ kc, void* __restrict__ vc,
                                           const u16* __restrict__ kb, const u16* __restrict__ vb,
                                           const int* __restrict__ qsl, const int* __restrict__ seq_lens,
                                           const int* __restrict__ block_table, const int* __restrict__ slot_mapping,
                                           int S, int H, int KVH, int BS, int bt_stride, int num_blocks, float scale,
                                           int* __restrict__ err, int window) {
    // Two buffers of keys and values (dynamic shared memory, FA_SMEM(D)
    // bytes); rows padded by 8 halves so ldmatrix rows land in distinct banks.
    extern __shared__ __align__(16) u16 fa_smem[];
    typedef u16 Row[D + 8];
    Row* skb[2] = {(Row*)fa_smem, (Row*)(fa_smem + 2 * FA_BK * (D + 8))};
    Row* svb[2] = {(Row*)(fa_smem + FA_BK * (D + 8)), (Row*)(fa_smem + 3 * FA_BK * (D + 8))};
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
                kv_store4<KT>(kc, o, *(const float4*)(k + t * kvw + kh * D + c));
                kv_store4<KT>(vc, o, *(const float4*)(v + t * kvw + kh * D + c));
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
    // The sliding window: the block's first key tile (its first row's first
    // key) and the warp's first key (its first row's).
    int jbeg = 0, wfirst = 0;
    if (window > 0) {
        jbeg = max(0, new_start + r0 + 1 - window) / FA_BK * FA_BK;
        wfirst = new_start + r0 + warp * 16 + 1 - window;
    }
    fa_issue<D, KT>(skb[0], svb[0], kc, vc, kb, vb, bt, jbeg, kend, new_start, q0, kh, KVH, BS);
    cp_async_commit();
    for (int j0 = jbeg, it = 0; j0 < kend; j0 += FA_BK, it++) {
        if (j0 + FA_BK < kend)  // the next tile streams in while this one is used
            fa_issue<D, KT>(skb[(it + 1) & 1], svb[(it + 1) & 1], kc, vc, kb, vb, bt, j0 + FA_BK, kend, new_start, q0, kh, KVH, BS);
        cp_async_commit();
        cp_async_wait_n<1>();
        __syncthreads();
        Row* sk = skb[it & 1];
        Row* sv = svb[it & 1];
        if (j0 > wlast || j0 + FA_BK <= wfirst) {  // every key of the tile is after the warp's rows, or before their windows
            __syncthreads();
            continue;
        }

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
        }
        if (window > 0 && j0 < wfirst + 16) {  // a tile that crosses one of the warp rows' window starts
#pragma unroll
            for (int n = 0; n < FA_BK / 8; n++) {
                const int j = j0 + n * 8 + c2;
                if (j <= pa - window) sc[n][0] = NEG_INF;
                if (j + 1 <= pa - window) sc[n][1] = NEG_INF;
                if (j <= pb - window) sc[n][2] = NEG_INF;
                if (j + 1 <= pb - window) sc[n][3] = NEG_INF;
            }
        }
#pragma unroll
        for (int n = 0; n < FA_BK / 8; n++) {
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
        for (int kq = 0; kq < FA_BK / 16; kq++) {
#pragma unroll
            for (int d = 0; d < D / 8; d += 2) {
                u32 b[4];
                ldsm_x4_t(b, &sv[kq * 16 + lr + (li & 1) * 8][d * 8 + (li >> 1) * 8]);
                mma_bf16(o[d], pf[kq], b);
                mma_bf16(o[d + 1], pf[kq], b + 2);
            }
        }
        __syncthreads();  // this buffer is refilled next iteration
    }
    cp_async_wait_n<0>();
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

#define FLASH(D, KT, SFX)                                                                                               \
    MTLB_KERNEL void __launch_bounds__(FA_WARPS * 32) flash_attention_d##D##_##SFX(                          \
        float* __restrict__ out, const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v, \
        void* __restrict__ kc, void* __restrict__ vc, const u16* __restrict__ kb, const u16* __restrict__ vb,           \
        const int* __restrict__ qsl, const int* __restrict__ seq_lens,                                                  \
        const int* __restrict__ block_table, const int* __restrict__ slot_mapping, int S, int H, int KVH, int BS,       \
        int bt_stride, int num_blocks, float scale, int* __restrict__ err, int window) {                               \
        flash_body<D, KT>(out, q, k, v, kc, vc, kb, vb, qsl, seq_lens, block_table, slot_mapping, S, H, KVH, BS,         \
                          bt_stride, num_blocks, scale, err, window);                                                   \
    }
FLASH(64, DT_F32, f32)
FLASH(128, DT_F32, f32)
FLASH(64, DT_F16, f16)
FLASH(128, DT_F16, f16)
FLASH(64, DT_BF16, bf16)
FLASH(128, DT_BF16, bf16)
