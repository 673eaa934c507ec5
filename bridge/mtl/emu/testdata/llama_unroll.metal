// A llama.cpp-style reduction whose loop hints take macros: the unroll
// count of a template's loop is MIN of two of its parameters, as llama.cpp
// bounds its flash-attention loops, and a clang loop hint counts by a
// macro of its own. Metal expands macros in these pragmas' arguments.
#include <metal_stdlib>
using namespace metal;

#define MIN(x, y) ((x) < (y) ? (x) : (y))
#define UNROLL_BY 2

typedef struct {
  int32_t ne00;  // floats in a row
} kargs_unroll;

// Each thread sums its row of ne00 floats in chunks of NC, and writes the
// sum of the first NW chunks' sums, weighted by the chunk's number.
template <short NC, short NW>
kernel void kernel_chunk_sums_impl(
    constant kargs_unroll & args,
    device const float * src0,
    device       float * dst,
    uint tpig [[thread_position_in_grid]]) {
  device const float * x = src0 + tpig*args.ne00;
  float acc = 0.0f;
#pragma unroll (MIN(NW, 4*NC))
  for (short c = 0; c < NW; ++c) {
    float s = 0.0f;
#pragma clang loop unroll_count(UNROLL_BY)
    for (short k = 0; k < NC; ++k) {
      s += x[c*NC + k];
    }
    acc += (c + 1)*s;
  }
  dst[tpig] = acc;
}

typedef decltype(kernel_chunk_sums_impl<4, 3>) kernel_chunk_sums_t;

template [[host_name("kernel_chunk_sums_4_3")]] kernel kernel_chunk_sums_t kernel_chunk_sums_impl<4, 3>;
template [[host_name("kernel_chunk_sums_2_8")]] kernel kernel_chunk_sums_t kernel_chunk_sums_impl<2, 8>;
