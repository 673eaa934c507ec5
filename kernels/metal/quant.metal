// GEMV/GEMM, expert GEMVs and embedding rows on packed weights
// (kernels/quant, docs/quantization.md): MLX affine (2, 3, 4, 5, 6 and 8
// bits), GGUF's Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ4_NL
// and MXFP4, and mlx's nvfp4 and mxfp8 (NVFP4, MXFP8). Weights are
// dequantized in registers as they are read, never into memory. The
// threadgroup stages its activation rows once per chunk of k (as gemm.h's
// mv_tile), and each lane takes whole units of a row: 32 values of an
// affine, NVFP4 or MXFP8 row (4·bits bytes: one 16-byte load at 4 bits,
// two at 8; NVFP4's and MXFP8's scales follow the row's values), one
// 32-value block of Q8_0/Q4_0/IQ4_NL (34 and 18 bytes, 2-byte aligned:
// 8-byte words, uints and a ushort, q_block_words) or MXFP4 (17 bytes, byte
// aligned: an 8-byte word, a uint, two ushorts and a uchar, q_run_words) or
// sub-block of IQ4_XS (8-byte loads), or part of a 256-value super-block:
// of Q4_K (144 bytes, 16-byte loads), Q5_K (176 bytes, 16-byte loads), Q3_K
// and Q6_K (110 and 210 bytes, 2-byte aligned: 16-byte runs in 8-byte
// words, a uint and ushorts, q_run_words) or Q2_K (84 bytes, 4-byte
// aligned: 16-byte runs in an 8-byte word and uints, q_run_words) (QUnit).
// The IQ grid formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
// IQ1_M: kernels/quant iq.go) take one 32-value unit of a 256-value
// super-block: its grid indices, signs and scale, and the super-block's d;
// their grids are program-scope constants (iqgrid.h), which qmatvec and
// qmoe_mv copy into threadgroup memory for IQ2 and IQ3 (QMVGrid).
#include "gemm.h"
#include "iqgrid.h"

#define QF_AFFINE4 0
#define QF_AFFINE8 1
#define QF_AFFINE2 14
#define QF_AFFINE3 15
#define QF_AFFINE5 16
#define QF_AFFINE6 17
#define QF_Q8_0 2
#define QF_Q4_0 3
#define QF_Q4_K 4
#define QF_Q6_K 5
#define QF_Q2_K 6
#define QF_IQ2_XXS 7
#define QF_IQ2_XS 8
#define QF_IQ2_S 9
#define QF_IQ3_XXS 10
#define QF_IQ3_S 11
#define QF_IQ1_S 12
#define QF_IQ1_M 13
#define QF_Q5_K 18
#define QF_Q3_K 19
#define QF_IQ4_XS 20
#define QF_IQ4_NL 21
#define QF_MXFP4 22
#define QF_NVFP4 23
#define QF_MXFP8 24

// QMV_STAGE_FLOATS: threadgroup memory for staged activations (16 KiB).
#define QMV_STAGE_FLOATS 4096

// A lane's unit of a row. The K formats' are parts of a 256-value
// super-block, so a row of 2048 keeps 32 lanes busy where whole super-blocks
// kept 8: a Q4_K unit is the two sub-blocks one 32-byte chunk of nibbles
// holds, a Q5_K, Q6_K, Q3_K or Q2_K unit 16 positions of each of a half's
// four 32-value quarters (64 values); each unit reads only the scale bytes it uses, so the
// super-block's header costs a few bytes more a unit (docs/metal-kernels.md,
// "Packed weights" and "Short rows"). An IQ unit is 32 values, one eighth
// of a super-block (q_iq).
template <int F> struct QUnit { static constant constexpr uint values = 32; };
template <> struct QUnit<QF_Q4_K> { static constant constexpr uint values = 64; };
template <> struct QUnit<QF_Q6_K> { static constant constexpr uint values = 64; };
template <> struct QUnit<QF_Q5_K> { static constant constexpr uint values = 64; };
template <> struct QUnit<QF_Q3_K> { static constant constexpr uint values = 64; };
template <> struct QUnit<QF_Q2_K> { static constant constexpr uint values = 64; };

// QBlockBytes: an IQ format's super-block (256 values) in bytes.
template <int F> struct QBlockBytes;
template <> struct QBlockBytes<QF_IQ2_XXS> { static constant constexpr uint bytes = 66; };
template <> struct QBlockBytes<QF_IQ2_XS> { static constant constexpr uint bytes = 74; };
template <> struct QBlockBytes<QF_IQ2_S> { static constant constexpr uint bytes = 82; };
template <> struct QBlockBytes<QF_IQ3_XXS> { static constant constexpr uint bytes = 98; };
template <> struct QBlockBytes<QF_IQ3_S> { static constant constexpr uint bytes = 110; };
template <> struct QBlockBytes<QF_IQ1_S> { static constant constexpr uint bytes = 50; };
template <> struct QBlockBytes<QF_IQ1_M> { static constant constexpr uint bytes = 56; };

inline float q_half(device const uchar* p) { return float(as_type<half>(*(device const ushort*)p)); }

// q_scale is scale or bias i of a row, of the pipeline's type (a function
// constant, so the loops that read them carry no type test).
inline float q_scale(device const uchar* s, uint i) {
  if (q_scale_dt == 1) {
    return float(as_type<half>(*((device const ushort*)s + i)));
  }
  if (q_scale_dt == 2) {
    return as_type<float>(uint(*((device const ushort*)s + i)) << 16);
  }
  return *((device const float*)s + i);
}

// q_scale_bytes is a row's scales (or biases) in bytes.
inline uint q_scale_bytes(constant QMatArgs& a) { return a.groups * (q_scale_dt == 0 ? 4 : 2); }

// QRow is one weight row: its packed values, and for affine formats its
// scales and biases. w8 is w's byte offset mod 8 from the start of its
// bound buffer, which the host binds 16-byte aligned (weightAlign): GGUF's
// 2-byte-aligned blocks pick their loads by it (q_block_words).
struct QRow {
  device const uchar* w;
  device const uchar* s;
  device const uchar* b;
  uint w8;
};

// QBlockPieces places q_block_words's pieces in a block of 2 + 4·N bytes
// at alignment w8 (q_block_pieces): the window starts e bytes before the
// block (0 or 2), the run's 8-byte words start at the window's word r0, the
// two uints are its words iA and iB; the offsets from the block are the
// run's word i at run + 8i, the uints at uA and uB, the ushort at h.
struct QBlockPieces {
  uint e, r0, iA, iB;
  int run, uA, uB, h;
};
template <int N> inline QBlockPieces q_block_pieces(uint w8) {
  const uint a = w8 & 6u, e = a & 2u;
  QBlockPieces p;
  p.e = e;
  p.r0 = a == 0 ? 0u : (a == 2 ? 2u : 1u);
  p.iA = a == 0 ? uint(N - 2) : (a == 2 ? 1u : (a == 4 ? 0u : uint(N - 1)));
  p.iB = a == 0 || a == 4 ? uint(N - 1) : uint(N);
  p.run = int(4 * p.r0 - e);
  p.uA = int(4 * p.iA - e);
  p.uB = int(4 * p.iB - e);
  p.h = e == 0 ? 4 * N : 0;
  return p;
}

// q_block_words reads a GGUF block of 2 + 4·N bytes (f16 d, then N words
// of quants; Q8_0, Q4_0, IQ4_NL; N even), 2-byte aligned, in (N - 2)/2 + 3
// loads where ushorts took 2N + 1: a run of (N - 2)/2 8-byte words, two
// uints and a ushort tile the block at each of its four alignments mod 8
// (a = 0: run, uint, uint, ushort; 2: ushort, uint, run, uint; 4: uint,
// run, uint, ushort; 6: ushort, run, uint, uint). Every lane issues the
// same loads at addresses its block's alignment picks, so neighbouring
// lanes (blocks of different alignments) do not diverge. The pieces land
// by selects in W, the block's 4-byte-aligned window (from 2 bytes before
// it when it starts 2 past a boundary), whose words give d and the quants
// (docs/metal-kernels.md, "Packed weights"). Returns d; qw gets the quants.
template <int N> inline float q_block_words(device const uchar* blk, uint w8, thread uint* qw) {
  constexpr int D = (N - 2) / 2;
  const QBlockPieces pc = q_block_pieces<N>(w8);
  uint R[2 * D];
  for (int i = 0; i < D; i++) {
    const uint2 v = *(device const uint2*)(blk + pc.run + 8 * i);
    R[2 * i] = v.x;
    R[2 * i + 1] = v.y;
  }
  const uint A = *(device const uint*)(blk + pc.uA);
  const uint B = *(device const uint*)(blk + pc.uB);
  const uint S = uint(*(device const ushort*)(blk + pc.h));
  return q_block_assemble<N>(pc, R, A, B, S, qw);
}

// q_block_assemble places q_block_words's pieces (R the run's words, A and
// B the uints, S the ushort) in the block's window and returns d; qw gets
// the quants.
template <int N>
inline float q_block_assemble(QBlockPieces pc, thread const uint* R, uint A, uint B, uint S, thread uint* qw) {
  constexpr int D = (N - 2) / 2;
  const uint e = pc.e, r0 = pc.r0, iA = pc.iA, iB = pc.iB;
  uint W[N + 1];
  for (int k = 0; k <= N; k++) {
    uint w = 0;
    for (int r = 0; r < 3; r++) {
      const int j = k - r;
      if (j >= 0 && j < 2 * D) {
        w = r0 == uint(r) ? R[j] : w;
      }
    }
    w = iA == uint(k) ? A : w;
    w = iB == uint(k) ? B : w;
    if (k == 0) {
      w = e == 2 ? S << 16 : w; // d, in the window's first word's high half
    }
    if (k == N) {
      w = e == 0 ? S : w; // the last two quants, in its last word's low half
    }
    W[k] = w;
  }
  for (int i = 0; i < N; i++) {
    qw[i] = e == 0 ? (W[i] >> 16) | (W[i + 1] << 16) : W[i + 1];
  }
  return float(as_type<half>(ushort(e == 0 ? W[0] & 0xffffu : W[0] >> 16)));
}

// q_run_words reads a run of 4·N bytes inside a GGUF block (a K-quant
// unit's nibbles or high bits; N even), 2-byte aligned, in (N - 2)/2 + 3
// loads where ushorts took 2N: q_block_words's tiling without d's ushort, a
// run of (N - 2)/2 8-byte words, a uint and two ushorts at each alignment
// mod 8 (a = 0: run, uint, ushort, ushort; 2: ushort, uint, run, ushort; 4:
// uint, run, ushort, ushort; 6: ushort, run, uint, ushort). The pieces land
// by selects in the run's 2N halves, so every lane issues the same loads and
// reads no byte outside its run (docs/metal-kernels.md, "Packed weights").
// G is the run's alignment: 2; 4 where every block keeps 4-byte alignment
// (Q2_K's 84 bytes): then a is 0 or 4, the two ushorts are the run's last
// 4 bytes, and one uint reads them, (N - 2)/2 + 2 loads; 1 for byte-aligned
// blocks (MXFP4's 17): the last ushort becomes two uchars, and where the run
// starts at an odd byte one of them reads that byte and the rest of the run
// (even-aligned, 4N - 2 bytes) takes the words, the uint and a ushort at its
// own alignment, (N - 2)/2 + 4 loads where uchars took 4N. With LEAD
// (G = 1) it also reads the byte before the run (MXFP4's exponent) in the
// same loads: that byte and the run's first (odd start) or its last two (even
// start) are an aligned ushort, the other uchar the run's last byte or the
// lead, so the 4N + 1 bytes take (N - 2)/2 + 4 loads too; it returns the
// lead byte (0 without LEAD). An 8-byte run (N = 2, G = 2: the IQ grid
// formats' index runs) takes the uint and the two ushorts alone, 3 loads
// where ushorts took 4.
// qw[i] gets the run's bytes 4i..4i+3, little-endian.
template <int N, int G = 2, bool LEAD = false>
inline uint q_run_words(device const uchar* run, uint w8, thread uint* qw) {
  static_assert(N % 2 == 0 && (N >= 4 || (N == 2 && G == 2)),
                "a run of at least one 8-byte word, a uint and two ushorts, or 2-byte aligned a uint and two ushorts");
  static_assert(G == 1 || G == 2 || G == 4, "a run 1-, 2- or 4-byte aligned");
  static_assert(!LEAD || G == 1, "a lead byte beside a byte-aligned run only");
  constexpr int D = (N - 2) / 2;
  const uint o = G == 1 ? (w8 & 1u) : 0u; // the byte before the even-aligned rest
  const uint a = (w8 + o) & 6u;
  const uint r = a == 0 ? 0u : (a == 2 ? 3u : (a == 4 ? 2u : 1u));            // the 8-byte words' first half
  const uint iu = a == 0 ? uint(4 * D) : (a == 2 ? 1u : (a == 4 ? 0u : uint(4 * D + 1))); // the uint's
  const uint i0 = a == 2 || a == 6 ? 0u : uint(2 * N - 2);                     // the first ushort's
  device const uint2* pr = (device const uint2*)(run + o + 2 * r);
  uint R[D > 0 ? 2 * D : 1]; // an 8-byte run (N = 2) has no words
  for (int i = 0; i < D; i++) {
    const uint2 v = pr[i];
    R[2 * i] = v.x;
    R[2 * i + 1] = v.y;
  }
  const uint U = *(device const uint*)(run + o + 2 * iu);
  uint S0, S1;
  if (G == 4) { // i0 is 2N - 2: the ushorts are one aligned uint
    const uint T = *(device const uint*)(run + 4 * (N - 1));
    S0 = T & 0xffffu;
    S1 = T >> 16;
  } else {
    S0 = uint(*(device const ushort*)(run + o + 2 * i0));
    S1 = G == 2 ? uint(*(device const ushort*)(run + 2 * (2 * N - 1))) : 0u;
  }
  if (G == 1) {
    const uint c0 = o == 1 ? 0u : uint(4 * N - 2); // the uchars': c0 and the run's last byte
    uint C0, C1, lead = 0;
    if (LEAD) { // P: the lead and byte 0 (odd start) or bytes 4N - 2, 4N - 1; Q: the other
      const uint P = uint(*(device const ushort*)(run + (o == 1 ? -1 : 4 * N - 2)));
      const uint Q = uint(run[o == 1 ? 4 * N - 1 : -1]);
      lead = o == 1 ? P & 0xffu : Q;
      C0 = o == 1 ? P >> 8 : P & 0xffu;
      C1 = o == 1 ? Q : P >> 8;
    } else {
      C0 = uint(run[c0]);
      C1 = uint(run[4 * N - 1]);
    }
    uint B[4 * N];
    for (int k = 0; k < 4 * N; k++) {
      uint b = 0;
      for (int s = 0; s < 8; s++) { // the words start at byte o + 2r: 0 to 7
        const int j = k - s;
        if (j >= 0 && j < 8 * D) {
          b = o + 2 * r == uint(s) ? (R[j / 4] >> (8 * (j % 4))) & 0xffu : b;
        }
      }
      for (int t = 0; t < 4; t++) {
        b = o + 2 * iu + uint(t) == uint(k) ? (U >> (8 * t)) & 0xffu : b;
      }
      for (int t = 0; t < 2; t++) {
        b = o + 2 * i0 + uint(t) == uint(k) ? (S0 >> (8 * t)) & 0xffu : b;
      }
      b = c0 == uint(k) ? C0 : b;
      if (k == 4 * N - 1) {
        b = C1;
      }
      B[k] = b;
    }
    for (int i = 0; i < N; i++) {
      qw[i] = B[4 * i] | (B[4 * i + 1] << 8) | (B[4 * i + 2] << 16) | (B[4 * i + 3] << 24);
    }
    return lead;
  }
  uint H[2 * N];
  for (int k = 0; k < 2 * N; k++) {
    uint h = 0;
    for (int s = 0; s < 4; s++) { // the run's words start at half 0, 1, 2 or 3
      const int j = k - s;
      if (j >= 0 && j < 4 * D) {
        h = r == uint(s) ? (R[j / 2] >> (16 * (j % 2))) & 0xffffu : h;
      }
    }
    h = iu == uint(k) ? U & 0xffffu : h;
    h = iu + 1 == uint(k) ? U >> 16 : h;
    h = i0 == uint(k) ? S0 : h;
    if (k == 2 * N - 1) {
      h = S1;
    }
    H[k] = h;
  }
  for (int i = 0; i < N; i++) {
    qw[i] = H[2 * i] | (H[2 * i + 1] << 16);
  }
  return 0u;
}

// q_unit adds unit u of row's dot products with the staged activation rows
// (x: the unit's first value of column 0; columns xstride floats apart)
// into acc[0..cols).
template <int F>
inline void q_unit(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride, int cols,
                   thread float* acc);

