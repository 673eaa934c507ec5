// The row norms' shared core (norm.metal, layernorm.metal): one threadgroup
// a row of n values of T, float4 where the host found the row aligned
// (norm_vec), else float. Where a thread's share of the row fits NORM_KEEP
// values it stays in registers from the first pass, so x (and the
// residual) are read once (docs/metal-kernels.md, "Against llama.cpp's
// kernels"); a wider row streams from memory again on each pass.
#ifndef MTLBENCH_NORM_H
#define MTLBENCH_NORM_H
#include "mtlbench.h"

// The values of T a thread keeps: four float4s, 16 registers, so rows of
// up to 16 values a thread (16384 at 1024 threads) are read once.
#define NORM_KEEP 4

inline float norm_sq(float v) { return v * v; }
inline float norm_sq(float4 v) { return dot(v, v); }
inline float norm_sum(float v) { return v; }
inline float norm_sum(float4 v) { return (v.x + v.y) + (v.z + v.w); }

// norm_load is the row's i-th T: x's, or with ADD residual + x, stored back
// into the residual r (which only ADD reads or writes).
template <typename T, bool ADD>
inline T norm_load(device T* r, device const T* x, uint i) {
  if (ADD) {
    const T v = r[i] + x[i];
    r[i] = v;
    return v;
  }
  return x[i];
}

// norm_again is the i-th T of the row once loaded: what a streaming pass
// reads again (the residual this thread wrote, with ADD).
template <typename T, bool ADD>
inline T norm_again(device T* r, device const T* x, uint i) {
  return ADD ? T(r[i]) : T(x[i]);
}

// norm_kept reports whether every thread's share of n values fits NORM_KEEP.
inline bool norm_kept(uint n, ushort ntg) { return n <= NORM_KEEP * uint(ntg); }

// norm_first is a row's first pass, the one that reads x (and adds the
// residual): each thread's values go to v where they fit (kept), and it
// returns the thread's sum of their squares (SQ) or of the values.
template <typename T, bool ADD, bool SQ>
inline float norm_first(device T* r, device const T* x, uint n, bool kept, thread T* v, ushort tid, ushort ntg) {
  float s = 0.0f;
  if (kept) {
    for (uint j = 0; j < NORM_KEEP; j++) {
      const uint i = tid + j * ntg;
      if (i >= n) {
        break;
      }
      v[j] = norm_load<T, ADD>(r, x, i);
      s += SQ ? norm_sq(v[j]) : norm_sum(v[j]);
    }
  } else {
    for (uint i = tid; i < n; i += ntg) {
      const T u = norm_load<T, ADD>(r, x, i);
      s += SQ ? norm_sq(u) : norm_sum(u);
    }
  }
  return s;
}

// rms_norm_row: o = x / rms(x) * w over a row of n values of T, dim floats.
template <typename T, bool ADD>
inline void rms_norm_row(device T* r, device const T* x, device const T* w, device T* o, uint n, uint dim, float eps,
                         threadgroup float* partial, ushort tid, ushort ntg, ushort lane, ushort sg, ushort nsg) {
  const bool kept = norm_kept(n, ntg);
  T v[NORM_KEEP];
  const float ss = norm_first<T, ADD, true>(r, x, n, kept, v, tid, ntg);
  const float inv = 1.0f / sqrt(tg_sum(ss, partial, lane, sg, nsg) / float(dim) + eps);
  if (kept) {
    for (uint j = 0; j < NORM_KEEP; j++) {
      const uint i = tid + j * ntg;
      if (i >= n) {
        break;
      }
      o[i] = v[j] * inv * w[i];
    }
  } else {
    for (uint i = tid; i < n; i += ntg) {
      o[i] = norm_again<T, ADD>(r, x, i) * inv * w[i];
    }
  }
}

// layer_norm_row: o = (x - mean) / σ * w + b over a row of n values of T,
// dim floats: the mean first, then the variance about it (two reductions,
// as the reference), so a row with a large mean loses nothing.
template <typename T, bool ADD>
inline void layer_norm_row(device T* r, device const T* x, device const T* w, device const T* b, device T* o, uint n,
                           uint dim, float eps, threadgroup float* partial, ushort tid, ushort ntg, ushort lane,
                           ushort sg, ushort nsg) {
  const bool kept = norm_kept(n, ntg);
  T v[NORM_KEEP];
  const float s = norm_first<T, ADD, false>(r, x, n, kept, v, tid, ntg);
  const float mean = tg_sum(s, partial, lane, sg, nsg) / float(dim);
  float ss = 0.0f;
  if (kept) {
    for (uint j = 0; j < NORM_KEEP; j++) {
      if (tid + j * ntg >= n) {
        break;
      }
      ss += norm_sq(v[j] - mean);
    }
  } else {
    for (uint i = tid; i < n; i += ntg) {
      ss += norm_sq(norm_again<T, ADD>(r, x, i) - mean);
    }
  }
  const float inv = 1.0f / sqrt(tg_sum(ss, partial, lane, sg, nsg) / float(dim) + eps);
  if (kept) {
    for (uint j = 0; j < NORM_KEEP; j++) {
      const uint i = tid + j * ntg;
      if (i >= n) {
        break;
      }
      o[i] = (v[j] - mean) * inv * w[i] + b[i];
    }
  } else {
    for (uint i = tid; i < n; i += ntg) {
      o[i] = (norm_again<T, ADD>(r, x, i) - mean) * inv * w[i] + b[i];
    }
  }
}

#endif
