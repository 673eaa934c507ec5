// simdgroup_matrix, function constants and templates.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

// C = A * B, one simdgroup per 8x8 tile of C, straight from device memory.
kernel void matmul8(device const half* A [[buffer(0)]], device const half* B [[buffer(1)]],
                    device float* C [[buffer(2)]], constant MatDims& d [[buffer(3)]],
                    uint2 tg [[threadgroup_position_in_grid]]) {
  simdgroup_half8x8 a, b;
  simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.f);
  for (uint k = 0; k < d.K; k += 8) {
    simdgroup_load(a, A + tg.y * 8 * d.K + k, d.K);
    simdgroup_load(b, B + k * d.N + tg.x * 8, d.N);
    simdgroup_multiply_accumulate(acc, a, b, acc);
  }
  simdgroup_store(acc, C + tg.y * 8 * d.N + tg.x * 8, d.N);
}

// The same product with 16x16 tiles per threadgroup of four simdgroups,
// staged in threadgroup memory (B transposed on load), and scaled by 2
// through thread_elements().
kernel void matmul16_tg(device const float* A [[buffer(0)]], device const float* Bt [[buffer(1)]],
                        device float* C [[buffer(2)]], constant MatDims& d [[buffer(3)]],
                        uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                        uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float As[16 * 8];
  threadgroup float Bs[16 * 8]; // Bt rows: 16 columns of B, 8 of K
  uint sr = sg / 2, sc = sg % 2;
  simdgroup_float8x8 a, b;
  simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8>(0.f);
  for (uint k = 0; k < d.K; k += 8) {
    uint r = tid / 8, c = tid % 8;
    As[r * 8 + c] = A[(tg.y * 16 + r) * d.K + k + c];
    Bs[r * 8 + c] = Bt[(tg.x * 16 + r) * d.K + k + c];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    simdgroup_load(a, As + sr * 64, 8);
    simdgroup_load(b, Bs + sc * 64, 8, ulong2(0, 0), true);
    simdgroup_multiply_accumulate(acc, a, b, acc);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  acc.thread_elements() *= 2.0f;
  simdgroup_store(acc, C + (tg.y * 16 + sr * 8) * d.N + tg.x * 16 + sc * 8, d.N);
}

constant bool has_bias [[function_constant(0)]];
constant float scale [[function_constant(1)]];
constant bool has_scale = is_function_constant_defined(scale);

// y = x * scale + bias, each part present or not by function constants.
kernel void axpb(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                 device const float* bias [[buffer(2), function_constant(has_bias)]],
                 uint i [[thread_position_in_grid]]) {
  float v = x[i];
  if (has_scale) v *= scale;
  if (has_bias) v += bias[i];
  y[i] = v;
}

template <typename T>
kernel void add(device const T* a [[buffer(0)]], device const T* b [[buffer(1)]], device T* c [[buffer(2)]],
                uint i [[thread_position_in_grid]]) {
  c[i] = a[i] + b[i];
}

template [[host_name("add_f32")]] kernel void add<float>(device const float*, device const float*, device float*, uint);
template [[host_name("add_f16")]] kernel void add<half>(device const half*, device const half*, device half*, uint);
// MLX pastes the name's parts as adjacent literals ("add_" "i32").
#define instantiate_add(tname, T) template [[host_name("add_" #tname)]] [[kernel]] decltype(add<T>) add<T>;
instantiate_add(i32, int)
