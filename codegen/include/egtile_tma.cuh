// egtile_tma.cuh: TMA tile copies (PTX ISA 9.7.9.27, "cp.async.bulk.tensor") and bulk async-group
// completion (PTX ISA 9.7.9.28, "cp.async.bulk.commit_group / wait_group").
//
// `tmap` is a CUtensorMap kernel parameter declared `const __grid_constant__`, so its generic address
// is valid as the tensor-map operand. Coordinates are element offsets, innermost dimension first
// (c0 = innermost). The shared buffer holds the box densely, row-major, and is 128-byte aligned.
#pragma once
#include "egtile_common.cuh"

#define EG_TMA_TMAP(tmap) reinterpret_cast<eg_u64>(tmap)

// Fetch `tmap`'s descriptor into the TMA unit's cache before its first use (PTX ISA 9.7.9.15, "prefetch",
// .tensormap with a generic address: sm_90). A hint: no completion, no effect on any value.
__device__ __forceinline__ void eg_tma_prefetch_descriptor(const CUtensorMap* tmap) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(EG_TMA_TMAP(tmap)) : "memory");
}

// Global -> shared tile load that completes box-bytes transaction bytes on `bar`
// (.mbarrier::complete_tx::bytes). Issued by one thread after eg_mbarrier_arrive_expect_tx.
__device__ __forceinline__ void eg_tma_load_1d(void* dst, const CUtensorMap* tmap, eg_u64* bar, int c0) {
  asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3}], [%2];"
               ::"r"(eg_smem_addr(dst)), "l"(EG_TMA_TMAP(tmap)), "r"(eg_smem_addr(bar)), "r"(c0) : "memory");
}
__device__ __forceinline__ void eg_tma_load_2d(void* dst, const CUtensorMap* tmap, eg_u64* bar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
               ::"r"(eg_smem_addr(dst)), "l"(EG_TMA_TMAP(tmap)), "r"(eg_smem_addr(bar)), "r"(c0), "r"(c1) : "memory");
}
__device__ __forceinline__ void eg_tma_load_3d(void* dst, const CUtensorMap* tmap, eg_u64* bar, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];"
               ::"r"(eg_smem_addr(dst)), "l"(EG_TMA_TMAP(tmap)), "r"(eg_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ void eg_tma_load_4d(void* dst, const CUtensorMap* tmap, eg_u64* bar, int c0, int c1, int c2,
                                               int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];"
               ::"r"(eg_smem_addr(dst)), "l"(EG_TMA_TMAP(tmap)), "r"(eg_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2),
               "r"(c3) : "memory");
}
__device__ __forceinline__ void eg_tma_load_5d(void* dst, const CUtensorMap* tmap, eg_u64* bar, int c0, int c1, int c2,
                                               int c3, int c4) {
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, %7}], [%2];"
               ::"r"(eg_smem_addr(dst)), "l"(EG_TMA_TMAP(tmap)), "r"(eg_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2),
               "r"(c3), "r"(c4) : "memory");
}

// Shared -> global tile store (.bulk_group completion). The caller fences generic-proxy writes of
// `src` first (eg_fence_proxy_async_shared) and waits with eg_tma_store_wait before reusing `src`.
__device__ __forceinline__ void eg_tma_store_1d(const CUtensorMap* tmap, const void* src, int c0) {
  asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%0, {%2}], [%1];"
               ::"l"(EG_TMA_TMAP(tmap)), "r"(eg_smem_addr(src)), "r"(c0) : "memory");
}
__device__ __forceinline__ void eg_tma_store_2d(const CUtensorMap* tmap, const void* src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
               ::"l"(EG_TMA_TMAP(tmap)), "r"(eg_smem_addr(src)), "r"(c0), "r"(c1) : "memory");
}
__device__ __forceinline__ void eg_tma_store_3d(const CUtensorMap* tmap, const void* src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];"
               ::"l"(EG_TMA_TMAP(tmap)), "r"(eg_smem_addr(src)), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
__device__ __forceinline__ void eg_tma_store_4d(const CUtensorMap* tmap, const void* src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];"
               ::"l"(EG_TMA_TMAP(tmap)), "r"(eg_smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}
__device__ __forceinline__ void eg_tma_store_5d(const CUtensorMap* tmap, const void* src, int c0, int c1, int c2, int c3,
                                                int c4) {
  asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];"
               ::"l"(EG_TMA_TMAP(tmap)), "r"(eg_smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
               : "memory");
}

// cp.async.bulk.commit_group + cp.async.bulk.wait_group.read 0 (PTX ISA 9.7.9.28): returns once every
// bulk store this thread issued has finished reading shared memory (the source may be overwritten).
__device__ __forceinline__ void eg_tma_store_wait() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
