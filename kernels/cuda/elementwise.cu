// elementwise.cu: embedding gather, row gather, SwiGLU activation, add,
// argmax and the MoE combine: small ops, launch-latency bound in decode.

extern "C" __global__ void embedding(float* __restrict__ out, const int* __restrict__ ids, const void* __restrict__ table,
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
extern "C" __global__ void gather_rows(float* __restrict__ out, const float* __restrict__ x, const int* __restrict__ rows, int W) {
    pdl_wait();
    int r = blockIdx.x;
    const float* s = x + (long)rows[r] * W;
    float* o = out + (long)r * W;
    for (int i = threadIdx.x; i < W; i += blockDim.x) o[i] = s[i];
}

extern "C" __global__ void silu_mul(float* out, const float* gate, const float* up, long n) {
    pdl_wait();
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) out[i] = silu(gate[i]) * up[i];
}

extern "C" __global__ void add(float* out, const float* a, const float* b, long n) {
    pdl_wait();
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) out[i] = a[i] + b[i];
}

// argmax writes the index of each row's largest value, the first on ties
// (NaN never wins; a row of NaN gives 0), as the reference does.
extern "C" __global__ void __launch_bounds__(1024) argmax(int* __restrict__ out, const float* __restrict__ x, int V) {
    pdl_wait();
    __shared__ float sv[32];
    __shared__ int si[32];
    const float* row = x + (long)blockIdx.x * V;
    float bv = NEG_INF;
    int bi = 0x7fffffff;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float v = row[i];
        if (v > bv || (bi == 0x7fffffff && v == bv)) { bv = v; bi = i; }
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
    }
    if (lane == 0) { sv[warp] = bv; si[warp] = bi; }
    __syncthreads();
    if (warp == 0) {
        int nw = blockDim.x >> 5;
        bv = lane < nw ? sv[lane] : NEG_INF;
        bi = lane < nw ? si[lane] : 0x7fffffff;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
        }
        if (lane == 0) out[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
    }
}
