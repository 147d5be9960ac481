"""Benchmark: egtile's FP8 GEMM (wgmma's .m64nNk32 e4m3 form, chosen by the e-graph) against
``torch._scaled_mm`` (cuBLASLt's FP8 GEMM, what a PyTorch user would pick), in one process on the same inputs
(CUDA only; no assertions).

``C[M, N] = A[M, K] @ B[N, K]^T``, A and B float8_e4m3fn (B given N x K: K-major, the one layout the FP8 form
reads), float32 accumulation, C bfloat16; ``torch._scaled_mm(A, B.t(), scale_a=1, scale_b=1,
out_dtype=bfloat16)``, with cuBLASLt's default accumulation and with ``use_fast_accum=True`` (the FP8 tensor
core's own accumulation, as egtile's wgmma; the default promotes partial sums to full float32 at intervals). egtile's kernel is :func:`fp8_matmul` (TileLang's FP8 GEMM written with egtile's
constructs), two tiles: 128x256x128 (3 stages, 256 threads) and 128x128x128 (4 stages, 256 threads).

Method: correctness first, for every contender: fresh random inputs (normal x 8, in e4m3), the output poisoned
with NaN, every element within ``2^-7 |ref| + K 2^-12 (|A| @ |B|^T)`` of the float64 product of the decoded values
(bfloat16 rounding of the output plus the FP8 tensor core's accumulation, egtile.rules.mma); a contender that fails
is reported and not timed. Then ``--rounds`` rounds in which the contenders take turns (benchmarks/_timing.py: an
order drawn per round, each turn first running 0.5 s untimed), each timing every contender once
(``triton.testing.do_bench`` median when Triton is there, else CUDA events, median of 50); TFLOP/s from the median
time over rounds.

    python benchmarks/gemm_fp8.py [--rounds 3] [--size 4096]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

TILES = {"128x256x128": dict(bm=128, bn=256, bk=128, stages=3, threads=256),
         "128x128x128": dict(bm=128, bn=128, bk=128, stages=4, threads=256)}


def fp8_matmul(M: int, N: int, K: int, *, bm: int, bn: int, bk: int, stages: int, threads: int,
               fmt: str = "float8_e4m3fn", out: str = "bfloat16"):
    from egtile import language as T

    @T.prim_func
    def main(A: T.Tensor((M, K), fmt), B: T.Tensor((N, K), fmt), C: T.Tensor((M, N), out)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), fmt)
            B_s = T.alloc_shared((bn, bk), fmt)
            C_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=True)
            T.copy(C_f, C[by * bm, bx * bn])

    return main


def timer():
    from gemm import timer as gemm_timer  # benchmarks/ is on the path when a benchmark runs

    return gemm_timer()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=4096)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        print("no sm_90 GPU: nothing to time")
        return 0
    import egtile

    M = N = K = args.size
    g = torch.Generator().manual_seed(0)
    A = (torch.randn(M, K, generator=g) * 8).to(torch.float8_e4m3fn).cuda()
    B = (torch.randn(N, K, generator=g) * 8).to(torch.float8_e4m3fn).cuda()
    ref = A.double() @ B.double().T
    bound = 2.0 ** -7 * ref.abs() + K * 2.0 ** -12 * (A.double().abs() @ B.double().abs().T)
    one = torch.ones((), device="cuda")
    contenders = {}
    for name, tile in TILES.items():
        t0 = time.perf_counter()
        k = egtile.compile(fp8_matmul(M, N, K, **tile), target="cuda")
        wgmma = "eg_wgmma_ss_f8<" in k.get_kernel_source()
        print(f"egtile {name}: compiled in {time.perf_counter() - t0:.1f} s, wgmma's FP8 form: {wgmma}")
        C = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
        contenders[f"egtile {name}"] = (lambda k=k, C=C: (k(A, B, C), C)[1], C)
    # torch's result is a new tensor: timing a copy into a preallocated one would charge torch a pass over C
    for fast in (False, True):
        name = "torch._scaled_mm" + (" fast accum" if fast else "")
        try:
            torch._scaled_mm(A, B.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast)
        except Exception as e:  # noqa: BLE001
            print(f"{name} unavailable: {e}")
            continue
        contenders[name] = (lambda fast=fast: torch._scaled_mm(
            A, B.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast), None)
    ok = {}
    for name, (fn, out) in contenders.items():
        if out is not None:  # egtile writes into its own output: poison it first
            out.fill_(float("nan"))
        C = fn()
        torch.cuda.synchronize()
        err = (C.double() - ref).abs()
        good = bool(torch.isfinite(C).all()) and bool((err <= bound).all())
        rel = float((C.double() - ref).norm() / ref.norm())
        print(f"{name}: correct={good} relative error {rel:.2e}")
        if good:
            ok[name] = fn
    from _timing import in_turns

    how, bench = timer()
    times = in_turns({n: lambda fn=fn: bench(fn) for n, fn in ok.items()}, args.rounds)
    flops = 2.0 * M * N * K
    print(f"\nFP8 GEMM {M}x{N}x{K} (e4m3 x e4m3 -> bf16), {args.rounds} rounds ({how}), "
          f"{torch.cuda.get_device_name()}:")
    for n, ts in times.items():
        ms = statistics.median(ts)
        print(f"  {n:24s} {ms:8.3f} ms  {flops / ms / 1e9:7.1f} TFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
