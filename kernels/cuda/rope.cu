// rope.cu: Qwen3's per-head RMSNorm of q and k (QK-norm, optional) and the
// neox rotation at the step's positions, in place, one warp per head. Angles
// follow transformers: f32 inverse frequencies (inv_freq, computed on the
// host as the reference does), an f32 product with the position, then cos
// and sin of that f32 angle.

#define ROPE_WARPS 4

extern "C" __global__ void __launch_bounds__(ROPE_WARPS * 32) rope_qk(float* q, float* k, const float* __restrict__ qn,
                                                                     const float* __restrict__ kn, const int* __restrict__ positions,
                                                                     int H, int KVH, int D, const float* __restrict__ inv_freq, float eps) {
    pdl_wait();
    int t = blockIdx.x;
    int hh = blockIdx.y * ROPE_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (hh >= H + KVH) return;
    float* v;
    const float* nw;
    if (hh < H) {
        v = q + ((long)t * H + hh) * D;
        nw = qn;
    } else {
        v = k + ((long)t * KVH + (hh - H)) * D;
        nw = kn;
    }
    const int half = D / 2;
    float a[4], b[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        int i = lane + 32 * j;
        a[j] = i < half ? v[i] : 0.f;
        b[j] = i < half ? v[i + half] : 0.f;
    }
    if (nw) {
        float ss = 0.f;
#pragma unroll
        for (int j = 0; j < 4; j++) ss += a[j] * a[j] + b[j] * b[j];
        ss = warp_sum(ss);
        float inv = (float)(1.0 / sqrt((double)ss / D + (double)eps));
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int i = lane + 32 * j;
            if (i < half) {
                a[j] = a[j] * inv * nw[i];
                b[j] = b[j] * inv * nw[i + half];
            }
        }
    }
    float pos = (float)positions[t];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        int i = lane + 32 * j;
        if (i < half) {
            float ang = pos * inv_freq[i];
            float sf, cf;
            sincosf(ang, &sf, &cf);
            v[i] = a[j] * cf - b[j] * sf;
            v[i + half] = b[j] * cf + a[j] * sf;
        }
    }
}
