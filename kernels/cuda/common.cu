// common.cu: types and helpers shared by every kernel. Activations are f32;
// weights f32, f16 or bf16 (the dtype codes are bridge.DType's: 0 f32,
// 1 f16, 2 bf16); accumulation is f32 everywhere. No CUDA headers are
// included, so NVRTC needs no include path.

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define DT_F32 0
#define DT_F16 1
#define DT_BF16 2

// Bits of the step's error word (stats[0]); EndStep turns them into errors.
#define ERR_BAD_TOKEN 1
#define ERR_BAD_EXPERT 2
#define ERR_BAD_SLOT 4

#define NEG_INF (__int_as_float(0xff800000))

// The in-place timeline (MTLB_TIMELINE; docs/cuda.md, "The in-place
// timeline"): thread 0 of every block notes on the GPU's global clock when
// the wait on the previous kernel let it go, how long it waited there, and
// its launch's shape, in the log the host hands every module (mtlb_tl_log:
// the entries taken, the capacity, then two words an entry). A launch's
// blocks pass their wait only once the launch before has ended, so the log
// holds the launches in order, graph replays and all, whatever module
// each kernel comes from.
#ifdef MTLB_TIMELINE
__device__ u64* mtlb_tl_log;
__device__ __forceinline__ u64 tl_now() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ void tl_note(u64 reached) {
    u64* log = mtlb_tl_log;
    if ((threadIdx.x | threadIdx.y | threadIdx.z) || !log) return;
    const u64 t = tl_now();
    const u64 i = atomicAdd(&log[0], 1ull);
    if (i >= log[1]) return;
    const u64 blocks = ((u64)gridDim.x * gridDim.y * gridDim.z) & 0xffffff;
    const u64 warps = (blockDim.x * blockDim.y * blockDim.z + 31) >> 5;
    log[2 + 2 * i] = t;
    const u64 waited = t - reached < 0xffffffffull ? t - reached : 0xffffffffull;
    log[3 + 2 * i] = waited << 32 | blocks << 8 | warps;
}
#define TL_REACHED const u64 tl_reached = tl_now();
#define TL_RELEASED tl_note(tl_reached);
#else
#define TL_REACHED
#define TL_RELEASED
#endif

// pdl_wait starts every kernel: with programmatic dependent launch (sm_90)
// a kernel may be scheduled while the previous one still runs; it waits here
// until that one has finished and its writes are visible, then lets the
// next kernel be scheduled in turn. Without PDL both are no-ops.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    TL_REACHED
    asm volatile("griddepcontrol.wait;" ::: "memory");
    TL_RELEASED
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// pdl_wait_early is pdl_wait for the short, latency-bound kernels (norms,
// RoPE, attention, routing) when MTLB_PDL_EARLY is set: the next kernel is
// let in before the wait, so a GEMV after them is resident, and streaming
// its weights into L2, for their whole run instead of only their tail.
__device__ __forceinline__ void pdl_wait_early() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(MTLB_PDL_EARLY)
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    TL_REACHED
    asm volatile("griddepcontrol.wait;" ::: "memory");
    TL_RELEASED
#else
    pdl_wait();
#endif
}

