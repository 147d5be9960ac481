"""Is compute-sanitizer racecheck's report on a warp-specialized kernel's output tile a race? (docs/gpu-results.md,
2026-12-06 18:04-18:22.)

The shape racecheck reported: the consumer role stores its accumulator into a shared tile (``T.copy(acc, O_s)``, by
the accumulator's layout), the warp-specialized region ends with the CTA barrier, and all threads, producer ones
included, copy the tile to global memory. The SASS has one ``BAR.SYNC 0x0`` between the stores and the loads and the
simulator finds no race, yet racecheck pairs a consumer's store with a producer's load. The kernels it reported also
synchronize the two consumer warpgroups on a named barrier (``bar.sync 1, 256``) inside the loop. This kernel has the
same shape with one gemm and no named barrier (at 128 threads, one consumer warpgroup, or 256, the N split; the run
prints the count): no report here points at racecheck's model of the named barrier, a report at the pattern itself.
Each run checks its output against float64 first.

    compute-sanitizer --tool racecheck python benchmarks/prototypes/racecheck_output_tile.py --threads 128
    compute-sanitizer --tool racecheck python benchmarks/prototypes/racecheck_output_tile.py --threads 256
"""

from __future__ import annotations

import argparse

import torch

import egtile
from egtile import language as T
from egtile.codegen import generate

H, D, BN, N = 64, 256, 64, 512


def kernel(threads: int):
    @T.prim_func
    def main(Q: T.Tensor((H, D), "float16"), KV: T.Tensor((N, D), "float16"), Out: T.Tensor((H, BN), "float16")):
        with T.Kernel(1, threads=threads) as bx:
            Q_s = T.alloc_shared((H, D), "float16")
            KV_s = T.alloc_shared((BN, D), "float16")
            O_s = T.alloc_shared((H, BN), "float16")
            acc = T.alloc_fragment((H, BN), "float32")
            T.copy(Q, Q_s)
            T.fill(acc, 0)
            for k in T.Pipelined(N // BN, num_stages=2):
                T.copy(KV[k * BN:(k + 1) * BN, :], KV_s)
                T.gemm(Q_s, KV_s, acc, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
            T.copy(acc, O_s)
            T.copy(O_s, Out)

    return main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=128, choices=(128, 256))
    args = ap.parse_args()
    prim = kernel(args.threads)
    source = generate(egtile.optimize(prim).scheduled)
    source = source if isinstance(source, str) else source.source
    print(f"threads {args.threads}: named barriers in the kernel: {source.count('eg_named_barrier_sync')}, "
          f"CTA barriers: {source.count('__syncthreads')}")
    k = egtile.compile(prim, target="cuda")
    g = torch.Generator().manual_seed(0)
    Q, KV = (torch.randn(n, D, generator=g) / 8 for n in (H, N))
    out = torch.full((H, BN), float("nan"), dtype=torch.float16, device="cuda")
    k(Q.half().cuda(), KV.half().cuda(), out)
    torch.cuda.synchronize()
    ref = sum(Q.half().double() @ KV.half()[i * BN:(i + 1) * BN].double().T for i in range(N // BN))
    err = (out.cpu().double() - ref).abs().max().item()
    print(f"max abs error against float64: {err:.3g} ({'PASS' if err < 5e-2 else 'FAIL'})")


if __name__ == "__main__":
    main()
