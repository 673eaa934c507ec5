// elementwise.cu: embedding gather, row gather, SwiGLU activation, add,
// argmax and the MoE combine: small ops, launch-latency bound in decode.

MTLB_KERNEL void embedding(float* __restrict__ out, const int* __restrict__ ids, const void* __restrict__ table,
                                     int dt, int V, int W, int* __restrict__ err) {
    pdl_wait();
    int t = blockIdx.x;
    int id = ids[t];
    float* o = out + (long)t * W;
    if (id < 0 || id >= V) {
        if (threadIdx.x == 0) atomicOr(err, ERR_BAD_TOKEN);
        for (int i = threadIdx.x; i < W; i += blockDim.x) o[i] = 0.f;
        return;
    }
    long base = (long)id * W;
    for (int i = threadIdx.x; i < W; i += blockDim.x) o[i] = load1_dt(dt, table, base + i);
}

// gather_rows copies rows[r] of x into row r of out.
MTLB_KERNEL void gather_rows(float* __restrict__ out, const float* __restrict__ x, const int* __restrict__ rows, int W) {
    pdl_wait();
    int r = blockIdx.x;
    const float* s = x + (long)rows[r] * W;
    float* o = out + (long)r * W;
    for (int i = threadIdx.x; i < W; i += blockDim.x) o[i] = s[i];
}

MTLB_KERNEL void silu_mul(float* out, const float* gate, const float* up, long n) {
    pdl_wait();
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) out[i] = silu(gate[i]) * up[i];
}

MTLB_KERNEL void add(float* out, const float* a, const float* b, long n) {
    pdl_wait();
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) out[i] = a[i] + b[i];
}

// better reports whether (v, i) beats (bv, bi): larger, or equal at a lower
// index; NaN never wins, and bi == INT_MAX means nothing seen yet.
__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
    return v > bv || (v == bv && i < bi);
}

__device__ __forceinline__ void warp_argmax(float& bv, int& bi) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (better(ov, oi, bv, bi)) { bv = ov; bi = oi; }
    }
}

// block_argmax reduces (bv, bi) over the block; thread 0 gets the result.
__device__ __forceinline__ void block_argmax(float& bv, int& bi, float* sv, int* si) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    warp_argmax(bv, bi);
    if (lane == 0) { sv[warp] = bv; si[warp] = bi; }
    __syncthreads();
    if (warp == 0) {
        int nw = blockDim.x >> 5;
        bv = lane < nw ? sv[lane] : NEG_INF;
        bi = lane < nw ? si[lane] : 0x7fffffff;
        warp_argmax(bv, bi);
    }
}

// argmax writes the index of each row's largest value, the first on ties
// (NaN and -inf never win; a row of nothing else gives -1, bridge.NoToken,
// the engine's sign of non-finite logits), as the reference does. Grid: (rows,
// parts): each block scans a slice of its row; the last block of a row to
// finish reduces the parts' winners (a vocabulary of 150k is too long for one
// block) and resets the row's counter for the next step.
MTLB_KERNEL void __launch_bounds__(256) argmax(int* __restrict__ out, const float* __restrict__ x, int V,
                                                        float* __restrict__ part_v, int* __restrict__ part_i,
                                                        int* __restrict__ counters) {
    pdl_wait();
    __shared__ float sv[32];
    __shared__ int si[32];
    __shared__ int s_last;
    const int row = blockIdx.x, np = gridDim.y, p = blockIdx.y;
    const int per = (V + np - 1) / np, lo = p * per, hi = min(V, lo + per);
    const float* r = x + (long)row * V;
    float bv = NEG_INF;
    int bi = 0x7fffffff;
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        float v = r[i];
        if (v > bv) { bv = v; bi = i; }  // bv starts at -inf: the first of equals stays
    }
    block_argmax(bv, bi, sv, si);
    if (np == 1) {
        if (threadIdx.x == 0) out[row] = bi == 0x7fffffff ? -1 : bi;
        return;
    }
    if (threadIdx.x == 0) {
        part_v[(long)row * np + p] = bv;
        part_i[(long)row * np + p] = bi;
        __threadfence();
        s_last = atomicAdd(&counters[row], 1) == np - 1;
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    bv = NEG_INF;
    bi = 0x7fffffff;
    for (int q = threadIdx.x; q < np; q += blockDim.x) {
        float v = __ldcg(part_v + (long)row * np + q);
        int i = __ldcg(part_i + (long)row * np + q);
        if (i != 0x7fffffff && (bi == 0x7fffffff || better(v, i, bv, bi))) { bv = v; bi = i; }
    }
    block_argmax(bv, bi, sv, si);
    if (threadIdx.x == 0) {
        out[row] = bi == 0x7fffffff ? -1 : bi;
        counters[row] = 0;
    }
}

// read_bw streams n 16-byte words (the bandwidth probe); a block writes only
// if its xor of everything read hits a fixed value, which keeps the loads
// without a store per word.
MTLB_KERNEL void __launch_bounds__(256) read_bw(const uint4* __restrict__ p, long n, unsigned* __restrict__ out) {
    unsigned acc = 0;
    const long stride = (long)gridDim.x * blockDim.x;
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a = ld_stream(p + i), b = ld_stream(p + i + stride);
        uint4 c = ld_stream(p + i + 2 * stride), d = ld_stream(p + i + 3 * stride);
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n; i += stride) {
        uint4 a = ld_stream(p + i);
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;
}
