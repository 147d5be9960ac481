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
// value of both exactly (IEEE 754 binary16 / bfloat16 are subsets of binary32). The float8 formats are
// added by egtile_fp8.cuh, included only by kernels that use them (cuda_fp8.h costs NVRTC time).
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

// T.reinterpret (the tile IR's bit cast): the same bits read as another type of the same width, as TVM's CUDA
// code generator emits it (`*(To*)&x`; CUDA's __float_as_uint and kin are the same for their pairs).
template <typename To, typename From>
__device__ __forceinline__ To eg_bitcast(From x) {
  static_assert(sizeof(To) == sizeof(From), "T.reinterpret keeps the width");
  return *reinterpret_cast<const To*>(&x);
}

// ---- integer and float helpers -------------------------------------------------------------------
// Floor division and floor modulo (the tile IR's `//` and `floormod`, TVM's floordiv/floormod); the
// IR's `%` and `/` on integers are C's truncating ones and are emitted as plain operators. On floats both
// work on the rounded quotient of the value's precision (float32 below float64) and floormod rounds the
// product and the difference separately (NVRTC runs with --fmad=false), exactly as egtile.evaluate does.
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
// Floats: IEEE 754-2019 minimumNumber / maximumNumber, the sign of a zero result defined (as egtile.evaluate
// computes it): a NaN operand is ignored, and -0.0 < +0.0. Branch-free: fminf/fmaxf are IEEE maxNum (a NaN
// operand is treated as missing data, CUDA Math API) and differ from minimumNumber/maximumNumber only in which
// zero they return for two zeros of opposite signs; equal operands are resolved on their bits (OR gives -0.0 for
// the minimum, AND +0.0 for the maximum; equal non-zero operands have equal bits). One FMNMX, a compare, a LOP3
// and a select, instead of a branch per operand (the softmax's row maximum runs this per element).
// Under fast math (TileLang's TL_ENABLE_FAST_MATH: NVRTC --use_fast_math -DEGTILE_FAST_MATH) the sign of a
// zero result is not specified, as with the other fast-math relaxations: one FMNMX.
#ifdef EGTILE_FAST_MATH
template <> __device__ __forceinline__ float eg_min<float>(float a, float b) { return fminf(a, b); }
template <> __device__ __forceinline__ float eg_max<float>(float a, float b) { return fmaxf(a, b); }
#else
template <> __device__ __forceinline__ float eg_min<float>(float a, float b) {
  const float m = fminf(a, b);
  return a == b ? __int_as_float(__float_as_int(a) | __float_as_int(b)) : m;
}
template <> __device__ __forceinline__ float eg_max<float>(float a, float b) {
  const float m = fmaxf(a, b);
  return a == b ? __int_as_float(__float_as_int(a) & __float_as_int(b)) : m;
}
#endif
template <> __device__ __forceinline__ double eg_min<double>(double a, double b) {
  const double m = fmin(a, b);
  return a == b ? __longlong_as_double(__double_as_longlong(a) | __double_as_longlong(b)) : m;
}
template <> __device__ __forceinline__ double eg_max<double>(double a, double b) {
  const double m = fmax(a, b);
  return a == b ? __longlong_as_double(__double_as_longlong(a) & __double_as_longlong(b)) : m;
}

// Fused multiply-add for tile-op accumulations (SIMT gemm): `acc + a * b` rounded once. Written out because
// egtile compiles with --fmad=false, which keeps scalar expressions unfused, as the oracle evaluates them.
__device__ __forceinline__ float eg_fma(float acc, float a, float b) { return fmaf(a, b, acc); }
__device__ __forceinline__ double eg_fma(double acc, double a, double b) { return fma(a, b, acc); }
template <typename T> __device__ __forceinline__ T eg_fma(T acc, T a, T b) { return acc + a * b; }

