// quant_persist.cu: a run of single-token affine GEMVs (what quant_int.cu's
// qa_gemv does with one activation row: q/k/v with the RMSNorm folded in,
// o adding into the residual, gate/up with SwiGLU, down) as one persistent
// launch, one block a multiprocessor (docs/cuda.md, "Persistent GEMV
// chains"). Launched one after another, each GEMV pays its own ramp: wait
// for the kernel before, stage x, then a pass of weight loads whose DRAM
// latency nothing hides. Here a producer warp streams every instruction's
// rows for its block into a ring of shared-memory slots with bulk copies
// (cp.async.bulk), running ahead across instructions as far as the ring
// allows, while the consumer warps go through the instructions: a grid
// barrier (x is the previous instruction's output), staging x as
// quant_int.cu does, then the rows from shared memory with its integer
// dots. The backend joins GEMVs into it only when asked
// (MTLBENCH_CUDA_CHAINS=1): on an H200 it is still slower than the
// kernels apart, its warps stalled at the barriers on the slowest one and
// on their dots' latency (docs/cuda.md).

#define QC_MAXI 8      // instructions a launch
#define QC_CWARPS 16   // consumer warps; one producer warp after them
#define QC_SLOT 16384  // bytes a ring slot (a chunk of rows)
#define QC_MAXSLOTS 16

// QCIns is one GEMV, as the host writes it: every field 8 bytes, so the
// launch's argument slots are the struct (bridge/cuda persist_linux.go).
// nmat matrices of n[i] rows read x (or with gu, gate w[0] and up w[1]:
// out[0] = silu(gate)·up, out[1] = up where set, each with its bias[i]
// added first); out[i] = x·wᵀ + bias[i]
// (bias may be the residual and out the same buffer). With nw, x is
// RMSNorm'd first (nh: block 0 stores the normalised row).
struct QCIns {
    const float* x;
    long long K, rowBytes, groups, sdt, bits, gu, nmat;
    const unsigned char* w[3];
    const unsigned char* s[3];
    const unsigned char* b[3];
    const float* bias[3];
    float* out[3];
    long long n[3];
    const float* nw;
    float* nh;
    double eps;
};

struct QCProg {
    QCIns ins[QC_MAXI];
    long long n, slots;
    unsigned* bar;  // the grid barrier's word (qc_grid_sync)
};

// QCChunk is a run of rows of one matrix (with gu, of gate and up) that the
// producer copies into one slot: rows [r, r+n) of matrix m.
struct QCChunk {
    int m, r, n;
};

// qc_sbytes is a row's scales (or biases) in bytes; qc_rowbytes the bytes
// a row takes in a slot: its values, scales and biases (twice that for a
// gate/up pair).
__device__ __forceinline__ int qc_sbytes(const QCIns& I) { return (int)I.groups * (I.sdt == DT_F32 ? 4 : 2); }
__device__ __forceinline__ int qc_rowbytes(const QCIns& I) { return ((int)I.rowBytes + 2 * qc_sbytes(I)) * (I.gu ? 2 : 1); }

// QCPlan walks a block's chunks of an instruction, the same for the
// producer and the consumers: the block's share of the rows (of all nmat
// matrices one after another, or of the gate/up pairs), in chunks of at
// most a slot's rows that do not cross a matrix.
struct QCPlan {
    int total, r, end, cap;
    __device__ __forceinline__ QCPlan(const QCIns& I) {
        total = I.gu ? (int)I.n[0] : (int)(I.n[0] + (I.nmat > 1 ? I.n[1] : 0) + (I.nmat > 2 ? I.n[2] : 0));
        r = (int)((long long)total * blockIdx.x / gridDim.x);
        end = (int)((long long)total * (blockIdx.x + 1) / gridDim.x);
        cap = QC_SLOT / qc_rowbytes(I);
    }
    __device__ __forceinline__ bool next(const QCIns& I, QCChunk& c) {
        if (r >= end) return false;
        int m = 0, base = 0;
        if (!I.gu) {
            while (m < 2 && r >= base + (int)I.n[m]) base += (int)I.n[m], m++;
        }
        const int stop = min(end, I.gu ? total : base + (int)I.n[m]);
        c.m = m, c.r = r - base, c.n = min(cap, stop - r);
        r += c.n;
        return true;
    }
};

__device__ __forceinline__ u32 qc_smem(const void* p) { return (u32)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void qc_mbar_init(u64* m, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(qc_smem(m)), "r"(count) : "memory");
}

