// moe.cu: the sparse MoE block on the GPU, with no host round trip.
//
// moe_route (one block) turns router logits into each token's top-k experts
// and weights (softmax, top-k, optional renormalisation), counts the
// distinct experts (ExpertsTouched), and groups the (token, expert) pairs
// into slots: within each chunk of `chunk` pairs, one slot per expert used,
// with the pairs of that expert listed contiguously. The strategies are
// chunk sizes: grouped is one chunk of every pair, chunked is the strategy's
// chunk size, loop is chunks of one pair. The slot grid is sized on the host
// from the shapes alone (chunks × min(experts, chunk)), so a step replays as
// a CUDA graph; unused slots have no pairs and their blocks exit at once.
//
// moe_gate_up and moe_down are gather GEMVs over the slots: a block reads
// rows of one expert's weights once per pass of M pairs, so each routed
// expert's weights are streamed once per chunk and experts no token chose
// are never read. For a single token moe_down_sum also does the weighted
// sum; otherwise moe_combine sums each token's k outputs in top-k order.

#define ROUTE_THREADS 1024
#define MOE_WARPS 8
#define ROUTE_MAXE 512

// block_scan_excl returns the exclusive prefix sum of v over the block and
// the total in *total. tmp holds 32 ints.
__device__ __forceinline__ int block_scan_excl(int v, int* tmp, int* total) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    __syncthreads();
    if (lane == 31) tmp[warp] = x;
    __syncthreads();
    if (warp == 0) {
        int w = lane < (blockDim.x >> 5) ? tmp[lane] : 0;  // blocks of fewer than 32 warps
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            int y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        tmp[lane] = w;  // inclusive over warps
    }
    __syncthreads();
    int before = warp > 0 ? tmp[warp - 1] : 0;
    *total = tmp[31];
    return before + x - v;
}

// route_token (one warp) turns token t's router logits into its top-k
// experts and weights: softmax, top-k (ties to the lower index, as
// torch.topk), then renormalisation of the k weights when norm is set.
__device__ __forceinline__ void route_token(const float* __restrict__ logits, int t, int E, int K, int norm,
                                            int* __restrict__ topk_ids, float* __restrict__ topk_w, int* stats) {
    const int lane = threadIdx.x & 31;
    const float* lg = logits + (long)t * E;
    float p[ROUTE_MAXE / 32];
    float mx = NEG_INF;
#pragma unroll
    for (int i = 0; i < ROUTE_MAXE / 32; i++) {
        int e = lane + 32 * i;
        p[i] = e < E ? lg[e] : NEG_INF;
        mx = fmaxf(mx, p[i]);
    }
    mx = warp_max(mx);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < ROUTE_MAXE / 32; i++) {
        int e = lane + 32 * i;
        p[i] = e < E ? expf(p[i] - mx) : 0.f;
        sum += p[i];
    }
    sum = warp_sum(sum);
#pragma unroll
    for (int i = 0; i < ROUTE_MAXE / 32; i++) {
        int e = lane + 32 * i;
        p[i] = e < E ? p[i] / sum : -1.f;  // -1: never chosen
    }
    // Round j's winner is kept by lane j (j < 32), so the weights are
    // renormalised and stored in one go; k > 32 also stores as it goes.
    float chosen = 0.f, myv = 0.f;
    int myi = 0;
    for (int j = 0; j < K; j++) {
        float bv = -1.f;
        int bi = 0x7fffffff;
#pragma unroll
        for (int i = 0; i < ROUTE_MAXE / 32; i++)
            if (p[i] > bv) { bv = p[i]; bi = lane + 32 * i; }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
        }
        if (bi == 0x7fffffff) {  // NaN logits: keep indices valid, report
            bi = j % E;
            bv = 0.f;
            if (lane == 0) atomicOr(stats, ERR_BAD_EXPERT);
        }
