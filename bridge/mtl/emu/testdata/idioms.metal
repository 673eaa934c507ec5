// llama.cpp-style idioms: unattributed buffer arguments (numbered by
// Metal), function constants at macro offsets, a dequantization function as
// a template argument, matrix types, pointer casts into threadgroup memory,
// simdgroup_load(m, p, 8, 0, false), and typedef'd instantiations.
#include <metal_stdlib>
using namespace metal;

#define FC_MM 100
#define FOR_UNROLL(x) _Pragma("clang loop unroll(full)") for (x)

constant bool  FC_bounds [[function_constant(FC_MM + 0)]];
constant short FC_shift  [[function_constant(FC_MM + 1)]];

typedef struct {
  int32_t  M;
  int32_t  N;
  int32_t  K;
  uint64_t nb01; // bytes between rows of src0
} kargs_mm;

constexpr constant static float kscale[4] = {1.0f, 0.5f, 0.25f, 0.125f};

// 16 int8 weights and their scale.
typedef struct {
  half   d;
  int8_t qs[16];
} block_q8;

template <typename type4x4>
void dequantize_q8(device const block_q8 * xb, short il, thread type4x4 & reg) {
  const float d = xb->d;
  FOR_UNROLL (short i = 0; i < 16; i++) {
    reg[i/4][i%4] = (float) xb->qs[i] * d;
  }
}

template <typename type4x4>
void dequantize_f16(device const half4x4 * src, short il, thread type4x4 & reg) {
  reg = (type4x4)(*src);
}

// dst[M x N] = dequant(src0)[M x K] * src1^T, src1 being N x K; one
// simdgroup per 8x8 tile.
template <typename block_q, void (*deq)(device const block_q *, short, thread half4x4 &)>
kernel void mm_deq(
        constant kargs_mm & args,
        device const char * src0,
        device const half * src1,
        device      float * dst,
        threadgroup  char * shmem [[threadgroup(0)]],
        uint3  tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]]) {
  threadgroup half * sa = (threadgroup half *)(shmem);       // 8 x 16: m, k
  threadgroup half * sb = (threadgroup half *)(shmem + 256); // 16 x 8: k, n
  const int m0 = tgpig.y*8;
  const int n0 = tgpig.x*8;

  simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8>(0.f);
  simdgroup_half8x8 ma, mb;

  for (int k = 0; k < args.K; k += 16) {
    if (tiitg < 8) {
      device const block_q * x = (device const block_q *)(src0 + args.nb01*(m0 + tiitg)) + k/16;
      half4x4 tmp;
      deq(x, 0, tmp);
      FOR_UNROLL (short i = 0; i < 16; i++) {
        *(sa + 16*tiitg + i) = tmp[i/4][i%4];
      }
    }
    for (short i = tiitg; i < 128; i += 32) {
      const short kk = i/8, nn = i%8;
      sb[kk*8 + nn] = (!FC_bounds || n0 + nn < args.N) ? src1[(n0 + nn)*args.K + k + kk] : half(0);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    FOR_UNROLL (short ik = 0; ik < 2; ik++) {
      simdgroup_load(ma, sa + 8*ik, 16, 0, false);
      simdgroup_load(mb, sb + 64*ik, 8, 0, false);
      simdgroup_multiply_accumulate(acc, ma, mb, acc);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  acc.thread_elements() *= kscale[FC_shift & 3];

  if (!FC_bounds) {
    simdgroup_store(acc, dst + m0*args.N + n0, args.N, 0, false);
  } else {
    threadgroup float * tmp = (threadgroup float *) shmem;
    simdgroup_store(acc, tmp, 8, 0, false);
    simdgroup_barrier(mem_flags::mem_threadgroup);
    for (short i = tiitg; i < 64; i += 32) {
      const short mm = i/8, nn = i%8;
      if (n0 + nn < args.N) {
        dst[(m0 + mm)*args.N + n0 + nn] = tmp[i];
      }
    }
  }
}

typedef decltype(mm_deq<block_q8, dequantize_q8<half4x4>>) mm_deq_t;

template [[host_name("mm_q8_f16")]]  kernel mm_deq_t mm_deq<block_q8, dequantize_q8<half4x4>>;
template [[host_name("mm_f16_f16")]] kernel mm_deq_t mm_deq<half4x4,  dequantize_f16<half4x4>>;

// A pointer to an element taken with & (a raw address) and handed to a
// function: its bounds are found again from the address alone.
static void bump(device atomic_uint *c, uint v) { atomic_fetch_add_explicit(c, v, memory_order_relaxed); }

kernel void bump_first(device uint *before [[buffer(0)]], device atomic_uint *counts [[buffer(1)]],
                       uint tid [[thread_position_in_grid]]) {
  before[tid] = tid;
  bump(&counts[0], 1u);
}