__device__ __forceinline__ void qc_mbar_wait(u64* m, int parity) {
    asm volatile(
        "{\n.reg .pred p;\nQC_WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra QC_WAIT;\n}" ::"r"(qc_smem(m)),
        "r"(parity)
        : "memory");
}

__device__ __forceinline__ void qc_mbar_arrive(u64* m) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(qc_smem(m)) : "memory");
}

// qc_copy: bytes (a multiple of 16, both addresses 16-byte aligned) from
// global memory into shared memory, counted on m's transaction count.
__device__ __forceinline__ void qc_copy(void* dst, const void* src, u32 bytes, u64* m) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     qc_smem(dst)),
                 "l"(src), "r"(bytes), "r"(qc_smem(m))
                 : "memory");
#endif
}

// qc_bar synchronises the consumer warps only (named barrier 1): the
// producer runs on its own.
__device__ __forceinline__ void qc_bar() { asm volatile("bar.sync 1, %0;" ::"r"(QC_CWARPS * 32) : "memory"); }

// qc_grid_sync: every block's consumers have arrived, and their writes are
// visible. Block 0 adds 2^31 - (blocks - 1), the others 1, so the top bit
// of the word flips once all have arrived and the low bits are back where
// they were: the word needs no reset between barriers or launches.
__device__ __forceinline__ void qc_grid_sync(unsigned* bar) {
    qc_bar();
    if (threadIdx.x == 0) {
        const unsigned inc = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
        __threadfence();
        const unsigned old = atomicAdd(bar, inc);
        unsigned cur;
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(cur) : "l"(bar) : "memory");
        } while (((old ^ cur) & 0x80000000u) == 0);
    }
    qc_bar();
}

// qc_stage stages x (K values, at most 16 a consumer thread) as qa_stage
// does (qa_quantize), in one pass: every value is loaded once, into registers, and the
// RMSNorm's sum of squares comes from them. x is read through L2 (it was
// written in this launch, so not through the read-only path).
template <int BITS>
__device__ __forceinline__ void qc_stage(QAStage& st, const QCIns& I, float* red) {
    const int K = (int)I.K, per = K / 8, tid = threadIdx.x;
    float4 p[2][2];
    float ss = 0.f;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int v = tid + h * QC_CWARPS * 32;
        p[h][0] = p[h][1] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (v < per) {
            p[h][0] = __ldcg((const float4*)I.x + 2 * v), p[h][1] = __ldcg((const float4*)I.x + 2 * v + 1);
            ss += p[h][0].x * p[h][0].x + p[h][0].y * p[h][0].y + p[h][0].z * p[h][0].z + p[h][0].w * p[h][0].w +
                  p[h][1].x * p[h][1].x + p[h][1].y * p[h][1].y + p[h][1].z * p[h][1].z + p[h][1].w * p[h][1].w;
        }
    }
    float inv = 1.f;
    if (I.nw) {
        ss = warp_sum(ss);
        if ((tid & 31) == 0) red[tid >> 5] = ss;
        qc_bar();
        float t = 0.f;
#pragma unroll
        for (int w = 0; w < QC_CWARPS; w++) t += red[w];
        inv = (float)(1.0 / sqrt((double)t / K + I.eps));
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int v = tid + h * QC_CWARPS * 32;
        if (h * QC_CWARPS * 32 >= per) break;  // uniform over the block
        const bool ok = v < per;
        float4 p0 = p[h][0], p1 = p[h][1];
        if (I.nw && ok) {
            const float4* w = (const float4*)(I.nw + 8 * v);
            p0 = norm4(p0, __ldg(w), inv), p1 = norm4(p1, __ldg(w + 1), inv);
            if (I.nh && blockIdx.x == 0) {
                float4* o = (float4*)(I.nh + 8 * v);
                o[0] = p0, o[1] = p1;
            }
        }
        qa_quantize<BITS>(st, p0, p1, ok, 0, 0, v);
    }
}

// qc_sval is scale or bias i of a row in a slot, of type SDT.
template <int SDT>
__device__ __forceinline__ float qc_sval(const unsigned char* p, int i) {
    if (SDT == DT_F32) return ((const float*)p)[i];
    const u16 h = ((const u16*)p)[i];
    return SDT == DT_BF16 ? __uint_as_float((u32)h << 16) : f16_to_f32(h);
}

