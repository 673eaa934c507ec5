// GPT-2's elementwise ops: GELU (tanh approximation) and learned position
// embeddings.
#include "mtlbench.h"

// ERR_POSITION: a token's position outside the position table (host:
// bridge/metal step.go's errPosition).
#define ERR_POSITION 5

// gelu_tanh: out = gelu_tanh_of(x) (mtlbench.h), in place allowed.
kernel void gelu_tanh(constant EltArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                      device float* out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  if (i >= a.n) {
    return;
  }
  out[i] = gelu_tanh_of(x[i]);
}

// position_embedding: x[t][i] += table[positions[t]][i], one thread per
// element (EmbedArgs: vocab is the table's positions).
template <typename T>
kernel void position_embedding(constant EmbedArgs& a [[buffer(0)]], device const int* positions [[buffer(1)]],
                               device const T* table [[buffer(2)]], device float* x [[buffer(3)]],
                               device atomic_uint* stats [[buffer(4)]], uint2 gid [[thread_position_in_grid]]) {
  const uint i = gid.x, t = gid.y;
  if (i >= a.dim || t >= a.tokens) {
    return;
  }
  const int p = positions[t];
  if (p < 0 || uint(p) >= a.vocab) {
    if (i == 0) {
      record_error(stats, ERR_POSITION, uint(p));
    }
    return;
  }
  x[ulong(t) * a.dim + i] += float(table[ulong(p) * a.dim + i]);
}

template [[host_name("position_embedding_f32")]] kernel void position_embedding<float>(
    constant EmbedArgs&, device const int*, device const float*, device float*, device atomic_uint*, uint2);
template [[host_name("position_embedding_f16")]] kernel void position_embedding<half>(
    constant EmbedArgs&, device const int*, device const half*, device float*, device atomic_uint*, uint2);
template [[host_name("position_embedding_bf16")]] kernel void position_embedding<bf16_t>(
    constant EmbedArgs&, device const int*, device const bf16_t*, device float*, device atomic_uint*, uint2);