// q_affine_codes unpacks the 32 codes of an affine unit: BITS words, code
// j at bit j·BITS of their little-endian stream (mlx's packing), so at 3, 5
// and 6 bits a code may straddle two words. The words are read with the
// widest load their alignment allows (a unit starts at a multiple of
// 4·BITS bytes): 16 bytes at 4 and 8 bits, 8 at 2 and 6, 4 at 3 and 5.
template <int BITS> inline void q_affine_codes(device const uchar* unit, thread float* q) {
  uint wd[BITS];
  if (BITS % 4 == 0) {
    for (int h = 0; h < BITS / 4; h++) {
      const uint4 v = ((device const uint4*)unit)[h];
      wd[4 * h] = v.x;
      wd[4 * h + 1] = v.y;
      wd[4 * h + 2] = v.z;
      wd[4 * h + 3] = v.w;
    }
  } else if (BITS % 2 == 0) {
    for (int h = 0; h < BITS / 2; h++) {
      const uint2 v = ((device const uint2*)unit)[h];
      wd[2 * h] = v.x;
      wd[2 * h + 1] = v.y;
    }
  } else {
    for (int h = 0; h < BITS; h++) {
      wd[h] = ((device const uint*)unit)[h];
    }
  }
  for (int j = 0; j < 32; j++) {
    const int w = j * BITS / 32, s = j * BITS % 32;
    uint c = wd[w] >> s;
    if (s + BITS > 32) {
      c |= wd[w + 1] << (32 - s);
    }
    q[j] = float(c & ((1u << BITS) - 1u));
  }
}

// q_scale_raw is scale or bias i's bits (a ushort, or a float's uint);
// q_scale_of their value (q_scale).
inline uint q_scale_raw(device const uchar* s, uint i) {
  return q_scale_dt == 0 ? *((device const uint*)s + i) : uint(*((device const ushort*)s + i));
}
inline float q_scale_of(uint v) {
  return q_scale_dt == 1 ? float(as_type<half>(ushort(v))) : (q_scale_dt == 2 ? as_type<float>(v << 16) : as_type<float>(v));
}

// q_affine_pair gives unit u's scale and bias. Where a row is an even number
// of units (k a multiple of 64), q_rows puts its units in lane pairs, the
// even unit in the even lane, every pair active together: a staged chunk is
// a multiple of 256 values and a row's units start at lane 0 of its lanes
// (its own 32, or an aligned block of at least 2). The pair then shares its
// loads: in groups of 64 or more both units are in one group, so the even
// lane loads the scale and the odd the bias; in groups of 32 the even lane
// loads both units' scales in one load (4-byte aligned: rows of an even
// number of groups, tensors 16-byte aligned) and the odd their biases. Each
// lane takes the other's by simd_shuffle_xor: one load where it read two
// (docs/metal-kernels.md, "Packed weights").
inline void q_affine_pair(QRow row, uint u, constant QMatArgs& a, thread float& sc, thread float& bi) {
  const uint g = u >> a.group_shift;
  if (a.k % 64 != 0) {
    sc = q_scale(row.s, g);
    bi = q_scale(row.b, g);
    return;
  }
  const uint p = u & 1u;
  device const uchar* src = p == 0 ? row.s : row.b;
  uint2 mine; // the pair's two values (groups of 32: units u & ~1 and u | 1), or one twice
  if (a.group_shift == 0) {
    if (q_scale_dt == 0) {
      mine = *((device const uint2*)src + g / 2);
    } else {
      const uint v = *((device const uint*)src + g / 2);
      mine = uint2(v & 0xffffu, v >> 16);
    }
  } else {
    const uint v = q_scale_raw(src, g);
    mine = uint2(v, v);
  }
  const uint2 other = uint2(simd_shuffle_xor(mine.x, 1), simd_shuffle_xor(mine.y, 1));
  const uint2 s2 = p == 0 ? mine : other, b2 = p == 0 ? other : mine;
  sc = q_scale_of(p == 0 ? s2.x : s2.y);
  bi = q_scale_of(p == 0 ? b2.x : b2.y);
}

// Affine: sum of scale·q + bias over the unit's 32 values, one group.
template <int BITS>
inline void q_affine(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride, int cols,
                     thread float* acc) {
  float q[32];
  q_affine_codes<BITS>(row.w + u * 4 * BITS, q);
  float sc, bi;
  q_affine_pair(row, u, a, sc, bi);
  for (int c = 0; c < cols; c++) {
    threadgroup const float* xc = x + c * xstride;
    float d = 0.0f, sx = 0.0f;
    for (int i = 0; i < 32; i++) {
      d += xc[i] * q[i];
      sx += xc[i];
    }
    acc[c] += sc * d + bi * sx;
  }
}

#define Q_UNIT_AFFINE(F, BITS)                                                                                   \
  template <>                                                                                                    \
  inline void q_unit<F>(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,       \
                        int cols, thread float* acc) {                                                           \
    q_affine<BITS>(row, u, a, x, xstride, cols, acc);                                                            \
  }
Q_UNIT_AFFINE(QF_AFFINE4, 4)
Q_UNIT_AFFINE(QF_AFFINE8, 8)
Q_UNIT_AFFINE(QF_AFFINE2, 2)
Q_UNIT_AFFINE(QF_AFFINE3, 3)
Q_UNIT_AFFINE(QF_AFFINE5, 5)
Q_UNIT_AFFINE(QF_AFFINE6, 6)

template <>
inline void q_unit<QF_Q8_0>(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,
                            int cols, thread float* acc) {
  uint qw[8];
  const float d = q_block_words<8>(row.w + u * 34, row.w8 + u * 34, qw);
  float q[32];
  for (int i = 0; i < 32; i++) {
    q[i] = float(int(qw[i / 4] << (24 - 8 * (i % 4))) >> 24);
  }
  for (int c = 0; c < cols; c++) {
    threadgroup const float* xc = x + c * xstride;
    float s = 0.0f;
    for (int i = 0; i < 32; i++) {
      s += xc[i] * q[i];
    }
    acc[c] += d * s;
  }
}

template <>
inline void q_unit<QF_Q4_0>(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,
                            int cols, thread float* acc) {
  uint qw[4];
  const float d = q_block_words<4>(row.w + u * 18, row.w8 + u * 18, qw);
  float q[32];
  for (int i = 0; i < 16; i++) {
    const uint b = (qw[i / 4] >> (8 * (i % 4))) & 0xffu;
    q[i] = float(int(b & 0xfu) - 8);
    q[i + 16] = float(int(b >> 4) - 8);
  }
  for (int c = 0; c < cols; c++) {
    threadgroup const float* xc = x + c * xstride;
    float s = 0.0f;
    for (int i = 0; i < 32; i++) {
      s += xc[i] * q[i];
    }
    acc[c] += d * s;
  }
}

