// egtile_wgmma.cuh: warpgroup matrix multiply-accumulate on sm_90a (PTX ISA 9.7.15, "Asynchronous
// Warpgroup Level Matrix Multiply-Accumulate Instructions"): the async-proxy ordering instructions, the
// 64-bit shared-memory matrix descriptor, and wgmma.mma_async.m64nNk16 with f32 accumulators and
// .f16/.bf16 operands, A from shared memory (SS) or from registers (RS), and .m64nNk32 with .e4m3/.e5m2
// operands (SS, K-major), for every N in 8..256 step 8.
//
// Every thread of a warpgroup (4 consecutive warps starting at a warp index divisible by 4) executes
// each of these with the same operands (.sync.aligned). The layouts they assume -- which thread holds
// which accumulator element, the register-A fragment, and what a descriptor's LBO/SBO/swizzle mean for
// a K-major or MN-major operand tile -- are defined once in egtile.layout (Python), which also computes
// the descriptor fields the codegen bakes in; this header only encodes and issues.
#pragma once
#include "egtile_common.cuh"

// ---- ordering (PTX ISA 9.7.15.7, "Asynchronous wgmma Proxy Operations") ---------------------------------

// wgmma.fence.sync.aligned (PTX ISA 9.7.15.7.1): orders this warpgroup's prior register and shared-memory
// accesses before the wgmma.mma_async that follow. Required before the first wgmma.mma_async of a
// sequence and whenever the accumulator or register-A operands were touched by other instructions since
// the last one (e.g. zeroing, or a conversion that produced A). Shared memory written by ordinary stores
// that a wgmma then reads needs fence.proxy.async.shared::cta as well (egtile_sync.cuh,
// eg_fence_proxy_async_shared); TMA writes completed on an mbarrier need only the wait.
__device__ __forceinline__ void eg_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

// wgmma.commit_group.sync.aligned (PTX ISA 9.7.15.7.2): closes a wgmma-group holding every
// wgmma.mma_async this warpgroup issued since the previous commit (an empty group if none).
__device__ __forceinline__ void eg_wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