// qc_pair dots pair q of a chunk (in the slot: values, scales, biases of
// its n rows; with GU the gate's, then the up's) with the staged x and
// stores it: rows 2q and 2q+1, or with GU gate row q and its up row.
template <int BITS, int SDT, bool GU>
__device__ __forceinline__ void qc_pair(const QAStage& st, const unsigned char* slot, const QCIns& I, const QCChunk& c,
                                        int q, int lane) {
    const int rb = (int)I.rowBytes, sb = qc_sbytes(I), units = (int)I.K / 32, gsh = qa_gsh((int)I.K / (int)I.groups);
    const int n = c.n;
    const unsigned char *va = slot, *sa = slot + n * rb, *ba = sa + n * sb, *vb = va, *sb2 = sa, *bb = ba;
    int ra = 2 * q, rb2 = 2 * q + 1;
    if (GU) {
        ra = rb2 = q;
        vb = slot + n * (rb + 2 * sb), sb2 = vb + n * rb, bb = sb2 + n * sb;
    }
    const bool two = GU || rb2 < n;
    // The residual (or bias) is read before the dots, so its L2 latency
    // passes while they run.
    float add0 = 0.f, add1 = 0.f;
    if (GU && lane == 0) {
        if (I.bias[0]) add0 = __ldcg(I.bias[0] + c.r + ra);
        if (I.bias[1]) add1 = __ldcg(I.bias[1] + c.r + ra);
    } else if (!GU && lane == 0 && I.bias[c.m]) {
        add0 = __ldcg(I.bias[c.m] + c.r + ra);
        if (two) add1 = __ldcg(I.bias[c.m] + c.r + rb2);
    }
    float acc0 = 0.f, acc1 = 0.f;
    for (int u = lane; u < units; u += 32) {
        uint4 xq[6];
#pragma unroll
        for (int k = 0; k < 6; k++) xq[k] = st.q[qa_slot(u, k)];
        const float d = st.d[u], sx = st.s[u];
        const int g = u >> gsh;
        // Both rows' loads first, so their latencies overlap.
        uint4 w0[BITS / 4], w1[BITS / 4];
        const int r1 = two ? rb2 : ra;
#pragma unroll
        for (int k = 0; k < BITS / 4; k++) {
            w0[k] = ((const uint4*)(va + ra * rb))[u * (BITS / 4) + k];
            w1[k] = ((const uint4*)(vb + r1 * rb))[u * (BITS / 4) + k];
        }
        const float s0 = qc_sval<SDT>(sa + ra * sb, g), b0 = qc_sval<SDT>(ba + ra * sb, g);
        const float s1 = qc_sval<SDT>(sb2 + r1 * sb, g), b1 = qc_sval<SDT>(bb + r1 * sb, g);
        acc0 += s0 * d * qa_dot<BITS>(w0, xq) + b0 * sx;
        acc1 += s1 * d * qa_dot<BITS>(w1, xq) + b1 * sx;
    }
    acc0 = warp_sum(acc0), acc1 = warp_sum(acc1);
    if (lane != 0) return;
    const int row = c.r + ra;
    if (GU) {
        I.out[0][row] = silu(acc0 + add0) * (acc1 + add1);
        if (I.out[1]) I.out[1][row] = acc1 + add1;
    } else {
        float* o = I.out[c.m];
        o[row] = acc0 + add0;
        if (two) o[row + 1] = acc1 + add1;
    }
}

// qc_consume: a consumer warp's share of an instruction: the pairs of the
// block's rows, counted over its chunks in order, every QC_CWARPS-th from
// the warp's own, so all warps share every instruction whatever its chunks.
// A warp waits for a chunk as it reaches it and frees it as it passes it
// (every warp frees every chunk once), so an instruction larger than the
// ring streams through it. c is the instruction's first chunk in the
// ring's sequence; it returns the instruction's chunks.
template <int BITS, int SDT, bool GU>
__device__ __forceinline__ int qc_consume(const QAStage& st, const unsigned char* ring, const QCIns& I, int c, int S,
                                          u64* full, u64* empty, int warp, int lane) {
    QCPlan plan(I);
    QCChunk ch;
    // slot and phase of chunk j, kept as j advances (no division a chunk)
    int j = -1, pstart = 0, np = 0, slot = c % S - 1, phase = (c / S) & 1;
    if (slot < 0) slot = S - 1, phase ^= 1;
    for (int s = warp;; s += QC_CWARPS) {
        bool more = true;
        while (s >= pstart + np) {
            if (j >= 0) {
                __syncwarp();
                if (lane == 0) qc_mbar_arrive(&empty[slot]);
            }
            if (!plan.next(I, ch)) {
                more = false;
                break;
            }
            j++, pstart += np, np = GU ? ch.n : (ch.n + 1) / 2;
            if (++slot == S) slot = 0, phase ^= 1;
            qc_mbar_wait(&full[slot], phase);
        }
        if (!more) break;
        qc_pair<BITS, SDT, GU>(st, ring + slot * QC_SLOT, I, ch, s - pstart, lane);
    }
    return j + 1;
}

