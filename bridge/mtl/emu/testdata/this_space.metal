// Member functions and the address space of `this` (emu_test.go
// TestThisAddressSpace): Apple's compiler refuses a call on an object in an
// address space the member is not declared for.
#include <metal_stdlib>
using namespace metal;

// bf16 as its bits, converted by a member declared for thread objects only.
struct bits_thread {
  ushort bits;
  operator float() const { return as_type<float>(uint(bits) << 16); }
};

// The same, declared for every address space.
struct bits_all {
  ushort bits;
  operator float() const thread { return as_type<float>(uint(bits) << 16); }
  operator float() const device { return as_type<float>(uint(bits) << 16); }
  operator float() const threadgroup { return as_type<float>(uint(bits) << 16); }
  operator float() const constant { return as_type<float>(uint(bits) << 16); }
};

// Device objects only.
struct bits_device {
  ushort bits;
  float get() const device { return as_type<float>(uint(bits) << 16); }
};

kernel void read_thread_only(device const bits_thread* in [[buffer(0)]], device float* out [[buffer(1)]],
                             uint i [[thread_position_in_grid]]) {
  out[i] = float(in[i]); // refused by Apple's compiler: `this` is device
}

kernel void copy_then_read(device const bits_thread* in [[buffer(0)]], device float* out [[buffer(1)]],
                           uint i [[thread_position_in_grid]]) {
  const bits_thread v = in[i]; // a thread copy: its own conversion applies
  out[i] = float(v);
}

kernel void read_all(device const bits_all* in [[buffer(0)]], device float* out [[buffer(1)]],
                     uint i [[thread_position_in_grid]], uint l [[thread_position_in_threadgroup]]) {
  threadgroup bits_all tg[8];
  tg[l] = in[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const bits_all v = in[i];
  out[i] = float(in[i]) + float(tg[l]) + float(v);
}

kernel void device_on_thread(device const bits_device* in [[buffer(0)]], device float* out [[buffer(1)]],
                             uint i [[thread_position_in_grid]]) {
  out[i] = in[i].get();
  const bits_device v = in[i];
  out[i] += v.get(); // refused: get() is for device objects
}
