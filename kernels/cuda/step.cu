// step.cu: the kernels that open and close a step inside its graph, in
// place of the copies and the memset between graphs (each a stream
// operation of several microseconds at batch-1 decode). The host's side of
// both is pinned memory the kernels reach across the bus.

// pdl_wait_only waits for the kernel before, as pdl_wait does, but lets the
// next one in only at the end: after step_end comes the next step's
// step_begin, which rewrites what the step reads and clears what it wrote.
__device__ __forceinline__ void pdl_wait_only() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    TL_REACHED
    asm volatile("griddepcontrol.wait;" ::: "memory");
    TL_RELEASED
#endif
}

// step_begin brings the step's metadata in from the pinned buffer the host
// filled (n int32s), with the n_tok token ids at tok_off taken from src when
// it is set (the previous step's argmax, still on the device), and clears
// the n_stats stats words. It lets no kernel in before it is done: every
// later kernel, even one scheduled early, sees this step's metadata.
MTLB_KERNEL void step_begin(int* __restrict__ meta, const int* __restrict__ host, int n,
                                      const int* __restrict__ src, int tok_off, int n_tok, int* __restrict__ stats,
                                      int n_stats) {
    pdl_wait_only();
    const int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int j = i - tok_off;
        meta[i] = src && j >= 0 && j < n_tok ? src[j] : host[i];
    }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_stats; i += stride) stats[i] = 0;
}

// step_end hands the step's results to the host: the n_stats stats words
// (the error word first), then the n_ids sampled ids, into the slot's pinned
// buffer (ids at ids_off).
MTLB_KERNEL void step_end(int* __restrict__ host, const int* __restrict__ stats, int n_stats,
                                    const int* __restrict__ ids, int ids_off, int n_ids) {
    pdl_wait_only();
    const int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_stats; i += stride) host[i] = stats[i];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_ids; i += stride) host[ids_off + i] = ids[i];
}
