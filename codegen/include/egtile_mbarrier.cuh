// egtile_mbarrier.cuh: mbarrier objects in shared memory (PTX ISA 9.7.13.15, "Parallel synchronization
// and communication instructions: mbarrier"). Each barrier is one 8-byte, 8-byte-aligned shared word.
//
// Phase semantics: a phase completes when its pending arrival count and its pending transaction byte
// count (tx-count) are both 0; the phase number then increments and the counts reset. Waiters name the
// phase they wait for by its parity.
#pragma once
#include "egtile_common.cuh"

// mbarrier.init.shared::cta.b64 (PTX ISA 9.7.13.15.9): set the expected arrival count of phase 0.
// Run by one thread before any other use; follow with eg_fence_mbarrier_init() and a CTA barrier.
__device__ __forceinline__ void eg_mbarrier_init(eg_u64* bar, eg_u32 arrive_count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(eg_smem_addr(bar)), "r"(arrive_count) : "memory");
}

// fence.mbarrier_init.release.cluster (PTX ISA 9.7.13.4, "membar/fence"): makes prior mbarrier.init
// visible to the async proxy (TMA complete_tx) and to other threads before they use the barrier.
__device__ __forceinline__ void eg_fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// mbarrier.arrive.shared::cta.b64 (PTX ISA 9.7.13.15.13): one arrival, release semantics at CTA scope
// (this thread's prior memory accesses happen before the phase completes).
__device__ __forceinline__ void eg_mbarrier_arrive(eg_u64* bar) {
  asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared::cta.b64 st, [%0];\n\t}" ::"r"(eg_smem_addr(bar)) : "memory");
}

// mbarrier.arrive.expect_tx.shared::cta.b64 (PTX ISA 9.7.13.15.13; expect-tx operation 9.7.13.15.4):
// one arrival plus `tx_bytes` expected transaction bytes that TMA loads will complete.
__device__ __forceinline__ void eg_mbarrier_arrive_expect_tx(eg_u64* bar, eg_u32 tx_bytes) {
  asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n\t}"
               ::"r"(eg_smem_addr(bar)), "r"(tx_bytes) : "memory");
}

// mbarrier.try_wait.parity.shared::cta.b64 (PTX ISA 9.7.13.15.16) in a loop: returns once the phase of
// parity `parity` has completed (immediately while the current phase's parity differs from `parity`).
// Acquire semantics at CTA scope: what the arriving threads (and completed TMA transfers) wrote is
// visible after the return. try_wait suspends the thread for a system-dependent time limit, so the loop
// does not spin hot.
__device__ __forceinline__ void eg_mbarrier_wait_parity(eg_u64* bar, eg_u32 parity) {
  const eg_u32 addr = eg_smem_addr(bar);
  eg_u32 done = 0;
  do {
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(addr), "r"(parity) : "memory");
  } while (!done);
}
