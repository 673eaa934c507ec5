// Kernels with planted bugs the emulator must report.
#include <metal_stdlib>
using namespace metal;

// Lane 0 of each simdgroup writes its partial sum; thread 0 reads all of
// them without a threadgroup_barrier in between.
kernel void racy_sum(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                     uint tid [[thread_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]],
                     uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float partial[4];
  float s = simd_sum(in[tid]);
  if (lane == 0) partial[sg] = s;
  if (tid == 0) out[0] = partial[0] + partial[1] + partial[2] + partial[3];
}

// Writes one element per thread, whatever the buffer's length.
kernel void oob_write(device float* out [[buffer(0)]], uint gid [[thread_position_in_grid]]) {
  out[gid] = 1.0f;
}

// Threads past 96 return before the barrier the others wait at.
kernel void early_exit(device float* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float t[128];
  if (tid >= 96) return;
  t[tid] = float(tid);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = t[95 - tid];
}

// Threads 32 and up index past the threadgroup array.
kernel void tg_index(device float* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float t[32];
  t[tid] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = t[tid % 32];
}

// The two halves of the group wait at different barriers.
kernel void split_barrier(device float* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  if (tid < 32) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
  } else {
    threadgroup_barrier(mem_flags::mem_device);
  }
  out[tid] = 1.0f;
}

// misaligned_load reads a float4 one float past an aligned address.
kernel void misaligned_load(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                            uint gid [[thread_position_in_grid]]) {
  const float4 v = *(device const float4*)(in + 1 + 4 * gid);
  out[gid] = v.x + v.y + v.z + v.w;
}
