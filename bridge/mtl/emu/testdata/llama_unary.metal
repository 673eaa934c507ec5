// A llama.cpp-style element-wise kernel: the operation chosen by a function
// constant, one template body instantiated for scalars and for float4,
// fmax and fmin with an integer scalar beside the vector.
#include <metal_stdlib>
using namespace metal;

enum unary_ops {
  OP_RELU = 1,
  OP_HARDSIGMOID,
  OP_HARDSWISH,
};

constant short FC_unary_op [[function_constant(400)]];

typedef struct {
  int32_t ne0;  // elements of T
} kargs_unary;

template <typename T, typename TC>
kernel void kernel_unary_impl(
    constant kargs_unary & args,
    device const char * src0,
    device       char * dst,
    uint tpig [[thread_position_in_grid]]) {
  if ((int) tpig >= args.ne0) {
    return;
  }
  const TC x = (TC) ((device const T *) src0)[tpig];
  device T * y = (device T *) dst;
  if (FC_unary_op == OP_RELU) {
    y[tpig] = (T) fmax(0, x);
  }
  if (FC_unary_op == OP_HARDSIGMOID) {
    y[tpig] = (T) fmax(0, fmin(1, x/6 + 0.5));
  }
  if (FC_unary_op == OP_HARDSWISH) {
    y[tpig] = (T) (x * fmax(0, fmin(1, x/6 + 0.5)));
  }
}

typedef decltype(kernel_unary_impl<float, float>) kernel_unary_t;

template [[host_name("kernel_unary_f32")]]   kernel kernel_unary_t kernel_unary_impl<float,  float>;
template [[host_name("kernel_unary_f32_4")]] kernel kernel_unary_t kernel_unary_impl<float4, float4>;
