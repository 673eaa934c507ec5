// MLX-style idioms: kernel templates instantiated through macros with
// decltype, a Limits trait with static constant members, METAL_FUNC
// helpers (the macro Apple's metal_stdlib defines, which MLX uses without
// defining), simdgroup reductions through threadgroup memory, function
// constants guarding buffers, functors as template arguments, packed
// vectors, metal:: qualified calls and strided indexing.
#include <metal_stdlib>
#include <metal_simdgroup>
using namespace metal;

#define MLX_MTL_CONST static constant constexpr const
#define MLX_MTL_PRAGMA_UNROLL _Pragma("clang loop unroll(full)")

MLX_MTL_CONST int SIMD_SIZE = 32;

template <typename U>
struct Limits {
  static const constant U max = metal::numeric_limits<U>::max();
  static const constant U min = metal::numeric_limits<U>::min();
};
template <>
struct Limits<float> {
  static constexpr constant float max = metal::numeric_limits<float>::infinity();
  static constexpr constant float min = -metal::numeric_limits<float>::infinity();
};
template <>
struct Limits<half> {
  static constexpr constant half max = metal::numeric_limits<half>::infinity();
  static constexpr constant half min = -metal::numeric_limits<half>::infinity();
};

// A trait as a variable template in the constant address space, with a
// partial specialisation (MLX's is_complex_v).
template <typename T>
struct wrapped {
  T v;
};
template <typename T>
static constexpr constant bool is_wrapped_v = false;
template <typename T>
static constexpr constant bool is_wrapped_v<wrapped<T>> = true;
static_assert(is_wrapped_v<wrapped<half>> && !is_wrapped_v<half>, "is_wrapped_v");