// prefetch_l2 asks the copy engine to bring bytes at p (16-byte aligned, a
// multiple of 16) into L2 without waiting: weights whose addresses do not
// depend on the previous kernel are fetched before pdl_wait, overlapping
// that kernel's tail and the launch gap.
__device__ __forceinline__ void prefetch_l2(const void* p, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDACC_VER_MAJOR__ >= 12  // PTX 8.0
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

// prefetch_rows prefetches rows [row0, row0+rows) of a row-major [n][k]
// matrix of esize-byte elements, split over the calling warp's lanes in
// pieces of at most 16 KiB. A no-op unless k·esize is a multiple of 16.
__device__ __forceinline__ void prefetch_rows(const void* W, int row0, int rows, int n, int k, int esize) {
    rows = min(rows, n - row0);
    if (rows <= 0 || (k * esize) % 16 != 0) return;
    const char* p = (const char*)W + (long)row0 * k * esize;
    const long bytes = (long)rows * k * esize;
    const int lane = threadIdx.x & 31;
    for (long off = (long)lane << 14; off < bytes; off += 32l << 14)
        prefetch_l2(p + off, (unsigned)min(bytes - off, 16384l));
}

__device__ __forceinline__ float f16_to_f32(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ u16 f32_to_f16(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ u16 f32_to_bf16(float f) {
    u32 u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
    u += 0x7fffu + ((u >> 16) & 1u);                    // round to nearest even
    return (u16)(u >> 16);
}

// ld_stream reads 16 bytes that are used once (weights): read-only path, no
// L1 allocation, so L1 keeps the activations every warp re-reads.
__device__ __forceinline__ uint4 ld_stream(const void* p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

__device__ __forceinline__ void unpack_bf16x2(u32 u, float& a, float& b) {
    a = __uint_as_float(u << 16);
    b = __uint_as_float(u & 0xffff0000u);
}

__device__ __forceinline__ void unpack_f16x2(u32 u, float& a, float& b) {
    a = f16_to_f32((u16)(u & 0xffffu));
    b = f16_to_f32((u16)(u >> 16));
}

// widen8 widens 8 half-precision weights (f16 or bf16) held in a uint4.
template <int DT>
__device__ __forceinline__ void widen8(uint4 u, float* v) {
    if (DT == DT_BF16) {
        unpack_bf16x2(u.x, v[0], v[1]); unpack_bf16x2(u.y, v[2], v[3]);
        unpack_bf16x2(u.z, v[4], v[5]); unpack_bf16x2(u.w, v[6], v[7]);
    } else {
        unpack_f16x2(u.x, v[0], v[1]); unpack_f16x2(u.y, v[2], v[3]);
        unpack_f16x2(u.z, v[4], v[5]); unpack_f16x2(u.w, v[6], v[7]);
    }
}

// load8 widens the 8 weights at element i (a multiple of 8) of base.
template <int DT>
__device__ __forceinline__ void load8(const void* base, long i, float* v) {
    if (DT == DT_F32) {
        const float* p = (const float*)base + i;
        uint4 a = ld_stream(p), b = ld_stream(p + 4);
        v[0] = __uint_as_float(a.x); v[1] = __uint_as_float(a.y);
        v[2] = __uint_as_float(a.z); v[3] = __uint_as_float(a.w);
        v[4] = __uint_as_float(b.x); v[5] = __uint_as_float(b.y);
        v[6] = __uint_as_float(b.z); v[7] = __uint_as_float(b.w);
    } else {
        widen8<DT>(ld_stream((const u16*)base + i), v);
    }
}

// load1 widens the single element i of base.
template <int DT>
__device__ __forceinline__ float load1(const void* base, long i) {
    if (DT == DT_F32) return __ldg((const float*)base + i);
    u16 h = __ldg((const u16*)base + i);
    if (DT == DT_BF16) return __uint_as_float(((u32)h) << 16);
    return f16_to_f32(h);
}

// load1_dt is load1 with the dtype known only at run time.
__device__ __forceinline__ float load1_dt(int dt, const void* base, long i) {
    if (dt == DT_F32) return load1<DT_F32>(base, i);
    if (dt == DT_BF16) return load1<DT_BF16>(base, i);
    return load1<DT_F16>(base, i);
}

// ---- the KV cache in its dtype KT (DT_F32, DT_F16 or DT_BF16) ----
// Keys and values are stored rounded to KT (nearest even) and read back
// widened to f32; a step's own keys and values, which attention reads from
// its k and v inputs, go through kv_round so they count as stored.

// KVElem<KT>::T is the cache's element type: float, or the 16-bit bits.
template <int KT> struct KVElem { typedef u16 T; };
template <> struct KVElem<DT_F32> { typedef float T; };

template <int KT>
__device__ __forceinline__ float kv_load(const void* base, long i) {
    if (KT == DT_F32) return ((const float*)base)[i];
    const u16 h = ((const u16*)base)[i];
    if (KT == DT_BF16) return __uint_as_float(((u32)h) << 16);
    return f16_to_f32(h);
}

template <int KT>
__device__ __forceinline__ void kv_store(void* base, long i, float x) {
    if (KT == DT_F32) ((float*)base)[i] = x;
    else if (KT == DT_BF16) ((u16*)base)[i] = f32_to_bf16(x);
    else ((u16*)base)[i] = f32_to_f16(x);
}

// kv_round is x as a KT cache stores it, widened back to f32.
template <int KT>
__device__ __forceinline__ float kv_round(float x) {
    if (KT == DT_F32) return x;
    if (KT == DT_BF16) return __uint_as_float(((u32)f32_to_bf16(x)) << 16);
    return f16_to_f32(f32_to_f16(x));
}

// kv_load4 widens the 4 cache elements at element i (a multiple of 4) of
// base: one 16-byte load for f32, 8 bytes for the half types.
template <int KT>
__device__ __forceinline__ float4 kv_load4(const void* base, long i) {
    if (KT == DT_F32) return *(const float4*)((const float*)base + i);
    const uint2 u = *(const uint2*)((const u16*)base + i);
    float4 r;
    if (KT == DT_BF16) {
        unpack_bf16x2(u.x, r.x, r.y);
        unpack_bf16x2(u.y, r.z, r.w);
    } else {
        unpack_f16x2(u.x, r.x, r.y);
        unpack_f16x2(u.y, r.z, r.w);
    }
    return r;
}

// kv_store4 stores 4 values at element i (a multiple of 4) of base in KT.
template <int KT>
__device__ __forceinline__ void kv_store4(void* base, long i, float4 x) {
    if (KT == DT_F32) {
        *(float4*)((float*)base + i) = x;
    } else if (KT == DT_BF16) {
        *(uint2*)((u16*)base + i) = make_uint2((u32)f32_to_bf16(x.x) | ((u32)f32_to_bf16(x.y) << 16),
                                               (u32)f32_to_bf16(x.z) | ((u32)f32_to_bf16(x.w) << 16));
    } else {
        *(uint2*)((u16*)base + i) = make_uint2((u32)f32_to_f16(x.x) | ((u32)f32_to_f16(x.y) << 16),
                                               (u32)f32_to_f16(x.z) | ((u32)f32_to_f16(x.w) << 16));
    }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// block_sum reduces v over the block (blockDim.x a multiple of 32, at most
// 1024); every thread gets the total. red holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* red) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float t = lane < nw ? red[lane] : 0.f;
    return warp_sum(t);
}

__device__ __forceinline__ float silu(float x) { return x / (1.f + expf(-x)); }

// norm4 is RMSNorm's scaling of four elements, in its order: (x·inv)·w.
__device__ __forceinline__ float4 norm4(float4 x, float4 w, float inv) {
    return make_float4(x.x * inv * w.x, x.y * inv * w.y, x.z * inv * w.z, x.w * inv * w.w);
}

__device__ __forceinline__ float dot8(const float* w, float4 a, float4 b) {
    return w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w +
           w[4] * b.x + w[5] * b.y + w[6] * b.z + w[7] * b.w;
}

// rope_sincos is the rotation of RoPE's frequency inv at pos, the one rule
// rope_head and the decode kernels' dec_rope_angles share: the f32
// product, rounded as transformers (and kernels.RoPE) round it, and
// sincosf of it, which NVRTC compiles without fast math (__sincosf's
// error grows with the angle) (docs/architecture.md, "Rotary embeddings").
__device__ __forceinline__ void rope_sincos(float pos, float inv, float* s, float* c) {
    const float ang = pos * inv;
    sincosf(ang, s, c);
}

// rope_head (one warp) normalises one head of D values with the per-head
// RMSNorm weights nw (QK-norm; skipped when nw is null) and rotates it, neox
// style, at position pos, reading src and writing dst (which may be src).
// Angles follow transformers: f32 inverse frequencies computed on the host
// as the reference does, an f32 product with the position, then cos and sin
// of that f32 angle. D is even and at most 256.
__device__ __forceinline__ void rope_head(const float* src, float* dst, const float* __restrict__ nw, int D, float pos,
                                          const float* __restrict__ inv_freq, float eps) {
    const int lane = threadIdx.x & 31;
    const int half = D / 2;
    float a[4], b[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        int i = lane + 32 * j;
        a[j] = i < half ? src[i] : 0.f;
        b[j] = i < half ? src[i + half] : 0.f;
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
#pragma unroll
    for (int j = 0; j < 4; j++) {
        int i = lane + 32 * j;
        if (i < half) {
            float sf, cf;
            rope_sincos(pos, inv_freq[i], &sf, &cf);
            dst[i] = a[j] * cf - b[j] * sf;
            dst[i + half] = b[j] * cf + a[j] * sf;
        }
    }
}

// ---- tensor cores (sm_80+: mma.sync, ldmatrix, cp.async) ----
// Fragment layouts of mma.m16n8k16 (bf16 in, f32 accumulate), with g =
// lane/4 and c = lane%4: A (16×16, row-major) a0 = (g, 2c..2c+1), a1 =
// (g+8, 2c..), a2 = (g, 2c+8..), a3 = (g+8, 2c+8..); B (16×8, as columns)
// b0 = (k 2c..2c+1, n g), b1 = (k 2c+8.., n g); C (16×8) c0,c1 = (g, 2c..
// 2c+1), c2,c3 = (g+8, 2c..). The lower half of a packed pair holds the
// lower index.

// pack_bf16 rounds lo and hi to bf16 (nearest even) as one pair.
__device__ __forceinline__ u32 pack_bf16(float lo, float hi) {
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ void mma_bf16(float* c, const u32* a, const u32* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void mma_f16(float* c, const u32* a, const u32* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// mma_half is mma_bf16 or mma_f16 by the operands' half type DT.
template <int DT>
__device__ __forceinline__ void mma_half(float* c, const u32* a, const u32* b) {
    if (DT == DT_BF16) {
        mma_bf16(c, a, b);
    } else {
        mma_f16(c, a, b);
    }
}

// ldsm_x4 loads four 8×8 bf16 matrices from shared memory: lanes 8i..8i+7
// give the row addresses of matrix i, and r[i] is each lane's pair of it
// (row lane/4, columns 2·(lane%4)..); ldsm_x4_t transposes each matrix.
__device__ __forceinline__ void ldsm_x4(u32* r, const void* p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s) : "memory");
}

__device__ __forceinline__ void ldsm_x4_t(u32* r, const void* p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s) : "memory");
}

// cp_async16z copies 16 bytes to shared memory without waiting, or writes
// zeros there when ok is false (src is then not read).
__device__ __forceinline__ void cp_async16z(void* smem, const void* gmem, bool ok) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(ok ? 16 : 0) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait_n() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
