// egtile_common.cuh: types and scalar helpers shared by every egtile kernel.
//
// NVRTC cannot include <cuda.h> (it needs the host C library), so the 128-byte opaque TMA descriptor
// type is declared here with the layout the CUDA driver API documents for CUtensorMap
// (cuda.h: `typedef struct CUtensorMap_st { alignas(64) cuuint64_t opaque[16]; } CUtensorMap;`).
// The host side (egtile.runtime) fills it with cuTensorMapEncodeTiled.
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef __cuda_cuda_h__
struct alignas(64) CUtensorMap {
  unsigned long long opaque[16];
};
#endif

typedef unsigned long long eg_u64;
typedef unsigned int eg_u32;

// Shared-window address of a generic pointer into shared memory: the `r` operand that every
// `.shared::cta` / `.shared::cluster` PTX instruction below takes (PTX ISA 6.4.1, "Generic
// addressing"; cvta.to.shared, PTX ISA 9.7.9.19).
__device__ __forceinline__ eg_u32 eg_smem_addr(const void* p) {
  return static_cast<eg_u32>(__cvta_generic_to_shared(p));
}

// ---- conversions ---------------------------------------------------------------------------------
// C semantics for every pair of element types; half and bfloat16 go through float32, which holds every
// value of both exactly (IEEE 754 binary16 / bfloat16 are subsets of binary32).
template <typename T> struct eg_is_lowp { static constexpr bool value = false; };
template <> struct eg_is_lowp<half> { static constexpr bool value = true; };
template <> struct eg_is_lowp<__nv_bfloat16> { static constexpr bool value = true; };

template <typename To, typename From>
__device__ __forceinline__ To eg_cast(From x) {
  if constexpr (eg_is_lowp<From>::value && eg_is_lowp<To>::value) {
    return To(static_cast<float>(x));
  } else if constexpr (eg_is_lowp<From>::value) {
    return static_cast<To>(static_cast<float>(x));
  } else if constexpr (eg_is_lowp<To>::value) {
    return To(static_cast<float>(x));
  } else {
    return static_cast<To>(x);
  }
}

// ---- integer and float helpers -------------------------------------------------------------------
// Floor division and floor modulo (the tile IR's `//` and `floormod`, TVM's floordiv/floormod); the
// IR's `%` and `/` on integers are C's truncating ones and are emitted as plain operators.
template <typename T>
__device__ __forceinline__ T eg_floordiv(T a, T b) {
  T q = a / b;
  return (q * b != a && ((a < T(0)) != (b < T(0)))) ? q - T(1) : q;
}
__device__ __forceinline__ float eg_floordiv(float a, float b) { return floorf(a / b); }
__device__ __forceinline__ double eg_floordiv(double a, double b) { return floor(a / b); }
template <typename T>
__device__ __forceinline__ T eg_floormod(T a, T b) {
  T r = a % b;
  return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
}
__device__ __forceinline__ float eg_floormod(float a, float b) { return a - floorf(a / b) * b; }
__device__ __forceinline__ double eg_floormod(double a, double b) { return a - floor(a / b) * b; }

template <typename T> __device__ __forceinline__ T eg_min(T a, T b) { return b < a ? b : a; }
template <typename T> __device__ __forceinline__ T eg_max(T a, T b) { return a < b ? b : a; }
// Floats: a NaN operand is ignored (IEEE 754 minNum/maxNum, as the interpreter does).
template <> __device__ __forceinline__ float eg_min<float>(float a, float b) { return fminf(a, b); }
template <> __device__ __forceinline__ float eg_max<float>(float a, float b) { return fmaxf(a, b); }
template <> __device__ __forceinline__ double eg_min<double>(double a, double b) { return fmin(a, b); }
template <> __device__ __forceinline__ double eg_max<double>(double a, double b) { return fmax(a, b); }
template <typename T> __device__ __forceinline__ T eg_abs(T a) { return a < T(0) ? -a : a; }
__device__ __forceinline__ float eg_abs(float a) { return fabsf(a); }
__device__ __forceinline__ double eg_abs(double a) { return fabs(a); }

__device__ __forceinline__ float eg_rem(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double eg_rem(double a, double b) { return fmod(a, b); }

// Identity elements of max / min reductions.
template <typename T> __device__ __forceinline__ T eg_lowest();
template <typename T> __device__ __forceinline__ T eg_highest();
template <> __device__ __forceinline__ float eg_lowest<float>() { return -__int_as_float(0x7f800000); }
template <> __device__ __forceinline__ float eg_highest<float>() { return __int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double eg_lowest<double>() { return -__longlong_as_double(0x7ff0000000000000LL); }
template <> __device__ __forceinline__ double eg_highest<double>() { return __longlong_as_double(0x7ff0000000000000LL); }
template <> __device__ __forceinline__ int eg_lowest<int>() { return -2147483647 - 1; }
template <> __device__ __forceinline__ int eg_highest<int>() { return 2147483647; }
template <> __device__ __forceinline__ long long eg_lowest<long long>() { return -9223372036854775807LL - 1; }
template <> __device__ __forceinline__ long long eg_highest<long long>() { return 9223372036854775807LL; }
template <> __device__ __forceinline__ unsigned int eg_lowest<unsigned int>() { return 0u; }
template <> __device__ __forceinline__ unsigned int eg_highest<unsigned int>() { return 0xffffffffu; }
template <> __device__ __forceinline__ unsigned long long eg_lowest<unsigned long long>() { return 0ull; }
template <> __device__ __forceinline__ unsigned long long eg_highest<unsigned long long>() { return ~0ull; }

// A vector of N elements moved by one ld/st.v2/.v4 (PTX ISA 9.7.9.8, 9.7.9.10): 4, 8 or 16 bytes, aligned
// to its size; egtile.codegen.ops.vector proves the alignment of every address it passes.
template <typename T, int N> struct alignas(sizeof(T) * N) eg_vec { T v[N]; };
template <typename T, int N> __device__ __forceinline__ eg_vec<T, N> eg_vload(const T* p) {
  return *reinterpret_cast<const eg_vec<T, N>*>(p);
}
template <typename T, int N> __device__ __forceinline__ void eg_vstore(T* p, const eg_vec<T, N>& x) {
  *reinterpret_cast<eg_vec<T, N>*>(p) = x;
}