// Shifts with a non-constant count, as PTX shl/shr define them (PTX ISA, "Logic and Shift Instructions"):
// the count is unsigned and clamped to the operand width, so a count < 0 or >= the width gives 0 for
// `<<` and the sign fill (0 or -1) for `>>`; C leaves both undefined. The left shift goes through the
// unsigned type (a negative left operand is undefined in C++17).
template <typename T> struct eg_unsigned;
template <> struct eg_unsigned<signed char> { typedef unsigned char type; };
template <> struct eg_unsigned<unsigned char> { typedef unsigned char type; };
template <> struct eg_unsigned<short> { typedef unsigned short type; };
template <> struct eg_unsigned<unsigned short> { typedef unsigned short type; };
template <> struct eg_unsigned<int> { typedef unsigned int type; };
template <> struct eg_unsigned<unsigned int> { typedef unsigned int type; };
template <> struct eg_unsigned<long long> { typedef unsigned long long type; };
template <> struct eg_unsigned<unsigned long long> { typedef unsigned long long type; };
template <typename T>
__device__ __forceinline__ T eg_shl(T a, long long s) {
  constexpr long long bits = sizeof(T) * 8;
  return (s < 0 || s >= bits) ? T(0) : T(typename eg_unsigned<T>::type(a) << s);
}
template <typename T>
__device__ __forceinline__ T eg_shr(T a, long long s) {
  constexpr long long bits = sizeof(T) * 8;
  return (s < 0 || s >= bits) ? T((a >> (bits - 1)) >> 1) : T(a >> s);
}