#pragma unroll
        for (int i = 0; i < ROUTE_MAXE / 32; i++)
            if (lane + 32 * i == bi) p[i] = -1.f;
        chosen += bv;
        if (lane == j) { myv = bv; myi = bi; }
        if (j >= 32 && lane == 0) {
            topk_ids[t * K + j] = bi;
            topk_w[t * K + j] = bv;
        }
    }
    if (lane < K) {
        topk_ids[t * K + lane] = myi;
        topk_w[t * K + lane] = norm ? myv / chosen : myv;
    }
    if (norm && K > 32 && lane == 0) {
        __syncwarp(0x1u);
        for (int j = 32; j < K; j++) topk_w[t * K + j] /= chosen;
    }
}

// moe_route1 is moe_route for a single token (one warp): its k experts are
// distinct, so each pair is its own slot.
MTLB_KERNEL void moe_route1(const float* __restrict__ logits, int E, int K, int norm,
                                      int* __restrict__ topk_ids, float* __restrict__ topk_w,
                                      int* __restrict__ slot_expert, int* __restrict__ slot_start,
                                      int* __restrict__ slot_count, int* __restrict__ pair_list, int* __restrict__ stats,
                                      int stat_index) {
    pdl_wait();
    route_token(logits, 0, E, K, norm, topk_ids, topk_w, stats);
    __syncwarp();
    for (int j = threadIdx.x; j < K; j += 32) {
        slot_expert[j] = topk_ids[j];  // lane j wrote it: no wait
        slot_start[j] = j;
        slot_count[j] = 1;
        pair_list[j] = j;
    }
    if (threadIdx.x == 0) stats[stat_index] = K;
}

// last_block_gathers reports, to every thread of a block, whether the block
// is the last of the grid to get here (counter counts them); the last one
// first copies the n logits every block wrote from L2 into dst.
__device__ __forceinline__ bool last_block_gathers(int* __restrict__ counter, const float* __restrict__ logits,
                                                   float* dst, int n) {
    __shared__ int s_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(counter, 1) == gridDim.x - 1;
    __syncthreads();
    if (!s_last) return false;
    __threadfence();
    for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = __ldcg(logits + i);
    __syncthreads();
    return true;
}

// route1_tail ends a single token's router kernel: once every block's
// logits are written, the last block to finish routes the token
// (route_token) and fills the expert slots, and resets counter.
__device__ __forceinline__ void route1_tail(const float* __restrict__ logits, int E, int K, int norm,
                                            int* __restrict__ topk_ids, float* __restrict__ topk_w,
                                            int* __restrict__ slot_expert, int* __restrict__ slot_start,
                                            int* __restrict__ slot_count, int* __restrict__ pair_list,
                                            int* __restrict__ stats, int stat_index, int* __restrict__ counter) {
    __shared__ float s_logits[ROUTE_MAXE];
    if (!last_block_gathers(counter, logits, s_logits, E)) return;
    const int lane = threadIdx.x & 31;
    if (threadIdx.x >= 32) return;
    route_token(s_logits, 0, E, K, norm, topk_ids, topk_w, stats);
    __syncwarp();
    for (int j = lane; j < K; j += 32) {
        slot_expert[j] = topk_ids[j];
        slot_start[j] = j;
        slot_count[j] = 1;
        pair_list[j] = j;
    }
    if (lane == 0) {
        stats[stat_index] = K;
        *counter = 0;
    }
}

