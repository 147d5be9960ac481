// egtile_sync.cuh: CTA barriers, proxy fences and warpgroup register reallocation.
#pragma once
#include "egtile_common.cuh"

// bar.sync id, count (PTX ISA 9.7.13.1, "bar / barrier"): named barrier `id` (0..15) among `count`
// threads (a multiple of 32); `__syncthreads()` is bar.sync 0 over the whole CTA.
__device__ __forceinline__ void eg_named_barrier_sync(eg_u32 id, eg_u32 count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// bar.arrive id, count (PTX ISA 9.7.13.4): count this warp's threads toward the current round of named
// barrier `id` without waiting (the round completes when `count` threads arrived or synced).
__device__ __forceinline__ void eg_named_barrier_arrive(eg_u32 id, eg_u32 count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// fence.proxy.async.shared::cta (PTX ISA 9.7.13.4, "membar/fence"; async proxy, PTX ISA 8.6): orders
// this thread's generic-proxy shared-memory accesses before later async-proxy accesses (TMA store).
__device__ __forceinline__ void eg_fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// setmaxnreg.{inc,dec}.sync.aligned.u32 N (PTX ISA 9.7.19.5): the executing warpgroup raises (inc,
// blocking until the CTA's register pool has enough) or lowers (dec, returning registers to the pool)
// its per-thread register maximum to N (a multiple of 8 in [24, 256]). All warps of the warpgroup run
// the same instruction; ptxas honours it only when the kernel has a register cap at entry
// (__launch_bounds__(threads, 1)), otherwise it warns C7508.
template <int N> __device__ __forceinline__ void eg_setmaxnreg_inc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg count must be a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N> __device__ __forceinline__ void eg_setmaxnreg_dec() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg count must be a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

// The order of the machine code, not of memory. ptxas issues a bar.sync or a wgmma.wait_group as early as
// its operands allow, above register-only work the program puts before it (a softmax): a warpgroup would
// then start its ping-pong turn before its softmax, or wait for a wgmma group the softmax was meant to run
// under. Neither moves above a store to shared memory, and the work stays before the store, whose value
// it computes (SASS: tests/test_codegen_pin.py; codegen/ops/pin.py says what holds the order). `slot` is
// this thread's own word of the kernel's pin scratch area: nothing reads it, and no two threads share it.
__device__ __forceinline__ eg_u32 eg_pin_bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ eg_u32 eg_pin_bits(__half v) { return __half_as_ushort(v); }
__device__ __forceinline__ eg_u32 eg_pin_bits(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
__device__ __forceinline__ eg_u32 eg_pin_bits(int v) { return (eg_u32)v; }
__device__ __forceinline__ eg_u32 eg_pin_bits(eg_u32 v) { return v; }
__device__ __forceinline__ void eg_pin_order(unsigned char* slot, eg_u32 value) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(eg_smem_addr(slot)), "r"(value) : "memory");
}
