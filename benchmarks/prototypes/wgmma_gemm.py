"""Hand-written Hopper GEMM prototype: the schedule egtile should emit for ``T.gemm``, written as a CUDA
source generator that uses egtile's headers (egtile_tma.cuh, egtile_mbarrier.cuh, egtile_sync.cuh,
egtile_wgmma.cuh) and takes every layout fact from egtile.layout. Not compiler output. The only PTX
outside those headers is the 2-CTA cluster's (``_CLUSTER_PTX``: multicast TMA, remote mbarrier arrive,
cluster barrier), used by the ``cluster=2`` variants alone.

``C[M, N] = A[M, K] @ B`` with f16 or bf16 inputs, f32 accumulation and C in the input type. B is given
either as ``Bt[N, K]`` (``b_major="K"``, both operands K-major, the cuBLAS "TN" case) or as ``B[K, N]``
(``b_major="MN"``, egtile's ``examples/gemm.py``; wgmma reads B transposed, ``imm-trans-b = 1``).

Schedule (the shape of egtile's warp-specialized schedule):

* one CTA per ``bm x bn`` output tile (or, ``persistent``, one CTA per SM walking the tiles), 3 warpgroups:
  consumers 0 and 1 each own ``bm / 2`` rows, the producer warpgroup is LAST;
* producer: ``setmaxnreg.dec``, one thread waits ``empty[s]``, arms ``full[s]`` with the stage's bytes
  (``mbarrier.arrive.expect_tx``) and issues the TMA loads of the A and B tiles (128-byte swizzle) into
  stage ``s`` of ``stages``;
* consumers: ``setmaxnreg.inc``, wait ``full[s]``, issue ``bk / 16`` k-steps of
  ``wgmma.mma_async.m64n{wn}k16`` per 64-row block and ``wn``-column block with descriptors from
  ``WgmmaOperand.descriptor``, commit, ``wgmma.wait_group<wait_depth>``, then release the stage whose
  group is now complete (one arrival per consumer warp on ``empty``);
* epilogue: f32 accumulators -> C, directly from registers (``epilogue="direct"``, element positions from
  ``wgmma_accumulator(wn)``) or through a 128-byte-swizzled shared slab and TMA stores (``epilogue="tma"``,
  with ``fence.proxy.async`` between the generic writes and the async-proxy read);
* tile order: grouped rasterization (``group_m`` tile rows share the B panels in L2);
* ``cluster=2``: CTA pairs along M share B; each CTA loads half of B and multicasts it into both, and a
  stage is refilled only once the consumers of both CTAs released it.

Fastest measured on the H200 (docs/perf.md, docs/design/wgmma.md): 128x256x64, wgmma N=256, 3 stages,
persistent, group_m=8, TMA-store epilogue, ``wait_depth=0``: 1.00-1.03x cuBLAS at 4096^3 and 8192^3.

    python benchmarks/prototypes/wgmma_gemm.py --check            # correctness of every variant
    python benchmarks/prototypes/wgmma_gemm.py --bench            # the table (cuBLAS, Triton, variants)
    python benchmarks/prototypes/wgmma_gemm.py --precompile DIR   # cubins + SASS summary, no GPU needed
    python benchmarks/prototypes/wgmma_gemm.py --launch --only 8  # one warm-up + one launch (for ncu)
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from egtile.layout import Major, SmemTile, Swizzle, WgmmaOperand, wgmma_accumulator  # noqa: E402

CONSUMERS = 2
WARPGROUP = 128


@dataclass(frozen=True)
class Config:
    """One schedule of the prototype; every field is one decision."""

    dtype: str = "float16"
    bm: int = 128
    bn: int = 256
    bk: int = 64
    wn: int = 256                 # N of one wgmma instruction (bn / wn instructions per k-step and row block)
    stages: int = 4
    b_major: str = "K"            # "K": B given as Bt[N, K]; "MN": B given as B[K, N]
    persistent: bool = False
    group_m: int = 1              # tile-order swizzle: tile rows per group (1 = row-major tile order)
    wait_depth: int = 1           # wgmma groups left in flight after each commit
    epilogue: str = "direct"      # "direct" (registers -> global) or "tma" (registers -> shared -> TMA store)
    c_cols: int = 0               # "tma": columns of the shared C slab per pass (0 = bn, one pass)
    cluster: int = 1              # 2: CTA pairs along M share B; each loads half of it, multicast to both
    grid_policy: str = "occupancy"  # persistent grid: "occupancy" (cuOccupancyMaxActiveClusters) or "sms"
    consumer_regs: int = 232
    producer_regs: int = 40

    @property
    def name(self) -> str:
        parts = [f"{self.bm}x{self.bn}x{self.bk}", f"n{self.wn}", f"s{self.stages}", f"B{self.b_major}",
                 f"w{self.wait_depth}", self.epilogue]
        if self.persistent:
            parts.append("pers")
        if self.group_m > 1:
            parts.append(f"g{self.group_m}")
        if self.epilogue == "tma" and self.slab_cols != self.bn:
            parts.append(f"c{self.slab_cols}")
        if self.cluster > 1:
            parts.append(f"cl{self.cluster}")
        if self.persistent and self.grid_policy != "occupancy":
            parts.append(f"grid-{self.grid_policy}")
        return "-".join(parts)

    @property
    def slab_cols(self) -> int:
        return self.c_cols or self.bn

    @property
    def mi(self) -> int:
        """64-row wgmma blocks per consumer warpgroup."""
        return self.bm // (64 * CONSUMERS)

    @property
    def ni(self) -> int:
        return self.bn // self.wn

    def tiles(self) -> tuple[SmemTile, SmemTile]:
        a = SmemTile(self.bm, self.bk, 2, Swizzle.B128)                        # rows M, columns K
        b = (SmemTile(self.bn, self.bk, 2, Swizzle.B128) if self.b_major == "K"   # rows N, columns K
             else SmemTile(self.bk, self.bn, 2, Swizzle.B128))                   # rows K, columns N
        return a, b

    @property
    def stage_bytes(self) -> int:
        a, b = self.tiles()
        return a.nbytes + b.nbytes

    @property
    def c_tile(self) -> SmemTile:
        """The shared C slab of the TMA epilogue: all bm rows, ``slab_cols`` columns per pass."""
        return SmemTile(self.bm, self.slab_cols, 2, Swizzle.B128)

    @property
    def smem_bytes(self) -> int:
        extra = self.c_tile.nbytes if self.epilogue == "tma" else 0
        return 1024 + self.stages * self.stage_bytes + extra + 16 * self.stages

    def problems(self) -> list[str]:
        out = []
        if self.bm % (64 * CONSUMERS) or self.bn % self.wn or self.bk % 64:
            out.append("bm must split into 64-row blocks over 2 consumers, bn into wn, bk into 128-byte panels")
        if self.bk != 64:
            out.append("this prototype loads one 128-byte (64-element) K panel per stage")
        regs = self.mi * self.bn // 2
        if regs > self.consumer_regs - 40:
            out.append(f"{regs} accumulator registers do not fit under setmaxnreg {self.consumer_regs}")
        if CONSUMERS * WARPGROUP * self.consumer_regs + WARPGROUP * self.producer_regs > 65536:
            out.append("setmaxnreg budget exceeds the 64K-register file")
        if self.cluster not in (1, 2) or (self.cluster == 2 and self.b_major == "K" and (self.bn // 2) % 8):
            out.append("cluster is 1 or 2 (B split in two halves)")
        if self.cluster == 2 and self.b_major == "MN" and (self.bn // 64) % 2:
            out.append("an MN-major B splits into an even number of 64-column panels over the pair")
        if self.bn % self.slab_cols or self.slab_cols % 64:
            out.append("the C slab covers whole 64-column panels and divides bn")
        if self.smem_bytes > 232448:
            out.append(f"{self.smem_bytes} bytes of shared memory exceed the 227 KiB per block")
        return out


# ---- source generation ------------------------------------------------------------------------------------

def _descriptor_plan(cfg: Config):
    """Descriptor fields and per-instruction start offsets (bytes from the stage's A / B tile)."""
    a_tile, b_tile = cfg.tiles()
    a_op = WgmmaOperand(a_tile, Major.K, "A")
    b_op = WgmmaOperand(b_tile, Major.K if cfg.b_major == "K" else Major.MN, "B")
    ad, bd = a_op.descriptor(0, 0), b_op.descriptor(0, 0, cfg.wn)
    a_off = {(mi, kk): a_op.descriptor(mi * 64, kk * 16).start for mi in range(cfg.mi) for kk in range(cfg.bk // 16)}
    b_off = {(ni, kk): b_op.descriptor(ni * cfg.wn, kk * 16, cfg.wn).start
             for ni in range(cfg.ni) for kk in range(cfg.bk // 16)}
    # consumer warpgroup w reads rows [w * mi * 64, ...): its offset must be linear in w
    wg_step = a_op.descriptor(cfg.mi * 64, 0).start
    for w in range(CONSUMERS):
        for (mi, kk), off in a_off.items():
            assert a_op.descriptor((w * cfg.mi + mi) * 64, kk * 16).start == w * wg_step + off
    return ad, bd, a_off, b_off, wg_step


def source(cfg: Config, M: int, N: int, K: int) -> str:
    """The CUDA source of ``cfg`` for one problem shape (shapes are compile-time constants, as in egtile)."""
    problems = cfg.problems()
    if problems:
        raise ValueError(f"{cfg.name}: " + "; ".join(problems))
    if M % cfg.bm or N % cfg.bn or K % cfg.bk:
        raise ValueError(f"{cfg.name}: {M}x{N}x{K} is not a multiple of the tile")
    T = "half" if cfg.dtype == "float16" else "__nv_bfloat16"
    T2, cvt2 = (("__half2", "__floats2half2_rn") if cfg.dtype == "float16"
                else ("__nv_bfloat162", "__floats2bfloat162_rn"))
    a_tile, b_tile = cfg.tiles()
    ad, bd, a_off, b_off, wg_step = _descriptor_plan(cfg)
    tb = 0 if cfg.b_major == "K" else 1
    frag = wgmma_accumulator(cfg.wn)
    regs = cfg.wn // 2
    S = cfg.stages
    acc = [[f"acc{mi}_{ni}" for ni in range(cfg.ni)] for mi in range(cfg.mi)]
    all_acc = [a for row in acc for a in row]

    # --- consumer k-tile body ---
    mma = []
    for kk in range(cfg.bk // 16):
        scale = "k != 0" if kk == 0 else "1"
        for mi in range(cfg.mi):
            for ni in range(cfg.ni):
                mma.append(f"      eg_wgmma_ss<{cfg.wn}, T, 0, {tb}>({acc[mi][ni]}, ad + {a_off[mi, kk] >> 4}u, "
                           f"bd + {b_off[ni, kk] >> 4}u, {scale});")
    release = ("release_cluster(&empty[{}], rank ^ 1)" if cfg.cluster > 1 else "eg_mbarrier_arrive(&empty[{}])")
    if cfg.wait_depth == 1:
        after = ("      eg_wgmma_wait_group<1>();\n"
                 f"      if (k != 0 && lane == 0) {release.format('prev_s')};\n"
                 "      prev_s = s;")
        drain = ("    eg_wgmma_wait_group<0>();\n"
                 f"    if (lane == 0) {release.format('prev_s')};")
    else:
        after = ("      eg_wgmma_wait_group<0>();\n"
                 f"      if (lane == 0) {release.format('s')};")
        drain = ""

    # --- epilogue ---
    # Element (row, col) of register pair (v, v+1) of acc[mi][ni]: the fragment's position is the thread
    # part (slot 0's expression) plus the slot's constant part (its position for thread 0).
    t_row, t_col = frag.coord_expr("tid", 0)
    pairs = []  # (row constant, column constant, accumulator, slot)
    for mi in range(cfg.mi):
        for ni in range(cfg.ni):
            for v in range(0, regs, 2):
                r0, c0 = frag.coord(0, v)
                assert frag.coord(0, v + 1) == (r0, c0 + 1)        # the pair is two adjacent columns
                pairs.append((mi * 64 + r0, ni * cfg.wn + c0, acc[mi][ni], v))

    def pair_store(row_c: int, col_c: int, name: str, v: int, col_lo: int = 0) -> str:
        value = f"{cvt2}({name}[{v}], {name}[{v + 1}])"
        if cfg.epilogue == "direct":
            return (f"    *reinterpret_cast<{T2}*>(C + (size_t)(row0 + {row_c} + {t_row}) * N_ + col0 + {col_c} + "
                    f"{t_col}) = {value};")
        return (f"    *reinterpret_cast<{T2}*>(c_tile + c_offset(wg_row + {row_c} + {t_row}, {col_c - col_lo} + "
                f"{t_col})) = {value};")

    c_tile = cfg.c_tile
    rows_per_wg = cfg.mi * 64
    cl = cfg.cluster

    if cl == 1 and cfg.b_major == "K":
        load_b = "          eg_tma_load_2d(st + A_BYTES, &tmap_b, &full[s], k * BK, tn * BN);"
    elif cl == 1:
        load_b = "\n".join(f"          eg_tma_load_2d(st + A_BYTES + {off}, &tmap_b, &full[s], tn * BN + {c0}, k * BK);"
                           for c0, off in b_tile.tma_boxes())
    elif cfg.b_major == "K":
        # rows [rank * bn/2, (rank+1) * bn/2) of the K-major B tile, written into both CTAs of the pair
        half = cfg.bn // 2
        load_b = (f"          tma_load_2d_multicast(st + A_BYTES + rank * {b_tile.offset(half, 0)}u, &tmap_b, &full[s], "
                  f"k * BK, tn * BN + rank * {half}, 3);")
    else:
        boxes = b_tile.tma_boxes()
        per = len(boxes) // 2
        load_b = "\n".join(
            f"          tma_load_2d_multicast(st + A_BYTES + {boxes[i][1]}u + rank * {boxes[per][1]}u, &tmap_b, &full[s], "
            f"tn * BN + {boxes[i][0]} + rank * {boxes[per][0]}, k * BK, 3);" for i in range(per))
    # A cluster of `cl` CTAs walks tile groups of `cl` tile rows: CTA `rank` takes row cl * tm' + rank.
    first = "blockIdx.x / CL"
    tiles_loop = (f"for (int tile = {first}; tile < NTILES / CL; tile += gridDim.x / CL)" if cfg.persistent
                  else f"for (int tile = {first}; tile < {first} + 1; ++tile)")
    tma_c_param = ", const __grid_constant__ CUtensorMap tmap_c" if cfg.epilogue == "tma" else ""
    if cfg.epilogue == "direct":
        epilogue_code = "\n".join(pair_store(*p_) for p_ in pairs)
    else:
        # one pass per C slab of slab_cols columns; each pass: the previous store has read the slab, all
        # threads write their part, fence.proxy.async, barrier, one thread stores (one TMA box per panel)
        chunks = []
        for p_ in range(cfg.bn // cfg.slab_cols):
            lo = p_ * cfg.slab_cols
            # a pair's 8-column group never straddles a slab (slabs are whole 64-column panels)
            writes = [pair_store(r, c, n, v, lo) for r, c, n, v in pairs if lo <= c < lo + cfg.slab_cols]
            assert len(writes) * (cfg.bn // cfg.slab_cols) == len(pairs)
            stores = "\n".join(
                f"      eg_tma_store_2d(&tmap_c, c_tile + {c0 // c_tile.panel_cols * c_tile.panel_stride} + wg_row * "
                f"{c_tile.row_bytes}, col0 + {lo + c0}, row0);" for c0, _ in c_tile.tma_boxes())
            chunks.append(f"""    if (tid == 0) eg_tma_store_wait();          // the previous store has read c_tile
    eg_named_barrier_sync(1 + wg, {WARPGROUP});
{chr(10).join(writes)}
    eg_fence_proxy_async_shared();                // generic writes of c_tile before the async-proxy read
    eg_named_barrier_sync(1 + wg, {WARPGROUP});
    if (tid == 0) {{
{stores}
    }}""")
        epilogue_code = "\n".join(chunks)

    return f"""// wgmma GEMM prototype {cfg.name}, {M}x{N}x{K} {cfg.dtype} (benchmarks/prototypes/wgmma_gemm.py)
#include "egtile_common.cuh"
#include "egtile_mbarrier.cuh"
#include "egtile_tma.cuh"
#include "egtile_sync.cuh"
#include "egtile_wgmma.cuh"

typedef {T} T;
constexpr int M_ = {M}, N_ = {N}, K_ = {K};
constexpr int BM = {cfg.bm}, BN = {cfg.bn}, BK = {cfg.bk}, S = {S};
constexpr int TILES_M = M_ / BM, TILES_N = N_ / BN, KT = K_ / BK;
[[maybe_unused]] constexpr int NTILES = TILES_M * TILES_N;
constexpr unsigned A_BYTES = {a_tile.nbytes}, STAGE = {cfg.stage_bytes};
constexpr int GROUP_M = {cfg.group_m}, CL = {cl};
{_CLUSTER_PTX if cl > 1 else ""}
// Grouped tile order over tile groups of CL tile rows: GROUP_M groups are walked column by column, so
// consecutive CTAs (clusters) share B panels in L2. CTA `rank` of a cluster takes tile row CL * tm + rank.
__device__ __forceinline__ void tile_coords(int tile, int rank, int& tm, int& tn) {{
  constexpr int GROUPS_M = TILES_M / CL;
  const int per_group = GROUP_M * TILES_N;
  const int first_m = (tile / per_group) * GROUP_M;
  const int rows = min(GROUPS_M - first_m, GROUP_M);
  tm = (first_m + (tile % per_group) % rows) * CL + rank;
  tn = (tile % per_group) / rows;
}}

// Byte offset of C tile element (r, c) in the 128-byte-swizzled shared C tile (egtile.layout.SmemTile
// ({c_tile.rows}, {c_tile.cols}, 2, B128): 64-column panels of {c_tile.panel_stride} bytes).
__device__ __forceinline__ unsigned c_offset(int r, int c) {{
  const unsigned off = (c / 64) * {c_tile.panel_stride}u + r * 128u + (c % 64) * 2u;
  return off ^ (((off >> 7) & 7u) << 4);
}}

extern "C" __global__ void __launch_bounds__({(CONSUMERS + 1) * WARPGROUP}, 1)
gemm(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b{tma_c_param}, T* C) {{
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (eg_smem_addr(smem_raw) & 1023u)) & 1023u);
  unsigned char* c_tile = smem + S * STAGE;
  eg_u64* full = reinterpret_cast<eg_u64*>(c_tile + {c_tile.nbytes if cfg.epilogue == "tma" else 0});
  eg_u64* empty = full + S;
  const int wg = threadIdx.x / {WARPGROUP}, tid = threadIdx.x % {WARPGROUP}, lane = threadIdx.x % 32;
  const int rank = {"(int)cluster_ctarank()" if cl > 1 else "0"};
  if (threadIdx.x == 0) {{
    // empty[s]: one arrival per consumer warp of every CTA of the cluster (each writes into all of them)
    for (int s = 0; s < S; ++s) {{ eg_mbarrier_init(&full[s], 1); eg_mbarrier_init(&empty[s], {CONSUMERS * 4 * cl}); }}
    eg_fence_mbarrier_init();
  }}
  {"cluster_sync();      // barrier inits visible to the peer before any multicast or remote arrive" if cl > 1 else "__syncthreads();"}

  if (wg == {CONSUMERS}) {{                        // producer warpgroup (last)
    eg_setmaxnreg_dec<{cfg.producer_regs}>();
    if (tid == 0) {{
      int s = 0;
      eg_u32 ph = 0;
      {tiles_loop} {{
        int tm, tn;
        tile_coords(tile, rank, tm, tn);
        for (int k = 0; k < KT; ++k) {{
          eg_mbarrier_wait_parity(&empty[s], ph ^ 1);
          eg_mbarrier_arrive_expect_tx(&full[s], STAGE);
          unsigned char* st = smem + s * STAGE;
          eg_tma_load_2d(st, &tmap_a, &full[s], k * BK, tm * BM);
{load_b}
          if (++s == S) {{ s = 0; ph ^= 1; }}
        }}
      }}
    }}
    return;
  }}

  eg_setmaxnreg_inc<{cfg.consumer_regs}>();      // consumer warpgroups 0..{CONSUMERS - 1}
  {" ".join(f"float {a}[{regs}];" for a in all_acc)}
  const eg_u64 a_desc0 = eg_wgmma_desc(smem, {ad.lbo}u, {ad.sbo}u, EG_WGMMA_SWIZZLE_128B) + ((wg * {wg_step}u) >> 4);
  const eg_u64 b_desc0 = eg_wgmma_desc(smem + A_BYTES, {bd.lbo}u, {bd.sbo}u, EG_WGMMA_SWIZZLE_128B);
  const int wg_row = wg * {rows_per_wg};
  int s = 0;
  [[maybe_unused]] int prev_s = 0;
  eg_u32 ph = 0;
  {tiles_loop} {{
    int tm, tn;
    tile_coords(tile, rank, tm, tn);
    const int row0 = tm * BM + wg_row, col0 = tn * BN;
    for (int k = 0; k < KT; ++k) {{
      eg_mbarrier_wait_parity(&full[s], ph);
      const eg_u64 ad = a_desc0 + ((s * STAGE) >> 4), bd = b_desc0 + ((s * STAGE) >> 4);
      {" ".join(f"eg_wgmma_fence_operand({a});" for a in all_acc)}
      eg_wgmma_fence();
{chr(10).join(mma)}
      eg_wgmma_commit_group();
{after}
      if (++s == S) {{ s = 0; ph ^= 1; }}
    }}
{drain}
    {" ".join(f"eg_wgmma_fence_operand({a});" for a in all_acc)}
{epilogue_code}
  }}
{"  if (tid == 0) eg_tma_store_wait();" if cfg.epilogue == "tma" else ""}
{"  cluster_sync();      // the peer may still arrive on our barriers until both are done" if cl > 1 else ""}
}}
"""


# Cluster helpers the prototype's pair schedule needs beyond egtile's headers (candidates for an
# egtile_cluster.cuh once clusters are a decision): PTX ISA 9.7.9.25.5.x cp.async.bulk.tensor
# .multicast::cluster (sm_90a), 9.7.9.21 mapa, 9.7.13.15.13 mbarrier.arrive.shared::cluster, 9.7.13.3
# barrier.cluster, and the %cluster_ctarank special register (10.x).
_CLUSTER_PTX = r"""
__device__ __forceinline__ eg_u32 cluster_ctarank() {
  eg_u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// every non-exited thread of the cluster arrives; release/acquire order shared-memory accesses cluster-wide
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// one arrival on the barrier at this address in both CTAs of the pair: the local one, and the peer's through
// its shared::cluster address (mapa). Default semantics (.release at .cta scope), as the stage's readers
// (this warpgroup's wgmma) completed at wait_group already: the explicit .release.cluster form compiles to
// MEMBAR.ALL.GPU before each arrive, which costs a third of the throughput in the main loop.
__device__ __forceinline__ void release_cluster(eg_u64* bar, eg_u32 peer) {
  eg_mbarrier_arrive(bar);
  asm volatile("{\n\t.reg .b32 ra;\n\tmapa.shared::cluster.u32 ra, %0, %1;\n\t"
               "mbarrier.arrive.shared::cluster.b64 _, [ra];\n\t}"
               ::"r"(eg_smem_addr(bar)), "r"(peer) : "memory");
}
// TMA box written at the same shared offset of every CTA in ctaMask, completing bytes on each one's barrier
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* tmap, eg_u64* bar, int c0, int c1,
                                                      unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%3, %4}], [%2], %5;"
               ::"r"(eg_smem_addr(dst)), "l"(EG_TMA_TMAP(tmap)), "r"(eg_smem_addr(bar)), "r"(c0), "r"(c1), "h"(mask)
               : "memory");
}
"""


# ---- compile ----------------------------------------------------------------------------------------------

def compile_cubin(cfg: Config, M: int, N: int, K: int) -> tuple[bytes, str]:
    from egtile.codegen import nvrtc

    out = nvrtc.compile_cuda(source(cfg, M, N, K), f"gemm_{cfg.name}.cu")
    return out.cubin, out.log


def sass_summary(cubin: bytes) -> dict:
    """HGMMA shapes, TMA/mbarrier/setmaxnreg presence and the resource report of a cubin."""
    from egtile.codegen import sass

    text = sass.disassemble(cubin)
    usage = sass.resource_usage(cubin)
    return {"hgmma": sorted(set(re.findall(r"HGMMA\.\w+", text))), "utmaldg": "UTMALDG" in text,
            "utmastg": "UTMASTG" in text, "setmaxnreg": "USETMAXREG" in text, "ldl_stl": bool(re.search(r"\b(LDL|STL)\b", text)),
            "regs": usage.get("REG"), "local": usage.get("LOCAL"), "stack": usage.get("STACK")}


# ---- launch (cuda.bindings driver) -------------------------------------------------------------------------

def _drv():
    from cuda.bindings import driver as d

    return d


def _ok(result, what: str):
    d = _drv()
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != d.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed: {err}")
    return rest[0] if len(rest) == 1 else (tuple(rest) if rest else None)


def tensor_map(t, box_rows: int, box_cols: int, swizzle: Swizzle):
    import torch

    d = _drv()
    kind = {torch.float16: "FLOAT16", torch.bfloat16: "BFLOAT16"}[t.dtype]
    rows, cols = t.shape
    return _ok(d.cuTensorMapEncodeTiled(
        getattr(d.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{kind}"), 2, t.data_ptr(),
        [d.cuuint64_t(cols), d.cuuint64_t(rows)], [d.cuuint64_t(t.stride(0) * t.element_size())],
        [d.cuuint32_t(box_cols), d.cuuint32_t(box_rows)], [d.cuuint32_t(1), d.cuuint32_t(1)],
        d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, getattr(d.CUtensorMapSwizzle, swizzle.tensor_map_name),
        d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")


class Gemm:
    """A compiled prototype bound to one shape; ``gemm(A, B, C)`` launches on torch's current stream."""

    def __init__(self, cfg: Config, M: int, N: int, K: int, cubin: bytes) -> None:
        import torch

        d = _drv()
        self.cfg, self.M, self.N, self.K = cfg, M, N, K
        torch.cuda.init()
        _ok(d.cuInit(0), "cuInit")
        ctx = _ok(d.cuDevicePrimaryCtxRetain(_ok(d.cuDeviceGet(torch.cuda.current_device()), "cuDeviceGet")), "ctx")
        _ok(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        self._module = _ok(d.cuModuleLoadData(cubin), "cuModuleLoadData")
        self._fn = _ok(d.cuModuleGetFunction(self._module, b"gemm"), "cuModuleGetFunction")
        _ok(d.cuFuncSetAttribute(self._fn, d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 cfg.smem_bytes), "cuFuncSetAttribute")
        ntiles = (M // cfg.bm) * (N // cfg.bn)
        sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        self.grid = ntiles
        self.max_active_clusters = None
        if cfg.cluster > 1:
            self.max_active_clusters = int(_ok(d.cuOccupancyMaxActiveClusters(self._fn, self._config(sms, 0)),
                                               "cuOccupancyMaxActiveClusters"))
        if cfg.persistent:
            # as many CTAs (whole clusters) as can be resident at once: one per SM, or fewer when clusters
            # cannot use every SM (cuOccupancyMaxActiveClusters); "sms" launches one per SM regardless
            resident = sms
            if cfg.cluster > 1 and cfg.grid_policy == "occupancy":
                resident = min(sms, cfg.cluster * self.max_active_clusters)
            self.grid = min(ntiles, resident - resident % cfg.cluster)
        self._cache: dict = {}

    def _config(self, grid: int, stream: int):
        d = _drv()
        cfg = d.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid, 1, 1
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = (CONSUMERS + 1) * WARPGROUP, 1, 1
        cfg.sharedMemBytes = self.cfg.smem_bytes
        cfg.hStream = d.CUstream(stream)
        if self.cfg.cluster > 1:
            attr = d.CUlaunchAttribute()
            attr.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = self.cfg.cluster, 1, 1
            cfg.attrs = [attr]
            cfg.numAttrs = 1
        else:
            cfg.numAttrs = 0
        return cfg

    def _args(self, A, B, C):
        key = (A.data_ptr(), B.data_ptr(), C.data_ptr())
        if key not in self._cache:
            cfg = self.cfg
            maps = [tensor_map(A, cfg.bm, cfg.bk, Swizzle.B128),
                    tensor_map(B, cfg.bn // cfg.cluster, cfg.bk, Swizzle.B128) if cfg.b_major == "K"
                    else tensor_map(B, cfg.bk, 64, Swizzle.B128)]
            if cfg.epilogue == "tma":
                maps.append(tensor_map(C, cfg.mi * 64, 64, Swizzle.B128))
            ptr = ctypes.c_uint64(C.data_ptr())
            addrs = [int(m.getPtr()) for m in maps] + [ctypes.addressof(ptr)]
            arr = (ctypes.c_void_p * len(addrs))(*addrs)
            self._cache = {key: (maps, ptr, arr)}
        return self._cache[key][2]

    def __call__(self, A, B, C) -> None:
        import torch

        d = _drv()
        arr = self._args(A, B, C)
        cfg = self._config(self.grid, torch.cuda.current_stream().cuda_stream)
        _ok(d.cuLaunchKernelEx(cfg, self._fn, ctypes.addressof(arr), 0), "cuLaunchKernelEx")


# ---- Triton tl.dot reference kernel ----------------------------------------------------------------------

def triton_matmul():
    import triton
    import triton.language as tl

    configs = [triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
               triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8}, num_stages=4, num_warps=8),
               triton.Config({"BM": 256, "BN": 128, "BK": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
               triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}, num_stages=4, num_warps=4)]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
        pid = tl.program_id(0)
        num_m = tl.cdiv(M, BM)
        num_n = tl.cdiv(N, BN)
        per_group = GROUP_M * num_n
        first_m = (pid // per_group) * GROUP_M
        rows = min(num_m - first_m, GROUP_M)
        pid_m = first_m + (pid % per_group) % rows
        pid_n = (pid % per_group) // rows
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a = a_ptr + rm[:, None] * sam + rk[None, :] * sak
        b = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for _ in range(0, K, BK):
            acc = tl.dot(tl.load(a), tl.load(b), acc)
            a += BK * sak
            b += BK * sbk
        tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty))

    def run(A, Bkn, C):
        M, K = A.shape
        N = Bkn.shape[1]
        grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa: E731
        kernel[grid](A, Bkn, C, M, N, K, A.stride(0), A.stride(1), Bkn.stride(0), Bkn.stride(1),
                     C.stride(0), C.stride(1))

    return run


# ---- variants, checks, timing -----------------------------------------------------------------------------

def variants() -> list[Config]:
    """Every schedule measured (indices are stable: docs/perf.md and the device scripts name them).

    0-13: the baseline (non-persistent, direct epilogue) and one decision changed at a time; 14-22: the
    persistent TMA-store schedule ``pt`` and the 2-CTA cluster; 23-26: one decision of ``pt`` undone."""
    base = Config()
    pt = dataclasses.replace(base, stages=3, epilogue="tma", persistent=True, group_m=8)
    return [
        base,
        dataclasses.replace(base, wn=128),                        # N=128 instructions (two per k-step)
        dataclasses.replace(base, stages=3),
        dataclasses.replace(base, wait_depth=0),                  # no wgmma group left in flight
        dataclasses.replace(base, group_m=8),                     # tile-order swizzle for L2
        dataclasses.replace(base, persistent=True),
        dataclasses.replace(base, persistent=True, group_m=8),
        dataclasses.replace(base, stages=3, epilogue="tma"),
        dataclasses.replace(base, stages=3, epilogue="tma", persistent=True, group_m=8),
        dataclasses.replace(base, b_major="MN"),                  # egtile's examples/gemm.py layout (B[K, N])
        dataclasses.replace(base, b_major="MN", persistent=True, group_m=8),
        Config(bm=128, bn=128, wn=128, stages=5),                 # the 128x128 tile
        Config(bm=128, bn=128, wn=128, stages=5, persistent=True, group_m=8),
        Config(bm=256, bn=128, wn=128, stages=4),                 # 2 x m64 blocks per consumer
        # 14..: the persistent TMA-store schedule, then the 2-CTA cluster sharing B through multicast
        dataclasses.replace(pt, stages=4, c_cols=128),            # 4 stages: C staged in two 128-column passes
        dataclasses.replace(pt, cluster=2),
        dataclasses.replace(pt, stages=4, c_cols=128, cluster=2),
        dataclasses.replace(pt, b_major="MN"),
        dataclasses.replace(pt, b_major="MN", stages=4, c_cols=128, cluster=2),
        dataclasses.replace(pt, group_m=16, cluster=2),
        # 20..: where the pair schedule's time goes
        dataclasses.replace(pt, cluster=2, grid_policy="sms"),
        dataclasses.replace(base, cluster=2),                     # non-persistent pairs, hardware-scheduled
        dataclasses.replace(base, cluster=2, stages=3, epilogue="tma"),
        # 23..: one decision of the persistent TMA-store schedule undone at a time
        dataclasses.replace(pt, wn=128),
        dataclasses.replace(pt, wait_depth=0),
        dataclasses.replace(pt, group_m=1),
        dataclasses.replace(pt, epilogue="direct"),
    ]


def _inputs(M: int, N: int, K: int, dtype: str, b_major: str, seed: int):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    dt = getattr(torch, dtype)
    A = torch.randn(M, K, device="cuda", generator=g, dtype=torch.float32).to(dt)
    Bkn = torch.randn(K, N, device="cuda", generator=g, dtype=torch.float32).to(dt)
    B = Bkn.t().contiguous() if b_major == "K" else Bkn
    return A, Bkn, B


def check(gemm: Gemm, dtype: str, seed: int) -> dict:
    """Fresh random inputs, NaN-poisoned C, every element against a float32 reference with the bound
    |C - AB| <= 2^-8 |AB| + K 2^-22 (|A||B|) (bf16 output rounding is 2^-9 relative; f32 accumulation)."""
    import torch

    M, N, K = gemm.M, gemm.N, gemm.K
    A, Bkn, B = _inputs(M, N, K, dtype, gemm.cfg.b_major, seed)
    C = torch.full((M, N), float("nan"), device="cuda", dtype=A.dtype)
    gemm(A, B, C)
    torch.cuda.synchronize()
    with _no_tf32():
        ref = A.float() @ Bkn.float()
        mag = A.float().abs() @ Bkn.float().abs()
    out = C.float()
    err = (out - ref).abs()
    bound = 2.0 ** -8 * ref.abs() + K * 2.0 ** -22 * mag
    bad = int((~(err <= bound)).sum())      # NaN counts as bad
    rel = float((out - ref).norm() / ref.norm())
    return {"bad": bad, "rel": rel, "max_err": float(err.nan_to_num(float("inf")).max())}


class _no_tf32:
    def __enter__(self):
        import torch

        self.prev = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False

    def __exit__(self, *exc):
        import torch

        torch.backends.cuda.matmul.allow_tf32 = self.prev


def _clocks() -> str:
    """SM clock (MHz), power (W) and temperature (C) now, through NVML (empty when unavailable)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return (f"{pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)} MHz "
                f"{pynvml.nvmlDeviceGetPowerUsage(h) / 1000:.0f} W {pynvml.nvmlDeviceGetTemperature(h, 0)} C")
    except Exception:  # noqa: BLE001 - telemetry is optional
        return ""


def bench_shape(dt: str, n: int, vs: list[Config], tl_run, passed, args, results) -> list[dict]:
    """Time cuBLAS (both B layouts), Triton and every variant on one n^3 problem: ``args.rounds`` rounds,
    each timing every contender once (do_bench median), so that clock and temperature drift spread over
    all contenders alike; a contender's ratio in a round is that round's best cuBLAS time over its time."""
    import statistics

    import torch
    import triton

    flops = 2.0 * n * n * n
    A, Bkn, Bt = _inputs(n, n, n, dt, "K", seed=n)
    C = torch.empty(n, n, device="cuda", dtype=A.dtype)
    Ct = torch.empty_like(C)
    tl_run(A, Bkn, Ct)                                      # autotune once, outside the rounds
    contenders = [("cuBLAS matmul(A, Bt.t())", lambda: torch.matmul(A, Bt.t())),
                  ("cuBLAS matmul(A, B)", lambda: torch.matmul(A, Bkn)),
                  ("Triton tl.dot (4 autotuned configs)", lambda: tl_run(A, Bkn, Ct))]
    for v in vs:
        cfg = dataclasses.replace(v, dtype=dt)
        if passed is not None and (dt, cfg.name, n) not in passed:
            print(f"{dt} {n} {cfg.name}: not timed (no passing check)", flush=True)
            continue
        g = Gemm(cfg, n, n, n, load_cubin(args.cubins, cfg, n, n, n))
        r = check(g, dt, seed=n + 3)
        if r["bad"]:
            print(f"{dt} {n} {cfg.name}: WRONG ({r['bad']} bad elements), not timed", flush=True)
            continue
        B = Bt if cfg.b_major == "K" else Bkn
        print(f"{dt} {n} {cfg.name}: grid {g.grid} CTAs, max active clusters {g.max_active_clusters}", flush=True)
        results["rows"].append({"kind": "launch", "dtype": dt, "n": n, "name": cfg.name, "grid": g.grid,
                                "max_active_clusters": g.max_active_clusters})
        contenders.append((cfg.name, (lambda g=g, B=B: g(A, B, C))))
    times = {name: [] for name, _ in contenders}
    ratios = {name: [] for name, _ in contenders}
    for rnd in range(args.rounds):
        this = {name: float(triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median"))
                for name, fn in contenders}
        best = min(this["cuBLAS matmul(A, Bt.t())"], this["cuBLAS matmul(A, B)"])
        for name in this:
            times[name].append(this[name])
            ratios[name].append(best / this[name])
        print(f"round {rnd} {dt} {n}: cuBLAS {flops / best / 1e9:.0f} TFLOP/s  {_clocks()}", flush=True)
    out = []
    for name, _ in contenders:
        ms = statistics.median(times[name])
        rec = {"kind": "bench", "dtype": dt, "n": n, "name": name, "ms": ms, "tflops": flops / (ms * 1e-3) / 1e12,
               "ratio": statistics.median(ratios[name]), "ratio_min": min(ratios[name]),
               "ratio_max": max(ratios[name]), "times_ms": times[name]}
        results["rows"].append(rec)
        out.append(rec)
        print(f"{dt:9s} {n:5d}  {name:48s} {ms:8.4f} ms {rec['tflops']:7.1f} TFLOP/s  {rec['ratio']:5.3f}x cuBLAS "
              f"[{rec['ratio_min']:.3f}-{rec['ratio_max']:.3f}]", flush=True)
    return out


def load_cubin(cache: Path | None, cfg: Config, M: int, N: int, K: int) -> bytes:
    if cache is not None:
        f = cache / f"{cfg.dtype}-{cfg.name}-{M}x{N}x{K}.cubin"
        if f.is_file():
            return f.read_bytes()
    return compile_cubin(cfg, M, N, K)[0]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="correctness of every variant (small and large shapes)")
    p.add_argument("--bench", action="store_true", help="time cuBLAS, Triton and the variants")
    p.add_argument("--precompile", type=Path, help="write cubins and a SASS summary to this directory")
    p.add_argument("--cubins", type=Path, help="directory of precompiled cubins (from --precompile)")
    p.add_argument("--sizes", default="4096,8192")
    p.add_argument("--dtypes", default="float16,bfloat16")
    p.add_argument("--only", default="", help="comma-separated variant indices")
    p.add_argument("--json", type=Path, help="write the results here (--check appends one JSON line per check)")
    p.add_argument("--ok-from", type=Path, help="--bench times only the variants this --check output passed")
    p.add_argument("--rounds", type=int, default=5, help="--bench: interleaved rounds (each times every contender)")
    p.add_argument("--launch", action="store_true", help="one warm-up and one launch per variant (for ncu)")
    p.add_argument("--with-cublas", action="store_true", help="--launch: torch.matmul twice first")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    dtypes = args.dtypes.split(",")
    vs = variants()
    if args.only:
        vs = [vs[int(i)] for i in args.only.split(",")]
    results: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": []}

    if args.precompile:
        args.precompile.mkdir(parents=True, exist_ok=True)
        summary = {}
        for dt in dtypes:
            for v in vs:
                cfg = dataclasses.replace(v, dtype=dt)
                for n in sorted(set(sizes) | {1024}):
                    t0 = time.time()
                    cubin, log = compile_cubin(cfg, n, n, n)
                    (args.precompile / f"{dt}-{cfg.name}-{n}x{n}x{n}.cubin").write_bytes(cubin)
                    if n == sizes[0]:
                        s = sass_summary(cubin)
                        s["log"] = log
                        s["compile_s"] = round(time.time() - t0, 2)
                        summary[f"{dt}-{cfg.name}"] = s
                        print(f"{dt:9s} {cfg.name:48s} {s}", flush=True)
        (args.precompile / "sass_summary.json").write_text(json.dumps(summary, indent=1))
        return 0

    import torch

    dev = torch.cuda.get_device_name()
    results["device"] = dev
    if args.check:
        ok = True
        for dt in dtypes:
            for v in vs:
                cfg = dataclasses.replace(v, dtype=dt)
                for n in sorted({1024, *sizes}):
                    g = Gemm(cfg, n, n, n, load_cubin(args.cubins, cfg, n, n, n))
                    r = check(g, dt, seed=n + len(results["rows"]))
                    r2 = check(g, dt, seed=7 * n + 1)                    # fresh inputs, same kernel
                    row = {"kind": "check", "dtype": dt, "variant": cfg.name, "n": n, **r, "bad2": r2["bad"]}
                    results["rows"].append(row)
                    good = r["bad"] == 0 and r2["bad"] == 0
                    row["ok"] = good
                    ok &= good
                    if args.json:
                        with args.json.open("a") as f:
                            f.write(json.dumps(row) + "\n")
                    print(f"check {dt:9s} {cfg.name:48s} {n:5d}  bad={r['bad']} bad2={r2['bad']} rel={r['rel']:.2e} "
                          f"{'ok' if good else 'FAIL'}", flush=True)
        return 0 if ok else 1

    if args.launch:
        if args.with_cublas:
            for dt in dtypes:
                for n in sizes:
                    A, _, Bt = _inputs(n, n, n, dt, "K", seed=n)
                    torch.matmul(A, Bt.t())
                    torch.matmul(A, Bt.t())
                    torch.cuda.synchronize()
                    print(f"launched {dt} cuBLAS matmul(A, Bt.t()) {n}")
        for dt in dtypes:
            for v in vs:
                cfg = dataclasses.replace(v, dtype=dt)
                for n in sizes:
                    g = Gemm(cfg, n, n, n, load_cubin(args.cubins, cfg, n, n, n))
                    A, Bkn, B = _inputs(n, n, n, dt, cfg.b_major, seed=n)
                    C = torch.empty(n, n, device="cuda", dtype=A.dtype)
                    g(A, B, C)
                    g(A, B, C)
                    torch.cuda.synchronize()
                    print(f"launched {dt} {cfg.name} {n}: grid {g.grid}, max active clusters {g.max_active_clusters}")
        return 0

    if args.bench:
        tl_run = triton_matmul()
        passed = None
        if args.ok_from is not None:
            checks = [json.loads(line) for line in args.ok_from.read_text().splitlines() if line.strip()]
            passed = {(c["dtype"], c["variant"], c["n"]) for c in checks if c["ok"]}
        table = []
        for dt in dtypes:
            for n in sizes:
                table += bench_shape(dt, n, vs, tl_run, passed, args, results)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
        print(f"\n# {results['date']}  {dev}  (median over {args.rounds} interleaved rounds; ratio = best cuBLAS "
              f"layout of the same round / this)")
        for rec in table:
            print(f"{rec['dtype'][:4]} {rec['n']:5d} {rec['name'][:46]:46s} {rec['tflops']:6.0f} {rec['ratio']:5.2f} "
                  f"[{rec['ratio_min']:.2f}-{rec['ratio_max']:.2f}]")
        return 0
    p.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
