// llama.cpp-style row gathering from bfloat16 weights: a dequantizer
// template over the destination matrix type, passed to the kernel as a
// function-pointer template argument, converting a bfloat4x4 to a half4x4
// or float4x4 with a matrix cast.
#include <metal_stdlib>
using namespace metal;

typedef matrix<bfloat, 4, 4> bfloat4x4;

typedef struct {
  int32_t ne00;   // elements in a row, a multiple of 16
  uint64_t nb01;  // bytes between source rows
  uint64_t nb1;   // bytes between destination rows
} kargs_get_rows;

template <typename type4x4>
void dequantize_bf16(device const bfloat4x4 * src, short il, thread type4x4 & reg) {
  reg = (type4x4)(*src);
}

template <typename T4x4, typename block_q, short nl, void (*dequantize_func)(device const block_q *, short, thread T4x4 &)>
kernel void kernel_get_rows(
    constant kargs_get_rows & args,
    device const char * src0,
    device const int32_t * src1,
    device char * dst,
    uint3 tgpig [[threadgroup_position_in_grid]],
    ushort tiitg [[thread_index_in_threadgroup]],
    ushort3 ntg [[threads_per_threadgroup]]) {
  const int32_t r = src1[tgpig.x];
  device const block_q * x = (device const block_q *) (src0 + r*args.nb01);
  device T4x4 * y = (device T4x4 *) (dst + tgpig.x*args.nb1);
  for (int ind = tiitg; ind < args.ne00/16; ind += ntg.x) {
    T4x4 temp;
    dequantize_func(x + ind/nl, ind%nl, temp);
    y[ind] = temp;
  }
}

typedef decltype(kernel_get_rows<half4x4, bfloat4x4, 1, dequantize_bf16>) get_rows_f16_t;
typedef decltype(kernel_get_rows<float4x4, bfloat4x4, 1, dequantize_bf16>) get_rows_f32_t;

template [[host_name("kernel_get_rows_bf16_f16")]] kernel get_rows_f16_t kernel_get_rows<half4x4, bfloat4x4, 1, dequantize_bf16>;
template [[host_name("kernel_get_rows_bf16_f32")]] kernel get_rows_f32_t kernel_get_rows<float4x4, bfloat4x4, 1, dequantize_bf16>;
