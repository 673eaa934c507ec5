// A llama.cpp-style ALiBi row bias: function constants indexed from an
// enum, a templated kernel instantiated under a host name, a `constant
// kargs &` argument struct, pow of a float and a short, a simdgroup
// reduction, and a store through a cast pointer as the body of an if.
#include <metal_stdlib>
using namespace metal;

enum fc_offsets {
  FC_ALIBI = 300,
};

constant bool FC_alibi_has_bias [[function_constant(FC_ALIBI + 0)]];

typedef struct {
  int32_t ne00;
  int32_t n_head_log2;
  float m0;
  float m1;
  uint64_t nb01;
  uint64_t nb1;
} kargs_alibi;

template <typename T>
kernel void kernel_alibi(
    constant kargs_alibi & args,
    device const char * src0,
    device       char * dst,
    uint3  tgpig [[threadgroup_position_in_grid]],
    ushort tiisg [[thread_index_in_simdgroup]]) {
  const short h = tgpig.x;
  float slope = 1.0f;
  if (FC_alibi_has_bias) {
    const float base = h < args.n_head_log2 ? args.m0 : args.m1;
    const short exph = h < args.n_head_log2 ? h + 1 : 2*(h - args.n_head_log2) + 1;
    slope = pow(base, exph);
  }
  device const T * x = (device const T *) (src0 + h*args.nb01);
  float m = -FLT_MAX;
  for (int i = tiisg; i < args.ne00; i += 32) {
    m = max(m, (float) x[i]);
  }
  m = simd_max(m);
  for (int i = tiisg; i < args.ne00; i += 32)
    if (i < args.ne00) ((device float *) (dst + h*args.nb1))[i] = slope*((float) x[i] - m);
}

typedef decltype(kernel_alibi<half>) kernel_alibi_t;

template [[host_name("kernel_alibi_f16")]] kernel kernel_alibi_t kernel_alibi<half>;
template [[host_name("kernel_alibi_f32")]] kernel kernel_alibi_t kernel_alibi<float>;
