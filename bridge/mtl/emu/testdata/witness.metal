// Kernels whose cost the witness must count exactly (witness_test.go): one
// thread per element, n elements, each kernel's loads and stores written out
// so the expected bytes, loads and barriers can be worked out by hand.
#include <metal_stdlib>
using namespace metal;

// One 4-byte load and one 4-byte store per lane.
kernel void copy_f32(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
  out[i] = in[i] * 2.0f;
}

// A quarter of the lanes load, four elements each (a row split over too
// few lanes): as many bytes as copy_f32, a quarter of the lanes busy in
// each of a simdgroup's four load instructions.
kernel void copy_quarter_lanes(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                               uint i [[thread_position_in_grid]]) {
  if (i % 4 != 0)
    return;
  for (uint j = 0; j < 4; j++)
    out[i + j] = in[i + j] * 2.0f;
}

// One 2-byte load per lane: the GEMV shape of loading one half at a time.
kernel void copy_f16(device const half* in [[buffer(0)]], device half* out [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
  out[i] = in[i] * 2.0h;
}

// One 16-byte load and store per lane.
kernel void copy_f32x4(device const float4* in [[buffer(0)]], device float4* out [[buffer(1)]],
                       uint i [[thread_position_in_grid]]) {
  out[i] = in[i] * 2.0f;
}

// One 8-byte load per lane.
kernel void copy_f16x4(device const half4* in [[buffer(0)]], device half4* out [[buffer(1)]],
                       uint i [[thread_position_in_grid]]) {
  out[i] = in[i] * 2.0h;
}

// Eight halves through one 16-byte load (a pointer cast), as the best
// GEMVs load weights; the 16 bytes go out as one store too.
kernel void copy_f16x8(device const half* in [[buffer(0)]], device half* out [[buffer(1)]],
                       uint i [[thread_position_in_grid]]) {
  float4 v = ((device const float4*)in)[i];
  ((device float4*)out)[i] = v;
}

// A packed vector: one 16-byte load.
kernel void copy_packed(device const packed_float4* in [[buffer(0)]], device float4* out [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
  float4 v = in[i];
  out[i] = v;
}

// Each input element read twice (a second pass over the same data).
kernel void read_twice(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                       uint i [[thread_position_in_grid]]) {
  float s = 0;
  for (int pass = 0; pass < 2; pass++) s += in[i];
  out[i] = s;
}

// Two inputs, which the host may bind to overlapping ranges of one buffer.
kernel void add_two(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]],
                    device float* out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  out[i] = a[i] + b[i];
}

// A compound assignment reads and writes its element; the index comes from
// a device load on the left side.
kernel void scatter_add(device const float* in [[buffer(0)]], device const uint* idx [[buffer(1)]],
                        device float* out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  out[idx[i]] += in[i];
}

// Device atomics count as read and write.
kernel void count_atomic(device atomic_uint* counter [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  atomic_fetch_add_explicit(counter, 1u, memory_order_relaxed);
}

// A tree reduction over 64 threads in threadgroup memory: one barrier after
// the stores, then one per halving step (32, 16, 8, 4, 2, 1): 7 barriers.
// The dynamic scratch (threadgroup(0)) is set by the host and unused.
kernel void tg_reduce(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                      threadgroup float* scratch [[threadgroup(0)]],
                      uint i [[thread_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                      uint g [[threadgroup_position_in_grid]]) {
  threadgroup float buf[64];
  buf[tid] = in[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint s = 32; s > 0; s >>= 1) {
    if (tid < s) buf[tid] += buf[tid + s];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (tid == 0) out[g] = buf[0];
}

// simdgroup_load and simdgroup_store of an 8x8 float tile in device memory:
// one load and one store of two elements per lane.
kernel void tile_copy(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                      uint g [[threadgroup_position_in_grid]]) {
  simdgroup_float8x8 m;
  simdgroup_load(m, in + g * 64, 8);
  simdgroup_store(m, out + g * 64, 8);
}

// One lane (thread 70: the first simdgroup of the second threadgroup of 64)
// walks all 128 elements, every other thread loads its own: the busiest
// simdgroup issues 128 loads in a row (CriticalLoads), the others one each.
kernel void one_walks(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
  if (i != 70) {
    out[i] = in[i];
    return;
  }
  float s = 0.0f;
  for (uint j = 0; j < 128; j++)
    s += in[j];
  out[i] = s;
}