template <int BITS, int SDT>
__device__ __forceinline__ int qc_consume_gu(const QAStage& st, const unsigned char* ring, const QCIns& I, int c, int S,
                                             u64* full, u64* empty, int warp, int lane) {
    if (I.gu) return qc_consume<BITS, SDT, true>(st, ring, I, c, S, full, empty, warp, lane);
    return qc_consume<BITS, SDT, false>(st, ring, I, c, S, full, empty, warp, lane);
}

// qc_produce: the producer's lane 0 copies every chunk of every
// instruction into the ring, in the consumers' order, waiting for a slot
// only when the ring is full.
__device__ __forceinline__ void qc_produce(const QCProg& P, unsigned char* ring, u64* full, u64* empty) {
    const int S = (int)P.slots;
    int c = 0;
    for (int i = 0; i < (int)P.n; i++) {
        const QCIns& I = P.ins[i];
        const int rb = (int)I.rowBytes, sb = qc_sbytes(I);
        QCPlan plan(I);
        QCChunk ch;
        while (plan.next(I, ch)) {
            const int slot = c % S;
            if (c >= S) qc_mbar_wait(&empty[slot], ((c / S) - 1) & 1);
            unsigned char* dst = ring + slot * QC_SLOT;
            const u32 blk = ch.n * (rb + 2 * sb);
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(qc_smem(&full[slot])),
                         "r"(blk * (I.gu ? 2 : 1))
                         : "memory");
            for (int h = 0; h < (I.gu ? 2 : 1); h++) {
                const int m = I.gu ? h : ch.m;
                unsigned char* d = dst + h * blk;
                qc_copy(d, I.w[m] + (long long)ch.r * rb, ch.n * rb, &full[slot]);
                qc_copy(d + ch.n * rb, I.s[m] + (long long)ch.r * sb, ch.n * sb, &full[slot]);
                qc_copy(d + ch.n * (rb + sb), I.b[m] + (long long)ch.r * sb, ch.n * sb, &full[slot]);
            }
            c++;
        }
    }
}

MTLB_KERNEL void __launch_bounds__((QC_CWARPS + 1) * 32, 1) qachain(const __grid_constant__ QCProg P) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) unsigned char qc_ring[];
    __shared__ QAStage st;
    __shared__ float red[QC_CWARPS];
    __shared__ QCIns ins;
    __shared__ __align__(8) u64 full[QC_MAXSLOTS], empty[QC_MAXSLOTS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, S = (int)P.slots;
    if (threadIdx.x == 0) {
        for (int i = 0; i < S; i++) qc_mbar_init(&full[i], 1), qc_mbar_init(&empty[i], QC_CWARPS);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (warp == QC_CWARPS) {
        // Weights depend on no kernel: the copies start before the wait.
        if (lane == 0) qc_produce(P, qc_ring, full, empty);
        return;
    }
    TL_REACHED
    asm volatile("griddepcontrol.wait;" ::: "memory");
    TL_RELEASED
    int c = 0;
    for (int i = 0; i < (int)P.n; i++) {
        if (i > 0) {
            qc_grid_sync(P.bar);
            // Every block is resident now: the next kernel may be let in
            // (before that, its blocks could take the SMs ours wait for).
            if (i == 1) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
        }
        // The instruction in shared memory: the kernel parameter, indexed
        // by i, would be read through generic loads of the parameter space
        // each time a field is used.
        if (threadIdx.x < sizeof(QCIns) / 8)
            ((long long*)&ins)[threadIdx.x] = ((const long long*)&P.ins[i])[threadIdx.x];
        qc_bar();
        const QCIns& I = ins;
        if (I.bits == 4)
            qc_stage<4>(st, I, red);
        else
            qc_stage<8>(st, I, red);
        qc_bar();
        int n = 0;
        if (I.bits == 4) {
            QA_SDT((int)I.sdt, (n = qc_consume_gu<4, SDT>(st, qc_ring, I, c, S, full, empty, warp, lane)))
        } else {
            QA_SDT((int)I.sdt, (n = qc_consume_gu<8, SDT>(st, qc_ring, I, c, S, full, empty, warp, lane)))
        }
        c += n;
    }
#endif
}
