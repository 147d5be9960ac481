"""CPU time of the simulator on four kernels whose time is per-element ``T.Parallel`` bodies and tile ops.

    python benchmarks/sim_speed.py [--profile NAME] [--only NAME,...] [--per-element]

Kernels: the flash-attention forward of ``examples/flash_attention.py`` (128 x 64 blocks, one head, sequence
128, head dim 64, float16), the layer norm of ``examples/norms.py`` (8 x 1024 float16, 128 threads), and the
hand-written warp-specialized GEMM of ``examples/warp_specialized_gemm.py`` (``T.ws``, 256 threads, 128 x 128 x 128,
64 x 64 x 32 tiles), and a bfloat16 row gather into shared memory (``gather``: 4 blocks of 32 x 512). Each is compiled once (not timed), then simulated with ``egtile.sim.simulate``; the figure is
``time.process_time`` of the simulation (CPU time, so that a loaded machine's waiting is not counted), best of
``--repeat`` runs. The outputs are checked against torch, so a fast wrong simulator does not pass.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "examples"), os.path.join(HERE, "..", "tests")]
sys.argv = sys.argv[:1] + [a for a in sys.argv[1:]]  # the examples parse --target/--small and ignore the rest


def _flash():
    import flash_attention as fa

    import egtile

    prim = fa.flashattn.__wrapped__(1, 1, 128, 64, False, block_M=128, block_N=64, threads=128, dtype="float16")
    k = egtile.compile(prim, target="sim")
    torch.manual_seed(0)
    Q, K, V = (torch.randn(1, 128, 1, 64, dtype=torch.float16) for _ in range(3))
    args = (Q, K, V, torch.full((1, 128, 1, 64), float("nan"), dtype=torch.float16))
    ref, _ = fa.reference(Q, K, V, False)

    def check(out):
        return (out[3].double() - ref).abs().max().item() < 2e-2
    return k, args, check


def _norm():
    import norms

    import egtile

    prim = norms.layer_norm.__wrapped__(8, 1024, blk_m=1, threads=128, dtype="float16")
    k = egtile.compile(prim, target="sim")
    torch.manual_seed(0)
    ins = norms.inputs("layer_norm", 8, 1024, "float16", "cpu")
    ref, _ = norms.reference("layer_norm", ins, 1e-5)
    args = (*ins, torch.full((8, 1024), float("nan"), dtype=torch.float16))

    def check(out):
        return (out[-1].double() - ref).abs().max().item() < 2e-2
    return k, args, check


def _ws_gemm():
    import warp_specialized_gemm as ws

    import egtile

    prim = ws.ws_matmul.__wrapped__(128, 128, 128, 64, 64, 32)
    k = egtile.compile(prim, target="sim")
    torch.manual_seed(0)
    A = torch.randn(128, 128, dtype=torch.float16)
    B = torch.randn(128, 128, dtype=torch.float16)
    ref = A.double() @ B.double()

    def check(out):
        return (out[2].double() - ref).abs().max().item() < 1e-2
    return k, (A, B, torch.full((128, 128), float("nan"))), check


def _gather():
    """TileLang's sparse-MLA gather (``dsa_sparse_finetune``): rows of a bfloat16 ``KV`` picked by an index tensor
    into shared memory (a two-variable ``T.Parallel`` of 32 x 512, 128 elements per thread: batched, every
    iteration recorded for the repeated-iteration check), then scaled out to global."""
    import egtile
    from egtile import language as T

    n, bi, d, blocks = 256, 32, 512, 4

    @T.prim_func
    def main(KV: T.Tensor((n, d), "bfloat16"), Idx: T.Tensor((blocks, bi), "int32"),
             Out: T.Tensor((blocks, bi, d), "bfloat16")):
        with T.Kernel(blocks, threads=128) as bx:
            S = T.alloc_shared((bi, d), "bfloat16")
            for i, j in T.Parallel(bi, d):
                S[i, j] = KV[Idx[bx, i], j]
            for i, j in T.Parallel(bi, d):
                Out[bx, i, j] = S[i, j] * 3.0

    k = egtile.compile(main, target="sim")
    torch.manual_seed(0)
    KV = torch.randn(n, d, dtype=torch.bfloat16)
    Idx = torch.randint(0, n, (blocks, bi), dtype=torch.int32)
    ref = (KV[Idx.long()].float() * 3.0).to(torch.bfloat16)

    def check(out):
        return torch.equal(out[2], ref)
    return k, (KV, Idx, torch.full((blocks, bi, d), float("nan"), dtype=torch.bfloat16)), check


KERNELS = {"flash_attention": _flash, "layer_norm": _norm, "ws_gemm": _ws_gemm, "gather": _gather}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--only", default=",".join(KERNELS))
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--profile", default=None, help="print a cProfile of this kernel's simulation")
    p.add_argument("--per-element", action="store_true",
                   help="run every T.Parallel body per element (egtile.sim.batch.ENABLED = False): the path before")
    a, _ = p.parse_known_args()
    from egtile.sim import batch, simulate

    batch.ENABLED = not a.per_element

    ok = True
    for name in a.only.split(","):
        k, args, check = KERNELS[name]()
        sched = k.scheduled
        best = None
        for _ in range(a.repeat):
            t0 = time.process_time()
            res = simulate(sched, *args)
            dt = time.process_time() - t0
            best = dt if best is None else min(best, dt)
        good = check(res.outputs) and not res.races and res.deadlock is None
        ok &= good
        print(f"{name:16s} {best:7.2f} s CPU  {'ok' if good else 'WRONG'}", flush=True)
        if a.profile == name:
            pr = cProfile.Profile()
            pr.enable()
            simulate(sched, *args)
            pr.disable()
            pstats.Stats(pr).sort_stats("tottime").print_stats(25)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
