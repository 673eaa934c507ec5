// rope.cu: Qwen3's per-head RMSNorm of q and k (QK-norm, optional) and the
// neox rotation at the step's positions, in place, one warp per head
// (rope_head, common.cu). A decode step's RoPE usually runs inside its
// attention kernel instead (attention.cu).

#define ROPE_WARPS 4

MTLB_KERNEL void __launch_bounds__(ROPE_WARPS * 32) rope_qk(float* q, float* k, const float* __restrict__ qn,
                                                                     const float* __restrict__ kn, const int* __restrict__ positions,
                                                                     int H, int KVH, int D, const float* __restrict__ inv_freq, float eps) {
    pdl_wait_early();
    int t = blockIdx.x;
    int hh = blockIdx.y * ROPE_WARPS + (threadIdx.x >> 5);
    if (hh >= H + KVH) return;
    float* v = hh < H ? q + ((long)t * H + hh) * D : k + ((long)t * KVH + (hh - H)) * D;
    rope_head(v, v, hh < H ? qn : kn, D, (float)positions[t], inv_freq, eps);
}
