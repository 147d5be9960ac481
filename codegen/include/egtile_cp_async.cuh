// egtile_cp_async.cuh: per-thread asynchronous global -> shared copies (PTX ISA 9.7.9.25, "cp.async")
// completed through an mbarrier (PTX ISA 9.7.9.25.3.3, "cp.async.mbarrier.arrive").
#pragma once
#include "egtile_common.cuh"

// cp.async.ca.shared.global, 4 or 8 bytes (cp-size 4 and 8 need .ca); `src` is a generic pointer into
// global memory (the global window of the generic address space is the identity on sm_90) aligned to
// the copy size; `dst` is shared memory aligned likewise.
__device__ __forceinline__ void eg_cp_async_4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(eg_smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void eg_cp_async_8(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(eg_smem_addr(dst)), "l"(src) : "memory");
}
// cp.async.cg.shared.global, 16 bytes (bypasses L1).
__device__ __forceinline__ void eg_cp_async_16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(eg_smem_addr(dst)), "l"(src) : "memory");
}

// cp.async.mbarrier.arrive.noinc.shared.b64 (PTX ISA 9.7.9.25.3.3): an arrive-on operation on `bar`
// triggered once all prior cp.async of this thread have completed. `.noinc`: the pending count is not
// incremented first, so this arrival counts toward the barrier's init count.
__device__ __forceinline__ void eg_cp_async_mbarrier_arrive_noinc(eg_u64* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" ::"r"(eg_smem_addr(bar)) : "memory");
}