// Q4_K's sub-block j scale and min (ggml's get_scale_min_k4).
inline void q4k_scale_min(int j, thread const uchar* q, thread float& sc, thread float& m) {
  if (j < 4) {
    sc = float(q[j] & 63);
    m = float(q[j + 4] & 63);
  } else {
    sc = float((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
    m = float((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q4_K, unit u: chunk j = u%4 of super-block u/4, sub-block 2j in its 32
// bytes' low nibbles and 2j+1 in their high ones. Their 6-bit scales and
// mins (q4k_scale_min) take scale bytes 2j, 2j+1, 2j+4, 2j+5 and, from
// j = 2 on, 2j-4, 2j-3, a count that differs between units: so the four
// units of a super-block each load one word of its 16-byte header (d and
// dmin, then the 12 scale bytes), word j, and take the other three from
// their neighbours by simd_shuffle_xor. They sit in lanes 4m..4m+3 in
// order, every lane active: a row's units start at lane 0 of its lanes
// (q_rows: its own 32 or an aligned block of at least 4), a staged chunk
// is a multiple of 256 values, and a row's units a multiple of 4. Every
// lane issues the same three loads, 36 bytes a unit where ushorts read 40
// or 42 in 5 or 6 (docs/metal-kernels.md, "Packed weights").
template <>
inline void q_unit<QF_Q4_K>(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,
                            int cols, thread float* acc) {
  device const uchar* blk = row.w + (u / 4) * 144;
  const uint j = u % 4;
  const uint hv = *(device const uint*)(blk + 4 * j);
  const uint h1 = simd_shuffle_xor(hv, 1), h2 = simd_shuffle_xor(hv, 2), h3 = simd_shuffle_xor(hv, 3);
  uint hw[4]; // word k of the header comes from the lane of unit k: j ^ (j ^ k)
  for (uint k = 0; k < 4; k++) {
    const uint m = j ^ k;
    hw[k] = m == 0 ? hv : (m == 1 ? h1 : (m == 2 ? h2 : h3));
  }
  const float2 dm = float2(as_type<half2>(hw[0]));
  uchar sc[12];
  for (int i = 0; i < 12; i++) {
    sc[i] = uchar((hw[1 + i / 4] >> (8 * (i % 4))) & 0xffu);
  }
  device const uint4* p = (device const uint4*)(blk + 16 + 32 * j);
  const uint4 q0 = p[0], q1 = p[1];
  const uint qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
  float lo[32], hi[32];
  for (int i = 0; i < 32; i++) {
    const uint byte = (qw[i / 4] >> (8 * (i % 4))) & 0xffu;
    lo[i] = float(byte & 0xfu);
    hi[i] = float(byte >> 4);
  }
  float s1, m1, s2, m2;
  q4k_scale_min(int(2 * j), sc, s1, m1);
  q4k_scale_min(int(2 * j + 1), sc, s2, m2);
  for (int c = 0; c < cols; c++) {
    threadgroup const float* xc = x + c * xstride;
    float dl = 0.0f, dh = 0.0f, sl = 0.0f, sh = 0.0f;
    for (int i = 0; i < 32; i++) {
      dl += xc[i] * lo[i];
      sl += xc[i];
      dh += xc[32 + i] * hi[i];
      sh += xc[32 + i];
    }
    acc[c] += dm.x * (s1 * dl + s2 * dh) - dm.y * (m1 * sl + m2 * sh);
  }
}

// Q5_K (176 bytes: f16 d and dmin, Q4_K's 12 scale bytes, 32 bytes of
// fifth bits, 128 of nibbles as Q4_K's), unit u: 64 values of super-block
// u/4, half n = u/2%2 (sub-blocks 4n..4n+3), its positions l in [16h,
// 16h+16) (h = u%2) of each of the half's four 32-value sub-blocks. Value
// 32k+l of the half has its nibble in byte l of chunk 2n + k/2 (low for k
// even, high for k odd) and its fifth bit at bit 4n+k of qh byte l. So a
// unit is 32 bytes of nibbles, 16 of fifth bits and the 16-byte header in
// four 16-byte loads; each fifth-bit byte is read by the two units of its
// positions, as by the two halves of a 128-value unit, and a row of 768
// values is 12 units (docs/metal-kernels.md, "Short rows").
template <>
inline void q_unit<QF_Q5_K>(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,
                            int cols, thread float* acc) {
  device const uchar* blk = row.w + (u / 4) * 176;
  const uint n = (u / 2) % 2, h = u % 2;
  device const uint4* p = (device const uint4*)blk;
  const uint4 head = p[0], qh = p[1 + h];
  const float2 dm = float2(as_type<half2>(head.x));
  const uint sw[3] = {head.y, head.z, head.w};
  uchar sc[12];
  for (int i = 0; i < 12; i++) {
    sc[i] = uchar((sw[i / 4] >> (8 * (i % 4))) & 0xffu);
  }
  const uint hw[4] = {qh.x, qh.y, qh.z, qh.w};
  threadgroup const float* xh = x - 64 * h; // the half's first value: x is the unit's (u·64)
  for (uint c2 = 0; c2 < 2; c2++) {         // chunk 2n + c2: sub-blocks 4n + 2·c2 (low nibbles) and one more
    const uint4 q = p[3 + 2 * (2 * n + c2) + h];
    const uint qw[4] = {q.x, q.y, q.z, q.w};
    const uint j = 4 * n + 2 * c2;
    float lo[16], hi[16];
    for (int i = 0; i < 16; i++) {
      const uint byte = (qw[i / 4] >> (8 * (i % 4))) & 0xffu;
      const uint b5 = (hw[i / 4] >> (8 * (i % 4))) >> j;
      lo[i] = float((byte & 0xfu) | ((b5 & 1u) << 4));
      hi[i] = float((byte >> 4) | ((b5 & 2u) << 3));
    }
    float s1, m1, s2, m2;
    q4k_scale_min(int(j), sc, s1, m1);
    q4k_scale_min(int(j + 1), sc, s2, m2);
    for (int c = 0; c < cols; c++) {
      threadgroup const float* xc = xh + c * xstride + 64 * c2 + 16 * h;
      float dl = 0.0f, dh = 0.0f, sl = 0.0f, sh = 0.0f;
      for (int i = 0; i < 16; i++) {
        dl += xc[i] * lo[i];
        sl += xc[i];
        dh += xc[32 + i] * hi[i];
        sh += xc[32 + i];
      }
      acc[c] += dm.x * (s1 * dl + s2 * dh) - dm.y * (m1 * sl + m2 * sh);
    }
  }
}

// q3k_scale is Q3_K's 6-bit scale i (of 16) from its 12 scale bytes: the
// low 4 bits from byte i%8 (its high nibble from i = 8 on), the high 2 from
// byte 8 + i%4 at bit 2·(i/4).
inline int q3k_scale(int i, thread const uchar* sc) {
  const uint lo = (uint(sc[i % 8]) >> (4 * (i / 8))) & 0xfu;
  const uint hi = (uint(sc[8 + i % 4]) >> (2 * (i / 4))) & 3u;
  return int(lo | (hi << 4));
}

// Q3_K (110 bytes, 2-byte aligned): 32 bytes of high bits (hm), 64 of
// 2-bit values (qs), 12 of 6-bit scales, f16 d. Value 128n + 32j + l
// (j < 4) takes 2 bits from qs[32n + l] at bit 2j, the third from hm[l] at
// bit 4n + j (clear: q − 4), and scale 8n + 2j + l/16 (less 32); w =
// d·scale·q. Unit u: the 64 values of super-block u/4 with n = u/2%2 and l
// in [16p, 16p+16) (p = u%2): 16 bytes of qs and 16 of hm (runs at the
// block's alignment mod 8: q_run_words, 4 loads each), 6 scale bytes
// (uchars) and d. hm's and the scales' bytes hold both halves' bits, so
// both n read them, as the half-block unit did (docs/metal-kernels.md,
// "Short rows" and "Packed weights").
template <>
inline void q_unit<QF_Q3_K>(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,
                            int cols, thread float* acc) {
  const uint b = (u / 4) * 110;
  device const uchar* blk = row.w + b;
  const uint n = (u / 2) % 2, p = u % 2, w8 = row.w8 + b;
  const float d = q_half(blk + 108);
  uint hm[4], qs[4];
  q_run_words<4>(blk + 16 * p, w8, hm);
  q_run_words<4>(blk + 32 + 32 * n + 16 * p, w8, qs);
  // Scale i = 8n + 2j + p: its low nibble is nibble n of byte 2j + p, its
  // high pair bits 2(2n + j/2) of byte 8 + (2j + p)%4.
  const uint sh[2] = {blk[104 + p], blk[106 + p]};
  threadgroup const float* xh = x - 64 * p; // the half's first value: x is the unit's (u·64)
  for (int j = 0; j < 4; j++) {
    const uint lo = (uint(blk[96 + 2 * j + p]) >> (4 * n)) & 0xfu;
    const uint hi = (sh[j % 2] >> (2 * (2 * n + j / 2))) & 3u;
    const float s = d * float(int(lo | (hi << 4)) - 32);
    float q[16];
    for (int l = 0; l < 16; l++) {
      const uint sh8 = 8 * (l % 4);
      const int v = int((qs[l / 4] >> (sh8 + 2 * j)) & 3u);
      q[l] = float(((hm[l / 4] >> (sh8 + 4 * n + j)) & 1u) ? v : v - 4);
    }
    for (int c = 0; c < cols; c++) {
      threadgroup const float* xc = xh + c * xstride + 32 * j + 16 * p;
      float acq = 0.0f;
      for (int l = 0; l < 16; l++) {
        acq += xc[l] * q[l];
      }
      acc[c] += s * acq;
    }
  }
}

// IQ4_NL's 16 levels (kernels/quant IQ4NLLevels), which IQ4_XS shares.
constant float iq4nl_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// iq4_levels writes the 32 values of 16 bytes of IQ4 indices as Q4_0 orders
// them (value j byte j's low nibble, value j+16 its high one), from four
// words.
inline void iq4_levels(thread const uint* w, thread float* q) {
  for (int i = 0; i < 16; i++) {
    const uint b = (w[i / 4] >> (8 * (i % 4))) & 0xffu;
    q[i] = iq4nl_levels[b & 0xfu];
    q[i + 16] = iq4nl_levels[b >> 4];
  }
}

// IQ4_NL (18 bytes, 2-byte aligned: Q4_0's layout, q_block_words), unit u:
// block u, f16 d and 16 bytes of indices; w = d·level.
template <>
inline void q_unit<QF_IQ4_NL>(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,
                              int cols, thread float* acc) {
  uint w[4];
  const float d = q_block_words<4>(row.w + u * 18, row.w8 + u * 18, w);
  float q[32];
  iq4_levels(w, q);
  for (int c = 0; c < cols; c++) {
    threadgroup const float* xc = x + c * xstride;
    float s = 0.0f;
    for (int i = 0; i < 32; i++) {
      s += xc[i] * q[i];
    }
    acc[c] += d * s;
  }
}

// IQ4_XS (136 bytes, 8-byte aligned): f16 d, 16 bits of scales' high pairs,
// 4 bytes of their low nibbles, 128 bytes of indices. Unit u: sub-block
// b = u%8 of super-block u/8, its 16 index bytes (two 8-byte loads) and the
// 8-byte header; w = d·(scale − 32)·level.
template <>
inline void q_unit<QF_IQ4_XS>(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,
                              int cols, thread float* acc) {
  device const uchar* blk = row.w + (u / 8) * 136;
  const uint b = u % 8;
  device const uint2* p = (device const uint2*)blk;
  const uint2 head = p[0], q0 = p[1 + 2 * b], q1 = p[2 + 2 * b];
  const uint ls = ((head.y >> (4 * b)) & 0xfu) | (((head.x >> (16 + 2 * b)) & 3u) << 4);
  const float dl = float(as_type<half>(ushort(head.x & 0xffffu))) * float(int(ls) - 32);
  const uint w[4] = {q0.x, q0.y, q1.x, q1.y};
  float q[32];
  iq4_levels(w, q);
  for (int c = 0; c < cols; c++) {
    threadgroup const float* xc = x + c * xstride;
    float s = 0.0f;
    for (int i = 0; i < 32; i++) {
      s += xc[i] * q[i];
    }
    acc[c] += dl * s;
  }
}

// MXFP4's E2M1 values (kernels/quant MXFP4Levels, halved).
constant float mxfp4_values[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};

// mxfp4_scale is 2^(e−127) for an E8M0 exponent e (0: the f32 subnormal
// 2^−127, as ggml's e8m0 conversion).
inline float mxfp4_scale(uint e) { return as_type<float>(e == 0 ? 0x00400000u : e << 23); }

// MXFP4 (17 bytes, byte aligned), unit u: block u, its exponent and 16
// bytes of codes in Q4_0's order (a run at any alignment mod 8, the
// exponent the byte before it: q_run_words<4, 1, true>, 5 loads where
// uchars took 17); w = E2M1(code)·2^(e−127).
template <>
inline void q_unit<QF_MXFP4>(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,
                             int cols, thread float* acc) {
  uint qw[4];
  const float d = mxfp4_scale(q_run_words<4, 1, true>(row.w + u * 17 + 1, row.w8 + u * 17 + 1, qw));
  float q[32];
  for (int i = 0; i < 16; i++) {
    const uint b = (qw[i / 4] >> (8 * (i % 4))) & 0xffu;
    q[i] = mxfp4_values[b & 0xfu];
    q[i + 16] = mxfp4_values[b >> 4];
  }
  for (int c = 0; c < cols; c++) {
    threadgroup const float* xc = x + c * xstride;
    float s = 0.0f;
    for (int i = 0; i < 32; i++) {
      s += xc[i] * q[i];
    }
    acc[c] += d * s;
  }
}

// e4m3_value is an E4M3 byte's value as mlx reads it (kernels/quant
// E4M3ToF32): its low seven bits as the top of an f16's, times 256.
inline float e4m3_value(uint b) {
  return float(as_type<half>(ushort(((b & 0x80u) << 8) | ((b & 0x7fu) << 7)))) * 256.0f;
}

// NVFP4 (mlx's nvfp4: a row's codes, value i in nibble i, then its E4M3
// scales, one a group of 16), unit u: its 16 bytes of codes at a 16-byte
// aligned offset, one load, and its two groups' scales, one ushort after
// the row's codes; w = E2M1(code)·E4M3(scale).
template <>
inline void q_unit<QF_NVFP4>(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,
                             int cols, thread float* acc) {
  const uint4 v = ((device const uint4*)row.w)[u];
  const uint sc = ((device const ushort*)(row.w + a.k / 2))[u];
  const uint wd[4] = {v.x, v.y, v.z, v.w};
  float q[32];
  for (int i = 0; i < 4; i++) {
    for (int j = 0; j < 8; j++) {
      q[8 * i + j] = mxfp4_values[(wd[i] >> (4 * j)) & 0xfu];
    }
  }
  const float s0 = e4m3_value(sc & 0xffu), s1 = e4m3_value(sc >> 8);
  for (int c = 0; c < cols; c++) {
    threadgroup const float* xc = x + c * xstride;
    float d0 = 0.0f, d1 = 0.0f;
    for (int i = 0; i < 16; i++) {
      d0 += xc[i] * q[i];
      d1 += xc[i + 16] * q[i + 16];
    }
    acc[c] += s0 * d0 + s1 * d1;
  }
}

// MXFP8 (mlx's mxfp8: a row's E4M3 values, then its E8M0 exponents, one a
// group of 32), unit u: its 32 values at a 16-byte aligned offset, two
// loads, and its exponent, one byte after the row's values;
// w = E4M3(q)·2^(e−127).
template <>
inline void q_unit<QF_MXFP8>(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,
                             int cols, thread float* acc) {
  device const uint4* p = (device const uint4*)(row.w + u * 32);
  const uint4 v0 = p[0], v1 = p[1];
  const uint wd[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
  float q[32];
  for (int i = 0; i < 32; i++) {
    q[i] = e4m3_value((wd[i / 4] >> (8 * (i % 4))) & 0xffu);
  }
  const float d = mxfp4_scale(row.w[a.k + u]);
  for (int c = 0; c < cols; c++) {
    threadgroup const float* xc = x + c * xstride;
    float s = 0.0f;
    for (int i = 0; i < 32; i++) {
      s += xc[i] * q[i];
    }
    acc[c] += d * s;
  }
}

// Q6_K, unit u: 64 values of super-block u/4 (210 bytes, 2-byte aligned),
// half n = u/2%2, its positions l in [16h, 16h+16) (h = u%2) of each of the
// half's four 32-value quarters: value 32q+l has its low nibble in byte l
// (q even) or l+32 (q odd) of the half's 64 (q < 2 low, else high), its
// high pair in bits 2q of byte l of the half's 32, and the scale of its 16
// values. So a unit reads three 16-byte runs (two of nibbles, one of high
// pairs, each at the block's alignment mod 8: q_run_words, 4 loads each), 4
// scale bytes (every other byte: uchars) and d, each byte but d by one unit
// only, and a row of 768 values is 12 units (docs/metal-kernels.md, "Short
// rows" and "Packed weights").
template <>
inline void q_unit<QF_Q6_K>(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,
                            int cols, thread float* acc) {
  const uint b = (u / 4) * 210;
  device const uchar* blk = row.w + b;
  const uint n = (u / 2) % 2, h = u % 2, w8 = row.w8 + b;
  const float d = q_half(blk + 208);
  uint lo[8], qh[4]; // lo[0..4): bytes 16h.. of the half's nibbles, lo[4..8): 32 + 16h..
  q_run_words<4>(blk + 64 * n + 16 * h, w8, lo);
  q_run_words<4>(blk + 64 * n + 32 + 16 * h, w8, lo + 4);
  q_run_words<4>(blk + 128 + 32 * n + 16 * h, w8, qh);
  threadgroup const float* xh = x - 64 * h; // the half's first value: x is the unit's (u·64)
  for (int qq = 0; qq < 4; qq++) {         // quarter: values 32·qq + 16h.. of the half
    const float s = d * float(as_type<char>(blk[192 + 8 * n + 2 * qq + h])); // its 16 values' scale
    float q[16];
    for (int l = 0; l < 16; l++) {
      const uint lq = (lo[4 * (qq & 1) + l / 4] >> (8 * (l % 4))) & 0xffu;
      const uint low = qq < 2 ? (lq & 0xfu) : (lq >> 4);
      const uint hi = (qh[l / 4] >> (8 * (l % 4) + 2 * qq)) & 3u;
      q[l] = float(int(low | (hi << 4)) - 32);
    }
    for (int c = 0; c < cols; c++) {
      threadgroup const float* xc = xh + c * xstride + 32 * qq + 16 * h;
      float acq = 0.0f;
      for (int l = 0; l < 16; l++) {
        acq += xc[l] * q[l];
      }
      acc[c] += s * acq;
    }
  }
}

// Q2_K: 16 scale bytes (4-bit scale, 4-bit min per 16 values), 64 bytes of
// 2-bit values, f16 d and dmin (84-byte blocks keep 4-byte alignment). Half
// n's 32 bytes hold four 2-bit planes: plane j of bytes 16p..16p+15 is
// sub-block 8n + 2j + p, values 128n + 32j + 16p.., whose scale byte is
// 8n + 2j + p. Unit u: the 64 values of super-block u/4 with n = u/2%2 and
// p = u%2, its 16 bytes of values (a run at the block's alignment mod 8, 0
// or 4: q_run_words<4, 4>, an 8-byte word and two uints where four uints
// took four loads), 4 scale bytes (every other byte: uchars) and d and dmin
// (one uint) (docs/metal-kernels.md, "Short rows" and "Packed weights").
template <>
inline void q_unit<QF_Q2_K>(QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,
                            int cols, thread float* acc) {
  const uint b = (u / 4) * 84;
  device const uchar* blk = row.w + b;
  const uint n = (u / 2) % 2, p = u % 2;
  const float2 dm = float2(as_type<half2>(*(device const uint*)(blk + 80)));
  uint qw[4];
  q_run_words<4, 4>(blk + 16 + 32 * n + 16 * p, row.w8 + b, qw);
  threadgroup const float* xh = x - 64 * p; // the half's first value: x is the unit's (u·64)
  for (int j = 0; j < 4; j++) {
    const uint sc = blk[8 * n + 2 * j + p];
    const float dj = dm.x * float(sc & 0xfu), mj = dm.y * float(sc >> 4);
    float q[16];
    for (int l = 0; l < 16; l++) {
      q[l] = float((qw[l / 4] >> (8 * (l % 4) + 2 * j)) & 3u);
    }
    for (int c = 0; c < cols; c++) {
      threadgroup const float* xc = xh + c * xstride + 32 * j + 16 * p;
      float aq = 0.0f, ax = 0.0f;
      for (int l = 0; l < 16; l++) {
        aq += xc[l] * q[l];
        ax += xc[l];
      }
      acc[c] += dj * aq - mj * ax;
    }
  }
}

// ---------------------------------------------------------------------------
// The IQ grid formats (kernels/quant iq.go, which defines their layouts):
// unit u is values 32·(u%8).. of super-block u/8. The super-blocks are
// 2-byte aligned (66, 74, 82, 98, 110, 50 bytes: a unit's 8-byte runs of
// indices in q_run_words<2>'s uint and two ushorts, 4-byte runs as two
// ushorts, single bytes as uchars), IQ1_M's 8 (56 bytes: uints). q_iq
// decodes unit j of super-block b into 32 signed codes (grid values, or
// IQ1's 8·g ± 1) and the scales of its two halves, w = s·code, reading only
// the unit's bytes and d.
// ---------------------------------------------------------------------------

// q_ksign is sign mask s of IQ2_XXS, IQ2_XS and IQ3_XXS: 7 stored bits, the
// eighth their parity (ggml's ksigns_iq2xs, computed: no table to read).
inline uint q_ksign(uint s) {
  s &= 127u;
  return s | (popcount(s) & 1u) << 7;
}

// q_u32 is the little-endian uint at p, a 2-byte aligned address.
inline uint q_u32(device const uchar* p) {
  device const ushort* h = (device const ushort*)p;
  return uint(h[0]) | uint(h[1]) << 16;
}

// q_grid8 writes grid row g's 8 values (byte j, unsigned) into q, negated
// where bit j of sign is set; q_grid4 likewise for a 4-value row.
inline void q_grid8(ulong g, uint sign, thread float* q) {
  for (int j = 0; j < 8; j++) {
    const float v = float(uint(g >> (8 * j)) & 0xffu);
    q[j] = (sign >> j) & 1u ? -v : v;
  }
}
inline void q_grid4(uint g, uint sign, thread float* q) {
  for (int j = 0; j < 4; j++) {
    const float v = float((g >> (8 * j)) & 0xffu);
    q[j] = (sign >> j) & 1u ? -v : v;
  }
}

// q_grid1 writes IQ1 grid row g's codes 8·g + off (g's bytes are int8 -1, 0,
// 1; off ±1, IQ1Delta in eighths) into q.
inline void q_grid1(ulong g, int off, thread float* q) {
  for (int j = 0; j < 8; j++) {
    q[j] = float(8 * int(as_type<char>(uchar(g >> (8 * j)))) + off);
  }
}

// The grids' accessors: q_iq reads row i of its format's grid as grid[i],
// from the program-scope constant (QGridConst) or from a copy in
// threadgroup memory (QGridShared), wherever its kernel keeps the grid
// (QMVGrid; docs/metal-kernels.md, "IQ formats").
template <int F> struct QGridConst;
template <> struct QGridConst<QF_IQ2_XXS> {
  using row = ulong;
  static constant constexpr uint rows = 256;
  row operator[](uint i) const { return iq2xxs_grid[i]; }
};
template <> struct QGridConst<QF_IQ2_XS> {
  using row = ulong;
  static constant constexpr uint rows = 512;
  row operator[](uint i) const { return iq2xs_grid[i]; }
};
template <> struct QGridConst<QF_IQ2_S> {
  using row = ulong;
  static constant constexpr uint rows = 1024;
  row operator[](uint i) const { return iq2s_grid[i]; }
};
template <> struct QGridConst<QF_IQ3_XXS> {
  using row = uint;
  static constant constexpr uint rows = 256;
  row operator[](uint i) const { return iq3xxs_grid[i]; }
};
template <> struct QGridConst<QF_IQ3_S> {
  using row = uint;
  static constant constexpr uint rows = 512;
  row operator[](uint i) const { return iq3s_grid[i]; }
};
template <> struct QGridConst<QF_IQ1_S> {
  using row = ulong;
  static constant constexpr uint rows = 2048;
  row operator[](uint i) const { return iq1s_grid[i]; }
};
template <> struct QGridConst<QF_IQ1_M> : QGridConst<QF_IQ1_S> {}; // IQ1_S's grid

template <class T> struct QGridShared {
  threadgroup const T* rows;
  T operator[](uint i) const { return rows[i]; }
};

// q_iq(QFormat<F>(), grid, b, w8, j, q, s0, s1) decodes unit j of F's
// super-block b, w8 its offset mod 8 from its bound buffer (QRow), which
// places the 8-byte index runs' loads (q_run_words<2>) (overloads by
// format, each templated on its grid's accessor G).
template <int F> struct QFormat {};

// IQ2_XXS: unit j is 8 bytes at 2+8j: four grid indices, then four 7-bit
// sign masks under a 4-bit scale.
template <class G>
inline void q_iq(QFormat<QF_IQ2_XXS>, G grid, device const uchar* b, uint w8, uint j, thread float* q,
                 thread float& s0, thread float& s1) {
  uint r[2];
  q_run_words<2>(b + 2 + 8 * j, w8 + 2 + 8 * j, r);
  const uint idx = r[0], aux = r[1];
  for (int l = 0; l < 4; l++) {
    q_grid8(grid[(idx >> (8 * l)) & 255u], q_ksign(aux >> (7 * l)), q + 8 * l);
  }
  s0 = s1 = q_half(b) * (0.5f + float(aux >> 28)) * 0.25f;
}

// q_iq2_halves gives an IQ2_XS or IQ2_S unit's half scales: d·(0.5 + s)/4
// for the low and high nibble of its scale byte.
inline void q_iq2_halves(float d, uint sc, thread float& s0, thread float& s1) {
  s0 = d * (0.5f + float(sc & 15u)) * 0.25f;
  s1 = d * (0.5f + float(sc >> 4)) * 0.25f;
}

// IQ2_XS: four ushorts at 2+8j (9-bit index, 7-bit sign mask) and scale
// byte 66+j, a nibble a half.
template <class G>
inline void q_iq(QFormat<QF_IQ2_XS>, G grid, device const uchar* b, uint w8, uint j, thread float* q,
                 thread float& s0, thread float& s1) {
  uint r[2];
  q_run_words<2>(b + 2 + 8 * j, w8 + 2 + 8 * j, r);
  for (int l = 0; l < 4; l++) {
    const uint v = (r[l / 2] >> (16 * (l % 2))) & 0xffffu;
    q_grid8(grid[v & 511u], q_ksign(v >> 9), q + 8 * l);
  }
  q_iq2_halves(q_half(b), b[66 + j], s0, s1);
}

// IQ2_S: index bytes 2+4j.., sign bytes 34+4j.., the indices' high bit
// pairs in byte 66+j and the scale nibbles in byte 74+j (the GEMVs share
// the block's words: q_iq_gemv). q_iq2s decodes unit j from d and them.
template <class G>
inline void q_iq2s(G grid, float d, uint qs, uint signs, uint qh, uint sc, thread float* q, thread float& s0,
                   thread float& s1) {
  for (int l = 0; l < 4; l++) {
    const uint i = ((qs >> (8 * l)) & 255u) | ((qh >> (2 * l)) & 3u) << 8;
    q_grid8(grid[i], (signs >> (8 * l)) & 255u, q + 8 * l);
  }
  q_iq2_halves(d, sc, s0, s1);
}
template <class G>
inline void q_iq(QFormat<QF_IQ2_S>, G grid, device const uchar* b, uint w8, uint j, thread float* q,
                 thread float& s0, thread float& s1) {
  q_iq2s(grid, q_half(b), q_u32(b + 2 + 4 * j), q_u32(b + 34 + 4 * j), b[66 + j], b[74 + j], q, s0, s1);
}

// IQ3_XXS: eight index bytes at 2+8j (4-value rows), and at 66+4j four
// 7-bit sign masks (one per 8 values) under a 4-bit scale.
template <class G>
inline void q_iq(QFormat<QF_IQ3_XXS>, G grid, device const uchar* b, uint w8, uint j, thread float* q,
                 thread float& s0, thread float& s1) {
  uint r[2];
  q_run_words<2>(b + 2 + 8 * j, w8 + 2 + 8 * j, r);
  const uint aux = q_u32(b + 66 + 4 * j);
  for (int l = 0; l < 4; l++) {
    const uint v = (r[l / 2] >> (16 * (l % 2))) & 0xffffu, sign = q_ksign(aux >> (7 * l));
    q_grid4(grid[v & 255u], sign, q + 8 * l);
    q_grid4(grid[v >> 8], sign >> 4, q + 8 * l + 4);
  }
  s0 = s1 = q_half(b) * (0.5f + float(aux >> 28)) * 0.5f;
}

// IQ3_S: eight index bytes at 2+8j with their high bits in byte 66+j, four
// sign bytes at 74+4j (a nibble a row), the scale nibble j of bytes 106...
template <class G>
inline void q_iq(QFormat<QF_IQ3_S>, G grid, device const uchar* b, uint w8, uint j, thread float* q,
                 thread float& s0, thread float& s1) {
  uint qs[2]; // each byte read once
  q_run_words<2>(b + 2 + 8 * j, w8 + 2 + 8 * j, qs);
  const uint qh = b[66 + j], signs = q_u32(b + 74 + 4 * j);
  for (int l = 0; l < 8; l++) {
    const uint i = ((qs[l / 4] >> (8 * (l % 4))) & 255u) | ((qh >> l) & 1u) << 8;
    q_grid4(grid[i], signs >> (4 * l), q + 4 * l);
  }
  const uint sc = (uint(b[106 + j / 2]) >> (4 * (j % 2))) & 15u;
  s0 = s1 = q_half(b) * float(1u + 2u * sc);
}

// IQ1_S: four index bytes at 2+4j, and the ushort at 34+2j: four 3-bit
// high index parts, a 3-bit scale and the sign of the unit's offset (the
// GEMVs share the block's words: q_iq_gemv). q_iq1s decodes unit j from d,
// its index word qs and its ushort qh.
template <class G>
inline void q_iq1s(G grid, float d, uint qs, uint qh, thread float* q, thread float& s0, thread float& s1) {
  const int off = qh & 0x8000u ? -1 : 1;
  for (int l = 0; l < 4; l++) {
    q_grid1(grid[((qs >> (8 * l)) & 255u) | ((qh >> (3 * l)) & 7u) << 8], off, q + 8 * l);
  }
  s0 = s1 = d * float(2u * ((qh >> 12) & 7u) + 1u) * 0.125f;
}
template <class G>
inline void q_iq(QFormat<QF_IQ1_S>, G grid, device const uchar* b, uint w8, uint j, thread float* q,
                 thread float& s0, thread float& s1) {
  const uint qs = q_u32(b + 2 + 4 * j), qh = *(device const ushort*)(b + 34 + 2 * j);
  q_iq1s(grid, q_half(b), qs, qh, q, s0, s1);
}

// IQ1_M (56 bytes: uints): four index bytes at 4j, a nibble per row at
// 32+2j (3 high index bits, the offset's sign), and four scale ushorts at
// 48, ushort j/2 holding the unit's two 3-bit scales; d is their top
// nibbles, so a unit reads its own ushort and the other three's high bytes
// (the GEMVs share the block's words: q_iq_gemv). q_iq1m decodes unit j from
// its index word qs, its nibbles qh, its scale ushort sw and d's nibbles dh.
template <class G>
inline void q_iq1m(G grid, uint qs, uint qh, uint sw, uint dh, uint j, thread float* q, thread float& s0,
                   thread float& s1) {
  const float d = float(as_type<half>(ushort(dh)));
  for (int l = 0; l < 4; l++) {
    const uint nib = (qh >> (4 * l)) & 15u;
    q_grid1(grid[((qs >> (8 * l)) & 255u) | (nib & 7u) << 8], nib & 8u ? -1 : 1, q + 8 * l);
  }
  const uint s = sw >> (6 * (j % 2));
  s0 = d * float(2u * (s & 7u) + 1u) * 0.125f;
  s1 = d * float(2u * ((s >> 3) & 7u) + 1u) * 0.125f;
}
template <class G>
inline void q_iq(QFormat<QF_IQ1_M>, G grid, device const uchar* b, uint w8, uint j, thread float* q,
                 thread float& s0, thread float& s1) {
  const uint qs = *(device const uint*)(b + 4 * j), qh = *(device const ushort*)(b + 32 + 2 * j);
  const uint sw = *(device const ushort*)(b + 48 + 2 * (j / 2));
  uint dh = 0;
  for (uint i = 0; i < 4; i++) {
    dh |= (i == j / 2 ? sw >> 12 : uint(b[49 + 2 * i]) >> 4) << (4 * i);
  }
  q_iq1m(grid, qs, qh, sw, dh, j, q, s0, s1);
}

// q_iq_gemv is q_iq for a GEMV's unit (q_iq_unit), whose super-block's
// eight units sit in lanes 8m..8m+7 in order, every lane active: a row's
// units start at lane 0 of its lanes (q_rows: its own 32 or an aligned
// block of at least 8), a staged chunk is a multiple of 256 values, so is
// a row. IQ2_S, IQ1_S and IQ1_M, whose units read a few bytes each in 7, 4
// and 6 loads, share their block's loads there: each unit loads a piece
// of it (two in IQ2_S) and takes the others' by simd_shuffle_xor
// (docs/metal-kernels.md, "IQ formats").
template <int F, class G>
inline void q_iq_gemv(QFormat<F> f, G grid, device const uchar* b, uint w8, uint j, thread float* q,
                      thread float& s0, thread float& s1) {
  q_iq(f, grid, b, w8, j, q, s0, s1);
}

// q_block_lanes gives each of a super-block's eight lanes (unit j in lane
// 8m + j) every lane's piece: W[k] is unit k's, by simd_shuffle_xor.
inline void q_block_lanes(uint2 mine, uint j, thread uint2* W) {
  for (uint k = 0; k < 8; k++) {
    W[k] = mine;
  }
  for (uint m = 1; m < 8; m++) {
    const uint2 v = uint2(simd_shuffle_xor(mine.x, ushort(m)), simd_shuffle_xor(mine.y, ushort(m)));
    for (uint k = 0; k < 8; k++) {
      W[k] = (j ^ m) == k ? v : W[k];
    }
  }
}

// IQ1_M's 56-byte blocks are 8-byte aligned: unit j loads the block's
// 8-byte word j (unit 7 word 6 again, so every lane loads) and takes the
// words it needs, its index word, its nibbles and the four scale ushorts:
// one load a unit where it read six, 64 bytes a block where it read 88.
template <class G>
inline void q_iq_gemv(QFormat<QF_IQ1_M>, G grid, device const uchar* b, uint w8, uint j, thread float* q,
                      thread float& s0, thread float& s1) {
  uint2 W[8]; // unit k's word: the block's 8-byte word k (unit 7's: word 6)
  q_block_lanes(*((device const uint2*)b + min(j, 6u)), j, W);
  uint2 wq = W[0], wh = W[4]; // the words holding index word j (block word j) and nibbles j (word 8 + j/2)
  for (uint k = 1; k < 4; k++) {
    wq = j / 2 == k ? W[k] : wq;
  }
  wh = j >= 4 ? W[5] : wh;
  const uint qs = j % 2 == 0 ? wq.x : wq.y;
  const uint hw = (j / 2) % 2 == 0 ? wh.x : wh.y, qh = (hw >> (16 * (j % 2))) & 0xffffu;
  const uint2 sc = W[6]; // the four scale ushorts
  const uint sv = j / 4 == 0 ? sc.x : sc.y, sw = (sv >> (16 * ((j / 2) % 2))) & 0xffffu;
  const uint dh = (sc.x >> 12 & 0xfu) | (sc.x >> 28) << 4 | (sc.y >> 12 & 0xfu) << 8 | (sc.y >> 28) << 12;
  q_iq1m(grid, qs, qh, sw, dh, j, q, s0, s1);
}
// IQ1_S's 50-byte blocks (2 + 4·12, 2-byte aligned) are q_block_words<12>'s
// eight pieces at the block's alignment (five 8-byte words, two uints and a
// ushort): unit j loads piece j, and each assembles the block's words from
// all eight, one load a unit where it read four, 50 bytes a block where it
// read 64.
template <class G>
inline void q_iq_gemv(QFormat<QF_IQ1_S>, G grid, device const uchar* b, uint w8, uint j, thread float* q,
                      thread float& s0, thread float& s1) {
  const QBlockPieces pc = q_block_pieces<12>(w8);
  uint2 mine;
  if (j < 5) {
    mine = *(device const uint2*)(b + pc.run + 8 * int(j));
  } else if (j < 7) {
    mine = uint2(*(device const uint*)(b + (j == 5 ? pc.uA : pc.uB)), 0u);
  } else {
    mine = uint2(uint(*(device const ushort*)(b + pc.h)), 0u);
  }
  uint2 W[8];
  q_block_lanes(mine, j, W);
  uint R[10], qw[12];
  for (int i = 0; i < 5; i++) {
    R[2 * i] = W[i].x;
    R[2 * i + 1] = W[i].y;
  }
  const float d = q_block_assemble<12>(pc, R, W[5].x, W[6].x, W[7].x, qw);
  uint qs = qw[0], hw = qw[8];
  for (uint k = 1; k < 8; k++) {
    qs = j == k ? qw[k] : qs;
  }
  for (uint k = 1; k < 4; k++) {
    hw = j / 2 == k ? qw[8 + k] : hw;
  }
  q_iq1s(grid, d, qs, (hw >> (16 * (j % 2))) & 0xffffu, q, s0, s1);
}
// IQ2_S's 82-byte blocks (2 + 4·20, 2-byte aligned) are q_block_words<20>'s
// twelve pieces (nine 8-byte words, two uints and a ushort): unit j loads
// word j, then units 0 to 2 the ninth word and the uints and units 3 to 7
// the ushort (so every lane loads), two loads a unit where it read seven,
// 90 bytes a block where it read 96.
template <class G>
inline void q_iq_gemv(QFormat<QF_IQ2_S>, G grid, device const uchar* b, uint w8, uint j, thread float* q,
                      thread float& s0, thread float& s1) {
  const QBlockPieces pc = q_block_pieces<20>(w8);
  const uint2 first = *(device const uint2*)(b + pc.run + 8 * int(j));
  uint2 second;
  if (j == 0) {
    second = *(device const uint2*)(b + pc.run + 64);
  } else if (j < 3) {
    second = uint2(*(device const uint*)(b + (j == 1 ? pc.uA : pc.uB)), 0u);
  } else {
    second = uint2(uint(*(device const ushort*)(b + pc.h)), 0u);
  }
  uint2 W[8], V[8];
  q_block_lanes(first, j, W);
  q_block_lanes(second, j, V);
  uint R[18], qw[20];
  for (int i = 0; i < 8; i++) {
    R[2 * i] = W[i].x;
    R[2 * i + 1] = W[i].y;
  }
  R[16] = V[0].x;
  R[17] = V[0].y;
  const float d = q_block_assemble<20>(pc, R, V[1].x, V[2].x, V[3].x, qw);
  uint qs = qw[0], signs = qw[8];
  for (uint k = 1; k < 8; k++) {
    qs = j == k ? qw[k] : qs;
    signs = j == k ? qw[8 + k] : signs;
  }
  const uint sh = 8 * (j % 4), hi = j / 4; // the unit's byte in words 16+hi (high bits) and 18+hi (scales)
  const uint qh = ((hi == 0 ? qw[16] : qw[17]) >> sh) & 255u, sc = ((hi == 0 ? qw[18] : qw[19]) >> sh) & 255u;
  q_iq2s(grid, d, qs, signs, qh, sc, q, s0, s1);
}

// q_iq_unit: an IQ unit's dot products, each half under its own scale.
template <int F, class G>
inline void q_iq_unit(G grid, QRow row, uint u, threadgroup const float* x, uint xstride, int cols,
                      thread float* acc) {
  float q[32], s0, s1;
  q_iq_gemv(QFormat<F>(), grid, row.w + ulong(u / 8) * QBlockBytes<F>::bytes, row.w8 + (u / 8) * QBlockBytes<F>::bytes,
            u % 8, q, s0, s1);
  for (int c = 0; c < cols; c++) {
    threadgroup const float* xc = x + c * xstride;
    float a0 = 0.0f, a1 = 0.0f;
    for (int l = 0; l < 16; l++) {
      a0 += xc[l] * q[l];
      a1 += xc[16 + l] * q[16 + l];
    }
    acc[c] += s0 * a0 + s1 * a1;
  }
}

// QMVGrid<F>: where the GEMVs (qmatvec, qmoe_mv) read F's grid. A
// simdgroup's lanes read different rows, and constant memory is built for
// shared addresses, so the IQ2 and IQ3 grids (1 to 8 KiB) are copied into
// threadgroup memory, as ggml's kernels do; IQ1's 16 KiB stays in constant
// memory (docs/metal-kernels.md, "IQ formats"). stage copies the grid into
// floats of threadgroup memory (strided over the threadgroup, read after the
// barrier that ends the first staging) and returns its accessor, type.
struct QNoGrid {};
template <int F> struct QMVGrid {
  using type = QNoGrid;
  static constant constexpr uint floats = 0;
  type stage(threadgroup float* mem, ushort tid, ushort ntg) { return type(); }
};
template <int F> struct QMVGridConst {
  using type = QGridConst<F>;
  static constant constexpr uint floats = 0;
  type stage(threadgroup float* mem, ushort tid, ushort ntg) { return type(); }
};
template <int F> struct QMVGridShared {
  using row = typename QGridConst<F>::row;
  using type = QGridShared<row>;
  static constant constexpr uint floats = QGridConst<F>::rows * uint(sizeof(row)) / 4;
  type stage(threadgroup float* mem, ushort tid, ushort ntg) {
    threadgroup row* g = (threadgroup row*)mem;
    for (uint i = tid; i < QGridConst<F>::rows; i += ntg) {
      g[i] = QGridConst<F>()[i];
    }
    return type{g};
  }
};
template <> struct QMVGrid<QF_IQ2_XXS> : QMVGridShared<QF_IQ2_XXS> {};
template <> struct QMVGrid<QF_IQ2_XS> : QMVGridShared<QF_IQ2_XS> {};
template <> struct QMVGrid<QF_IQ2_S> : QMVGridShared<QF_IQ2_S> {};
template <> struct QMVGrid<QF_IQ3_XXS> : QMVGridShared<QF_IQ3_XXS> {};
template <> struct QMVGrid<QF_IQ3_S> : QMVGridShared<QF_IQ3_S> {};
template <> struct QMVGrid<QF_IQ1_S> : QMVGridConst<QF_IQ1_S> {};
template <> struct QMVGrid<QF_IQ1_M> : QMVGridConst<QF_IQ1_M> {};

// q_unit_at is q_unit, or for the IQ formats q_iq_unit reading the grid
// through grid (QMVGrid<F>::type).
template <int F>
inline void q_unit_at(QNoGrid, QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,
                      int cols, thread float* acc) {
  q_unit<F>(row, u, a, x, xstride, cols, acc);
}
template <int F, class G>
inline void q_unit_at(G grid, QRow row, uint u, constant QMatArgs& a, threadgroup const float* x, uint xstride,
                      int cols, thread float* acc) {
  q_iq_unit<F>(grid, row, u, x, xstride, cols, acc);
}

// q_stage copies chunk [k0, k0+kc) of the activation rows src[c] (-1: none,
// zeros) into xs, float4 at a time (k is a multiple of 32), each value
// through the folded norm nm (mtlbench.h's MVNorm, when on: an RMSNorm's
// 1/rms scales the dot products at the end, as every format's dot is linear
// in x).
inline void q_stage(device const float* x, thread const int* src, uint k, uint k0, uint kc, uint KC,
                    threadgroup float* xs, ushort tid, ushort ntg, thread MVNorm& nm) {
  const uint q = kc / 4;
  for (uint i = tid; i < uint(mv_cols) * q; i += ntg) {
    const uint c = i / q, j = 4 * (i % q);
    float4 v = 0.0f;
    if (src[c] >= 0) {
      v = *(device const float4*)(x + ulong(src[c]) * k + k0 + j);
      if (nm.on) {
        v = mv_norm4(nm, int(c), k0 + j, v);
      }
    }
    *(threadgroup float4*)(xs + c * KC + j) = v;
  }
}

// q_rows adds, for the simdgroup's mv_rows weight rows from n0 (of n), their
// dot products with the staged rows into acc (each lane its units' part).
// Chunks of at most 16 units a row would leave lanes out of every load, so
// rows then share the simdgroup: row r takes the aligned block of L lanes
// (the first chunk's units rounded up to a power of two, the same for every
// chunk) at (r mod 32/L)·L, unit u at its lane u, and one load serves 32/L
// rows. simd_sum over a row's block, the other lanes' zeros added exactly,
// is the sum of its units at lanes 0..L-1 (docs/metal-kernels.md, "Short
// rows").
template <int F, class G>
inline void q_rows(constant QMatArgs& a, G grid, device const uchar* w, ulong wo, device const uchar* s,
                   device const uchar* b, uint n, uint n0, uint k0, uint kc, uint KC, threadgroup const float* xs, ushort lane, int cols,
                   thread float (*acc)[MV_MAX_COLS]) {
  const uint U = QUnit<F>::values;
  const uint sz = q_scale_bytes(a);
  const uint nu = kc / U, nu0 = min(KC, uint(a.k)) / U;
  if (nu0 > 16 || mv_rows == 1) {
    for (int r = 0; r < mv_rows && n0 + r < n; r++) {
      const ulong row = n0 + r, ro = wo + row * a.row_bytes;
      QRow q = {w + ro, s + row * sz, b + row * sz, uint(ro & 7)};
      for (uint u = lane; u < nu; u += 32) {
        q_unit_at<F>(grid, q, k0 / U + u, a, xs + u * U, KC, cols, acc[r]);
      }
    }
    return;
  }
  const uint L = nu0 > 8 ? 16u : nu0 > 4 ? 8u : nu0 > 2 ? 4u : nu0 > 1 ? 2u : 1u;
  const int P = int(32u / L); // rows a load serves
  const int sub = int(lane / L);
  const uint u = lane % L;
  for (int r0 = 0; r0 < mv_rows; r0 += P) {
    const int r = r0 + sub; // this lane's row
    if (r >= mv_rows || n0 + uint(r) >= n || u >= nu) {
      continue;
    }
    // The row's sums, picked from the rows' registers by selects, not an
    // index a lane computes (that would put acc in memory); a unit adds to
    // the first cols <= mv_cols of them.
    float cur[MV_MAX_COLS];
    for (int c = 0; c < mv_cols; c++) {
      cur[c] = acc[0][c];
      for (int i = 1; i < mv_rows; i++) {
        cur[c] = r == i ? acc[i][c] : cur[c];
      }
    }
    const ulong row = n0 + uint(r), ro = wo + row * a.row_bytes;
    QRow q = {w + ro, s + row * sz, b + row * sz, uint(ro & 7)};
    q_unit_at<F>(grid, q, k0 / U + u, a, xs + u * U, KC, cols, cur);
    for (int i = 0; i < mv_rows; i++) {
      for (int c = 0; c < mv_cols; c++) {
        acc[i][c] = r == i ? cur[c] : acc[i][c];
      }
    }
  }
}

// qmatvec: out[m][n] = x[m][k]·wᵀ (+ bias) for up to three packed matrices
// of one format and depth that read the same x (mv_segs: q, k, v; each
// with its bias where mv_biases has its bit), mv_cols rows of x a
// threadgroup (grid y), mv_rows weight rows of one matrix a simdgroup
// (grid x: the first matrix's row tiles, then the second's, ...).
// With mv_swiglu two matrices of equal rows (gate, up) give out0 =
// silu(x·gateᵀ + bias0)·(x·upᵀ + bias1), each bias where mv_biases has
// it; with mv_norm x is RMSNorm(x)·g, computed here (rmsnorm_gemv), or
// with mv_layernorm LayerNorm(x)·g + beta (layernorm_gemv); with mv_gelu
// the output goes through GELU (GPT-2's c_fc); with mv_residual the output
// is also added into residual (gemv_residual). With mv_argmax (one row of
// x, one matrix: the LM head before a greedy pick, gemv_argmax) the
// threadgroup's largest output and its first index go to part_v and
// part_i[tg.x], argmax_merge's partials (docs/metal-kernels.md, "Argmax").
template <int F>
kernel void qmatvec(constant QMatArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                    device const uchar* w0 [[buffer(2)]], device const uchar* s0 [[buffer(3)]],
                    device const uchar* b0 [[buffer(4)]], device float* out0 [[buffer(5)]],
                    device const float* bias0 [[buffer(6), function_constant(mv_bias0)]],
                    device const float* g [[buffer(7), function_constant(mv_norm)]],
                    device float* residual [[buffer(8), function_constant(mv_residual)]],
                    device const uchar* w1 [[buffer(9), function_constant(mv_two)]],
                    device const uchar* s1 [[buffer(10), function_constant(mv_two)]],
                    device const uchar* b1 [[buffer(11), function_constant(mv_two)]],
                    device float* out1 [[buffer(12), function_constant(mv_out1)]],
                    device const float* bias1 [[buffer(13), function_constant(mv_bias1)]],
                    device const uchar* w2 [[buffer(14), function_constant(mv_three)]],
                    device const uchar* s2 [[buffer(15), function_constant(mv_three)]],
                    device const uchar* b2 [[buffer(16), function_constant(mv_three)]],
                    device float* out2 [[buffer(17), function_constant(mv_three)]],
                    device const float* bias2 [[buffer(18), function_constant(mv_bias2)]],
                    device const float* beta [[buffer(19), function_constant(mv_ln_bias)]],
                    device float* part_v [[buffer(20), function_constant(mv_argmax)]],
                    device uint* part_i [[buffer(21), function_constant(mv_argmax)]],
                    uint2 tg [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                    ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                    ushort nsg [[simdgroups_per_threadgroup]]) {
  // The staged activations, then the grid's copy if any (QMVGrid): one
  // allocation, so formats without one keep exactly the staging's 16 KiB.
  threadgroup float xs[QMV_STAGE_FLOATS + QMVGrid<F>::floats];
  const uint R = uint(mv_rows);
  const uint t0 = (a.n + R - 1) / R, t1 = (a.n1 + R - 1) / R;
  uint tile = tg.x * nsg + sg;
  device const uchar* w = w0;
  device const uchar* s = s0;
  device const uchar* b = b0;
  device float* out = out0;
  device const float* bias = bias0;
  bool biased = mv_bias0;
  uint n = a.n;
  if (mv_two && !mv_swiglu && tile >= t0) {
    tile -= t0;
    w = w1, s = s1, b = b1, out = out1, bias = bias1, biased = mv_bias1, n = a.n1;
    if (mv_three && tile >= t1) {
      tile -= t1;
      w = w2, s = s2, b = b2, out = out2, bias = bias2, biased = mv_bias2, n = a.n2;
    }
  }
  const uint n0 = tile * R; // past n: stages with the others, computes nothing
  const uint m0 = tg.y * uint(mv_cols);
  int src[MV_MAX_COLS];
  int cols = 0;
  for (int c = 0; c < mv_cols; c++) {
    src[c] = m0 + c < a.m ? int(m0 + c) : -1;
    cols += src[c] >= 0 ? 1 : 0;
  }
  float acc[MV_MAX_ROWS][MV_MAX_COLS], accu[MV_MAX_ROWS][MV_MAX_COLS];
  for (int r = 0; r < MV_MAX_ROWS; r++) {
    for (int c = 0; c < MV_MAX_COLS; c++) {
      acc[r][c] = 0.0f;
      accu[r][c] = 0.0f;
    }
  }
  const uint KC = uint(QMV_STAGE_FLOATS / mv_cols) / 256u * 256u;
  const ushort ntg = nsg * 32;
  MVNorm nm = mv_norm_of(mv_norm, mv_layernorm, g, beta);
  mv_ln_rows(nm, x, src, a.k, KC, a.eps, xs, tid, ntg, lane, sg, nsg);
  const auto grid = QMVGrid<F>().stage(xs + QMV_STAGE_FLOATS, tid, ntg); // read after the first barrier
  for (uint k0 = 0; k0 < a.k; k0 += KC) {
    const uint kc = min(KC, a.k - k0);
    q_stage(x, src, a.k, k0, kc, KC, xs, tid, ntg, nm);
    mv_ln_staged(nm, xs, src, a.k, KC, true, tid, ntg, lane);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    q_rows<F>(a, grid, w, 0, s, b, n, n0, k0, kc, KC, xs, lane, cols, acc);
    if (mv_swiglu) {
      q_rows<F>(a, grid, w1, 0, s1, b1, n, n0, k0, kc, KC, xs, lane, cols, accu);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  float inv[MV_MAX_COLS];
  mv_norm_scale(nm, a.k, a.eps, xs, lane, sg, nsg, inv); // the chunks are done with xs
  float am_v = NEG_MAX; // mv_argmax: this simdgroup's largest output, rows in order
  uint am_i = 0xffffffffu;
  for (int r = 0; r < mv_rows; r++) {
    for (int c = 0; c < mv_cols; c++) {
      float y = simd_sum(acc[r][c]) * inv[c];
      if (biased) {
        y += n0 + r < n ? bias[n0 + r] : 0.0f;
      }
      if (mv_swiglu) {
        const float u = simd_sum(accu[r][c]) * inv[c] + (mv_bias1 && n0 + r < n ? bias1[n0 + r] : 0.0f);
        y = silu(y) * u;
      }
      if (mv_gelu) {
        y = gelu_tanh_of(y);
      }
      if (mv_argmax && c == 0 && n0 + r < n) {
        argmax_take(y, n0 + r, am_v, am_i);
      }
      if (lane == 0 && n0 + r < n && src[c] >= 0) {
        const ulong o = ulong(src[c]) * n + n0 + r;
        out[o] = y;
        if (mv_residual) {
          residual[o] += y;
        }
      }
    }
  }
  if (mv_argmax) {
    // Every lane holds the simdgroup's outputs (simd_sum), so the pick
    // reads no logit back; xs is free once every simdgroup is past
    // mv_norm_scale.
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint idx;
    const float v = tg_argmax(am_v, am_i, xs, (threadgroup uint*)(xs + 32), lane, sg, nsg, idx);
    if (tid == 0) {
      part_v[tg.x] = v;
      part_i[tg.x] = idx;
    }
  }
}

// qmoe_mv: one (token, expert) pair a threadgroup column (grid y): with
// SwiGLU (pass 0) h[p] = silu(x[t]·gateᵀ)·(x[t]·upᵀ), the gate's values at
// w and the up's at w2; else (pass 1) y[p] = h[p]·downᵀ. Expert e's values
// sit e·w_stride bytes in, its scales e·s_stride. In a decode step's MoE
// block (docs/metal-kernels.md, "The MoE block in a decode step") pass 0 also takes
//  - mv_norm: x is the input of the RMSNorm before the block (weights g),
//    normalised as it is staged (qmatvec's rmsnorm_gemv);
//  - mv_route: simdgroup 0 routes the pair's token from the router's
//    logits while the others stage x, and the pair's first threadgroup
//    writes its expert, its weight and the distinct-expert count, as the
//    moe_route kernel would;
// and qmoe_mv_sum takes pass 1's place. With mv_tiles a threadgroup column
// is a tile of moe_group's instead (grid y: tile slots; unused ones exit):
// up to mv_cols pairs of one expert, staged side by side, so each of the
// expert's weight rows is read once for all of them; pass 0 writes h in
// the tiles' expert order, pass 1 reads it so and writes y in pair order
// for moe_combine (docs/metal-kernels.md, "Grouped expert GEMVs").
template <int F>
kernel void qmoe_mv(constant QMatArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                    device int* ids [[buffer(2)]], device const uchar* w [[buffer(3)]],
                    device const uchar* sc [[buffer(4)]], device const uchar* bi [[buffer(5)]],
                    device const uchar* w2 [[buffer(6), function_constant(mv_swiglu)]],
                    device const uchar* sc2 [[buffer(7), function_constant(mv_swiglu)]],
                    device const uchar* bi2 [[buffer(8), function_constant(mv_swiglu)]],
                    device float* out [[buffer(9)]], device atomic_uint* stats [[buffer(10)]],
                    device const float* g [[buffer(11), function_constant(mv_norm)]],
                    device const float* logits [[buffer(12), function_constant(mv_route)]],
                    device float* weights [[buffer(13), function_constant(mv_route)]],
                    device atomic_uint* flags [[buffer(14), function_constant(mv_route)]],
                    device atomic_uint* counts [[buffer(15), function_constant(mv_route)]],
                    device const int* perm [[buffer(16), function_constant(mv_tiles)]],
                    device const MoETile* tiles [[buffer(17), function_constant(mv_tiles)]],
                    uint2 tg [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                    ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                    ushort nsg [[simdgroups_per_threadgroup]]) {
  // The staged activations, the grid's copy if any (QMVGrid) and a word
  // for simdgroup 0's routed expert (mv_route), read after the first
  // barrier: one allocation.
  threadgroup float xs[QMV_STAGE_FLOATS + QMVGrid<F>::floats + 1];
  threadgroup uint* routed = (threadgroup uint*)(xs + QMV_STAGE_FLOATS + QMVGrid<F>::floats);
  const uint p = tg.y;
  uint e = 0;
  // src: the activation rows staged; dst: the output rows they give.
  int src[MV_MAX_COLS], dst[MV_MAX_COLS];
  for (int c = 0; c < MV_MAX_COLS; c++) {
    src[c] = -1;
    dst[c] = -1;
  }
  int cols = 1;
  if (mv_tiles) {
    const MoETile t = simd_tile(tiles, p, lane);
    if (t.expert < 0 || uint(t.expert) >= a.experts) {
      return; // the whole threadgroup: an unused tile slot
    }
    e = uint(t.expert);
    cols = min(t.rows, mv_cols);
    // Lane c reads pair c of the tile; the simdgroup shares them.
    const int mine = int(lane) < cols ? perm[t.row0 + int(lane)] : -1;
    for (int c = 0; c < mv_cols; c++) {
      const int pc = simd_broadcast(mine, ushort(c));
      if (c < cols) {
        src[c] = mv_swiglu ? pc / int(a.top_k) : t.row0 + c;
        dst[c] = mv_swiglu ? t.row0 + c : pc;
      }
    }
  } else if (mv_route) {
    if (sg == 0) {
      bool nan;
      const float wt = moe_route_pair(logits + ulong(p / a.top_k) * a.experts, a.experts, a.top_k, a.norm_topk != 0u,
                                      p % a.top_k, lane, e, nan);
      if (lane == 0) {
        routed[0] = e;
        if (tg.x == 0) {
          if (nan) {
            record_error(stats, ERR_ROUTE_NAN, p / a.top_k);
          }
          ids[p] = int(e);
          weights[p] = wt;
          count_expert(flags, counts, a.stats_slot, e);
        }
      }
    }
  } else {
    // One lane's load a simdgroup: a GPU broadcasts a uniform load, but the
    // witness counts every lane's.
    const int id = simd_broadcast_first(lane == 0 ? ids[p] : 0);
    if (id < 0 || uint(id) >= a.experts) {
      if (tid == 0 && tg.x == 0) {
        record_error(stats, ERR_EXPERT, uint(id));
      }
      return;
    }
    e = uint(id);
  }
  const uint n0 = (tg.x * nsg + sg) * uint(mv_rows);
  if (!mv_tiles) {
    src[0] = mv_swiglu ? int(p / a.top_k) : int(p);
    dst[0] = int(p);
  }
  MVNorm nm = mv_norm_of(mv_norm, false, g, g);
  float acc[MV_MAX_ROWS][MV_MAX_COLS], acc2[MV_MAX_ROWS][MV_MAX_COLS];
  for (int r = 0; r < MV_MAX_ROWS; r++) {
    for (int c = 0; c < MV_MAX_COLS; c++) {
      acc[r][c] = 0.0f;
      acc2[r][c] = 0.0f;
    }
  }
  const uint KC = uint(QMV_STAGE_FLOATS / mv_cols) / 256u * 256u;
  const ushort ntg = nsg * 32;
  const auto grid = QMVGrid<F>().stage(xs + QMV_STAGE_FLOATS, tid, ntg); // read after the first barrier
  for (uint k0 = 0; k0 < a.k; k0 += KC) {
    const uint kc = min(KC, a.k - k0);
    q_stage(x, src, a.k, k0, kc, KC, xs, tid, ntg, nm);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (mv_route) {
      e = routed[0];
    }
    const ulong wo = ulong(e) * a.w_stride, so = ulong(e) * a.s_stride;
    q_rows<F>(a, grid, w, wo, sc + so, bi + so, a.n, n0, k0, kc, KC, xs, lane, cols, acc);
    if (mv_swiglu) {
      q_rows<F>(a, grid, w2, wo, sc2 + so, bi2 + so, a.n, n0, k0, kc, KC, xs, lane, cols, acc2);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  float inv[MV_MAX_COLS];
  mv_norm_scale(nm, a.k, a.eps, xs, lane, sg, nsg, inv); // the chunks are done with xs
  for (int r = 0; r < mv_rows; r++) {
    for (int c = 0; c < mv_cols; c++) {
      const float gv = simd_sum(acc[r][c]) * inv[c];
      const float u = mv_swiglu ? simd_sum(acc2[r][c]) * inv[c] : 0.0f;
      if (lane == 0 && n0 + r < a.n && dst[c] >= 0) {
        out[ulong(dst[c]) * a.n + n0 + r] = mv_swiglu ? silu(gv) * u : gv;
      }
    }
  }
}

// qmoe_mv_sum: a token's down projections summed under their routing
// weights (grid y: tokens), what qmoe_mv's pass 1 and moe_combine compute:
// out[t] = Σ_j weights[t·K+j]·(h[t·K+j]·down_eᵀ), j in top-k order (the
// combine's sum), also added into residual with moe_residual; the token's
// first threadgroup clears its experts' flags, as moe_combine does.
// Simdgroup s dots pair s / G's rows of row group s % G (G = simdgroups /
// K: the host gives a multiple of K), so a threadgroup spends as many
// simdgroups on a pair as qmoe_mv's, and the K pairs' chunks of h are
// staged side by side (QMV_STAGE_FLOATS / K values each, at least 256).
template <int F>
kernel void qmoe_mv_sum(constant QMatArgs& a [[buffer(0)]], device const float* h [[buffer(1)]],
                        device const int* ids [[buffer(2)]], device const uchar* w [[buffer(3)]],
                        device const uchar* sc [[buffer(4)]], device const uchar* bi [[buffer(5)]],
                        device const float* weights [[buffer(6)]], device atomic_uint* flags [[buffer(7)]],
                        device float* out [[buffer(8)]], device atomic_uint* stats [[buffer(9)]],
                        device float* residual [[buffer(10), function_constant(moe_residual)]],
                        uint2 tg [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                        ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                        ushort nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float xs[QMV_STAGE_FLOATS + QMVGrid<F>::floats];
  const uint K = a.top_k, G = max(1u, uint(nsg) / K), R = uint(mv_rows);
  const uint j = sg / G, gi = sg % G; // j >= K: a simdgroup that only stages
  const uint t = tg.y, p0 = t * K;
  const uint n0 = (tg.x * G + gi) * R;
  const uint KC = uint(QMV_STAGE_FLOATS) / K / 256u * 256u;
  const ushort ntg = nsg * 32;
  const auto grid = QMVGrid<F>().stage(xs + QMV_STAGE_FLOATS, tid, ntg); // read after the first barrier
  bool live = j < K;
  uint e = 0;
  if (live) {
    const int id = simd_broadcast_first(lane == 0 ? ids[p0 + j] : 0);
    live = id >= 0 && uint(id) < a.experts;
    if (!live && lane == 0 && tg.x == 0) {
      record_error(stats, ERR_EXPERT, uint(id));
    }
    e = live ? uint(id) : 0u;
  }
  float acc[MV_MAX_ROWS][MV_MAX_COLS];
  for (int r = 0; r < MV_MAX_ROWS; r++) {
    for (int c = 0; c < MV_MAX_COLS; c++) {
      acc[r][c] = 0.0f;
    }
  }
  const ulong wo = ulong(e) * a.w_stride, so = ulong(e) * a.s_stride;
  for (uint k0 = 0; k0 < a.k; k0 += KC) {
    const uint kc = min(KC, a.k - k0), q = kc / 4;
    for (uint i = tid; i < K * q; i += ntg) {
      const uint jj = i / q, c = 4 * (i % q);
      *(threadgroup float4*)(xs + jj * KC + c) = *(device const float4*)(h + ulong(p0 + jj) * a.k + k0 + c);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (live) {
      q_rows<F>(a, grid, w, wo, sc + so, bi + so, a.n, n0, k0, kc, KC, xs + j * KC, lane, 1, acc);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  moe_sum_rows(acc, xs, K, G, j, gi, t, n0, a.n, ids, weights, flags, a.experts, out, residual, tg.x, tid, lane);
}

// q_values writes the 32 values of row q from value i0 (a multiple of 32)
// into v: the embedding's and the packed tiles' dequantization, a unit at a
// time. Each reads its unit as the GEMVs' q_unit does, with the widest
// loads its alignment allows: the 2-byte-aligned and byte-aligned GGUF
// blocks through q_block_words and q_run_words (32-byte runs at the block's
// alignment mod 8), the 16- and 8-byte-aligned ones in 16- and 8-byte
// loads, and a unit's adjacent scale bytes as one ushort
// (docs/metal-kernels.md, "The tiled GEMM's loads").
template <int F> inline void q_values(QRow q, uint i0, constant QMatArgs& a, thread float* v);

// QAffineHeld is a tile thread's scales and biases of one staged weight row,
// 16 bytes of each (the words of the groups one load read), kept from the
// k step that loads them to the last unit of their groups: a tile thread
// stages the same row's units in k order (qmm_stage), so a row's
// scales are read once, not once a unit.
struct QAffineHeld {
  uint4 s, b;
};

// q_held_word is word i (0-3) of w, by selects (no index into a vector).
inline uint q_held_word(uint4 w, uint i) { return i == 0 ? w.x : (i == 1 ? w.y : (i == 2 ? w.z : w.w)); }

// q_affine_held gives unit u's scale and bias, at the first unit of a span
// of groups loading the span's scales in one load and its biases in
// another into h: the widest of 16, 8 and 4 bytes that a row's scales (in
// bytes) are a multiple of, so every row's spans are aligned (tensors are
// 16-byte aligned: bridge/metal weightAlign), else one group's 2 bytes. Every lane of a
// tile is at the same k step and every row has the same span, so all lanes
// load at the same units (docs/metal-kernels.md, "The tiled GEMM's loads").
inline void q_affine_held(QRow q, uint u, constant QMatArgs& a, thread QAffineHeld& h, thread float& sc,
                          thread float& bi) {
  const uint g = u >> a.group_shift, sz = q_scale_dt == 0 ? 4u : 2u, rb = a.groups * sz;
  const uint span = (rb % 16 == 0 ? 16u : (rb % 8 == 0 ? 8u : (rb % 4 == 0 ? 4u : 2u))) / sz; // groups a load
  const uint j = g % span;
  if ((u & ((1u << a.group_shift) - 1u)) == 0 && j == 0) { // the span's first unit
    const uint o = g * sz;
    if (span * sz == 16) {
      h.s = *(device const uint4*)(q.s + o);
      h.b = *(device const uint4*)(q.b + o);
    } else if (span * sz == 8) {
      h.s = uint4(*(device const uint2*)(q.s + o), 0u, 0u);
      h.b = uint4(*(device const uint2*)(q.b + o), 0u, 0u);
    } else if (span * sz == 4) {
      h.s.x = *(device const uint*)(q.s + o);
      h.b.x = *(device const uint*)(q.b + o);
    } else {
      h.s.x = *(device const ushort*)(q.s + o);
      h.b.x = *(device const ushort*)(q.b + o);
    }
  }
  const uint jb = j * sz, sh = 8u * (jb & 2u); // the group's byte in the span, its half in its word
  const uint vs = q_held_word(h.s, jb / 4), vb = q_held_word(h.b, jb / 4);
  sc = q_scale_of(sz == 4 ? vs : (vs >> sh) & 0xffffu);
  bi = q_scale_of(sz == 4 ? vb : (vb >> sh) & 0xffffu);
}

// q_tile_values is q_values for a tile's staged row; the affine formats
// read their scales and biases through q_affine_held.
template <int F>
inline void q_tile_values(QRow q, uint i0, constant QMatArgs& a, thread QAffineHeld& h, thread float* v) {
  q_values<F>(q, i0, a, v);
}

template <int BITS> inline void q_affine_values(QRow q, uint i0, constant QMatArgs& a, thread float* v) {
  q_affine_codes<BITS>(q.w + i0 / 32 * 4 * BITS, v);
  const uint g = (i0 / 32) >> a.group_shift;
  const float sc = q_scale(q.s, g), bi = q_scale(q.b, g);
  for (int i = 0; i < 32; i++) {
    v[i] = sc * v[i] + bi;
  }
}
template <int BITS>
inline void q_affine_tile_values(QRow q, uint i0, constant QMatArgs& a, thread QAffineHeld& h, thread float* v) {
  q_affine_codes<BITS>(q.w + i0 / 32 * 4 * BITS, v);
  float sc, bi;
  q_affine_held(q, i0 / 32, a, h, sc, bi);
  for (int i = 0; i < 32; i++) {
    v[i] = sc * v[i] + bi;
  }
}
#define Q_VALUES_AFFINE(F, BITS)                                                                                 \
  template <> inline void q_values<F>(QRow q, uint i0, constant QMatArgs& a, thread float* v) {                 \
    q_affine_values<BITS>(q, i0, a, v);                                                                          \
  }                                                                                                              \
  template <>                                                                                                    \
  inline void q_tile_values<F>(QRow q, uint i0, constant QMatArgs& a, thread QAffineHeld& h, thread float* v) {  \
    q_affine_tile_values<BITS>(q, i0, a, h, v);                                                                  \
  }
Q_VALUES_AFFINE(QF_AFFINE4, 4)
Q_VALUES_AFFINE(QF_AFFINE8, 8)
Q_VALUES_AFFINE(QF_AFFINE2, 2)
Q_VALUES_AFFINE(QF_AFFINE3, 3)
Q_VALUES_AFFINE(QF_AFFINE5, 5)
Q_VALUES_AFFINE(QF_AFFINE6, 6)
template <> inline void q_values<QF_Q8_0>(QRow q, uint i0, constant QMatArgs& a, thread float* v) {
  const uint o = i0 / 32 * 34;
  uint qw[8];
  const float d = q_block_words<8>(q.w + o, q.w8 + o, qw);
  for (int i = 0; i < 32; i++) {
    v[i] = d * float(int(qw[i / 4] << (24 - 8 * (i % 4))) >> 24);
  }
}
template <> inline void q_values<QF_Q4_0>(QRow q, uint i0, constant QMatArgs& a, thread float* v) {
  const uint o = i0 / 32 * 18;
  uint qw[4];
  const float d = q_block_words<4>(q.w + o, q.w8 + o, qw);
  for (int i = 0; i < 16; i++) {
    const uint b = (qw[i / 4] >> (8 * (i % 4))) & 0xffu;
    v[i] = d * float(int(b & 0xfu) - 8);
    v[i + 16] = d * float(int(b >> 4) - 8);
  }
}
// Q4_K's and Q5_K's 16-byte header (f16 d and dmin, 12 scale bytes) in one
// load; sub-block j's scale and min (q4k_scale_min) times d and dmin.
inline void q4k_head(device const uchar* blk, uint j, thread float& d, thread float& dm) {
  const uint4 head = *(device const uint4*)blk;
  const uint sw[3] = {head.y, head.z, head.w};
  uchar sc[12];
  for (int i = 0; i < 12; i++) {
    sc[i] = uchar((sw[i / 4] >> (8 * (i % 4))) & 0xffu);
  }
  float s, m;
  q4k_scale_min(int(j), sc, s, m);
  const float2 h = float2(as_type<half2>(head.x));
  d = h.x * s;
  dm = h.y * m;
}
template <> inline void q_values<QF_Q4_K>(QRow q, uint i0, constant QMatArgs& a, thread float* v) {
  device const uchar* blk = q.w + i0 / 256 * 144;
  const uint j = (i0 % 256) / 64, hi = (i0 % 64) / 32;
  float d, dm;
  q4k_head(blk, 2 * j + hi, d, dm);
  device const uint4* p = (device const uint4*)(blk + 16 + 32 * j);
  const uint4 q0 = p[0], q1 = p[1];
  const uint qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
  for (int l = 0; l < 32; l++) {
    const uint b = (qw[l / 4] >> (8 * (l % 4))) & 0xffu;
    v[l] = d * float(hi ? b >> 4 : b & 0xfu) - dm;
  }
}
template <> inline void q_values<QF_Q5_K>(QRow q, uint i0, constant QMatArgs& a, thread float* v) {
  device const uchar* blk = q.w + i0 / 256 * 176;
  const uint j = (i0 % 256) / 32; // sub-block: chunk j/2, nibble j%2
  float d, dm;
  q4k_head(blk, j, d, dm);
  device const uint4* p = (device const uint4*)blk;
  const uint4 h0 = p[1], h1 = p[2], q0 = p[3 + 2 * (j / 2)], q1 = p[4 + 2 * (j / 2)];
  const uint hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
  const uint qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
  for (int l = 0; l < 32; l++) {
    const uint sh = 8 * (l % 4);
    const uint b = (qw[l / 4] >> sh) & 0xffu;
    const uint lo = j % 2 ? b >> 4 : b & 0xfu;
    v[l] = d * float(lo | (((hw[l / 4] >> (sh + j)) & 1u) << 4)) - dm;
  }
}
// Q3_K: a unit's 32 bytes of high bits and of 2-bit values (q_run_words at
// the block's alignment), its two scales' low nibbles and high pairs (two
// adjacent bytes each: ushorts) and d.
template <> inline void q_values<QF_Q3_K>(QRow q, uint i0, constant QMatArgs& a, thread float* v) {
  const uint o = i0 / 256 * 110;
  device const uchar* blk = q.w + o;
  const uint h = (i0 % 256) / 128, j = (i0 % 128) / 32;
  uint hm[8], qs[8];
  q_run_words<8>(blk, q.w8 + o, hm);
  q_run_words<8>(blk + 32 + 32 * h, q.w8 + o, qs);
  // Scales 8h + 2j + t (q3k_scale): low nibble h of byte 2j + t, high pair
  // 2h + j/2 of byte 8 + 2(j%2) + t.
  const uint lo2 = uint(*(device const ushort*)(blk + 96 + 2 * j));
  const uint hi2 = uint(*(device const ushort*)(blk + 104 + 2 * (j % 2)));
  const float d = q_half(blk + 108);
  float s[2];
  for (int t = 0; t < 2; t++) {
    const uint lo = (lo2 >> (8 * t + 4 * h)) & 0xfu;
    const uint hi = (hi2 >> (8 * t + 2 * (2 * h + j / 2))) & 3u;
    s[t] = d * float(int(lo | (hi << 4)) - 32);
  }
  for (int l = 0; l < 32; l++) {
    const uint sh = 8 * (l % 4);
    const int lo = int((qs[l / 4] >> (sh + 2 * j)) & 3u);
    const int x = ((hm[l / 4] >> (sh + 4 * h + j)) & 1u) ? lo : lo - 4;
    v[l] = (l < 16 ? s[0] : s[1]) * float(x);
  }
}
template <> inline void q_values<QF_IQ4_NL>(QRow q, uint i0, constant QMatArgs& a, thread float* v) {
  const uint o = i0 / 32 * 18;
  uint w[4];
  const float d = q_block_words<4>(q.w + o, q.w8 + o, w);
  iq4_levels(w, v);
  for (int i = 0; i < 32; i++) {
    v[i] = d * v[i];
  }
}
template <> inline void q_values<QF_IQ4_XS>(QRow q, uint i0, constant QMatArgs& a, thread float* v) {
  device const uchar* blk = q.w + i0 / 256 * 136;
  const uint b = (i0 % 256) / 32;
  device const uint2* p = (device const uint2*)blk;
  const uint2 head = p[0], q0 = p[1 + 2 * b], q1 = p[2 + 2 * b];
  const uint ls = ((head.y >> (4 * b)) & 0xfu) | (((head.x >> (16 + 2 * b)) & 3u) << 4);
  const float dl = float(as_type<half>(ushort(head.x & 0xffffu))) * float(int(ls) - 32);
  const uint w[4] = {q0.x, q0.y, q1.x, q1.y};
  iq4_levels(w, v);
  for (int i = 0; i < 32; i++) {
    v[i] = dl * v[i];
  }
}
template <> inline void q_values<QF_MXFP4>(QRow q, uint i0, constant QMatArgs& a, thread float* v) {
  const uint o = i0 / 32 * 17 + 1; // the codes; the exponent the byte before
  uint qw[4];
  const float d = mxfp4_scale(q_run_words<4, 1, true>(q.w + o, q.w8 + o, qw));
  for (int i = 0; i < 16; i++) {
    const uint b = (qw[i / 4] >> (8 * (i % 4))) & 0xffu;
    v[i] = d * mxfp4_values[b & 0xfu];
    v[i + 16] = d * mxfp4_values[b >> 4];
  }
}
template <> inline void q_values<QF_NVFP4>(QRow q, uint i0, constant QMatArgs& a, thread float* v) {
  const uint4 c = ((device const uint4*)q.w)[i0 / 32];
  const uint sc = ((device const ushort*)(q.w + a.k / 2))[i0 / 32];
  const uint wd[4] = {c.x, c.y, c.z, c.w};
  const float s0 = e4m3_value(sc & 0xffu), s1 = e4m3_value(sc >> 8);
  for (int i = 0; i < 32; i++) {
    v[i] = (i < 16 ? s0 : s1) * mxfp4_values[(wd[i / 8] >> (4 * (i % 8))) & 0xfu];
  }
}
template <> inline void q_values<QF_MXFP8>(QRow q, uint i0, constant QMatArgs& a, thread float* v) {
  device const uint4* p = (device const uint4*)(q.w + i0);
  const uint4 v0 = p[0], v1 = p[1];
  const uint wd[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
  const float d = mxfp4_scale(q.w[a.k + i0 / 32]);
  for (int i = 0; i < 32; i++) {
    v[i] = e4m3_value((wd[i / 4] >> (8 * (i % 4))) & 0xffu) * d;
  }
}
// Q6_K: a unit's 32 bytes of nibbles and of high pairs (q_run_words at the
// block's alignment), its two scales (adjacent bytes: one ushort) and d.
template <> inline void q_values<QF_Q6_K>(QRow q, uint i0, constant QMatArgs& a, thread float* v) {
  const uint o = i0 / 256 * 210;
  device const uchar* blk = q.w + o;
  const uint n = (i0 % 256) / 128, qq = (i0 % 128) / 32;
  uint ql[8], qh[8];
  q_run_words<8>(blk + 64 * n + 32 * (qq & 1), q.w8 + o, ql);
  q_run_words<8>(blk + 128 + 32 * n, q.w8 + o, qh);
  const uint sc = uint(*(device const ushort*)(blk + 192 + 8 * n + 2 * qq));
  const float d = q_half(blk + 208);
  for (int l = 0; l < 32; l++) {
    const uint sh = 8 * (l % 4);
    const uint lq = (ql[l / 4] >> sh) & 0xffu;
    const uint lo = qq < 2 ? (lq & 0xfu) : (lq >> 4);
    const int x = int(lo | (((qh[l / 4] >> (sh + 2 * qq)) & 3u) << 4)) - 32;
    v[l] = d * float(as_type<char>(uchar((sc >> (8 * (l / 16))) & 0xffu))) * float(x);
  }
}
// Q2_K: a unit's 32 bytes of 2-bit values (q_run_words<8, 4>: its blocks
// keep 4-byte alignment), its two scale bytes (one ushort), d and dmin (one
// uint).
template <> inline void q_values<QF_Q2_K>(QRow q, uint i0, constant QMatArgs& a, thread float* v) {
  const uint o = i0 / 256 * 84;
  device const uchar* blk = q.w + o;
  const uint c = (i0 % 256) / 32, n = c / 4, j = c % 4;
  uint qw[8];
  q_run_words<8, 4>(blk + 16 + 32 * n, q.w8 + o, qw);
  const uint sc2 = uint(*(device const ushort*)(blk + 2 * c));
  const float2 dm = float2(as_type<half2>(*(device const uint*)(blk + 80)));
  for (int h = 0; h < 2; h++) {
    const uint sc = (sc2 >> (8 * h)) & 0xffu;
    const float dl = dm.x * float(sc & 0xfu), ml = dm.y * float(sc >> 4);
    for (int l = 0; l < 16; l++) {
      const int i = 16 * h + l;
      v[i] = dl * float((qw[i / 4] >> (8 * (i % 4) + 2 * j)) & 3u) - ml;
    }
  }
}

// The IQ formats' values: a unit is a 32-value slice, so q_values is q_iq
// scaled (exactly kernels/quant's s·code).
template <int F> inline void q_iq_values(QRow q, uint i0, thread float* v) {
  float c[32], s0, s1;
  q_iq(QFormat<F>(), QGridConst<F>(), q.w + ulong(i0 / 256) * QBlockBytes<F>::bytes,
       q.w8 + (i0 / 256) * QBlockBytes<F>::bytes, (i0 % 256) / 32, c, s0, s1);
  for (int l = 0; l < 16; l++) {
    v[l] = s0 * c[l];
    v[16 + l] = s1 * c[16 + l];
  }
}
#define Q_IQ_VALUES(F)                                                                                            \
  template <> inline void q_values<F>(QRow q, uint i0, constant QMatArgs& a, thread float* v) {                  \
    q_iq_values<F>(q, i0, v);                                                                                     \
  }
Q_IQ_VALUES(QF_IQ2_XXS)
Q_IQ_VALUES(QF_IQ2_XS)
Q_IQ_VALUES(QF_IQ2_S)
Q_IQ_VALUES(QF_IQ3_XXS)
Q_IQ_VALUES(QF_IQ3_S)
Q_IQ_VALUES(QF_IQ1_S)
Q_IQ_VALUES(QF_IQ1_M)

// qembedding: out[t] = row tokens[t] of the packed table, dequantized; one
// simdgroup a token, each lane 32 values at a time.
template <int F>
kernel void qembedding(constant QMatArgs& a [[buffer(0)]], device const int* tokens [[buffer(1)]],
                       device const uchar* w [[buffer(2)]], device const uchar* sc [[buffer(3)]],
                       device const uchar* bi [[buffer(4)]], device float* out [[buffer(5)]],
                       device atomic_uint* stats [[buffer(6)]], uint2 tg [[threadgroup_position_in_grid]],
                       ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]],
                       ushort nsg [[simdgroups_per_threadgroup]]) {
  const uint t = tg.x * nsg + sg;
  if (t >= a.m) {
    return;
  }
  const int id = tokens[t];
  if (id < 0 || uint(id) >= a.n) {
    if (lane == 0) {
      record_error(stats, ERR_TOKEN_ID, uint(id));
    }
    return;
  }
  const uint sz = q_scale_bytes(a);
  QRow q = {w + ulong(id) * a.row_bytes, sc + ulong(id) * sz, bi + ulong(id) * sz, uint(ulong(id) * a.row_bytes & 7)};
  for (uint i0 = 32 * lane; i0 < a.k; i0 += 32 * 32) {
    float v[32];
    q_values<F>(q, i0, a, v);
    device float4* o = (device float4*)(out + ulong(t) * a.k + i0);
    for (int i = 0; i < 8; i++) {
      o[i] = float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
    }
  }
}

// ---------------------------------------------------------------------------
// Packed GEMM tiles, for many rows of x (prefill): the GEMVs above read a
// packed matrix once per 8 rows of x, a tile once per mm_bm. A threadgroup
// of mm_sgm × mm_sgn simdgroups computes an mm_bm × mm_bn tile of the
// output (gemm.h's MMAcc and mm_coord), staging a k step of QMM_BK values
// of its activation rows and of its weight rows, the latter dequantized as
// they are staged (each a unit of 32 values: q_values), never into device
// memory. threadgroup(0) holds mm_stages stages of (mm_bm +
// mats·mm_bn)·QMM_LD floats (bridge/metal: qmmMemory).
// ---------------------------------------------------------------------------
#define QMM_BK 32
#define QMM_LD (QMM_BK + 4) // staged row stride: 16 bytes of padding, as gemm.h's rows
// The most weight rows a thread stages a k step: gate and up's 2·mm_bn rows
// over 32·mm_sgm·mm_sgn threads, mm_bn at most 8·MM_MAX_TN·mm_sgn.
#define QMM_MAX_ROWS (2 * 8 * MM_MAX_TN / 32)

// QRows is a packed matrix: its rows' values, scales and biases, and w's
// byte offset mod 8 from its bound buffer (an expert's e·w_stride), which
// with each row's offset places q_values's loads (QRow's w8).
struct QRows {
  device const uchar* w;
  device const uchar* s;
  device const uchar* b;
  uint w8;
};

// qmm_stage stages k step k0 of the tile into one stage (As, Bs, Us): the
// activation rows, 16 bytes a thread at a time (k is a multiple of 32 in
// every packed format), and the weight rows, one 32-value unit each,
// dequantized; a thread's j-th row is the same at every step (held[j]),
// whose steps it stages in k order.
template <int F, bool DUAL>
inline void qmm_stage(constant QMatArgs& a, device const float* x, threadgroup const int* src, QRows w0, QRows w1,
                      uint n, uint n0, uint k0, threadgroup float* As, threadgroup float* Bs, threadgroup float* Us,
                      ushort tid, ushort ntg, thread QAffineHeld* held) {
  const int BM = mm_bm, BN = mm_bn;
  const uint sz = q_scale_bytes(a);
  for (int i = tid; i < BM * (QMM_BK / 4); i += ntg) {
    const int r = i / (QMM_BK / 4), c = (i % (QMM_BK / 4)) * 4;
    float4 v = 0.0f;
    if (src[r] >= 0) {
      v = *(device const float4*)(x + ulong(src[r]) * a.k + k0 + c);
    }
    *(threadgroup float4*)(As + r * QMM_LD + c) = v;
  }
  for (int j = 0; j < QMM_MAX_ROWS; j++) {
    const int i = tid + j * ntg;
    if (i >= (DUAL ? 2 : 1) * BN) {
      break;
    }
    const int r = i % BN;
    const bool up = DUAL && i >= BN;
    const QRows m = up ? w1 : w0;
    const uint row = n0 + uint(r);
    float v[32];
    if (row < n) {
      const ulong ro = ulong(row) * a.row_bytes;
      q_tile_values<F>(QRow{m.w + ro, m.s + ulong(row) * sz, m.b + ulong(row) * sz, uint((m.w8 + ro) & 7)}, k0, a,
                       held[j], v);
    } else {
      for (int e = 0; e < 32; e++) {
        v[e] = 0.0f;
      }
    }
    threadgroup float* dst = (up ? Us : Bs) + r * QMM_LD;
    for (int e = 0; e < 32; e += 4) {
      *(threadgroup float4*)(dst + e) = float4(v[e], v[e + 1], v[e + 2], v[e + 3]);
    }
  }
}

// qmm_accumulate computes the tile's products over all of k into acc0 (w0)
// and, when DUAL, acc1 (w1: gate and up over one activation tile): tile
// row r is row src[r] of x (-1: none), columns are weight rows n0.. (of n).
// With mm_stages == 2 the staging is double buffered, as gemm.h's
// mm_accumulate: step s+1 is staged into the other stage before step s's
// multiplies, one barrier a k step; with 1 (two stages do not fit in 31
// KiB: bridge/metal qmmMemory) a barrier before and after each step's
// multiplies. Every thread of the threadgroup must call it, after src is
// written and a barrier.
template <int F, bool DUAL>
inline void qmm_accumulate(constant QMatArgs& a, device const float* x, threadgroup const int* src, QRows w0, QRows w1,
                           uint n, uint n0, threadgroup float* smem, ushort tid, ushort ntg, ushort sg,
                           thread MMAcc& acc0, thread MMAcc& acc1) {
  const int BM = mm_bm, BN = mm_bn, TM = BM / (8 * mm_sgm), TN = BN / (8 * mm_sgn);
  const int sgm = sg / mm_sgn, sgn = sg % mm_sgn;
  const int SL = (BM + (DUAL ? 2 : 1) * BN) * QMM_LD; // one stage's floats
  for (int i = 0; i < TM; i++) {
    for (int j = 0; j < TN; j++) {
      acc0.t[i][j] = make_filled_simdgroup_matrix<float, 8>(0.0f);
      acc1.t[i][j] = make_filled_simdgroup_matrix<float, 8>(0.0f);
    }
  }
  QAffineHeld held[QMM_MAX_ROWS];
  if (mm_stages == 2 && a.k > 0) { // prologue: step 0 into stage 0
    qmm_stage<F, DUAL>(a, x, src, w0, w1, n, n0, 0, smem, smem + BM * QMM_LD, smem + (BM + BN) * QMM_LD, tid, ntg,
                       held);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  for (uint s = 0, k0 = 0; k0 < a.k; s++, k0 += QMM_BK) {
    threadgroup float* As = smem + (mm_stages == 2 ? int(s & 1) : 0) * SL;
    threadgroup float* Bs = As + BM * QMM_LD;
    threadgroup float* Us = Bs + BN * QMM_LD;
    const bool next = mm_stages == 2 && k0 + QMM_BK < a.k;
    if (mm_stages != 2) {
      qmm_stage<F, DUAL>(a, x, src, w0, w1, n, n0, k0, As, Bs, Us, tid, ntg, held);
      threadgroup_barrier(mem_flags::mem_threadgroup);
    } else if (next) { // the other stage: last read in step s-1, before its barrier
      threadgroup float* An = smem + int(1 - (s & 1)) * SL;
      qmm_stage<F, DUAL>(a, x, src, w0, w1, n, n0, k0 + QMM_BK, An, An + BM * QMM_LD, An + (BM + BN) * QMM_LD, tid,
                         ntg, held);
    }
    for (int kk = 0; kk < QMM_BK; kk += 8) {
      simdgroup_float8x8 af[MM_MAX_TM], bf[MM_MAX_TN];
      for (int i = 0; i < TM; i++) {
        simdgroup_load(af[i], As + (sgm * TM * 8 + i * 8) * QMM_LD + kk, QMM_LD);
      }
      for (int j = 0; j < TN; j++) {
        simdgroup_load(bf[j], Bs + (sgn * TN * 8 + j * 8) * QMM_LD + kk, QMM_LD, ulong2(0, 0), true);
      }
      for (int i = 0; i < TM; i++) {
        for (int j = 0; j < TN; j++) {
          simdgroup_multiply_accumulate(acc0.t[i][j], af[i], bf[j], acc0.t[i][j]);
        }
      }
      if (DUAL) {
        for (int j = 0; j < TN; j++) {
          simdgroup_load(bf[j], Us + (sgn * TN * 8 + j * 8) * QMM_LD + kk, QMM_LD, ulong2(0, 0), true);
        }
        for (int i = 0; i < TM; i++) {
          for (int j = 0; j < TN; j++) {
            simdgroup_multiply_accumulate(acc1.t[i][j], af[i], bf[j], acc1.t[i][j]);
          }
        }
      }
    }
    if (mm_stages != 2 || next) {
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
  }
}

// qmatmul_mm: out[m][n] = x[m][k]·wᵀ (+ bias) on packed tiles. Grid:
// (ceil(n / mm_bn), ceil(m / mm_bm)), mm_bm at most 64.
template <int F>
[[max_total_threads_per_threadgroup(MM_MAX_THREADS)]]
kernel void qmatmul_mm(constant QMatArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                       device const uchar* w [[buffer(2)]], device const uchar* s [[buffer(3)]],
                       device const uchar* b [[buffer(4)]], device float* out [[buffer(5)]],
                       device const float* bias [[buffer(6), function_constant(has_bias)]],
                       threadgroup float* smem [[threadgroup(0)]], uint2 tg [[threadgroup_position_in_grid]],
                       ushort tid [[thread_index_in_threadgroup]], uint2 ntgv [[threads_per_threadgroup]],
                       ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]]) {
  const ushort ntg = ushort(ntgv.x);
  threadgroup int src[64];
  const uint m0 = tg.y * uint(mm_bm), n0 = tg.x * uint(mm_bn);
  for (int r = tid; r < mm_bm; r += ntg) {
    src[r] = m0 + uint(r) < a.m ? int(m0) + r : -1;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const QRows q = {w, s, b, 0u};
  MMAcc acc, unused;
  qmm_accumulate<F, false>(a, x, src, q, q, a.n, n0, smem, tid, ntg, sg, acc, unused);
  const int TM = mm_bm / (8 * mm_sgm), TN = mm_bn / (8 * mm_sgn);
  for (int i = 0; i < TM; i++) {
    for (int j = 0; j < TN; j++) {
      int r, c;
      mm_coord(sg, lane, i, j, r, c);
      const float2 v = acc.t[i][j].thread_elements();
      const uint row = m0 + uint(r), col = n0 + uint(c);
      if (row >= a.m) {
        continue;
      }
      for (int e = 0; e < 2; e++) {
        if (col + uint(e) < a.n) {
          out[ulong(row) * a.n + col + e] = v[e] + (has_bias ? bias[col + e] : 0.0f);
        }
      }
    }
  }
}

// qmoe_mm_gate_up: the packed experts' gate and up GEMMs over tiles of up
// to mm_bm (token, expert) pairs of one expert (moe_group's tiles, as
// moe_mm_gate_up), SwiGLU in the epilogue: h[pair slot] = silu(x·gateᵀ) ·
// (x·upᵀ). Grid: (ceil(inter / mm_bn), tile slots).
template <int F>
[[max_total_threads_per_threadgroup(MM_MAX_THREADS)]]
kernel void qmoe_mm_gate_up(constant QMatArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                            device const int* perm [[buffer(2)]], device const MoETile* tiles [[buffer(3)]],
                            device const uchar* gw [[buffer(4)]], device const uchar* gs [[buffer(5)]],
                            device const uchar* gb [[buffer(6)]], device const uchar* uw [[buffer(7)]],
                            device const uchar* us [[buffer(8)]], device const uchar* ub [[buffer(9)]],
                            device float* h [[buffer(10)]], threadgroup float* smem [[threadgroup(0)]],
                            uint2 tg [[threadgroup_position_in_grid]], ushort tid [[thread_index_in_threadgroup]],
                            uint2 ntgv [[threads_per_threadgroup]], ushort lane [[thread_index_in_simdgroup]],
                            ushort sg [[simdgroup_index_in_threadgroup]]) {
  const ushort ntg = ushort(ntgv.x);
  threadgroup int src[64];
  const MoETile tile = tiles[tg.y];
  if (tile.expert < 0 || uint(tile.expert) >= a.experts) {
    return;
  }
  const uint n0 = tg.x * uint(mm_bn);
  for (int r = tid; r < mm_bm; r += ntg) {
    src[r] = r < tile.rows ? perm[tile.row0 + r] / int(a.top_k) : -1;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const ulong e = ulong(tile.expert);
  const QRows g = {gw + e * a.w_stride, gs + e * a.s_stride, gb + e * a.s_stride, uint((e * a.w_stride) & 7)};
  const QRows u = {uw + e * a.w_stride, us + e * a.s_stride, ub + e * a.s_stride, uint((e * a.w_stride) & 7)};
  MMAcc ga, ua;
  qmm_accumulate<F, true>(a, x, src, g, u, a.n, n0, smem, tid, ntg, sg, ga, ua);
  const int TM = mm_bm / (8 * mm_sgm), TN = mm_bn / (8 * mm_sgn);
  for (int i = 0; i < TM; i++) {
    for (int j = 0; j < TN; j++) {
      int r, c;
      mm_coord(sg, lane, i, j, r, c);
      const float2 gv = ga.t[i][j].thread_elements(), uv = ua.t[i][j].thread_elements();
      if (r >= tile.rows) {
        continue;
      }
      for (int k = 0; k < 2; k++) {
        const uint col = n0 + uint(c + k);
        if (col < a.n) {
          h[ulong(tile.row0 + r) * a.n + col] = silu(gv[k]) * uv[k];
        }
      }
    }
  }
}

// qmoe_mm_down: out[token] += weight(pair) · (h[pair slot]·downᵀ), the
// weighted scatter-add of every routed expert's rows into their tokens'
// output rows (cleared by moe_route), also into residual with
// moe_residual; it clears its expert's flag for the next call, as
// moe_mm_down does. The adds are atomic, so their order, and the output's
// last bits, vary from run to run. Grid: (ceil(hidden / mm_bn), tile slots).
template <int F>
[[max_total_threads_per_threadgroup(MM_MAX_THREADS)]]
kernel void qmoe_mm_down(constant QMatArgs& a [[buffer(0)]], device const float* h [[buffer(1)]],
                         device const int* perm [[buffer(2)]], device const MoETile* tiles [[buffer(3)]],
                         device const uchar* dw [[buffer(4)]], device const uchar* ds [[buffer(5)]],
                         device const uchar* db [[buffer(6)]], device float* out [[buffer(7)]],
                         device const float* weights [[buffer(8)]], device atomic_uint* flags [[buffer(9)]],
                         device float* residual [[buffer(10), function_constant(moe_residual)]],
                         threadgroup float* smem [[threadgroup(0)]], uint2 tg [[threadgroup_position_in_grid]],
                         ushort tid [[thread_index_in_threadgroup]], uint2 ntgv [[threads_per_threadgroup]],
                         ushort lane [[thread_index_in_simdgroup]], ushort sg [[simdgroup_index_in_threadgroup]]) {
  const ushort ntg = ushort(ntgv.x);
  threadgroup int src[64];
  threadgroup int tok[64];
  threadgroup float wt[64];
  const MoETile tile = tiles[tg.y];
  if (tile.expert < 0 || uint(tile.expert) >= a.experts) {
    return;
  }
  const uint n0 = tg.x * uint(mm_bn);
  for (int r = tid; r < mm_bm; r += ntg) {
    const int pair = r < tile.rows ? perm[tile.row0 + r] : -1;
    src[r] = pair >= 0 ? tile.row0 + r : -1;
    tok[r] = pair >= 0 ? pair / int(a.top_k) : 0;
    wt[r] = pair >= 0 ? weights[pair] : 0.0f;
  }
  if (tg.x == 0 && tid == 0) {
    atomic_store_explicit(&flags[tile.expert], 0u, memory_order_relaxed);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const ulong e = ulong(tile.expert);
  const QRows d = {dw + e * a.w_stride, ds + e * a.s_stride, db + e * a.s_stride, uint((e * a.w_stride) & 7)};
  MMAcc acc, unused;
  qmm_accumulate<F, false>(a, h, src, d, d, a.n, n0, smem, tid, ntg, sg, acc, unused);
  const int TM = mm_bm / (8 * mm_sgm), TN = mm_bn / (8 * mm_sgn);
  for (int i = 0; i < TM; i++) {
    for (int j = 0; j < TN; j++) {
      int r, c;
      mm_coord(sg, lane, i, j, r, c);
      const float2 v = acc.t[i][j].thread_elements();
      if (r >= tile.rows) {
        continue;
      }
      const ulong o = ulong(tok[r]) * a.n;
      for (int k = 0; k < 2; k++) {
        const uint col = n0 + uint(c + k);
        if (col < a.n) {
          const float y = wt[r] * v[k];
          atomic_fetch_add_explicit((device atomic_float*)(out + o + col), y, memory_order_relaxed);
          if (moe_residual) {
            atomic_fetch_add_explicit((device atomic_float*)(residual + o + col), y, memory_order_relaxed);
          }
        }
      }
    }
  }
}

#define INSTANTIATE_Q(F, mv, mm, moe, msum, emb, mgu, mdn)                                                                           \
  template [[host_name(#mv)]] kernel void qmatvec<F>(                                                            \
      constant QMatArgs&, device const float*, device const uchar*, device const uchar*, device const uchar*,     \
      device float*, device const float*, device const float*, device float*, device const uchar*,               \
      device const uchar*, device const uchar*, device float*, device const float*, device const uchar*,         \
      device const uchar*, device const uchar*, device float*, device const float*, device const float*,         \
      device float*, device uint*, uint2, ushort, ushort, ushort, ushort);                                       \
  template [[host_name(#moe)]] kernel void qmoe_mv<F>(                                                           \
      constant QMatArgs&, device const float*, device int*, device const uchar*, device const uchar*,             \
      device const uchar*, device const uchar*, device const uchar*, device const uchar*, device float*,          \
      device atomic_uint*, device const float*, device const float*, device float*, device atomic_uint*,          \
      device atomic_uint*, device const int*, device const MoETile*, uint2, ushort, ushort, ushort, ushort);       \
  template [[host_name(#msum)]] kernel void qmoe_mv_sum<F>(                                                \
      constant QMatArgs&, device const float*, device const int*, device const uchar*, device const uchar*,       \
      device const uchar*, device const float*, device atomic_uint*, device float*, device atomic_uint*,          \
      device float*, uint2, ushort, ushort, ushort, ushort);                                                       \
  template [[host_name(#emb)]] kernel void qembedding<F>(                                                        \
      constant QMatArgs&, device const int*, device const uchar*, device const uchar*, device const uchar*,       \
      device float*, device atomic_uint*, uint2, ushort, ushort, ushort);                                         \
  template [[host_name(#mm)]] kernel void qmatmul_mm<F>(                                                     \
      constant QMatArgs&, device const float*, device const uchar*, device const uchar*, device const uchar*,     \
      device float*, device const float*, threadgroup float*, uint2, ushort, uint2, ushort, ushort);             \
  template [[host_name(#mgu)]] kernel void qmoe_mm_gate_up<F>(                                                   \
      constant QMatArgs&, device const float*, device const int*, device const MoETile*, device const uchar*,    \
      device const uchar*, device const uchar*, device const uchar*, device const uchar*, device const uchar*,   \
      device float*, threadgroup float*, uint2, ushort, uint2, ushort, ushort);                                  \
  template [[host_name(#mdn)]] kernel void qmoe_mm_down<F>(                                                      \
      constant QMatArgs&, device const float*, device const int*, device const MoETile*, device const uchar*,    \
      device const uchar*, device const uchar*, device float*, device const float*, device atomic_uint*,         \
      device float*, threadgroup float*, uint2, ushort, uint2, ushort, ushort);

INSTANTIATE_Q(QF_AFFINE4, qmatvec_affine4, qmatmul_mm_affine4, qmoe_mv_affine4, qmoe_mv_sum_affine4, qembedding_affine4, qmoe_mm_gate_up_affine4, qmoe_mm_down_affine4)
INSTANTIATE_Q(QF_AFFINE8, qmatvec_affine8, qmatmul_mm_affine8, qmoe_mv_affine8, qmoe_mv_sum_affine8, qembedding_affine8, qmoe_mm_gate_up_affine8, qmoe_mm_down_affine8)
INSTANTIATE_Q(QF_AFFINE2, qmatvec_affine2, qmatmul_mm_affine2, qmoe_mv_affine2, qmoe_mv_sum_affine2, qembedding_affine2, qmoe_mm_gate_up_affine2, qmoe_mm_down_affine2)
INSTANTIATE_Q(QF_AFFINE3, qmatvec_affine3, qmatmul_mm_affine3, qmoe_mv_affine3, qmoe_mv_sum_affine3, qembedding_affine3, qmoe_mm_gate_up_affine3, qmoe_mm_down_affine3)
INSTANTIATE_Q(QF_AFFINE5, qmatvec_affine5, qmatmul_mm_affine5, qmoe_mv_affine5, qmoe_mv_sum_affine5, qembedding_affine5, qmoe_mm_gate_up_affine5, qmoe_mm_down_affine5)
INSTANTIATE_Q(QF_AFFINE6, qmatvec_affine6, qmatmul_mm_affine6, qmoe_mv_affine6, qmoe_mv_sum_affine6, qembedding_affine6, qmoe_mm_gate_up_affine6, qmoe_mm_down_affine6)
INSTANTIATE_Q(QF_Q8_0, qmatvec_q8_0, qmatmul_mm_q8_0, qmoe_mv_q8_0, qmoe_mv_sum_q8_0, qembedding_q8_0, qmoe_mm_gate_up_q8_0, qmoe_mm_down_q8_0)
INSTANTIATE_Q(QF_Q4_0, qmatvec_q4_0, qmatmul_mm_q4_0, qmoe_mv_q4_0, qmoe_mv_sum_q4_0, qembedding_q4_0, qmoe_mm_gate_up_q4_0, qmoe_mm_down_q4_0)
INSTANTIATE_Q(QF_Q4_K, qmatvec_q4_k, qmatmul_mm_q4_k, qmoe_mv_q4_k, qmoe_mv_sum_q4_k, qembedding_q4_k, qmoe_mm_gate_up_q4_k, qmoe_mm_down_q4_k)
INSTANTIATE_Q(QF_Q5_K, qmatvec_q5_k, qmatmul_mm_q5_k, qmoe_mv_q5_k, qmoe_mv_sum_q5_k, qembedding_q5_k, qmoe_mm_gate_up_q5_k, qmoe_mm_down_q5_k)
INSTANTIATE_Q(QF_Q3_K, qmatvec_q3_k, qmatmul_mm_q3_k, qmoe_mv_q3_k, qmoe_mv_sum_q3_k, qembedding_q3_k, qmoe_mm_gate_up_q3_k, qmoe_mm_down_q3_k)
INSTANTIATE_Q(QF_IQ4_XS, qmatvec_iq4_xs, qmatmul_mm_iq4_xs, qmoe_mv_iq4_xs, qmoe_mv_sum_iq4_xs, qembedding_iq4_xs, qmoe_mm_gate_up_iq4_xs, qmoe_mm_down_iq4_xs)
INSTANTIATE_Q(QF_IQ4_NL, qmatvec_iq4_nl, qmatmul_mm_iq4_nl, qmoe_mv_iq4_nl, qmoe_mv_sum_iq4_nl, qembedding_iq4_nl, qmoe_mm_gate_up_iq4_nl, qmoe_mm_down_iq4_nl)
INSTANTIATE_Q(QF_MXFP4, qmatvec_mxfp4, qmatmul_mm_mxfp4, qmoe_mv_mxfp4, qmoe_mv_sum_mxfp4, qembedding_mxfp4, qmoe_mm_gate_up_mxfp4, qmoe_mm_down_mxfp4)
INSTANTIATE_Q(QF_NVFP4, qmatvec_nvfp4, qmatmul_mm_nvfp4, qmoe_mv_nvfp4, qmoe_mv_sum_nvfp4, qembedding_nvfp4, qmoe_mm_gate_up_nvfp4, qmoe_mm_down_nvfp4)
INSTANTIATE_Q(QF_MXFP8, qmatvec_mxfp8, qmatmul_mm_mxfp8, qmoe_mv_mxfp8, qmoe_mv_sum_mxfp8, qembedding_mxfp8, qmoe_mm_gate_up_mxfp8, qmoe_mm_down_mxfp8)
INSTANTIATE_Q(QF_Q6_K, qmatvec_q6_k, qmatmul_mm_q6_k, qmoe_mv_q6_k, qmoe_mv_sum_q6_k, qembedding_q6_k, qmoe_mm_gate_up_q6_k, qmoe_mm_down_q6_k)
INSTANTIATE_Q(QF_Q2_K, qmatvec_q2_k, qmatmul_mm_q2_k, qmoe_mv_q2_k, qmoe_mv_sum_q2_k, qembedding_q2_k, qmoe_mm_gate_up_q2_k, qmoe_mm_down_q2_k)
INSTANTIATE_Q(QF_IQ2_XXS, qmatvec_iq2_xxs, qmatmul_mm_iq2_xxs, qmoe_mv_iq2_xxs, qmoe_mv_sum_iq2_xxs, qembedding_iq2_xxs, qmoe_mm_gate_up_iq2_xxs, qmoe_mm_down_iq2_xxs)
INSTANTIATE_Q(QF_IQ2_XS, qmatvec_iq2_xs, qmatmul_mm_iq2_xs, qmoe_mv_iq2_xs, qmoe_mv_sum_iq2_xs, qembedding_iq2_xs, qmoe_mm_gate_up_iq2_xs, qmoe_mm_down_iq2_xs)
INSTANTIATE_Q(QF_IQ2_S, qmatvec_iq2_s, qmatmul_mm_iq2_s, qmoe_mv_iq2_s, qmoe_mv_sum_iq2_s, qembedding_iq2_s, qmoe_mm_gate_up_iq2_s, qmoe_mm_down_iq2_s)
INSTANTIATE_Q(QF_IQ3_XXS, qmatvec_iq3_xxs, qmatmul_mm_iq3_xxs, qmoe_mv_iq3_xxs, qmoe_mv_sum_iq3_xxs, qembedding_iq3_xxs, qmoe_mm_gate_up_iq3_xxs, qmoe_mm_down_iq3_xxs)
INSTANTIATE_Q(QF_IQ3_S, qmatvec_iq3_s, qmatmul_mm_iq3_s, qmoe_mv_iq3_s, qmoe_mv_sum_iq3_s, qembedding_iq3_s, qmoe_mm_gate_up_iq3_s, qmoe_mm_down_iq3_s)
INSTANTIATE_Q(QF_IQ1_S, qmatvec_iq1_s, qmatmul_mm_iq1_s, qmoe_mv_iq1_s, qmoe_mv_sum_iq1_s, qembedding_iq1_s, qmoe_mm_gate_up_iq1_s, qmoe_mm_down_iq1_s)
INSTANTIATE_Q(QF_IQ1_M, qmatvec_iq1_m, qmatmul_mm_iq1_m, qmoe_mv_iq1_m, qmoe_mv_sum_iq1_m, qembedding_iq1_m, qmoe_mm_gate_up_iq1_m, qmoe_mm_down_iq1_m)
