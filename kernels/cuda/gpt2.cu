// gpt2.cu: GPT-2's ops: LayerNorm with bias (optionally after the residual
// add), GELU with the tanh approximation, learned position embeddings.

// Bit of the step's error word: a position outside the position table
// (bridge/cuda errorWord).
#define ERR_BAD_POSITION 8

// layer_norm writes out = (x - mean)·rsqrt(var + eps)·w + b, one block per
// row, the variance taken about the mean (two reductions, as the
// reference). With add non-null it first does residual += add and
// normalises the new residual (x is then unused).
MTLB_KERNEL void __launch_bounds__(1024) layer_norm(float* __restrict__ out, const float* __restrict__ x,
                                                              float* __restrict__ residual, const float* __restrict__ add,
                                                              const float* __restrict__ w, const float* __restrict__ b,
                                                              int D, float eps) {
    __shared__ float red[32];
    pdl_wait_early();
    const long row = blockIdx.x;
    float s = 0.f;
    if (add) {
        float* r = residual + row * D;
        const float* a = add + row * D;
        for (int i = threadIdx.x; i < D; i += blockDim.x) {
            float v = r[i] + a[i];
            r[i] = v;
            s += v;
        }
        x = r;  // each thread reads back only what it wrote until the barrier
    } else {
        x += row * D;
        for (int i = threadIdx.x; i < D; i += blockDim.x) s += x[i];
    }
    const float mean = block_sum(s, red) / D;
    float ss = 0.f;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        float d = x[i] - mean;
        ss += d * d;
    }
    const float inv = (float)(1.0 / sqrt((double)block_sum(ss, red) / D + (double)eps));
    float* o = out + row * D;
    for (int i = threadIdx.x; i < D; i += blockDim.x) o[i] = (x[i] - mean) * inv * w[i] + b[i];
}

// gelu_tanh: out = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (gemv.cu's
// gelu_tanh1, also the c_fc GEMV's epilogue); out may be x.
MTLB_KERNEL void gelu_tanh(float* out, const float* x, long n) {
    pdl_wait();
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        out[i] = gelu_tanh1(x[i]);
    }
}

// position_embedding: x[t] += table[positions[t]], one block per token.
MTLB_KERNEL void position_embedding(float* __restrict__ x, const int* __restrict__ positions,
                                              const void* __restrict__ table, int dt, int P, int W, int* __restrict__ err) {
    pdl_wait();
    int t = blockIdx.x;
    int p = positions[t];
    if (p < 0 || p >= P) {
        if (threadIdx.x == 0) atomicOr(err, ERR_BAD_POSITION);
        return;
    }
    float* o = x + (long)t * W;
    long base = (long)p * W;
    for (int i = threadIdx.x; i < W; i += blockDim.x) o[i] += load1_dt(dt, table, base + i);
}