// One row per threadgroup, N_READS values per thread.
template <typename T, typename AccT = float, int N_READS = 4>
[[kernel]] void softmax_single_row(
    const device T* in [[buffer(0)]],
    device T* out [[buffer(1)]],
    constant int& axis_size [[buffer(2)]],
    uint gid [[threadgroup_position_in_grid]],
    uint _lid [[thread_position_in_threadgroup]],
    uint simd_lane_id [[thread_index_in_simdgroup]],
    uint simd_group_id [[simdgroup_index_in_threadgroup]]) {
  int lid = _lid;
  threadgroup AccT local_max[SIMD_SIZE];
  threadgroup AccT local_normalizer[SIMD_SIZE];
  AccT ld[N_READS];
  in += gid * size_t(axis_size) + lid * N_READS;
  if (lid * N_READS + N_READS <= axis_size) {
    MLX_MTL_PRAGMA_UNROLL
    for (int i = 0; i < N_READS; i++) {
      ld[i] = AccT(in[i]);
    }
  } else {
    for (int i = 0; i < N_READS; i++) {
      ld[i] = ((lid * N_READS + i) < axis_size) ? AccT(in[i]) : Limits<AccT>::min;
    }
  }
  if (simd_group_id == 0) {
    local_max[simd_lane_id] = Limits<AccT>::min;
    local_normalizer[simd_lane_id] = 0;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  AccT maxval = Limits<AccT>::min;
  for (int i = 0; i < N_READS; i++) {
    maxval = (maxval < ld[i]) ? ld[i] : maxval;
  }
  maxval = simd_max(maxval);
  if (simd_lane_id == 0) {
    local_max[simd_group_id] = maxval;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (simd_group_id == 0) {
    maxval = simd_max(local_max[simd_lane_id]);
    if (simd_lane_id == 0) {
      local_max[0] = maxval;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  maxval = local_max[0];
  AccT normalizer = 0;
  for (int i = 0; i < N_READS; i++) {
    AccT exp_x = metal::fast::exp(ld[i] - maxval);
    ld[i] = exp_x;
    normalizer += exp_x;
  }
  normalizer = simd_sum(normalizer);
  if (simd_lane_id == 0) {
    local_normalizer[simd_group_id] = normalizer;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (simd_group_id == 0) {
    normalizer = simd_sum(local_normalizer[simd_lane_id]);
    if (simd_lane_id == 0) {
      local_normalizer[0] = normalizer;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  normalizer = 1 / local_normalizer[0];
  out += gid * size_t(axis_size) + lid * N_READS;
  for (int i = 0; i < N_READS; i++) {
    if (lid * N_READS + i < axis_size) {
      out[i] = T(ld[i] * normalizer);
    }
  }
}

#define instantiate_softmax(name, itype)                                    \
  template [[host_name("softmax_" #name)]] [[kernel]] decltype(             \
      softmax_single_row<itype>) softmax_single_row<itype>;

instantiate_softmax(float32, float)
instantiate_softmax(float16, half)

// Functors as template arguments; a scale buffer guarded by a function
// constant.
constant bool has_scale [[function_constant(10)]];

struct Add {
  template <typename T>
  T operator()(T x, T y) { return x + y; }
};
struct Maximum {
  template <typename T>
  METAL_FUNC T operator()(T x, T y) { return metal::max(x, y); }
};

template <typename T, typename U, typename Op>
[[kernel]] void binary_vv(
    device const T* a [[buffer(0)]],
    device const T* b [[buffer(1)]],
    device U* c [[buffer(2)]],
    constant const float& scale [[buffer(3), function_constant(has_scale)]],
    uint2 index [[thread_position_in_grid]],
    uint2 grid_dim [[threads_per_grid]]) {
  auto offset = index.x + grid_dim.x * size_t(index.y);
  U v = static_cast<U>(Op()(a[offset], b[offset]));
  if (has_scale) {
    v *= U(scale);
  }
  c[offset] = v;
}

#define instantiate_binary(name, T, U, Op) \
  template [[host_name(name)]] [[kernel]] decltype(binary_vv<T, U, Op>) binary_vv<T, U, Op>;

instantiate_binary("add_float32", float, float, Add)
instantiate_binary("max_int32_float32", int, float, Maximum)

// Strided reads (MLX's elem_to_loc).
template <typename IdxT = int64_t>
METAL_FUNC IdxT elem_to_loc(IdxT elem, constant const int* shape, constant const int64_t* strides, int ndim) {
  IdxT loc = 0;
  for (int i = ndim - 1; i >= 0 && elem > 0; --i) {
    loc += (elem % shape[i]) * IdxT(strides[i]);
    elem /= shape[i];
  }
  return loc;
}

template <typename T, typename U>
[[kernel]] void copy_g(
    device const T* src [[buffer(0)]],
    device U* dst [[buffer(1)]],
    constant const int* src_shape [[buffer(2)]],
    constant const int64_t* src_strides [[buffer(3)]],
    constant const int& ndim [[buffer(5)]],
    uint index [[thread_position_in_grid]]) {
  auto src_idx = elem_to_loc<int64_t>(index, src_shape, src_strides, ndim);
  dst[index] = static_cast<U>(src[src_idx]);
}

template [[host_name("copy_g_half_float")]] [[kernel]] decltype(copy_g<half, float>) copy_g<half, float>;

// Packed vectors in memory, widened to aligned ones.
[[kernel]] void packed_widen(
    const device packed_float3* in [[buffer(0)]],
    device float4* out [[buffer(1)]],
    const device packed_half4* h [[buffer(2)]],
    uint i [[thread_position_in_grid]]) {
  float3 v = in[i];
  half4 w = h[i];
  out[i] = float4(v, 1.0f) + float4(w) * metal::precise::divide(1.0f, 2.0f);
}

// A prefix sum by simd_prefix_exclusive_sum over simdgroups, through
// threadgroup memory given at dispatch.
[[kernel]] void scan_exclusive(
    const device uint* in [[buffer(0)]],
    device uint* out [[buffer(1)]],
    threadgroup uint* partial [[threadgroup(0)]],
    uint lid [[thread_index_in_threadgroup]],
    ushort lane [[thread_index_in_simdgroup]],
    ushort sg [[simdgroup_index_in_threadgroup]],
    ushort nsg [[simdgroups_per_threadgroup]]) {
  uint x = in[lid];
  uint pre = simd_prefix_exclusive_sum(x);
  if (lane == SIMD_SIZE - 1) {
    partial[sg] = pre + x;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    uint t = lane < nsg ? partial[lane] : 0;
    partial[lane] = simd_prefix_exclusive_sum(t);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid] = pre + partial[sg] + simd_broadcast_first(0u) * simd_shuffle_xor(x, 1);
}

// A steel-style 8x8 fragment: static constant members, a helper whose
// parameter carries a position attribute, lanes' elements reached through
// reinterpret_cast of thread_elements(), a trait specialised on pointers
// of each address space, member functions qualified `thread`, and
// integral_constant default arguments.
#define STEEL_CONST static constant constexpr const
#define STEEL_PRAGMA_UNROLL _Pragma("clang loop unroll(full)")

template <int v>
using Int = metal::integral_constant<int, v>;

template <typename T>
struct ptr_elem {};
template <typename T>
struct ptr_elem<device T*> {
  using type = metal::remove_cv_t<T>;
};
template <typename T>
struct ptr_elem<threadgroup T*> {
  using type = metal::remove_cv_t<T>;
};
template <typename T>
using ptr_elem_t = typename ptr_elem<metal::remove_cv_t<T>>::type;

template <typename T>
struct Frag8 {
  STEEL_CONST int kRows = 8;
  STEEL_CONST int kElems = (kRows * kRows) / 32;
  typedef metal::simdgroup_matrix<T, kRows, kRows> mat_type;
  typedef metal::vec<T, kElems> frag_type;

  METAL_FUNC static constexpr short2 get_coord(ushort lane [[thread_index_in_simdgroup]]) {
    const short qid = lane / 4;
    const short fm = (qid & 4) + ((lane / 2) % 4);
    const short fn = (qid & 2) * 2 + (lane % 2) * 2;
    return short2{fn, fm};
  }

  template <typename P, typename Off = Int<0>>
  METAL_FUNC static constexpr void load(thread frag_type& dst, P src, int ld, Off off = Int<0>{}) {
    STEEL_PRAGMA_UNROLL
    for (short j = 0; j < kElems; j++) {
      dst[j] = static_cast<T>(src[off + j]);
    }
    (void)ld;
  }

  template <typename P>
  METAL_FUNC static constexpr void store(const thread frag_type& src, P dst) {
    using U = ptr_elem_t<P>;
    STEEL_PRAGMA_UNROLL
    for (short j = 0; j < kElems; j++) {
      dst[j] = static_cast<U>(src[j]);
    }
  }

  METAL_FUNC static constexpr void mma(thread frag_type& D, thread frag_type& A, thread frag_type& B, thread frag_type& C) {
    mat_type D_mat, A_mat, B_mat, C_mat;
    reinterpret_cast<thread frag_type&>(A_mat.thread_elements()) = A;
    reinterpret_cast<thread frag_type&>(B_mat.thread_elements()) = B;
    reinterpret_cast<thread frag_type&>(C_mat.thread_elements()) = C;
    simdgroup_multiply_accumulate(D_mat, A_mat, B_mat, C_mat);
    D = reinterpret_cast<thread frag_type&>(D_mat.thread_elements());
  }
};

template <typename T, class F = Frag8<float>>
struct Tile {
  STEEL_CONST int kElems = F::kElems;
  typedef typename F::frag_type frag_type;
  frag_type frags[1] = {frag_type(0)};

  METAL_FUNC Tile() thread {}
  METAL_FUNC constexpr thread frag_type& at() thread { return frags[0]; }
  METAL_FUNC constexpr const thread frag_type& at() const thread { return frags[0]; }
};

// C = A * B + C for 8x8 matrices, one simdgroup, row-major; A read through
// threadgroup memory.
template <typename T>
[[kernel]] void frag_gemm(
    const device T* A [[buffer(0)]],
    const device T* B [[buffer(1)]],
    device float* C [[buffer(2)]],
    ushort lane [[thread_index_in_simdgroup]]) {
  threadgroup T As[64];
  for (short k = lane; k < 64; k += 32) {
    As[k] = A[k];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  using F = Frag8<float>;
  const short2 rc = F::get_coord(lane);
  Tile<float> a, b, c;
  F::load(a.at(), &As[rc.y * 8], 8, rc.x);
  F::load(b.at(), B + rc.y * 8 + rc.x, 8);
  F::load(c.at(), C + rc.y * 8 + rc.x, 8);
  F::mma(c.at(), a.at(), b.at(), c.at());
  F::store(c.at(), C + rc.y * 8 + rc.x);
}

template [[host_name("frag_gemm_half")]] [[kernel]] decltype(frag_gemm<half>) frag_gemm<half>;

// One query's attention over N keys (MLX's sdpa_vector in outline): BN
// simdgroups take every BN-th key, each lane D/32 components, with an
// online softmax; simdgroup 0 merges the partials through threadgroup
// memory. A bool mask and its stride are arguments only under has_mask.
constant bool has_mask [[function_constant(20)]];

template <typename T, int D, int BN>
[[kernel]] void attn_vector(
    const device T* queries [[buffer(0)]],
    const device T* keys [[buffer(1)]],
    const device T* values [[buffer(2)]],
    device T* out [[buffer(3)]],
    const constant int& N [[buffer(4)]],
    const constant float& scale [[buffer(5)]],
    const device bool* mask [[buffer(6), function_constant(has_mask)]],
    const constant int& mask_stride [[buffer(7), function_constant(has_mask)]],
    uint simd_gid [[simdgroup_index_in_threadgroup]],
    uint simd_lid [[thread_index_in_simdgroup]]) {
  constexpr int per_thread = D / SIMD_SIZE;
  typedef float U;
  thread U q[per_thread];
  thread U o[per_thread];
  threadgroup U maxs[BN];
  threadgroup U sums[BN];
  threadgroup U outs[BN * D];

  queries += simd_lid * per_thread;
  keys += simd_gid * D + simd_lid * per_thread;
  values += simd_gid * D + simd_lid * per_thread;
  for (int i = 0; i < per_thread; i++) {
    q[i] = static_cast<U>(scale) * queries[i];
    o[i] = 0;
  }
  U max_score = Limits<U>::min;
  U sum_exp = 0;
  for (int i = simd_gid; i < N; i += BN) {
    if (!has_mask || mask[i * mask_stride]) {
      U score = 0;
      for (int j = 0; j < per_thread; j++) {
        score += q[j] * static_cast<U>(keys[j]);
      }
      score = simd_sum(score);
      const U new_max = metal::max(max_score, score);
      const U factor = metal::fast::exp(max_score - new_max);
      const U e = metal::fast::exp(score - new_max);
      max_score = new_max;
      sum_exp = sum_exp * factor + e;
      for (int j = 0; j < per_thread; j++) {
        o[j] = o[j] * factor + e * static_cast<U>(values[j]);
      }
    }
    keys += BN * D;
    values += BN * D;
  }
  if (simd_lid == 0) {
    maxs[simd_gid] = max_score;
    sums[simd_gid] = sum_exp;
  }
  for (int j = 0; j < per_thread; j++) {
    outs[simd_gid * D + simd_lid * per_thread + j] = o[j];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (simd_gid == 0) {
    U m = Limits<U>::min;
    for (int s = 0; s < BN; s++) {
      m = metal::max(m, maxs[s]);
    }
    U total = 0;
    U acc[per_thread] = {0};
    for (int s = 0; s < BN; s++) {
      const U f = maxs[s] == Limits<U>::min ? 0 : metal::fast::exp(maxs[s] - m);
      total += sums[s] * f;
      for (int j = 0; j < per_thread; j++) {
        acc[j] += outs[s * D + simd_lid * per_thread + j] * f;
      }
    }
    for (int j = 0; j < per_thread; j++) {
      out[simd_lid * per_thread + j] = static_cast<T>(total == 0 ? acc[j] : acc[j] / total);
    }
  }
}

#define instantiate_attn(tname, type, dim, bn) \
  template [[host_name("attn_vector_" #tname "_" #dim)]] [[kernel]] decltype(attn_vector<type, dim, bn>) attn_vector<type, dim, bn>;

instantiate_attn(float16, half, 64, 4)
