// nvrtc.h: what NVRTC predefines for the kernels (kernels/cuda/*.cu), for
// clang's CUDA front end, so syntax_test.go checks them on machines with no
// GPU: qualifiers, vector types, built-in variables and the intrinsics the
// kernels use. Declarations only; nothing is linked or run.
#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __grid_constant__
#define __CUDACC__ 1
#define __CUDA_ARCH__ 900
#define __CUDACC_VER_MAJOR__ 13
#define CUDA_VERSION 13000
#define __NVCC__ 1
typedef unsigned long size_t;
struct __attribute__((aligned(1))) char1 { char x; };
struct __attribute__((aligned(2))) char2 { char x, y; };
struct __attribute__((aligned(1))) char3 { char x, y, z; };
struct __attribute__((aligned(4))) char4 { char x, y, z, w; };
struct __attribute__((aligned(1))) uchar1 { unsigned char x; };
struct __attribute__((aligned(2))) uchar2 { unsigned char x, y; };
struct __attribute__((aligned(1))) uchar3 { unsigned char x, y, z; };
struct __attribute__((aligned(4))) uchar4 { unsigned char x, y, z, w; };
struct __attribute__((aligned(2))) short1 { short x; };
struct __attribute__((aligned(4))) short2 { short x, y; };
struct __attribute__((aligned(2))) short3 { short x, y, z; };
struct __attribute__((aligned(8))) short4 { short x, y, z, w; };
struct __attribute__((aligned(2))) ushort1 { unsigned short x; };
struct __attribute__((aligned(4))) ushort2 { unsigned short x, y; };
struct __attribute__((aligned(2))) ushort3 { unsigned short x, y, z; };
struct __attribute__((aligned(8))) ushort4 { unsigned short x, y, z, w; };
struct __attribute__((aligned(4))) int1 { int x; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(4))) int3 { int x, y, z; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
struct __attribute__((aligned(4))) uint1 { unsigned int x; };
struct __attribute__((aligned(8))) uint2 { unsigned int x, y; };
struct __attribute__((aligned(4))) uint3 { unsigned int x, y, z; };
struct __attribute__((aligned(16))) uint4 { unsigned int x, y, z, w; };
struct __attribute__((aligned(8))) long1 { long x; };
struct __attribute__((aligned(16))) long2 { long x, y; };
struct __attribute__((aligned(8))) long3 { long x, y, z; };
struct __attribute__((aligned(16))) long4 { long x, y, z, w; };
struct __attribute__((aligned(8))) ulong1 { unsigned long x; };
struct __attribute__((aligned(16))) ulong2 { unsigned long x, y; };
struct __attribute__((aligned(8))) ulong3 { unsigned long x, y, z; };
struct __attribute__((aligned(16))) ulong4 { unsigned long x, y, z, w; };
struct __attribute__((aligned(8))) longlong1 { long long x; };
struct __attribute__((aligned(16))) longlong2 { long long x, y; };
struct __attribute__((aligned(8))) longlong3 { long long x, y, z; };
struct __attribute__((aligned(16))) longlong4 { long long x, y, z, w; };
struct __attribute__((aligned(8))) ulonglong1 { unsigned long long x; };
struct __attribute__((aligned(16))) ulonglong2 { unsigned long long x, y; };
struct __attribute__((aligned(8))) ulonglong3 { unsigned long long x, y, z; };
struct __attribute__((aligned(16))) ulonglong4 { unsigned long long x, y, z, w; };
struct __attribute__((aligned(4))) float1 { float x; };
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(4))) float3 { float x, y, z; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) double1 { double x; };
struct __attribute__((aligned(16))) double2 { double x, y; };
struct __attribute__((aligned(8))) double3 { double x, y, z; };
struct __attribute__((aligned(16))) double4 { double x, y, z, w; };
__device__ static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
__device__ static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
__device__ static inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
__device__ static inline float2 make_float2(float a, float b) { return {a, b}; }
#include <__clang_cuda_builtin_vars.h>
#include <__clang_cuda_libdevice_declares.h>
#include <__clang_cuda_device_functions.h>
#define INT_MAX 2147483647
#define INT_MIN (-INT_MAX-1)
#define HUGE_VAL __builtin_huge_val()
#define HUGE_VALF __builtin_huge_valf()
#include <__clang_cuda_math.h>
#define __CUDA_ARCH_HAS_FEATURE__(x) 1
struct dim3 { unsigned x, y, z; __device__ dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} __device__ dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {} };
typedef unsigned int cuuint32_t;
__device__ unsigned __isShared(const void*);
__device__ size_t __cvta_generic_to_shared(const void*);
#include <__clang_cuda_intrinsics.h>
template <class T> __device__ T __ldcg(const T*);
template <class T> __device__ T __ldcs(const T*);
template <class T> __device__ void __stcg(T*, T);
template <class T> __device__ void __stcs(T*, T);
#define __align__(n) __attribute__((aligned(n)))
__device__ int atomicAdd(int*, int);
__device__ unsigned atomicAdd(unsigned*, unsigned);
__device__ float atomicAdd(float*, float);
__device__ int atomicOr(int*, int);
__device__ int atomicMax(int*, int);
__device__ int atomicExch(int*, int);
__device__ unsigned long long atomicMax(unsigned long long*, unsigned long long);
__device__ unsigned long long atomicExch(unsigned long long*, unsigned long long);
__device__ int atomicCAS(int*, int, int);
__device__ unsigned long long atomicAdd(unsigned long long*, unsigned long long);
__device__ void __syncthreads();
__device__ void __threadfence();
__device__ int __syncthreads_or(int);
__device__ int __syncthreads_count(int);
__device__ int __syncthreads_and(int);