// moe_router_route1 is the router GEMV and moe_route1 in one launch, for a
// single token: each warp computes one expert's logit (f32 activations,
// f32 accumulation, as the f32 GEMV path does), and the last block to finish
// routes. counter is zero between steps (the last block resets it).
template <int DT>
__device__ __forceinline__ void router_route1_body(const float* __restrict__ x, const void* __restrict__ router,
                                                   float* __restrict__ logits, int H, int E, int K, int norm,
                                                   int* __restrict__ topk_ids, float* __restrict__ topk_w,
                                                   int* __restrict__ slot_expert, int* __restrict__ slot_start,
                                                   int* __restrict__ slot_count, int* __restrict__ pair_list,
                                                   int* __restrict__ stats, int stat_index, int* __restrict__ counter) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int e = blockIdx.x * MOE_WARPS + warp;
    // A half-precision row of up to 2048 weights is loaded before the wait:
    // the router depends on no kernel of the step, only x does.
    const bool pre = DT != DT_F32 && H <= 8 * 256 && e < E;
    uint4 raw[8];
    if (pre) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int i = lane * 8 + 256 * j;
            raw[j] = i < H ? ld_stream((const u16*)router + (long)e * H + i) : make_uint4(0, 0, 0, 0);
        }
    }
    pdl_wait();
    if (e < E) {
        float acc = 0.f;
        if (pre) {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int i = lane * 8 + 256 * j;
                if (i < H) {
                    float w[8];
                    widen8<DT>(raw[j], w);
                    const float4* xp = (const float4*)(x + i);
                    acc += dot8(w, __ldg(xp), __ldg(xp + 1));
                }
            }
        } else {
#pragma unroll 4
            for (int i = lane * 8; i < H; i += 256) {
                float w[8];
                load8<DT>(router, (long)e * H + i, w);
                const float4* xp = (const float4*)(x + i);
                acc += dot8(w, __ldg(xp), __ldg(xp + 1));
            }
        }
        acc = warp_sum(acc);
        if (lane == 0) logits[e] = acc;
    }
    route1_tail(logits, E, K, norm, topk_ids, topk_w, slot_expert, slot_start, slot_count, pair_list, stats, stat_index,
                counter);
}

#define ROUTER_ROUTE1(S, DT)                                                                                        \
    MTLB_KERNEL void __launch_bounds__(MOE_WARPS * 32) moe_router_route1_##S(                            \
        const float* __restrict__ x, const void* __restrict__ router, float* __restrict__ logits, int H, int E, int K, \
        int norm, int* __restrict__ topk_ids, float* __restrict__ topk_w, int* __restrict__ slot_expert,           \
        int* __restrict__ slot_start, int* __restrict__ slot_count, int* __restrict__ pair_list,                     \
        int* __restrict__ stats, int stat_index, int* __restrict__ counter) {                                        \
        router_route1_body<DT>(x, router, logits, H, E, K, norm, topk_ids, topk_w, slot_expert, slot_start,          \
                               slot_count, pair_list, stats, stat_index, counter);                                    \
    }

// route_slots routes T tokens from their logits ([T][E]) with the whole
// block (at least E threads): top-k per token (one warp each), the count of
// distinct experts in stats[stat_index], then the slots of each chunk of
// pairs: one per expert the chunk routes to, its pairs listed in
// pair_list. s_cnt and s_base hold E ints, s_tmp 32.
__device__ __forceinline__ void route_slots(const float* logits, int T, int E, int K, int norm, int chunk,
                                            int slots_per_chunk, int* __restrict__ topk_ids,
                                            float* __restrict__ topk_w, int* __restrict__ slot_expert,
                                            int* __restrict__ slot_start, int* __restrict__ slot_count,
                                            int* __restrict__ pair_list, int* __restrict__ stats, int stat_index,
                                            int* s_cnt, int* s_base, int* s_tmp) {
    const int warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int P = T * K;

    // 1. Route: one warp per token.
    for (int t = warp; t < T; t += nw) route_token(logits, t, E, K, norm, topk_ids, topk_w, stats);
    __syncthreads();

    // 2. Distinct experts touched by the step.
    for (int e = threadIdx.x; e < E; e += blockDim.x) s_cnt[e] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < P; i += blockDim.x) s_cnt[topk_ids[i]] = 1;
    __syncthreads();
    int total;
    block_scan_excl(threadIdx.x < E ? s_cnt[threadIdx.x] : 0, s_tmp, &total);
    if (threadIdx.x == 0) stats[stat_index] = total;

    // 3. Slots.
    if (chunk == 1) {
        for (int i = threadIdx.x; i < P; i += blockDim.x) {
            slot_expert[i] = topk_ids[i];
            slot_start[i] = i;
            slot_count[i] = 1;
            pair_list[i] = i;
        }
        return;
    }
    const int nchunks = (P + chunk - 1) / chunk;
    for (int c = 0; c < nchunks; c++) {
        const int lo = c * chunk, hi = min(P, lo + chunk);
        __syncthreads();
        for (int e = threadIdx.x; e < E; e += blockDim.x) s_cnt[e] = 0;
        __syncthreads();
        for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) atomicAdd(&s_cnt[topk_ids[i]], 1);
        __syncthreads();
        int cnt = threadIdx.x < E ? s_cnt[threadIdx.x] : 0;
        int used;
        int off = block_scan_excl(cnt, s_tmp, &used);
        int act = block_scan_excl(cnt > 0 ? 1 : 0, s_tmp, &used);
        const int slot0 = c * slots_per_chunk;
        if (threadIdx.x < E && cnt > 0) {
            int sl = slot0 + act;
            slot_expert[sl] = threadIdx.x;
            slot_start[sl] = lo + off;
            slot_count[sl] = cnt;
            s_base[threadIdx.x] = lo + off;
        }
        for (int i = used + threadIdx.x; i < slots_per_chunk; i += blockDim.x) {
            slot_count[slot0 + i] = 0;
            slot_expert[slot0 + i] = 0;
            slot_start[slot0 + i] = 0;
        }
        __syncthreads();
        for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
            int at = atomicAdd(&s_base[topk_ids[i]], 1);
            pair_list[at] = i;
        }
    }
}

