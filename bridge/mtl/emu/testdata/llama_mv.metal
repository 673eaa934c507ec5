// A llama.cpp-style quantized matrix-vector product: a kernel-argument
// struct passed on to a template implementation as `constant T &` (the
// template argument carrying the address space), char pointers stepped by
// byte strides, blocks read through uint16_t pointers, an array of device
// pointers, a function constant as the simdgroup count, and a typedef'd
// instantiation.
#include <metal_stdlib>
using namespace metal;

#define N_SIMDWIDTH 32
#define QK4 32
#define FC_MV 200

typedef struct {
  half d;
  uint8_t qs[QK4 / 2]; // element i in the low nibble of byte i % 16 (i < 16) or the high one
} block_q4;

typedef struct {
  int32_t ne00;
  int32_t ne01;
  uint64_t nb01;
} kargs_mv;

constant short FC_mv_nsg [[function_constant(FC_MV + 0)]];

template <int nr0, typename args_t>
void mul_mv_q4_impl(
    args_t args,
    device const char * src0,
    device const float * src1,
    device float * dst,
    uint3 tgpig,
    ushort tiisg,
    ushort sgitg) {
  const short nsg = FC_mv_nsg;
  const int nb = args.ne00 / QK4;
  const int r0 = (tgpig.x * nsg + sgitg) * nr0;

  float sumf[nr0] = {0.f};
  device const block_q4 * ax[nr0];
  for (short row = 0; row < nr0; ++row) {
    ax[row] = (device const block_q4 *) (src0 + (r0 + row) * args.nb01);
  }

  for (int ib = tiisg; ib < nb; ib += N_SIMDWIDTH) {
    float yl[QK4];
    device const float4 * y4 = (device const float4 *) (src1 + ib * QK4);
    for (short i = 0; i < QK4 / 4; ++i) {
      const float4 v = y4[i];
      yl[4*i + 0] = v.x;
      yl[4*i + 1] = v.y;
      yl[4*i + 2] = v.z;
      yl[4*i + 3] = v.w;
    }
    for (short row = 0; row < nr0; ++row) {
      if (r0 + row >= args.ne01) {
        break;
      }
      device const uint16_t * qs = ((device const uint16_t *) (ax[row] + ib)) + 1;
      float acc = 0.f;
      for (short i = 0; i < QK4 / 4; ++i) {
        const uint16_t q = qs[i];
        acc += yl[2*i + 0]  * (float((q >>  0) & 0xF) - 8.f)
             + yl[2*i + 1]  * (float((q >>  8) & 0xF) - 8.f)
             + yl[2*i + 16] * (float((q >>  4) & 0xF) - 8.f)
             + yl[2*i + 17] * (float((q >> 12) & 0xF) - 8.f);
      }
      sumf[row] += acc * (float) ax[row][ib].d;
    }
  }

  for (short row = 0; row < nr0; ++row) {
    const float tot = simd_sum(sumf[row]);
    if (tiisg == 0 && r0 + row < args.ne01) {
      dst[r0 + row] = tot;
    }
  }
}

template <int nr0>
kernel void kernel_mul_mv_q4(
    constant kargs_mv & args,
    device const char * src0,
    device const float * src1,
    device float * dst,
    uint3  tgpig [[threadgroup_position_in_grid]],
    ushort tiisg [[thread_index_in_simdgroup]],
    ushort sgitg [[simdgroup_index_in_threadgroup]]) {
  mul_mv_q4_impl<nr0, constant kargs_mv &>(args, src0, src1, dst, tgpig, tiisg, sgitg);
}

typedef decltype(kernel_mul_mv_q4<2>) mul_mv_q4_t;

template [[host_name("kernel_mul_mv_q4_r2")]] kernel mul_mv_q4_t kernel_mul_mv_q4<2>;