// Math intrinsics below float64 are CUDA's float32 functions (CUDA C++ Programming Guide, "Mathematical
// Functions", maximum ulp error without -use_fast_math: expf 2, exp2f 2, logf 1, log2f 1, sinf 2, cosf 2,
// tanhf 2, rsqrtf 2): the speed a softmax or an activation needs. The CPU oracle (egtile.evaluate) returns
// the correctly rounded float32 value, so the two differ by at most those bounds (docs/language.md). The
// float64 overloads are CUDA's float64 functions.
__device__ __forceinline__ float eg_exp(float x) { return expf(x); }
__device__ __forceinline__ float eg_exp2(float x) { return exp2f(x); }
__device__ __forceinline__ float eg_log(float x) { return logf(x); }
__device__ __forceinline__ float eg_log2(float x) { return log2f(x); }
__device__ __forceinline__ float eg_sin(float x) { return sinf(x); }
__device__ __forceinline__ float eg_cos(float x) { return cosf(x); }
__device__ __forceinline__ float eg_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ float eg_rsqrt(float x) { return rsqrtf(x); }
// sqrt is correctly rounded in both precisions (IEEE 754; NVRTC --prec-sqrt=true).
__device__ __forceinline__ float eg_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double eg_exp(double x) { return exp(x); }
__device__ __forceinline__ double eg_exp2(double x) { return exp2(x); }
__device__ __forceinline__ double eg_log(double x) { return log(x); }
__device__ __forceinline__ double eg_log2(double x) { return log2(x); }
__device__ __forceinline__ double eg_sin(double x) { return sin(x); }
__device__ __forceinline__ double eg_cos(double x) { return cos(x); }
__device__ __forceinline__ double eg_tanh(double x) { return tanh(x); }
__device__ __forceinline__ double eg_rsqrt(double x) { return 1.0 / sqrt(x); }
__device__ __forceinline__ double eg_sqrt(double x) { return sqrt(x); }
// TVM's tir.erf / log1p / floor / ceil / round / pow / isnan / isinf (egtile/mathfns.py declares each with its
// ulp bound): erff 2, log1pf 1, powf 4 ulp (the same Guide table); floor, ceil, rint and round are exact, so
// they agree with the oracle bit for bit. T.round is rint: ties to even, TileLang's default rounding mode
// (its CUDA lowering is nearbyintf, hrint for half/bfloat16); T.round(x, "ties-away-from-zero") is roundf.
__device__ __forceinline__ float eg_erf(float x) { return erff(x); }
__device__ __forceinline__ float eg_log1p(float x) { return log1pf(x); }
__device__ __forceinline__ float eg_floor(float x) { return floorf(x); }
__device__ __forceinline__ float eg_ceil(float x) { return ceilf(x); }
__device__ __forceinline__ float eg_round(float x) { return rintf(x); }
__device__ __forceinline__ float eg_round_away(float x) { return roundf(x); }
__device__ __forceinline__ float eg_pow(float x, float y) { return powf(x, y); }
// isnan / isinf spelled with comparisons only: the header also compiles on the host (tests/test_common_header_host.py),
// where they are std:: functions, and neither NVRTC's fast math nor -ffp-contract changes a comparison
__device__ __forceinline__ bool eg_isnan(float x) { return x != x; }
__device__ __forceinline__ bool eg_isinf(float x) { return fabsf(x) > 3.40282347e38f; }
__device__ __forceinline__ double eg_erf(double x) { return erf(x); }
__device__ __forceinline__ double eg_log1p(double x) { return log1p(x); }
__device__ __forceinline__ double eg_floor(double x) { return floor(x); }
__device__ __forceinline__ double eg_ceil(double x) { return ceil(x); }
__device__ __forceinline__ double eg_round(double x) { return rint(x); }
__device__ __forceinline__ double eg_round_away(double x) { return round(x); }
__device__ __forceinline__ double eg_pow(double x, double y) { return pow(x, y); }
__device__ __forceinline__ bool eg_isnan(double x) { return x != x; }
__device__ __forceinline__ bool eg_isinf(double x) { return fabs(x) > 1.7976931348623157e308; }
__device__ __forceinline__ bool eg_isfinite(float x) { return fabsf(x) <= 3.40282347e38f; }
__device__ __forceinline__ bool eg_isfinite(double x) { return fabs(x) <= 1.7976931348623157e308; }
// The rest of TVM's float math (egtile/mathfns.py): trunc, nearbyint/rint, fmod and copysign are exact, so they
// agree with the oracle bit for bit; the others are within the Guide's float32 bounds: hypotf 3, log10f 2,
// exp10f 2, tanf 4, atan2f 3, sinhf 3, coshf 2, asinf 2, acosf 2, atanf 2 ulp.
__device__ __forceinline__ float eg_trunc(float x) { return truncf(x); }
__device__ __forceinline__ float eg_nearbyint(float x) { return nearbyintf(x); }
__device__ __forceinline__ float eg_rint(float x) { return rintf(x); }
__device__ __forceinline__ float eg_fmod(float x, float y) { return fmodf(x, y); }
__device__ __forceinline__ float eg_copysign(float x, float y) { return copysignf(x, y); }
__device__ __forceinline__ float eg_hypot(float x, float y) { return hypotf(x, y); }
__device__ __forceinline__ float eg_log10(float x) { return log10f(x); }
__device__ __forceinline__ float eg_exp10(float x) { return exp10f(x); }
__device__ __forceinline__ float eg_tan(float x) { return tanf(x); }
__device__ __forceinline__ float eg_atan2(float y, float x) { return atan2f(y, x); }
__device__ __forceinline__ float eg_sinh(float x) { return sinhf(x); }
__device__ __forceinline__ float eg_cosh(float x) { return coshf(x); }
__device__ __forceinline__ float eg_asin(float x) { return asinf(x); }
__device__ __forceinline__ float eg_acos(float x) { return acosf(x); }
__device__ __forceinline__ float eg_atan(float x) { return atanf(x); }
__device__ __forceinline__ double eg_trunc(double x) { return trunc(x); }
__device__ __forceinline__ double eg_nearbyint(double x) { return nearbyint(x); }
__device__ __forceinline__ double eg_rint(double x) { return rint(x); }
__device__ __forceinline__ double eg_fmod(double x, double y) { return fmod(x, y); }
__device__ __forceinline__ double eg_copysign(double x, double y) { return copysign(x, y); }
__device__ __forceinline__ double eg_hypot(double x, double y) { return hypot(x, y); }
__device__ __forceinline__ double eg_log10(double x) { return log10(x); }
__device__ __forceinline__ double eg_exp10(double x) { return exp10(x); }
__device__ __forceinline__ double eg_tan(double x) { return tan(x); }
__device__ __forceinline__ double eg_atan2(double y, double x) { return atan2(y, x); }
__device__ __forceinline__ double eg_sinh(double x) { return sinh(x); }
__device__ __forceinline__ double eg_cosh(double x) { return cosh(x); }
__device__ __forceinline__ double eg_asin(double x) { return asin(x); }
__device__ __forceinline__ double eg_acos(double x) { return acos(x); }
__device__ __forceinline__ double eg_atan(double x) { return atan(x); }
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