MTLB_KERNEL void __launch_bounds__(ROUTE_THREADS) moe_route(
    const float* __restrict__ logits, int T, int E, int K, int norm, int chunk, int slots_per_chunk,
    int* __restrict__ topk_ids, float* __restrict__ topk_w, int* __restrict__ slot_expert,
    int* __restrict__ slot_start, int* __restrict__ slot_count, int* __restrict__ pair_list,
    int* __restrict__ stats, int stat_index) {
    pdl_wait();
    __shared__ int s_cnt[ROUTE_MAXE];
    __shared__ int s_base[ROUTE_MAXE];
    __shared__ int s_tmp[32];
    route_slots(logits, T, E, K, norm, chunk, slots_per_chunk, topk_ids, topk_w, slot_expert, slot_start, slot_count,
                pair_list, stats, stat_index, s_cnt, s_base, s_tmp);
}

// moe_router_route is the router GEMV and moe_route in one launch, for steps
// of 2 to ROUTE_MAXT tokens, half-precision router rows and at most
// MOE_WARPS·32 experts: each warp computes one expert's logit for every
// token (f32 activations, f32 accumulation, as the GEMV path), x staged
// through shared memory RR_CHUNK values at a time, and the last block to
// finish routes (route_slots). counter is zero between steps (the last
// block resets it).
#define ROUTE_MAXT 16
#define RR_CHUNK 512
template <int DT>
__device__ __forceinline__ void router_route_body(const float* __restrict__ x, const void* __restrict__ router,
                                                  float* __restrict__ logits, int T, int H, int E, int K, int norm,
                                                  int chunk, int slots_per_chunk, int* __restrict__ topk_ids,
                                                  float* __restrict__ topk_w, int* __restrict__ slot_expert,
                                                  int* __restrict__ slot_start, int* __restrict__ slot_count,
                                                  int* __restrict__ pair_list, int* __restrict__ stats, int stat_index,
                                                  int* __restrict__ counter) {
    __shared__ __align__(16) float s_x[ROUTE_MAXT * RR_CHUNK];
    __shared__ int s_cnt[MOE_WARPS * 32];
    __shared__ int s_base[MOE_WARPS * 32];
    __shared__ int s_tmp[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int e = blockIdx.x * MOE_WARPS + warp;
    const u16* row = (const u16*)router + (long)min(e, E - 1) * H;
    // Lane l holds weights c + 256h + 8l .. +7 of chunk c (h = 0, 1); the
    // first chunk's are loaded before the wait (the router depends on no
    // kernel of the step, only x does), each next one while this one is used.
    uint4 w[2], wn[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int i = 256 * h + 8 * lane;
        w[h] = i < H ? ld_stream(row + i) : make_uint4(0, 0, 0, 0);
    }
    pdl_wait();
    float acc[ROUTE_MAXT];
#pragma unroll
    for (int t = 0; t < ROUTE_MAXT; t++) acc[t] = 0.f;
    for (int c = 0; c < H; c += RR_CHUNK) {
        const int n = min(RR_CHUNK, H - c);  // a multiple of 8
        __syncthreads();
        for (int j = threadIdx.x; j < T * (n / 4); j += blockDim.x) {
            const int t = j / (n / 4), q = j - t * (n / 4);
            ((float4*)s_x)[t * (RR_CHUNK / 4) + q] = __ldg((const float4*)(x + (long)t * H + c) + q);
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int i = c + RR_CHUNK + 256 * h + 8 * lane;
            wn[h] = i < H ? ld_stream(row + i) : make_uint4(0, 0, 0, 0);
        }
        __syncthreads();
#pragma unroll
        for (int h = 0; h < 2; h++) {
            if (256 * h + 8 * lane < n) {  // past n, s_x holds an earlier chunk or nothing
                float wf[8];
                widen8<DT>(w[h], wf);
                const float4* xs = (const float4*)(s_x + 256 * h + 8 * lane);
#pragma unroll
                for (int t = 0; t < ROUTE_MAXT; t++)
                    if (t < T) acc[t] += dot8(wf, xs[t * (RR_CHUNK / 4)], xs[t * (RR_CHUNK / 4) + 1]);
            }
            w[h] = wn[h];
        }
    }
#pragma unroll
    for (int t = 0; t < ROUTE_MAXT; t++) {
        if (t < T) {
            const float v = warp_sum(acc[t]);
            if (lane == t && e < E) logits[(long)t * E + e] = v;
        }
    }
    if (!last_block_gathers(counter, logits, s_x, T * E)) return;
    route_slots(s_x, T, E, K, norm, chunk, slots_per_chunk, topk_ids, topk_w, slot_expert, slot_start, slot_count,
                pair_list, stats, stat_index, s_cnt, s_base, s_tmp);
    if (threadIdx.x == 0) *counter = 0;
}

// moe_rows runs R rows of one expert matrix W ([rows][k]) over the pairs of a
// slot, M at a time: out[pair][row] = f(x(pair) · W[row]), with x(pair) the
// pair's input row. With GATE it reads W and W2 (gate and up) and writes
// silu(gate)·up.
template <int DT, int M, int R, bool VEC, bool GATE>
__device__ __forceinline__ void moe_rows(const void* __restrict__ W, const void* __restrict__ W2,
                                         const float* __restrict__ X, int xdiv, const int* __restrict__ pairs, int cnt,
                                         float* __restrict__ out, int n, int k, int row0) {
    const int lane = threadIdx.x & 31;
    for (int t0 = 0; t0 < cnt; t0 += M) {
        int pr[M];
#pragma unroll
        for (int t = 0; t < M; t++) pr[t] = t0 + t < cnt ? pairs[t0 + t] : -1;
        float acc[M][R], acc2[M][R];
#pragma unroll
        for (int t = 0; t < M; t++)
#pragma unroll
            for (int r = 0; r < R; r++) acc[t][r] = acc2[t][r] = 0.f;
        if (VEC) {
#pragma unroll(M <= 2 ? 4 : 2)
            for (int i = lane * 8; i < k; i += 256) {
                float w[R][8], w2[R][8];
#pragma unroll
                for (int r = 0; r < R; r++) {
                    if (row0 + r < n) {
                        load8<DT>(W, (long)(row0 + r) * k + i, w[r]);
                        if (GATE) load8<DT>(W2, (long)(row0 + r) * k + i, w2[r]);
                    } else {
#pragma unroll
                        for (int j = 0; j < 8; j++) w[r][j] = w2[r][j] = 0.f;
                    }
                }
#pragma unroll
                for (int t = 0; t < M; t++) {
                    if (pr[t] >= 0) {
                        const float4* xp = (const float4*)(X + (long)(pr[t] / xdiv) * k + i);
                        float4 a = __ldg(xp), b = __ldg(xp + 1);
#pragma unroll
                        for (int r = 0; r < R; r++) {
                            acc[t][r] += dot8(w[r], a, b);
                            if (GATE) acc2[t][r] += dot8(w2[r], a, b);
                        }
                    }
                }
            }
        } else {
            for (int i = lane; i < k; i += 32) {
                float w[R], w2[R];
#pragma unroll
                for (int r = 0; r < R; r++) {
                    w[r] = row0 + r < n ? load1<DT>(W, (long)(row0 + r) * k + i) : 0.f;
                    w2[r] = GATE && row0 + r < n ? load1<DT>(W2, (long)(row0 + r) * k + i) : 0.f;
                }
#pragma unroll
                for (int t = 0; t < M; t++) {
                    if (pr[t] >= 0) {
                        float xv = X[(long)(pr[t] / xdiv) * k + i];
#pragma unroll
                        for (int r = 0; r < R; r++) {
                            acc[t][r] += w[r] * xv;
                            if (GATE) acc2[t][r] += w2[r] * xv;
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int t = 0; t < M; t++)
#pragma unroll
            for (int r = 0; r < R; r++) {
                acc[t][r] = warp_sum(acc[t][r]);
                if (GATE) acc2[t][r] = warp_sum(acc2[t][r]);
            }
        if (lane == 0) {
#pragma unroll
            for (int t = 0; t < M; t++)
#pragma unroll
                for (int r = 0; r < R; r++)
                    if (pr[t] >= 0 && row0 + r < n)
                        out[(long)pr[t] * n + row0 + r] = GATE ? silu(acc[t][r]) * acc2[t][r] : acc[t][r];
        }
    }
}

// Grid: (slots, row tiles). gate_ptrs/up_ptrs/down_ptrs are per-expert
// device pointers. x is [T][H]; hbuf is [T*K][I]; y is [T*K][H].
template <int DT, int M, int R, bool VEC>
__device__ __forceinline__ void moe_gate_up_body(const float* x, float* hbuf, const u64* gate_ptrs, const u64* up_ptrs,
                                                 const int* slot_expert, const int* slot_start, const int* slot_count,
                                                 const int* pair_list, int H, int I, int K) {
    int slot = blockIdx.x;
    int cnt = slot_count[slot];
    if (cnt == 0) return;
    int row0 = (blockIdx.y * MOE_WARPS + (threadIdx.x >> 5)) * R;
    if (row0 >= I) return;
    int e = slot_expert[slot];
    moe_rows<DT, M, R, VEC, true>((const void*)gate_ptrs[e], (const void*)up_ptrs[e], x, K, pair_list + slot_start[slot],
                                  cnt, hbuf, I, H, row0);
}

template <int DT, int M, int R, bool VEC>
__device__ __forceinline__ void moe_down_body(const float* hbuf, float* y, const u64* down_ptrs, const int* slot_expert,
                                              const int* slot_start, const int* slot_count, const int* pair_list,
                                              int H, int I) {
    int slot = blockIdx.x;
    int cnt = slot_count[slot];
    if (cnt == 0) return;
    int row0 = (blockIdx.y * MOE_WARPS + (threadIdx.x >> 5)) * R;
    if (row0 >= H) return;
    int e = slot_expert[slot];
    moe_rows<DT, M, R, VEC, false>((const void*)down_ptrs[e], 0, hbuf, 1, pair_list + slot_start[slot], cnt, y, H, I,
                                   row0);
}

// moe_down_sum is the single-token down projection fused with the weighted
// sum: out[row] = Σ_j w_j · (h_j · Wd[e_j][row]). A block takes DS rows; its
// warps share the (row, expert) pairs, so each warp streams a few short rows
// with all their loads in flight, and the block sums each row's k products
// in top-k order (deterministic). k is at most DS_MAXK.
#define DS_MAXK 32
template <int DT, int DS, bool VEC>
__device__ __forceinline__ void moe_down_sum_body(const float* __restrict__ hbuf, float* __restrict__ out,
                                                  const u64* __restrict__ down_ptrs, const int* __restrict__ topk_ids,
                                                  const float* __restrict__ topk_w, int H, int I, int K) {
    __shared__ float red[DS][DS_MAXK];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int row0 = blockIdx.x * DS;
#pragma unroll 2
    for (int pr = warp; pr < DS * K; pr += MOE_WARPS) {
        const int r = pr / K, j = pr % K, row = row0 + r;
        float part = 0.f;
        if (row < H) {
            const void* W = (const void*)down_ptrs[topk_ids[j]];
            const float* hx = hbuf + (long)j * I;
            if (VEC) {
#pragma unroll 4
                for (int i = lane * 8; i < I; i += 256) {
                    const float4* xp = (const float4*)(hx + i);
                    float w[8];
                    load8<DT>(W, (long)row * I + i, w);
                    part += dot8(w, __ldg(xp), __ldg(xp + 1));
                }
            } else {
                for (int i = lane; i < I; i += 32) part += load1<DT>(W, (long)row * I + i) * hx[i];
            }
        }
        part = warp_sum(part);
        if (lane == 0) red[r][j] = topk_w[j] * part;
    }
    __syncthreads();
    if (threadIdx.x < DS && row0 + threadIdx.x < H) {
        float s = 0.f;
        for (int j = 0; j < K; j++) s += red[threadIdx.x][j];
        out[row0 + threadIdx.x] = s;
    }
}

// moe_down_sum_prefetch (flag bit 0) prefetches the block's rows of its k
// experts' down weights before pdl_wait. The expert ids were written by
// moe_route, which finished before the gate/up kernel before this one got
// past its own wait, and so before this kernel was launched; they are read
// from L2 and clamped, since a wrong id could only cost a useless prefetch.
__device__ __forceinline__ void moe_down_sum_prefetch(const u64* __restrict__ down_ptrs,
                                                      const int* __restrict__ topk_ids, int DS, int H, int I, int K,
                                                      int E, int esize, int flags) {
    if (!(flags & 1) || threadIdx.x >= 32) return;
    const int row0 = blockIdx.x * DS;
    const int rows = min(DS, H - row0);
    if (rows <= 0 || (I * esize) % 16 != 0) return;
    for (int j = threadIdx.x; j < K; j += 32) {
        int e = min(max(__ldcg(topk_ids + j), 0), E - 1);
        const char* p = (const char*)down_ptrs[e] + (long)row0 * I * esize;
        const long bytes = (long)rows * I * esize;
        for (long off = 0; off < bytes; off += 16384) prefetch_l2(p + off, (unsigned)min(bytes - off, 16384l));
    }
}

#define MOE_GU_PARAMS                                                                                   \
    const float *x, float *hbuf, const u64 *gate_ptrs, const u64 *up_ptrs, const int *slot_expert,     \
        const int *slot_start, const int *slot_count, const int *pair_list, int H, int I, int K
#define MOE_GU_ARGS x, hbuf, gate_ptrs, up_ptrs, slot_expert, slot_start, slot_count, pair_list, H, I, K
#define MOE_DN_PARAMS                                                                                   \
    const float *hbuf, float *y, const u64 *down_ptrs, const int *slot_expert, const int *slot_start, \
        const int *slot_count, const int *pair_list, int H, int I
#define MOE_DN_ARGS hbuf, y, down_ptrs, slot_expert, slot_start, slot_count, pair_list, H, I
#define MOE_DS_PARAMS                                                                                    \
    const float *hbuf, float *out, const u64 *down_ptrs, const int *topk_ids, const float *topk_w, int H, \
        int I, int K, int E, int flags
#define MOE_DS_ARGS hbuf, out, down_ptrs, topk_ids, topk_w, H, I, K

// The expert GEMVs are held to 40 registers, 6 blocks per SM: more warps
// streaming weights beat the deeper unrolling the compiler would keep (on an
// H100, batch-16 decode of Qwen3-30B-A3B 5% faster; 32 registers spilled
// and were 5% slower).
#define MOE_MIN_BLOCKS 6
#define MOE_KERNELS(SUF, DT, M, R, VEC)                                                                  \
    MTLB_KERNEL void __launch_bounds__(MOE_WARPS * 32, MOE_MIN_BLOCKS)                         \
        moe_gate_up_##SUF(MOE_GU_PARAMS) {                                                               \
        pdl_wait();                                                                                      \
        moe_gate_up_body<DT, M, R, VEC>(MOE_GU_ARGS);                                                    \
    }                                                                                                    \
    MTLB_KERNEL void __launch_bounds__(MOE_WARPS * 32, MOE_MIN_BLOCKS)                         \
        moe_down_##SUF(MOE_DN_PARAMS) {                                                                  \
        pdl_wait();                                                                                      \
        moe_down_body<DT, M, R, VEC>(MOE_DN_ARGS);                                                       \
    }

#define MOE_DS_KERNEL(NAME, DT, DS, VEC)                                                       \
    MTLB_KERNEL void __launch_bounds__(MOE_WARPS * 32) NAME(MOE_DS_PARAMS) {           \
        moe_down_sum_prefetch(down_ptrs, topk_ids, DS, H, I, K, E, DT == DT_F32 ? 4 : 2, flags); \
        pdl_wait();                                                                              \
        moe_down_sum_body<DT, DS, VEC>(MOE_DS_ARGS);                                             \
    }

// Kernels are named by their pairs per pass (m) and, for bf16, rows per warp
// (r); the single-token down projection by its rows per block (d).
#define MOE_DT(S, DT)                                \
    MOE_KERNELS(S##_m1, DT, 1, 1, true)              \
    MOE_KERNELS(S##_m2, DT, 2, 1, true)              \
    MOE_KERNELS(S##_m4, DT, 4, 1, true)              \
    MOE_KERNELS(S##_m8, DT, 8, 1, true)              \
    MOE_KERNELS(S##_scalar, DT, 1, 1, false)         \
    MOE_DS_KERNEL(moe_down_sum_##S##_d4, DT, 4, true) \
    MOE_DS_KERNEL(moe_down_sum_##S##_scalar, DT, 4, false)

MOE_DT(f32, DT_F32)
MOE_DT(f16, DT_F16)
MOE_DT(bf16, DT_BF16)
MOE_KERNELS(bf16_m1_r2, DT_BF16, 1, 2, true)
MOE_KERNELS(bf16_m2_r2, DT_BF16, 2, 2, true)
MOE_KERNELS(bf16_m4_r2, DT_BF16, 4, 2, true)
MOE_KERNELS(bf16_m8_r2, DT_BF16, 8, 2, true)
MOE_DS_KERNEL(moe_down_sum_bf16_d2, DT_BF16, 2, true)
MOE_DS_KERNEL(moe_down_sum_bf16_d8, DT_BF16, 8, true)

// moe_combine writes out[t] = Σ_j w[t][j] · y[t·K+j], in top-k order.
MTLB_KERNEL void moe_combine(float* __restrict__ out, const float* __restrict__ y, const float* __restrict__ w,
                                       int H, int K) {
    pdl_wait();
    int t = blockIdx.x;
    int i = blockIdx.y * blockDim.x + threadIdx.x;  // grid: (tokens, hidden / block)
    if (i >= H) return;
    float s = 0.f;
#pragma unroll 4
    for (int j = 0; j < K; j++) s += __ldg(w + t * K + j) * y[((long)t * K + j) * H + i];
    out[(long)t * H + i] = s;
}

ROUTER_ROUTE1(f32, DT_F32)
ROUTER_ROUTE1(f16, DT_F16)
ROUTER_ROUTE1(bf16, DT_BF16)

#define ROUTER_ROUTE(S, DT)                                                                                          \
    MTLB_KERNEL void __launch_bounds__(MOE_WARPS * 32) moe_router_route_##S(                                 \
        const float* __restrict__ x, const void* __restrict__ router, float* __restrict__ logits, int T, int H, int E, \
        int K, int norm, int chunk, int slots_per_chunk, int* __restrict__ topk_ids, float* __restrict__ topk_w,       \
        int* __restrict__ slot_expert, int* __restrict__ slot_start, int* __restrict__ slot_count,                     \
        int* __restrict__ pair_list, int* __restrict__ stats, int stat_index, int* __restrict__ counter) {             \
        router_route_body<DT>(x, router, logits, T, H, E, K, norm, chunk, slots_per_chunk, topk_ids, topk_w,          \
                              slot_expert, slot_start, slot_count, pair_list, stats, stat_index, counter);             \
    }

ROUTER_ROUTE(f16, DT_F16)
ROUTER_ROUTE(bf16, DT_BF16)
