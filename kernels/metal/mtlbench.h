// mtlbench Metal kernels: argument structs shared with the host, function
// constant indices, and small helpers. bridge/metal mirrors every struct
// here with a Go struct of the same layout (its tests check sizes and
// offsets against this header), so keep fields 4-byte scalars in the order
// written, 8-byte fields 8-byte aligned, padding named (_padN), and sizes
// multiples of 16.
#ifndef MTLBENCH_H
#define MTLBENCH_H
#include <metal_stdlib>
using namespace metal;

// ---------------------------------------------------------------------------
// Element types. Activations are f32; weights are f32, f16 or bf16 and the
// KV cache f32, f16 or bf16, widened to f32 as they are read; accumulation
// is in f32.
// ---------------------------------------------------------------------------
#if defined(__HAVE_BFLOAT__)
typedef bfloat bf16_t;
#else
// Before MSL 3.1: bf16 as its bits, widened by a shift (exact). A member
// function's `this` has an address space, so the conversion is declared for
// each one a bf16 value is read from.
struct bf16_t {
  ushort bits;
  operator float() const thread { return as_type<float>(uint(bits) << 16); }
  operator float() const device { return as_type<float>(uint(bits) << 16); }
  operator float() const threadgroup { return as_type<float>(uint(bits) << 16); }
  operator float() const constant { return as_type<float>(uint(bits) << 16); }
};
#endif

// KV cache elements: N consecutive values widened to f32 with the widest
// loads their alignment allows (a lane's N values start at a multiple of N),
// and one value narrowed as the cache stores it (bf16 rounds to nearest
// even; Metal's own conversion does the same).
template <int N> inline void kv_read(device const float* p, thread float* r) {
  if (N % 4 == 0) {
    for (int i = 0; i < N; i += 4) {
      const float4 v = *(device const float4*)(p + i);
      r[i] = v.x; r[i + 1] = v.y; r[i + 2] = v.z; r[i + 3] = v.w;
    }
  } else if (N % 2 == 0) {
    for (int i = 0; i < N; i += 2) {
      const float2 v = *(device const float2*)(p + i);
      r[i] = v.x; r[i + 1] = v.y;
    }
  } else {
    for (int i = 0; i < N; i++) {
      r[i] = p[i];
    }
  }
}
template <int N> inline void kv_read(device const half* p, thread float* r) {
  if (N % 4 == 0) {
    for (int i = 0; i < N; i += 4) {
      const float4 v = float4(*(device const half4*)(p + i));
      r[i] = v.x; r[i + 1] = v.y; r[i + 2] = v.z; r[i + 3] = v.w;
    }
  } else if (N % 2 == 0) {
    for (int i = 0; i < N; i += 2) {
      const float2 v = float2(*(device const half2*)(p + i));
      r[i] = v.x; r[i + 1] = v.y;
    }
  } else {
    for (int i = 0; i < N; i++) {
      r[i] = float(p[i]);
    }
  }
}
template <int N> inline void kv_read(device const bf16_t* p, thread float* r) {
  device const ushort* u = (device const ushort*)p;
  if (N % 4 == 0) {
    for (int i = 0; i < N; i += 4) {
      const uint2 v = *(device const uint2*)(u + i);
      r[i] = as_type<float>(v.x << 16); r[i + 1] = as_type<float>(v.x & 0xffff0000u);
      r[i + 2] = as_type<float>(v.y << 16); r[i + 3] = as_type<float>(v.y & 0xffff0000u);
    }
  } else if (N % 2 == 0) {
    for (int i = 0; i < N; i += 2) {
      const uint v = *(device const uint*)(u + i);
      r[i] = as_type<float>(v << 16); r[i + 1] = as_type<float>(v & 0xffff0000u);
    }
  } else {
    for (int i = 0; i < N; i++) {
      r[i] = as_type<float>(uint(u[i]) << 16);
    }
  }
}