// wgmma.wait_group.sync.aligned N (PTX ISA 9.7.15.7.3): waits until at most N of this warpgroup's most
// recent wgmma-groups are pending; all older groups are complete, so their accumulators may be read and
// the shared memory they read may be overwritten. Reading an accumulator (or refilling an operand
// buffer) of a group that may still be pending is a race.
template <int N> __device__ __forceinline__ void eg_wgmma_wait_group() {
  static_assert(N >= 0, "wgmma.wait_group takes a non-negative count");
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Compiler-level fence on accumulator registers: an empty asm that reads and writes each register, so
// that the compiler neither moves accesses of `d` across a wgmma.mma_async / wait_group nor caches them
// (the asynchronous instruction writes them behind the compiler's back). Emit it around the wgmma
// sequence and after the wait, before the accumulators are read.
template <int R> __device__ __forceinline__ void eg_wgmma_fence_operand(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int R> __device__ __forceinline__ void eg_wgmma_fence_operand(eg_u32 (&a)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// ---- shared-memory matrix descriptor (PTX ISA 9.7.15.5.1.2.2, "Matrix Descriptor Format") --------------
// bits 0-13 encode(start address), 16-29 encode(leading dimension byte offset), 32-45 encode(stride
// dimension byte offset), 49-51 matrix base offset, 62-63 swizzle mode; encode(x) = (x & 0x3FFFF) >> 4.
// Addresses and offsets are 16-byte aligned. The base offset is 0 when the operand's swizzle pattern
// starts on a 1024/512/256-byte boundary (128/64/32-byte swizzle); egtile aligns swizzled buffers so.
// What LBO and SBO mean for each major-ness and swizzle: egtile.layout.smem (module docstring).
enum : eg_u32 { EG_WGMMA_SWIZZLE_NONE = 0, EG_WGMMA_SWIZZLE_128B = 1, EG_WGMMA_SWIZZLE_64B = 2, EG_WGMMA_SWIZZLE_32B = 3 };

__host__ __device__ __forceinline__ constexpr eg_u64 eg_wgmma_desc_encode(eg_u32 start, eg_u32 lbo, eg_u32 sbo,
                                                                          eg_u32 swizzle, eg_u32 base_offset = 0) {
  return static_cast<eg_u64>((start & 0x3FFFFu) >> 4) | (static_cast<eg_u64>((lbo & 0x3FFFFu) >> 4) << 16) |
         (static_cast<eg_u64>((sbo & 0x3FFFFu) >> 4) << 32) | (static_cast<eg_u64>(base_offset & 7u) << 49) |
         (static_cast<eg_u64>(swizzle & 3u) << 62);
}

// The warpgroup of rank `rank` (thread index relative to the first thread of the warpgroups issuing a wgmma),
// read from lane 0 with __shfl_sync: the value is the same on every lane either way, but only the shuffle lets
// ptxas know it, so that the descriptors computed from it stay in uniform registers instead of being computed
// per thread and moved over with R2UR before every wgmma (CUTLASS's canonical_warp_group_idx does the same).
// Every lane of the warp must execute it: a wgmma is warpgroup-wide.
__device__ __forceinline__ int eg_warpgroup_of(int rank) { return __shfl_sync(0xffffffffu, rank / 128, 0); }

// Descriptor of the operand tile starting at shared pointer `smem`.
__device__ __forceinline__ eg_u64 eg_wgmma_desc(const void* smem, eg_u32 lbo, eg_u32 sbo, eg_u32 swizzle) {
  return eg_wgmma_desc_encode(eg_smem_addr(smem), lbo, sbo, swizzle);
}

// The same descriptor with its start address moved by `bytes` (a multiple of 16; e.g. 32 per k16 step of
// a K-major swizzled operand). The start field cannot carry into LBO: shared addresses stay below 2^18.
__host__ __device__ __forceinline__ constexpr eg_u64 eg_wgmma_desc_advance(eg_u64 desc, eg_u32 bytes) {
  return desc + static_cast<eg_u64>(bytes >> 4);
}

// Two floats rounded to one packed .f16x2 / .bf16x2 register, `lo` in the low half: the element order
// of the register-A fragment (a0 low, a1 high; PTX ISA 9.7.15.5.1.1.1).
__device__ __forceinline__ eg_u32 eg_pack_f16x2(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<eg_u32*>(&h);
}
__device__ __forceinline__ eg_u32 eg_pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<eg_u32*>(&h);
}

// ---- wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16} (PTX ISA 9.7.15.5.2) --------------
// ---- and .m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2} (the FP8 form, SS, K-major operands) -------------------
// D (64 x N, f32, N/2 registers per thread in the layout of egtile.layout.wgmma_accumulator(N))
//   = A (64 x 16) * B (16 x N) + (scale_d != 0 ? D : 0), with A scaled by ScaleA and B by ScaleB (+1/-1).
// SS: A and B from shared memory through descriptors; TransA/TransB (imm-trans-a/-b) 0 = K-major,
//     1 = MN-major (transposed; .f16/.bf16 only).
// RS: A from four .f16x2/.bf16x2 registers per thread (egtile.layout.wgmma_a_registers()), which are
//     always K-major; TransB as above.
// The instruction is asynchronous: D and the A registers must not be accessed until a wait_group says
// its group is complete (eg_wgmma_fence_operand keeps the compiler from doing so).
//
// Implementation: one inline-asm block per N and form, generated by the preprocessor. The accumulator
// operands come first (%0 .. %N/2-1, strings EG_WGMMA_SL_<N/8>), then the others, whose operand numbers
// each EG_WGMMA_DEFINE line spells out (tests/test_wgmma_header.py checks them).
#define EG_WGMMA_STR_(x) #x
#define EG_WGMMA_OP(x) "%" EG_WGMMA_STR_(x)
#define EG_WGMMA_R4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])

#define EG_WGMMA_S4_0 "%0, %1, %2, %3"
#define EG_WGMMA_S4_1 "%4, %5, %6, %7"
#define EG_WGMMA_S4_2 "%8, %9, %10, %11"
#define EG_WGMMA_S4_3 "%12, %13, %14, %15"
#define EG_WGMMA_S4_4 "%16, %17, %18, %19"
#define EG_WGMMA_S4_5 "%20, %21, %22, %23"
#define EG_WGMMA_S4_6 "%24, %25, %26, %27"
#define EG_WGMMA_S4_7 "%28, %29, %30, %31"
#define EG_WGMMA_S4_8 "%32, %33, %34, %35"
#define EG_WGMMA_S4_9 "%36, %37, %38, %39"
#define EG_WGMMA_S4_10 "%40, %41, %42, %43"
#define EG_WGMMA_S4_11 "%44, %45, %46, %47"
#define EG_WGMMA_S4_12 "%48, %49, %50, %51"
#define EG_WGMMA_S4_13 "%52, %53, %54, %55"
#define EG_WGMMA_S4_14 "%56, %57, %58, %59"
#define EG_WGMMA_S4_15 "%60, %61, %62, %63"
#define EG_WGMMA_S4_16 "%64, %65, %66, %67"
#define EG_WGMMA_S4_17 "%68, %69, %70, %71"
#define EG_WGMMA_S4_18 "%72, %73, %74, %75"
#define EG_WGMMA_S4_19 "%76, %77, %78, %79"
#define EG_WGMMA_S4_20 "%80, %81, %82, %83"
#define EG_WGMMA_S4_21 "%84, %85, %86, %87"
#define EG_WGMMA_S4_22 "%88, %89, %90, %91"
#define EG_WGMMA_S4_23 "%92, %93, %94, %95"
#define EG_WGMMA_S4_24 "%96, %97, %98, %99"
#define EG_WGMMA_S4_25 "%100, %101, %102, %103"
#define EG_WGMMA_S4_26 "%104, %105, %106, %107"
#define EG_WGMMA_S4_27 "%108, %109, %110, %111"
#define EG_WGMMA_S4_28 "%112, %113, %114, %115"
#define EG_WGMMA_S4_29 "%116, %117, %118, %119"
#define EG_WGMMA_S4_30 "%120, %121, %122, %123"
#define EG_WGMMA_S4_31 "%124, %125, %126, %127"
#define EG_WGMMA_SL_1 EG_WGMMA_S4_0
#define EG_WGMMA_OL_1 EG_WGMMA_R4(0)
#define EG_WGMMA_SL_2 EG_WGMMA_SL_1 ", " EG_WGMMA_S4_1
#define EG_WGMMA_OL_2 EG_WGMMA_OL_1, EG_WGMMA_R4(4)
#define EG_WGMMA_SL_3 EG_WGMMA_SL_2 ", " EG_WGMMA_S4_2
#define EG_WGMMA_OL_3 EG_WGMMA_OL_2, EG_WGMMA_R4(8)
#define EG_WGMMA_SL_4 EG_WGMMA_SL_3 ", " EG_WGMMA_S4_3
#define EG_WGMMA_OL_4 EG_WGMMA_OL_3, EG_WGMMA_R4(12)
#define EG_WGMMA_SL_5 EG_WGMMA_SL_4 ", " EG_WGMMA_S4_4
#define EG_WGMMA_OL_5 EG_WGMMA_OL_4, EG_WGMMA_R4(16)
#define EG_WGMMA_SL_6 EG_WGMMA_SL_5 ", " EG_WGMMA_S4_5
#define EG_WGMMA_OL_6 EG_WGMMA_OL_5, EG_WGMMA_R4(20)
#define EG_WGMMA_SL_7 EG_WGMMA_SL_6 ", " EG_WGMMA_S4_6
#define EG_WGMMA_OL_7 EG_WGMMA_OL_6, EG_WGMMA_R4(24)
#define EG_WGMMA_SL_8 EG_WGMMA_SL_7 ", " EG_WGMMA_S4_7
#define EG_WGMMA_OL_8 EG_WGMMA_OL_7, EG_WGMMA_R4(28)
#define EG_WGMMA_SL_9 EG_WGMMA_SL_8 ", " EG_WGMMA_S4_8
#define EG_WGMMA_OL_9 EG_WGMMA_OL_8, EG_WGMMA_R4(32)
#define EG_WGMMA_SL_10 EG_WGMMA_SL_9 ", " EG_WGMMA_S4_9
#define EG_WGMMA_OL_10 EG_WGMMA_OL_9, EG_WGMMA_R4(36)
#define EG_WGMMA_SL_11 EG_WGMMA_SL_10 ", " EG_WGMMA_S4_10
#define EG_WGMMA_OL_11 EG_WGMMA_OL_10, EG_WGMMA_R4(40)
#define EG_WGMMA_SL_12 EG_WGMMA_SL_11 ", " EG_WGMMA_S4_11
#define EG_WGMMA_OL_12 EG_WGMMA_OL_11, EG_WGMMA_R4(44)
#define EG_WGMMA_SL_13 EG_WGMMA_SL_12 ", " EG_WGMMA_S4_12
#define EG_WGMMA_OL_13 EG_WGMMA_OL_12, EG_WGMMA_R4(48)
#define EG_WGMMA_SL_14 EG_WGMMA_SL_13 ", " EG_WGMMA_S4_13
#define EG_WGMMA_OL_14 EG_WGMMA_OL_13, EG_WGMMA_R4(52)
#define EG_WGMMA_SL_15 EG_WGMMA_SL_14 ", " EG_WGMMA_S4_14
#define EG_WGMMA_OL_15 EG_WGMMA_OL_14, EG_WGMMA_R4(56)
#define EG_WGMMA_SL_16 EG_WGMMA_SL_15 ", " EG_WGMMA_S4_15
#define EG_WGMMA_OL_16 EG_WGMMA_OL_15, EG_WGMMA_R4(60)
#define EG_WGMMA_SL_17 EG_WGMMA_SL_16 ", " EG_WGMMA_S4_16
#define EG_WGMMA_OL_17 EG_WGMMA_OL_16, EG_WGMMA_R4(64)
#define EG_WGMMA_SL_18 EG_WGMMA_SL_17 ", " EG_WGMMA_S4_17
#define EG_WGMMA_OL_18 EG_WGMMA_OL_17, EG_WGMMA_R4(68)
#define EG_WGMMA_SL_19 EG_WGMMA_SL_18 ", " EG_WGMMA_S4_18
#define EG_WGMMA_OL_19 EG_WGMMA_OL_18, EG_WGMMA_R4(72)
#define EG_WGMMA_SL_20 EG_WGMMA_SL_19 ", " EG_WGMMA_S4_19
#define EG_WGMMA_OL_20 EG_WGMMA_OL_19, EG_WGMMA_R4(76)
#define EG_WGMMA_SL_21 EG_WGMMA_SL_20 ", " EG_WGMMA_S4_20
#define EG_WGMMA_OL_21 EG_WGMMA_OL_20, EG_WGMMA_R4(80)
#define EG_WGMMA_SL_22 EG_WGMMA_SL_21 ", " EG_WGMMA_S4_21
#define EG_WGMMA_OL_22 EG_WGMMA_OL_21, EG_WGMMA_R4(84)
#define EG_WGMMA_SL_23 EG_WGMMA_SL_22 ", " EG_WGMMA_S4_22
#define EG_WGMMA_OL_23 EG_WGMMA_OL_22, EG_WGMMA_R4(88)
#define EG_WGMMA_SL_24 EG_WGMMA_SL_23 ", " EG_WGMMA_S4_23
#define EG_WGMMA_OL_24 EG_WGMMA_OL_23, EG_WGMMA_R4(92)
#define EG_WGMMA_SL_25 EG_WGMMA_SL_24 ", " EG_WGMMA_S4_24
#define EG_WGMMA_OL_25 EG_WGMMA_OL_24, EG_WGMMA_R4(96)
#define EG_WGMMA_SL_26 EG_WGMMA_SL_25 ", " EG_WGMMA_S4_25
#define EG_WGMMA_OL_26 EG_WGMMA_OL_25, EG_WGMMA_R4(100)
#define EG_WGMMA_SL_27 EG_WGMMA_SL_26 ", " EG_WGMMA_S4_26
#define EG_WGMMA_OL_27 EG_WGMMA_OL_26, EG_WGMMA_R4(104)
#define EG_WGMMA_SL_28 EG_WGMMA_SL_27 ", " EG_WGMMA_S4_27
#define EG_WGMMA_OL_28 EG_WGMMA_OL_27, EG_WGMMA_R4(108)
#define EG_WGMMA_SL_29 EG_WGMMA_SL_28 ", " EG_WGMMA_S4_28
#define EG_WGMMA_OL_29 EG_WGMMA_OL_28, EG_WGMMA_R4(112)
#define EG_WGMMA_SL_30 EG_WGMMA_SL_29 ", " EG_WGMMA_S4_29
#define EG_WGMMA_OL_30 EG_WGMMA_OL_29, EG_WGMMA_R4(116)
#define EG_WGMMA_SL_31 EG_WGMMA_SL_30 ", " EG_WGMMA_S4_30
#define EG_WGMMA_OL_31 EG_WGMMA_OL_30, EG_WGMMA_R4(120)
#define EG_WGMMA_SL_32 EG_WGMMA_SL_31 ", " EG_WGMMA_S4_31
#define EG_WGMMA_OL_32 EG_WGMMA_OL_31, EG_WGMMA_R4(124)

template <int N> struct eg_wgmma_op;  // defined for N = 8, 16, ..., 256 below

#define EG_WGMMA_SS_(N, Q, AB, t0, t1, t2, t3, t4, t5, t6)                                                  \
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, " EG_WGMMA_OP(t2) ", 0;\n\t"                             \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." AB "." AB " {" EG_WGMMA_SL_##Q "}, "          \
               EG_WGMMA_OP(t0) ", " EG_WGMMA_OP(t1) ", p, " EG_WGMMA_OP(t3) ", " EG_WGMMA_OP(t4) ", "          \
               EG_WGMMA_OP(t5) ", " EG_WGMMA_OP(t6) ";\n\t}\n"                                                  \
               : EG_WGMMA_OL_##Q                                                                        \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(SA), "n"(SB), "n"(TA), "n"(TB))
#define EG_WGMMA_RS_(N, Q, AB, t0, t1, t2, t3, t4, t5, t6, t7, t8)                                          \
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, " EG_WGMMA_OP(t5) ", 0;\n\t"                             \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." AB "." AB " {" EG_WGMMA_SL_##Q "}, {"         \
               EG_WGMMA_OP(t0) ", " EG_WGMMA_OP(t1) ", " EG_WGMMA_OP(t2) ", " EG_WGMMA_OP(t3) "}, "            \
               EG_WGMMA_OP(t4) ", p, " EG_WGMMA_OP(t6) ", " EG_WGMMA_OP(t7) ", " EG_WGMMA_OP(t8) ";\n\t}\n"     \
               : EG_WGMMA_OL_##Q                                                                        \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(SA), "n"(SB),      \
                 "n"(TB))
// The FP8 form (PTX ISA 9.7.15.5.2): .m64nNk32, .atype/.btype each .e4m3 or .e5m2, and no imm-trans-a/-b
// operands (8-bit operands in shared memory are K-major only): d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b.
#define EG_WGMMA_SS8_(N, Q, AT, BT, t0, t1, t2, t3, t4)                                                    \
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, " EG_WGMMA_OP(t2) ", 0;\n\t"                             \
               "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32." AT "." BT " {" EG_WGMMA_SL_##Q "}, "          \
               EG_WGMMA_OP(t0) ", " EG_WGMMA_OP(t1) ", p, " EG_WGMMA_OP(t3) ", " EG_WGMMA_OP(t4) ";\n\t}\n"    \
               : EG_WGMMA_OL_##Q                                                                        \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(SA), "n"(SB))
