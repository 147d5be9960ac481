// egtile_fp8.cuh: the 8-bit float element types, for kernels that use float8_e4m3fn / float8_e5m2
// (codegen/emit.py includes it only then: cuda_fp8.h adds NVRTC time to every kernel that includes it).
//
// They convert through float32, which holds every e4m3 and e5m2 value exactly. The constructors from float
// round to nearest even and saturate (__nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...), cuda_fp8.hpp; PTX
// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32, PTX ISA 9.7.9.21): beyond the largest finite value, infinities
// included, gives the largest finite value of the sign; NaN stays NaN. egtile.evaluate.round_fp8 is the
// same definition on the CPU.
#pragma once

#include <cuda_fp8.h>

#include "egtile_common.cuh"

template <> struct eg_is_lowp<__nv_fp8_e4m3> { static constexpr bool value = true; };
template <> struct eg_is_lowp<__nv_fp8_e5m2> { static constexpr bool value = true; };
