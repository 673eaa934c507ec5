// norm.cu: RMSNorm, optionally fused with the residual add before it, one
// block per row. Each thread keeps its elements in registers between the
// sum of squares and the scaling, so the row is read once and its loads are
// all in flight together.

#define NORM_VPT 16  // elements per thread kept in registers

// rms_norm writes out = x·rsqrt(mean(x²)+eps)·w. With add non-null it first
// does residual += add and normalises the new residual (x is then unused).
MTLB_KERNEL void __launch_bounds__(1024) rms_norm(float* __restrict__ out, const float* __restrict__ x,
                                                            float* __restrict__ residual, const float* __restrict__ add,
                                                            const float* __restrict__ w, int D, float eps) {
    __shared__ float red[32];
    const long row = blockIdx.x;
    const int nt = blockDim.x;
    float v[NORM_VPT], wv[NORM_VPT];
    float ss = 0.f;
    const bool fits = D <= nt * NORM_VPT;
    // The weights depend on no kernel of the step: their load overlaps the
    // kernel before instead of following the sum of squares.
    if (fits) {
#pragma unroll
        for (int j = 0; j < NORM_VPT; j++) {
            int i = threadIdx.x + j * nt;
            wv[j] = i < D ? w[i] : 0.f;
        }
    }
    pdl_wait_early();
    if (add) {
        float* r = residual + row * D;
        const float* a = add + row * D;
        if (fits) {
#pragma unroll
            for (int j = 0; j < NORM_VPT; j++) {
                int i = threadIdx.x + j * nt;
                v[j] = i < D ? r[i] + a[i] : 0.f;
            }
#pragma unroll
            for (int j = 0; j < NORM_VPT; j++) {
                int i = threadIdx.x + j * nt;
                if (i < D) r[i] = v[j];
                ss += v[j] * v[j];
            }
        } else {
            for (int i = threadIdx.x; i < D; i += nt) {
                float s = r[i] + a[i];
                r[i] = s;
                ss += s * s;
            }
        }
        x = r;
    } else {
        x += row * D;
        if (fits) {
#pragma unroll
            for (int j = 0; j < NORM_VPT; j++) {
                int i = threadIdx.x + j * nt;
                v[j] = i < D ? x[i] : 0.f;
                ss += v[j] * v[j];
            }
        } else {
            for (int i = threadIdx.x; i < D; i += nt) ss += x[i] * x[i];
        }
    }
    ss = block_sum(ss, red);
    float inv = (float)(1.0 / sqrt((double)ss / D + (double)eps));
    float* o = out + row * D;
    if (fits) {
#pragma unroll
        for (int j = 0; j < NORM_VPT; j++) {
            int i = threadIdx.x + j * nt;
            if (i < D) o[i] = v[j] * inv * wv[j];
        }
    } else {
        for (int i = threadIdx.x; i < D; i += nt) o[i] = x[i] * inv * w[i];
    }
}