#define EG_WGMMA_SS8_MEMBER(N, Q, AT, BT, t0, t1, t2, t3, t4)                                              \
  template <int SA, int SB>                                                                             \
  __device__ static __forceinline__ void ss_##AT##_##BT(float (&d)[N / 2], eg_u64 desc_a, eg_u64 desc_b, \
                                                        eg_u32 scale_d) {                               \
    EG_WGMMA_SS8_(N, Q, #AT, #BT, t0, t1, t2, t3, t4);                                                  \
  }
// t0..t8: the operand numbers N/2 .. N/2 + 8 (after the N/2 accumulators).
#define EG_WGMMA_DEFINE(N, Q, t0, t1, t2, t3, t4, t5, t6, t7, t8)                                          \
  template <> struct eg_wgmma_op<N> {                                                                   \
    template <int TA, int TB, int SA, int SB>                                                           \
    __device__ static __forceinline__ void ss_f16(float (&d)[N / 2], eg_u64 desc_a, eg_u64 desc_b,     \
                                                  eg_u32 scale_d) {                                     \
      EG_WGMMA_SS_(N, Q, "f16", t0, t1, t2, t3, t4, t5, t6);                                            \
    }                                                                                                   \
    template <int TA, int TB, int SA, int SB>                                                           \
    __device__ static __forceinline__ void ss_bf16(float (&d)[N / 2], eg_u64 desc_a, eg_u64 desc_b,    \
                                                   eg_u32 scale_d) {                                    \
      EG_WGMMA_SS_(N, Q, "bf16", t0, t1, t2, t3, t4, t5, t6);                                           \
    }                                                                                                   \
    template <int TB, int SA, int SB>                                                                   \
    __device__ static __forceinline__ void rs_f16(float (&d)[N / 2], const eg_u32 (&a)[4], eg_u64 desc_b,\
                                                  eg_u32 scale_d) {                                     \
      EG_WGMMA_RS_(N, Q, "f16", t0, t1, t2, t3, t4, t5, t6, t7, t8);                                    \
    }                                                                                                   \
    template <int TB, int SA, int SB>                                                                   \
    __device__ static __forceinline__ void rs_bf16(float (&d)[N / 2], const eg_u32 (&a)[4],             \
                                                   eg_u64 desc_b, eg_u32 scale_d) {                     \
      EG_WGMMA_RS_(N, Q, "bf16", t0, t1, t2, t3, t4, t5, t6, t7, t8);                                   \
    }                                                                                                   \
    EG_WGMMA_SS8_MEMBER(N, Q, e4m3, e4m3, t0, t1, t2, t3, t4)                                           \
    EG_WGMMA_SS8_MEMBER(N, Q, e4m3, e5m2, t0, t1, t2, t3, t4)                                           \
    EG_WGMMA_SS8_MEMBER(N, Q, e5m2, e4m3, t0, t1, t2, t3, t4)                                           \
    EG_WGMMA_SS8_MEMBER(N, Q, e5m2, e5m2, t0, t1, t2, t3, t4)                                           \
  };

EG_WGMMA_DEFINE(8, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12)
EG_WGMMA_DEFINE(16, 2, 8, 9, 10, 11, 12, 13, 14, 15, 16)
EG_WGMMA_DEFINE(24, 3, 12, 13, 14, 15, 16, 17, 18, 19, 20)
EG_WGMMA_DEFINE(32, 4, 16, 17, 18, 19, 20, 21, 22, 23, 24)
EG_WGMMA_DEFINE(40, 5, 20, 21, 22, 23, 24, 25, 26, 27, 28)
EG_WGMMA_DEFINE(48, 6, 24, 25, 26, 27, 28, 29, 30, 31, 32)
EG_WGMMA_DEFINE(56, 7, 28, 29, 30, 31, 32, 33, 34, 35, 36)
EG_WGMMA_DEFINE(64, 8, 32, 33, 34, 35, 36, 37, 38, 39, 40)
EG_WGMMA_DEFINE(72, 9, 36, 37, 38, 39, 40, 41, 42, 43, 44)
EG_WGMMA_DEFINE(80, 10, 40, 41, 42, 43, 44, 45, 46, 47, 48)
EG_WGMMA_DEFINE(88, 11, 44, 45, 46, 47, 48, 49, 50, 51, 52)
EG_WGMMA_DEFINE(96, 12, 48, 49, 50, 51, 52, 53, 54, 55, 56)
EG_WGMMA_DEFINE(104, 13, 52, 53, 54, 55, 56, 57, 58, 59, 60)
EG_WGMMA_DEFINE(112, 14, 56, 57, 58, 59, 60, 61, 62, 63, 64)
EG_WGMMA_DEFINE(120, 15, 60, 61, 62, 63, 64, 65, 66, 67, 68)
EG_WGMMA_DEFINE(128, 16, 64, 65, 66, 67, 68, 69, 70, 71, 72)
EG_WGMMA_DEFINE(136, 17, 68, 69, 70, 71, 72, 73, 74, 75, 76)
EG_WGMMA_DEFINE(144, 18, 72, 73, 74, 75, 76, 77, 78, 79, 80)
EG_WGMMA_DEFINE(152, 19, 76, 77, 78, 79, 80, 81, 82, 83, 84)
EG_WGMMA_DEFINE(160, 20, 80, 81, 82, 83, 84, 85, 86, 87, 88)
EG_WGMMA_DEFINE(168, 21, 84, 85, 86, 87, 88, 89, 90, 91, 92)
EG_WGMMA_DEFINE(176, 22, 88, 89, 90, 91, 92, 93, 94, 95, 96)
EG_WGMMA_DEFINE(184, 23, 92, 93, 94, 95, 96, 97, 98, 99, 100)
EG_WGMMA_DEFINE(192, 24, 96, 97, 98, 99, 100, 101, 102, 103, 104)
EG_WGMMA_DEFINE(200, 25, 100, 101, 102, 103, 104, 105, 106, 107, 108)
EG_WGMMA_DEFINE(208, 26, 104, 105, 106, 107, 108, 109, 110, 111, 112)
EG_WGMMA_DEFINE(216, 27, 108, 109, 110, 111, 112, 113, 114, 115, 116)
EG_WGMMA_DEFINE(224, 28, 112, 113, 114, 115, 116, 117, 118, 119, 120)
EG_WGMMA_DEFINE(232, 29, 116, 117, 118, 119, 120, 121, 122, 123, 124)
EG_WGMMA_DEFINE(240, 30, 120, 121, 122, 123, 124, 125, 126, 127, 128)
EG_WGMMA_DEFINE(248, 31, 124, 125, 126, 127, 128, 129, 130, 131, 132)
EG_WGMMA_DEFINE(256, 32, 128, 129, 130, 131, 132, 133, 134, 135, 136)

template <typename T> struct eg_wgmma_ab;  // the operand types wgmma.mma_async .f32 accepts here
template <> struct eg_wgmma_ab<half> { static constexpr bool bf16 = false; };
template <> struct eg_wgmma_ab<__nv_bfloat16> { static constexpr bool bf16 = true; };

// D (+)= A * B with A and B in shared memory. T: half or __nv_bfloat16 (both operands).
template <int N, typename T, int TransA = 0, int TransB = 0, int ScaleA = 1, int ScaleB = 1>
__device__ __forceinline__ void eg_wgmma_ss(float (&d)[N / 2], eg_u64 desc_a, eg_u64 desc_b, eg_u32 scale_d) {
  static_assert(N >= 8 && N <= 256 && N % 8 == 0, "wgmma .m64nNk16: N is a multiple of 8 in [8, 256]");
  static_assert((TransA == 0 || TransA == 1) && (TransB == 0 || TransB == 1), "imm-trans-a/-b are 0 or 1");
  static_assert((ScaleA == 1 || ScaleA == -1) && (ScaleB == 1 || ScaleB == -1), "imm-scale-a/-b are 1 or -1");
  if constexpr (eg_wgmma_ab<T>::bf16) {
    eg_wgmma_op<N>::template ss_bf16<TransA, TransB, ScaleA, ScaleB>(d, desc_a, desc_b, scale_d);
  } else {
    eg_wgmma_op<N>::template ss_f16<TransA, TransB, ScaleA, ScaleB>(d, desc_a, desc_b, scale_d);
  }
}

// D (+)= A * B with 8-bit float A and B in shared memory, both K-major (the FP8 form has no transpose):
// .m64nNk32, FA / FB: EG_WGMMA_E4M3 or EG_WGMMA_E5M2, independently (PTX ISA 9.7.15.5.2).
enum : int { EG_WGMMA_E4M3 = 0, EG_WGMMA_E5M2 = 1 };
template <int N, int FA, int FB, int ScaleA = 1, int ScaleB = 1>
__device__ __forceinline__ void eg_wgmma_ss_f8(float (&d)[N / 2], eg_u64 desc_a, eg_u64 desc_b, eg_u32 scale_d) {
  static_assert(N >= 8 && N <= 256 && N % 8 == 0, "wgmma .m64nNk32: N is a multiple of 8 in [8, 256]");
  static_assert((FA == EG_WGMMA_E4M3 || FA == EG_WGMMA_E5M2) && (FB == EG_WGMMA_E4M3 || FB == EG_WGMMA_E5M2),
                "the FP8 form takes .e4m3 or .e5m2 operands");
  static_assert((ScaleA == 1 || ScaleA == -1) && (ScaleB == 1 || ScaleB == -1), "imm-scale-a/-b are 1 or -1");
  if constexpr (FA == EG_WGMMA_E4M3 && FB == EG_WGMMA_E4M3) {
    eg_wgmma_op<N>::template ss_e4m3_e4m3<ScaleA, ScaleB>(d, desc_a, desc_b, scale_d);
  } else if constexpr (FA == EG_WGMMA_E4M3) {
    eg_wgmma_op<N>::template ss_e4m3_e5m2<ScaleA, ScaleB>(d, desc_a, desc_b, scale_d);
  } else if constexpr (FB == EG_WGMMA_E4M3) {
    eg_wgmma_op<N>::template ss_e5m2_e4m3<ScaleA, ScaleB>(d, desc_a, desc_b, scale_d);
  } else {
    eg_wgmma_op<N>::template ss_e5m2_e5m2<ScaleA, ScaleB>(d, desc_a, desc_b, scale_d);
  }
}

// D (+)= A * B with A in registers (four packed registers per thread, K-major) and B in shared memory.
template <int N, typename T, int TransB = 0, int ScaleA = 1, int ScaleB = 1>
__device__ __forceinline__ void eg_wgmma_rs(float (&d)[N / 2], const eg_u32 (&a)[4], eg_u64 desc_b, eg_u32 scale_d) {
  static_assert(N >= 8 && N <= 256 && N % 8 == 0, "wgmma .m64nNk16: N is a multiple of 8 in [8, 256]");
  static_assert(TransB == 0 || TransB == 1, "imm-trans-b is 0 or 1");
  static_assert((ScaleA == 1 || ScaleA == -1) && (ScaleB == 1 || ScaleB == -1), "imm-scale-a/-b are 1 or -1");
  if constexpr (eg_wgmma_ab<T>::bf16) {
    eg_wgmma_op<N>::template rs_bf16<TransB, ScaleA, ScaleB>(d, a, desc_b, scale_d);
  } else {
    eg_wgmma_op<N>::template rs_f16<TransB, ScaleA, ScaleB>(d, a, desc_b, scale_d);
  }
}