inline void kv_store(device float* p, float x) { *p = x; }
inline void kv_store(device half* p, float x) { *p = half(x); }
inline ushort bf16_bits(float x) {
  const uint u = as_type<uint>(x);
  return ushort((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline void kv_store(device bf16_t* p, float x) { *(device ushort*)p = bf16_bits(x); }

// rope_cos_sin is the rotation of RoPE's frequency inv at pos, the one
// rule rope_qk and the decode attention's rope_lane share: the f32 product,
// rounded as transformers (and kernels.RoPE) round it, and precise cos and
// sin of it, not fast math's, whose error grows with the angle
// (docs/architecture.md, "Rotary embeddings").
inline float2 rope_cos_sin(float pos, float inv) {
  const float ang = pos * inv;
  return float2(precise::cos(ang), precise::sin(ang));
}

// kv_round is x as the cache would return it after storing it.
inline float kv_round(float x, float) { return x; }
inline float kv_round(float x, half) { return float(half(x)); }
inline float kv_round(float x, bf16_t) { return as_type<float>(uint(bf16_bits(x)) << 16); }

// stage_t<T>::type is the type values of T are kept in threadgroup memory
// for simdgroup matrices (GEMM weights, prefill K and V): their own, except
// the bf16 bits of the MSL 3.0 fallback, which no simdgroup matrix holds,
// widened to f32. put16 stores one 16-byte vector of T values, given as
// their bits, at dst in that type.
template <typename T>
struct stage_t {
  typedef T type;
};
inline void put16(threadgroup float* dst, uint4 v, float) { *(threadgroup uint4*)dst = v; }
inline void put16(threadgroup half* dst, uint4 v, half) { *(threadgroup uint4*)dst = v; }
#if defined(__HAVE_BFLOAT__)
inline void put16(threadgroup bfloat* dst, uint4 v, bfloat) { *(threadgroup uint4*)dst = v; }
#else
template <>
struct stage_t<bf16_t> {
  typedef float type;
};
inline void put16(threadgroup float* dst, uint4 v, bf16_t) {
  *(threadgroup float4*)dst = float4(as_type<float>(v.x << 16), as_type<float>(v.x & 0xffff0000u),
                                     as_type<float>(v.y << 16), as_type<float>(v.y & 0xffff0000u));
  *(threadgroup float4*)(dst + 4) = float4(as_type<float>(v.z << 16), as_type<float>(v.z & 0xffff0000u),
                                           as_type<float>(v.w << 16), as_type<float>(v.w & 0xffff0000u));
}
#endif

// ---------------------------------------------------------------------------
// Function constants: variants and every launch shape the tuner explores.
// ---------------------------------------------------------------------------
#define FC_HAS_QK_NORM 10   // bool: rope_qk normalises each head first
#define FC_NORM_VEC 11      // bool: the row norms move float4s (dim a multiple of 4, every row 16-byte aligned)
#define FC_HAS_BIAS 20      // bool: matmul/matvec add a bias row
#define FC_MV_ROWS 21       // int: weight rows per simdgroup in matvec (1..4)
#define FC_MV_COLS 22       // int: activation rows per threadgroup in matvec (1..8)
#define FC_MV_SEGS 23       // int: weight matrices over one input in matvec_fused (1..3)
#define FC_MV_NORM 24       // bool: matvec_fused RMS-normalises its input as it reads it
#define FC_MV_RESIDUAL 25   // bool: matvec_fused adds its output into the residual
#define FC_MV_SWIGLU 26     // bool: matvec_fused writes silu(gate)·up of its two matrices
#define FC_MV_ROUTE 27      // bool: qmoe_mv (gate/up) routes its token from the router's logits itself
#define FC_MV_LAYERNORM 28  // bool: the norm matvec_fused / qmatvec fold (mv_norm) is a LayerNorm with a bias
#define FC_MV_GELU 29       // bool: matvec_fused / qmatvec apply GELU (tanh) to their output
#define FC_MM_BM 30         // int: rows of a matmul tile (8..64, multiple of 8*SGM)
#define FC_MM_BN 31         // int: columns of a matmul tile (8..64, multiple of 8*SGN)
#define FC_MM_BK 32         // int: depth of a k step (8, 16 or 32)
#define FC_MM_SGM 33        // int: simdgroups along the rows of a tile
#define FC_MM_SGN 34        // int: simdgroups along the columns of a tile
#define FC_MM_STAGES 35     // int: staging buffers of a tile (2: double buffered)
#define FC_ATTN_PARTITIONED 40 // bool: write per-partition partials (split-K)
#define FC_ATTN_NEW_KV 41   // bool: new keys come from k/v, written to the cache here
#define FC_ATTN_ROPE 42     // bool: decode attention applies RoPE (and QK-norm) to q and the new k
#define FC_ATTN_KEYS 43     // int: prefill attention's keys per staged step (8, 16 or 32)
#define FC_ATTN_STAGES 44   // int: prefill attention's K/V staging buffers (2: double buffered)
#define FC_ATTN_QBLOCKS 45  // int: prefill attention's 8-query blocks a tile (1, 2 or 4)
#define FC_ATTN_PADDED 46   // bool: the head (head_dim) is shorter than the decode kernel's D
#define FC_MOE_RESIDUAL 50  // bool: moe_combine / moe_mm_down / qmoe_mv_sum add the output into the residual
#define FC_MOE_ZERO_OUT 51  // bool: the routing kernel clears the output rows moe_mm_down adds into
#define FC_MV_TILES 52      // bool: qmoe_mv takes its pairs from moe_group's tiles (an expert's weights read once a tile)
#define FC_MV_BIASES 53     // int: the matrices of matvec_fused / qmatvec that add a bias, a bit each (1: the first)
#define FC_MV_ARGMAX 54     // bool: qmatvec / matvec_fused also write their threadgroup's largest output for argmax_merge (gemv_argmax)
#define FC_Q_SCALE_DT 60    // int: the packed kernels' affine scales and biases: 0 f32, 1 f16, 2 bf16 (0 for GGUF)

// The constants themselves, declared once here: a Metal library is one
// translation unit, whatever the number of .metal files it was made of.
constant bool has_qk_norm [[function_constant(FC_HAS_QK_NORM)]];
constant bool norm_vec [[function_constant(FC_NORM_VEC)]];
constant bool has_bias [[function_constant(FC_HAS_BIAS)]];
constant int mv_rows [[function_constant(FC_MV_ROWS)]];
constant int mv_cols [[function_constant(FC_MV_COLS)]];
constant int mm_bm [[function_constant(FC_MM_BM)]];
constant int mm_bn [[function_constant(FC_MM_BN)]];
constant int mm_bk [[function_constant(FC_MM_BK)]];
constant int mm_sgm [[function_constant(FC_MM_SGM)]];
constant int mm_sgn [[function_constant(FC_MM_SGN)]];
constant int mm_stages [[function_constant(FC_MM_STAGES)]];
constant bool attn_partitioned [[function_constant(FC_ATTN_PARTITIONED)]];
constant bool attn_new_kv [[function_constant(FC_ATTN_NEW_KV)]];
constant bool attn_rope [[function_constant(FC_ATTN_ROPE)]];
constant bool attn_padded [[function_constant(FC_ATTN_PADDED)]];
constant int attn_keys [[function_constant(FC_ATTN_KEYS)]];
constant int attn_stages [[function_constant(FC_ATTN_STAGES)]];
constant int attn_qblocks [[function_constant(FC_ATTN_QBLOCKS)]];
constant int mv_segs [[function_constant(FC_MV_SEGS)]];
constant bool mv_norm [[function_constant(FC_MV_NORM)]];
constant bool mv_residual [[function_constant(FC_MV_RESIDUAL)]];
constant bool mv_swiglu [[function_constant(FC_MV_SWIGLU)]];
constant bool moe_residual [[function_constant(FC_MOE_RESIDUAL)]];
constant bool moe_zero_out [[function_constant(FC_MOE_ZERO_OUT)]];
constant bool mv_route [[function_constant(FC_MV_ROUTE)]];
constant bool mv_tiles [[function_constant(FC_MV_TILES)]];
constant int mv_biases [[function_constant(FC_MV_BIASES)]];
constant bool mv_argmax [[function_constant(FC_MV_ARGMAX)]];
constant bool mv_layernorm [[function_constant(FC_MV_LAYERNORM)]];
constant bool mv_gelu [[function_constant(FC_MV_GELU)]];
constant int q_scale_dt [[function_constant(FC_Q_SCALE_DT)]];
// The buffers a GEMV of mv_segs matrices binds (matvec_fused, qmatvec): the
// second and third matrices, their outputs unless gate and up go to one
// (mv_swiglu), and the biases of those mv_biases names (up's too, added
// before the SiLU·mul): q, k and v, gate and up of one input share a
// dispatch whichever of them carry a bias.
constant bool mv_two = mv_segs > 1;
constant bool mv_three = mv_segs > 2;
constant bool mv_out1 = mv_two && !mv_swiglu;
constant bool mv_bias0 = (mv_biases & 1) != 0;
constant bool mv_bias1 = mv_two && (mv_biases & 2) != 0;
constant bool mv_bias2 = mv_three && (mv_biases & 4) != 0;
// A folded LayerNorm's bias (layernorm_gemv).
constant bool mv_ln_bias = mv_norm && mv_layernorm;

// Upper bounds of the register arrays the function constants index; after
// specialisation the compiler unrolls the bounded loops and drops the rest.
#define MV_MAX_ROWS 4
#define MV_MAX_COLS 8
#define MM_MAX_TM 4 // 8x8 tiles per simdgroup along rows
#define MM_MAX_TN 4 // and along columns
// The most threads a simdgroup_matrix tile kernel runs: 4 x 4 simdgroups.
// Declared on those kernels so the compiler keeps their registers within
// what that many threads allow, instead of the pipeline allowing fewer.
#define MM_MAX_THREADS 512

// NEG_MAX starts maxima and masks scores: finite, because Metal compiles
// with fast math by default, under which infinities are undefined.
#define NEG_MAX (-FLT_MAX)

// is_nan tests the bits, which fast math cannot fold away as it may isnan
// and comparisons with a NaN.
inline bool is_nan(float v) { return (as_type<uint>(v) & 0x7fffffffu) > 0x7f800000u; }

// Error codes a kernel records in the step's stats buffer (word 0, the first
// error wins; word 1 holds the offending value).
#define ERR_TOKEN_ID 1
#define ERR_SLOT 2
#define ERR_BLOCK 3
#define ERR_EXPERT 4
#define ERR_ROUTE_NAN 6 // a token's routing probabilities hold a NaN; value: the token

// ---------------------------------------------------------------------------
// Argument structs (setBytes).
// ---------------------------------------------------------------------------

struct NormArgs {
  uint rows;
  uint dim;
  float eps;
  uint _pad0;
};

struct EltArgs {
  uint n;
  uint _pad0;
  uint _pad1;
  uint _pad2;
};

struct EmbedArgs {
  uint tokens;
  uint dim;
  uint vocab;
  uint _pad0;
};

struct GatherArgs {
  uint rows;
  uint dim;
  uint src_rows;
  uint _pad0;
};

struct RopeArgs {
  uint tokens;
  uint heads;
  uint kv_heads;
  uint head_dim;
  float eps;
  uint _pad0;
  uint _pad1;
  uint _pad2;
};

struct MatArgs {
  uint m;  // activation rows
  uint n;  // weight rows (output columns)
  uint k;  // depth
  uint _pad0;
};

// FusedMVArgs: matvec_fused's segments are n0, n1 and n2 weight rows (0:
// none), laid on the grid one after another in whole simdgroup tiles.
struct FusedMVArgs {
  uint m;   // activation rows
  uint k;   // depth
  uint n0;
  uint n1;
  uint n2;
  float eps; // RMSNorm epsilon (mv_norm)
  uint _pad0;
  uint _pad1;
};

struct AttnArgs {
  uint num_tokens;
  uint num_seqs;
  uint heads;
  uint kv_heads;
  uint head_dim;
  uint block_size;
  uint max_blocks;     // block table row length
  uint num_blocks;     // blocks in the cache
  uint partition_size; // keys per partition (split-K); a multiple of 32
  uint num_partitions;
  uint heads_per_group; // query heads of one threadgroup (QH)
  float scale;
  uint num_tiles;      // prefill: query tiles (8 * attn_qblocks tokens)
  float eps;           // QK-norm epsilon (attn_rope with has_qk_norm)
  uint merge_slots;    // decode: simdgroups whose (o, m, l) meet in one round
  uint window;         // sliding window: keys p - window < j <= p (0: every j <= p)
};

struct ArgmaxArgs {
  uint rows;
  uint n;     // values a row
  uint part;  // values a partition (argmax_part), a multiple of 4
  uint parts; // partitions a row
  uint lead;  // values the logits start past a 16-byte boundary (0..3)
  uint _pad0;
  uint _pad1;
  uint _pad2;
};

struct RouteArgs {
  uint tokens;
  uint experts;
  uint top_k;
  uint norm_topk;
  uint stats_slot; // word of the stats buffer counting distinct experts
  uint hidden;     // moe_router_route: the router's depth
  uint _pad1;
  uint _pad2;
};

struct GroupArgs {
  uint pairs;           // tokens * top_k
  uint experts;
  uint chunk;           // pairs per chunk (strategy: 1 loop, all grouped)
  uint tile_rows;       // rows of one expert GEMM tile
  uint tiles_per_chunk; // tile slots each chunk owns
  uint _pad0;
  uint _pad1;
  uint _pad2;
};

struct MoEGemmArgs {
  uint n;        // output columns (inter for gate/up, hidden for down)
  uint k;        // depth (hidden for gate/up, inter for down)
  uint top_k;    // pair -> token divisor for the gather of gate/up
  uint tiles;    // tile slots
  ulong expert_stride; // elements between two experts' weights
  ulong w_offset;      // elements from an expert's base to this matrix
  ulong w2_offset;     // elements to the second matrix (up of gate/up)
  uint experts;
  uint norm_topk;  // moe_mv_pair: renormalise the top-k weights
  uint stats_slot; // and the word of the counts buffer its distinct experts bump
  float eps;       // moe_mv_pair with mv_norm: the folded RMSNorm's epsilon
  uint _pad0;
  uint _pad1;
};

struct CombineArgs {
  uint tokens;
  uint hidden;
  uint top_k;
  uint experts;
};

// A tile of an expert GEMM: rows [row0, row0+rows) of the expert-sorted
// pair order, all routed to expert (-1: an unused slot).
struct MoETile {
  int expert;
  int row0;
  int rows;
  int _pad0;
};

// simd_tile reads a threadgroup's tile slot once per simdgroup (lane 0)
// and shares it: the slot is the same for every thread.
inline MoETile simd_tile(device const MoETile* tiles, uint slot, ushort lane) {
  int4 v = 0;
  if (lane == 0) {
    const MoETile t = tiles[slot];
    v = int4(t.expert, t.row0, t.rows, 0);
  }
  MoETile t;
  t.expert = simd_broadcast(v.x, ushort(0));
  t.row0 = simd_broadcast(v.y, ushort(0));
  t.rows = simd_broadcast(v.z, ushort(0));
  t._pad0 = 0;
  return t;
}

// ---------------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------------

// MTL_STR makes a kernel's host name from pasted tokens.
#define MTL_STR2(x) #x
#define MTL_STR(x) MTL_STR2(x)

// record_error stores the step's first error and its value.
inline void record_error(device atomic_uint* stats, uint code, uint value) {
  uint expected = 0;
  while (!atomic_compare_exchange_weak_explicit(stats, &expected, code, memory_order_relaxed, memory_order_relaxed)) {
    if (expected != 0) {
      return; // an earlier error stays
    }
  }
  atomic_store_explicit(stats + 1, value, memory_order_relaxed);
}

// The two elements lane owns of an 8x8 simdgroup matrix (Apple's mapping):
// row fm, columns fn and fn+1.
inline void simd_frag_coord(ushort lane, thread short& fm, thread short& fn) {
  short qid = lane / 4;
  fm = (qid & 4) + ((lane / 2) % 4);
  fn = (qid & 2) * 2 + (lane % 2) * 2;
}

// silu is SwiGLU's gate: g·sigmoid(g).
inline float silu(float g) { return g / (1.0f + exp(-g)); }

// gelu_tanh_of is GPT-2's GELU, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
// precise::tanh: the fast one is off by more than the 1e-4 the engine holds
// against transformers.
inline float gelu_tanh_of(float v) {
  return 0.5f * v * (1.0f + precise::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}

// tg_sum adds v over the threadgroup: simd_sum, then the simdgroup sums
// through buf (32 floats). Every thread gets the total. The trailing
// barrier lets the caller reuse buf.
inline float tg_sum(float v, threadgroup float* buf, ushort lane, ushort sg, ushort nsg) {
  v = simd_sum(v);
  if (lane == 0) {
    buf[sg] = v;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float t = 0.0f;
  for (ushort i = 0; i < nsg; i++) {
    t += buf[i];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return t;
}

// mv_inv_rms reduces each row's sum of squares over the threadgroup and
// returns 1/rms (RMSNorm with eps) in inv[c]; buf is 32 floats of
// threadgroup memory.
inline void mv_inv_rms(thread float* ss, uint k, float eps, threadgroup float* buf, ushort lane, ushort sg, ushort nsg,
                       thread float* inv) {
  for (int c = 0; c < mv_cols; c++) {
    const float t = tg_sum(ss[c], buf, lane, sg, nsg);
    inv[c] = 1.0f / sqrt(t / float(k) + eps);
  }
}

// MVNorm is the norm a GEMV folds into the staging of its input rows
// (mv_norm): an RMSNorm, whose 1/rms scales the dot products at the end
// (each thread gathers its part of a row's sum of squares as it stages), or
// a LayerNorm with a bias (ln), whose mean and 1/σ the values need before
// they are used (mv_ln_rows). Neither changes what the weights are.
struct MVNorm {
  bool on, ln;
  bool staged;              // LayerNorm: rows fit one chunk, normalised where staged (mv_ln_staged)
  device const float* g;    // the norm's weight
  device const float* beta; // the LayerNorm's bias
  threadgroup float* red;   // LayerNorm: 32 floats of the staging for the threadgroup's sums
  float eps;                // LayerNorm: inside the root
  float ss[MV_MAX_COLS];    // RMSNorm: this thread's part of each row's sum of squares
  float mean[MV_MAX_COLS];  // LayerNorm: each row's mean
  float inv[MV_MAX_COLS];   // LayerNorm: each row's 1/σ
};

inline MVNorm mv_norm_of(bool on, bool ln, device const float* g, device const float* beta) {
  MVNorm nm;
  nm.on = on;
  nm.ln = on && ln;
  nm.staged = false;
  nm.g = g;
  nm.beta = beta;
  nm.red = nullptr;
  nm.eps = 0.0f;
  for (int c = 0; c < MV_MAX_COLS; c++) {
    nm.ss[c] = 0.0f;
    nm.mean[c] = 0.0f;
    nm.inv[c] = 1.0f;
  }
  return nm;
}

// mv_ln_rows readies a folded LayerNorm before any staging into xs (chunks
// of KC values a row, row c at c·KC). Rows that fit one chunk with 32
// floats to spare are staged as they are and normalised in place
// (mv_ln_staged), so device memory serves them once, as without the norm;
// the threadgroup's sums go in the last row's spare floats, so the kernel
// needs no threadgroup memory beyond its staging. Longer rows get their
// mean and 1/σ here, the sums going through xs before it stages: the mean
// first, then the variance about it, two passes over each row in device
// memory as the layer_norm kernel makes, so a row with a large mean loses
// nothing. src[c] (-1: none) is the same for the whole threadgroup, every
// thread of which calls it.
inline void mv_ln_rows(thread MVNorm& nm, device const float* x, thread const int* src, uint k, uint KC, float eps,
                       threadgroup float* xs, ushort tid, ushort ntg, ushort lane, ushort sg, ushort nsg) {
  nm.eps = eps;
  if (!nm.ln) {
    return;
  }
  if (k + 32 <= KC) {
    nm.staged = true;
    nm.red = xs + uint(mv_cols) * KC - 32;
    return;
  }
  threadgroup float* red = xs;
  for (int c = 0; c < mv_cols; c++) {
    if (src[c] < 0) {
      continue;
    }
    device const float* r = x + ulong(src[c]) * k;
    float s = 0.0f;
    for (uint i = tid; i < k; i += ntg) {
      s += r[i];
    }
    const float mean = tg_sum(s, red, lane, sg, nsg) / float(k);
    float d2 = 0.0f;
    for (uint i = tid; i < k; i += ntg) {
      const float d = r[i] - mean;
      d2 += d * d;
    }
    nm.mean[c] = mean;
    nm.inv[c] = 1.0f / sqrt(tg_sum(d2, red, lane, sg, nsg) / float(k) + eps);
  }
}

// mv_norm4 normalises the values x[kk..kk+3] of row c as they are staged
// (a LayerNorm of rows that fit one chunk waits for mv_ln_staged).
inline float4 mv_norm4(thread MVNorm& nm, int c, uint kk, float4 v) {
  if (nm.ln) {
    return nm.staged ? v
                     : (v - nm.mean[c]) * nm.inv[c] * *(device const float4*)(nm.g + kk) +
                           *(device const float4*)(nm.beta + kk);
  }
  nm.ss[c] += dot(v, v);
  return v * *(device const float4*)(nm.g + kk);
}

// mv_norm1 is mv_norm4 for one value.
inline float mv_norm1(thread MVNorm& nm, int c, uint kk, float v) {
  if (nm.ln) {
    return nm.staged ? v : (v - nm.mean[c]) * nm.inv[c] * nm.g[kk] + nm.beta[kk];
  }
  nm.ss[c] += v * v;
  return v * nm.g[kk];
}

// mv_ln_staged LayerNorms in place the rows a thread has just staged whole
// into xs (row c at c·KC, k values; vec: staged float4 at a time, as
// mv_tile and q_stage map them to threads), before the barrier that
// publishes them: each thread sums the values it wrote itself, the
// threadgroup reduces the sums in red, and each thread normalises its own
// values again. Every thread of the threadgroup calls it.
inline void mv_ln_staged(thread MVNorm& nm, threadgroup float* xs, thread const int* src, uint k, uint KC, bool vec,
                         ushort tid, ushort ntg, ushort lane) {
  if (!nm.staged) {
    return;
  }
  const ushort sg = tid / 32, nsg = ntg / 32; // Apple GPUs' SIMD width
  const uint w = vec ? 4u : 1u, q = k / w; // k values a row, w a thread's turn
  float s[MV_MAX_COLS];
  for (int c = 0; c < mv_cols; c++) {
    s[c] = 0.0f;
  }
  for (uint i = tid; i < uint(mv_cols) * q; i += ntg) {
    const uint c = i / q, j = w * (i % q);
    s[c] += vec ? dot(*(threadgroup float4*)(xs + c * KC + j), float4(1.0f)) : xs[c * KC + j];
  }
  for (int c = 0; c < mv_cols; c++) {
    nm.mean[c] = tg_sum(s[c], nm.red, lane, sg, nsg) / float(k);
    s[c] = 0.0f;
  }
  for (uint i = tid; i < uint(mv_cols) * q; i += ntg) {
    const uint c = i / q, j = w * (i % q);
    if (vec) {
      const float4 d = *(threadgroup float4*)(xs + c * KC + j) - nm.mean[c];
      s[c] += dot(d, d);
    } else {
      const float d = xs[c * KC + j] - nm.mean[c];
      s[c] += d * d;
    }
  }
  for (int c = 0; c < mv_cols; c++) {
    nm.inv[c] = 1.0f / sqrt(tg_sum(s[c], nm.red, lane, sg, nsg) / float(k) + nm.eps);
  }
  for (uint i = tid; i < uint(mv_cols) * q; i += ntg) {
    const uint c = i / q, j = w * (i % q);
    if (src[c] < 0) {
      continue; // stays zeros
    }
    if (vec) {
      threadgroup float4* v = (threadgroup float4*)(xs + c * KC + j);
      *v = (*v - nm.mean[c]) * nm.inv[c] * *(device const float4*)(nm.g + j) + *(device const float4*)(nm.beta + j);
    } else {
      xs[c * KC + j] = (xs[c * KC + j] - nm.mean[c]) * nm.inv[c] * nm.g[j] + nm.beta[j];
    }
  }
}

// mv_norm_scale gives in scale[c] what row c's dot products are multiplied
// by once staged: an RMSNorm's 1/rms (reduced over the threadgroup through
// buf, 32 floats, which every thread must call together), else 1.
inline void mv_norm_scale(thread MVNorm& nm, uint k, float eps, threadgroup float* buf, ushort lane, ushort sg,
                          ushort nsg, thread float* scale) {
  if (nm.on && !nm.ln) {
    mv_inv_rms(nm.ss, k, eps, buf, lane, sg, nsg, scale);
    return;
  }
  for (int c = 0; c < mv_cols; c++) {
    scale[c] = 1.0f;
  }
}

// tg_max is tg_sum's maximum.
inline float tg_max(float v, threadgroup float* buf, ushort lane, ushort sg, ushort nsg) {
  v = simd_max(v);
  if (lane == 0) {
    buf[sg] = v;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float t = NEG_MAX;
  for (ushort i = 0; i < nsg; i++) {
    t = max(t, buf[i]);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return t;
}

// argmax_take keeps v at i if it is larger than best, or equal as the
// thread's first: best starts at NEG_MAX (fast math leaves infinities
// undefined), so NaN and -inf are never taken and a row of nothing else
// gives none (-1, as the reference: bridge.NoToken). A thread visits its
// indices in increasing order, so on ties the first stays; -0 equals +0.
inline void argmax_take(float v, uint i, thread float& best, thread uint& bi) {
  if (!is_nan(v) && (v > best || (bi == 0xffffffffu && v == best))) {
    best = v;
    bi = i;
  }
}

// tg_argmax returns the largest v over the threadgroup and, among the
// threads holding it, the smallest idx (the first index on ties).
inline float tg_argmax(float v, uint idx, threadgroup float* bufv, threadgroup uint* bufi, ushort lane, ushort sg,
                       ushort nsg, thread uint& best) {
  float m = simd_max(v);
  uint i = simd_min(v == m ? idx : 0xffffffffu);
  if (lane == 0) {
    bufv[sg] = m;
    bufi[sg] = i;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float bm = NEG_MAX;
  uint bi = 0xffffffffu;
  for (ushort g = 0; g < nsg; g++) {
    float gv = bufv[g];
    uint gi = bufi[g];
    if (gv > bm || (gv == bm && gi < bi)) {
      bm = gv;
      bi = gi;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  best = bi;
  return bm;
}

// QMatArgs: a GEMV/GEMM or expert GEMV on packed weights (quant.metal).
// A weight row is row_bytes of packed values; affine formats have groups
// scales and biases per row, of the pipeline's q_scale_dt. Experts
// sit w_stride bytes (values) and s_stride bytes (scales) apart.
struct QMatArgs {
  uint m;          // activation rows (pairs for experts)
  uint n;          // weight rows
  uint k;          // depth
  uint row_bytes;  // packed bytes of a row
  uint groups;     // affine: groups per row
  uint top_k;      // experts: pairs per token
  uint experts;    // experts: count, for bounds
  uint _pad0;
  ulong w_stride;  // experts: bytes between experts' values
  ulong s_stride;  // experts: bytes between experts' scales
  float eps;       // qmatvec with mv_norm: the folded RMSNorm's epsilon
  uint n1;         // qmatvec with mv_segs > 1: the second matrix's rows
  uint n2;         // and the third's
  uint group_shift; // affine: log2 of a group's 32-value units, so a unit's
                    // group is unit >> group_shift (no division a unit)
  uint norm_topk;   // qmoe_mv with mv_route: renormalise the top-k weights
  uint stats_slot;  // and the word of the counts buffer its distinct experts bump
  uint _pad1;
  uint _pad2;
};

// MOE_ROUTE_LANE: the experts a lane of moe_route_pair holds (lane l
// experts l, l+32, ...): MoEs of at most 32·MOE_ROUTE_LANE experts route in
// qmoe_mv (bridge/metal quant.go's qmoeRouteExperts).
#define MOE_ROUTE_LANE 8

// ROUTE_TAKEN marks an expert a token's top-k has taken: below every
// routing key, so it is never taken again.
#define ROUTE_TAKEN NEG_MAX

// route_key ranks a routing probability in the top-k. A NaN (one NaN in the
// router's input or weights makes every probability NaN) ranks below every
// number but above ROUTE_TAKEN, so each pick is still an expert not taken
// yet, the expert kernels read in bounds, and the router reports
// ERR_ROUTE_NAN.
inline float route_key(float p) { return is_nan(p) ? -2.0f : p; }

// count_expert marks expert e taken by a routed pair and bumps the call's
// distinct-expert count, counts[slot], the first time. Each caller adds (1 or 0) rather
// than only the first: which pair comes first is a race, and an add that
// only the winner issued made the cost witness's loads per lane differ
// from run to run (docs/msl-subset.md, "The cost witness").
inline void count_expert(device atomic_uint* flags, device atomic_uint* counts, uint slot, uint e) {
  const uint first = atomic_exchange_explicit(&flags[e], 1u, memory_order_relaxed) == 0u ? 1u : 0u;
  atomic_fetch_add_explicit(&counts[slot], first, memory_order_relaxed);
}

// moe_route_pair is one simdgroup's routing of a token (its E logits at l)
// as route_token routes it: softmax, top-k by repeated argmax (the first
// index on ties), the weights renormalised over the k with norm_topk. It
// returns the weight of the token's j-th pick and sets expert to it, and
// nan when a pick's probability was NaN. Every lane gets the same answer;
// registers and simd reductions only, so the simdgroup routes while the
// rest of the threadgroup stages x.
inline float moe_route_pair(device const float* l, uint E, uint K, bool norm_topk, uint j, ushort lane,
                           thread uint& expert, thread bool& nan) {
  float v[MOE_ROUTE_LANE];
  float mx = NEG_MAX;
  for (uint i = 0; i < MOE_ROUTE_LANE; i++) {
    const uint e = lane + 32 * i;
    v[i] = e < E ? l[e] : ROUTE_TAKEN;
    mx = max(mx, v[i]);
  }
  mx = simd_max(mx);
  float s = 0.0f;
  for (uint i = 0; i < MOE_ROUTE_LANE; i++) {
    if (lane + 32 * i < E) {
      v[i] = exp(v[i] - mx);
      s += v[i];
    }
  }
  s = simd_sum(s);
  for (uint i = 0; i < MOE_ROUTE_LANE; i++) {
    if (lane + 32 * i < E) {
      v[i] = v[i] / s;
    }
  }
  float sum = 0.0f, mine = 0.0f;
  expert = 0;
  nan = false;
  for (uint r = 0; r < K; r++) {
    float bv = NEG_MAX;
    uint bi = 0xffffffffu;
    for (uint i = 0; i < MOE_ROUTE_LANE; i++) {
      const float k = route_key(v[i]);
      if (k > bv) {
        bv = k;
        bi = lane + 32 * i;
      }
    }
    const float m = simd_max(bv);
    const uint sel = min(simd_min(bv == m ? bi : 0xffffffffu), E - 1);
    // The pick's probability, from the lane holding it (selects, not an
    // index into v, which would put v in memory).
    float pv = 0.0f;
    for (uint i = 0; i < MOE_ROUTE_LANE; i++) {
      pv = i == sel / 32 ? v[i] : pv;
    }
    pv = simd_shuffle(pv, ushort(sel % 32));
    nan = nan || is_nan(pv);
    sum += pv;
    if (r == j) {
      mine = pv;
      expert = sel;
    }
    for (uint i = 0; i < MOE_ROUTE_LANE; i++) {
      if (lane + 32 * i == sel) {
        v[i] = ROUTE_TAKEN;
      }
    }
  }
  return norm_topk ? mine / sum : mine;
}

#endif // MTLBENCH_H
