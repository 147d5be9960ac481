"""Benchmark: egtile's GEMM (examples/gemm.py, compiled by the e-graph to wgmma) against cuBLAS
(``torch.matmul``) and a Triton ``tl.dot`` kernel, in one process on the same inputs (CUDA only; no
assertions).

``C[M, N] = A[M, K] @ B[K, N]``, fp16 or bf16 in, fp32 accumulate, C in the input type; shapes 4096³,
8192³ and one non-square shape (M=4224, N=2048, K=8192). egtile's kernel is ``examples/gemm.py``'s
``matmul`` with a 128x256x64 tile, 3 stages and 256 threads (two consumer warpgroups; warp specialization
adds the producer); every schedule decision is the e-graph's (``--explain`` prints them).

Method (docs/perf.md has the reasons): correctness first, for every contender and shape: fresh random
inputs (normal, scaled by 1/4), the output poisoned with NaN, every element within
``2^-8 |AB| + K 2^-22 (|A| @ |B|)`` of a float32 reference (``torch.matmul`` of the float32 inputs, whose
own error is far below the bound); a contender that fails is reported and not timed. Then ``--rounds``
rounds in which the contenders take turns (benchmarks/_timing.py: an order drawn per round, each turn first
running ``--warm-s`` seconds untimed so that the power-capped clock settles at what that contender draws), each
timing every contender once with ``triton.testing.do_bench`` (the median of its repetitions; it flushes L2 before
every call, alike for every contender). A contender's ratio in a round is cuBLAS's time over its time
in that round (above 1: faster than cuBLAS); the table gives the median ratio over rounds and TFLOP/s from
the median time. Without Triton, only egtile and cuBLAS; without an sm_90 GPU it says so and exits 0.

    python benchmarks/gemm.py [--rounds 5] [--warm-s 0.5] [--quick] [--dtypes float16,bfloat16] [--explain] [--jobs N] [--compile-only]

``--jobs N`` first compiles every egtile kernel of the run in N processes (the e-graph and the verifier are
single-threaded; each compile lands in the on-disk schedule cache, which the timed run then reads);
``--compile-only`` stops after that.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))

SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (4224, 2048, 8192))
TILE = dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def triton_matmul():
    """``c = fn(a, b)``: a Triton ``tl.dot`` GEMM with a few autotuned Hopper configurations, or why there is none."""
    try:
        import triton
        import triton.language as tl
    except Exception as e:  # noqa: BLE001 - report why and go on without it
        return f"Triton is not importable ({type(e).__name__}: {e})"

    configs = [triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP": 8}, num_stages=3, num_warps=8),
               triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP": 8}, num_stages=4, num_warps=8),
               triton.Config({"BM": 256, "BN": 128, "BK": 64, "GROUP": 8}, num_stages=3, num_warps=8)]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
        pid = tl.program_id(0)
        rows_of_tiles = tl.cdiv(M, BM)
        cols_of_tiles = tl.cdiv(N, BN)
        per_group = GROUP * cols_of_tiles
        first = (pid // per_group) * GROUP
        height = min(rows_of_tiles - first, GROUP)
        tm = first + (pid % per_group) % height
        tn = (pid % per_group) // height
        rm = tm * BM + tl.arange(0, BM)
        rn = tn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            a = tl.load(a_ptr + rm[:, None] * sam + (k * BK + rk)[None, :] * sak)
            b = tl.load(b_ptr + (k * BK + rk)[:, None] * sbk + rn[None, :] * sbn)
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty))

    def run(a, b, c=None):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), dtype=a.dtype, device=a.device) if c is None else c
        grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa: E731
        kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
        return c

    return run


def timer(warm_s: float = 0.5):
    """``(method, bench)``: ``bench(fn)`` is the median milliseconds of ``fn`` by triton's do_bench, or by CUDA
    events where triton is missing (``method`` says which), after ``fn`` has run ``warm_s`` seconds untimed (its
    clock settles: benchmarks/_timing.py)."""
    from _timing import event_median, settle

    try:
        from triton.testing import do_bench

        def bench(fn):
            settle(fn, warm_s)
            return do_bench(fn, warmup=25, rep=100, return_mode="median")
        return "do_bench", bench
    except Exception:  # noqa: BLE001 - CUDA events instead
        return "cuda events", lambda fn: event_median(fn, 50, warmup=5, warm_s=warm_s)


def _compile_one(job: tuple[int, int, int, str]) -> str:
    import time as _time

    import egtile
    from gemm import matmul

    M, N, K, dt = job
    t0 = _time.perf_counter()
    egtile.compile(matmul(M, N, K, dtype=dt, **TILE).kernel, target="cuda")
    return f"{dt} {M}x{N}x{K} compiled in {_time.perf_counter() - t0:.1f} s"


def precompile(jobs: list[tuple[int, int, int, str]], n: int) -> None:
    """Compile ``jobs`` in ``n`` spawned processes, filling the schedule cache."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(min(n, len(jobs))) as pool:
        for line in pool.imap_unordered(_compile_one, jobs):
            print("  " + line, flush=True)


def correct(what: str, got: torch.Tensor, A: torch.Tensor, B: torch.Tensor, ref: torch.Tensor, K: int) -> bool:
    bound = 2.0**-8 * ref.abs() + K * 2.0**-22 * (A.float().abs() @ B.float().abs())
    err = (got.float() - ref).abs()
    bad = ~(err <= bound)  # NaN fails
    if bool(bad.any()):
        idx = tuple(int(i) for i in torch.nonzero(bad)[0])
        print(f"  {what}: {int(bad.sum())} elements off, first {idx}: got {got[idx].item()}, expected "
              f"{ref[idx].item()} within {bound[idx].item():.3g}")
        return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warm-s", type=float, default=0.5,
                    help="seconds each contender runs untimed at the start of its turn (its clock settles)")
    ap.add_argument("--quick", action="store_true", help="4096³ only, 3 rounds")
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--explain", action="store_true", help="print egtile's schedule decisions for the first shape")
    ap.add_argument("--jobs", type=int, default=1, help="compile the egtile kernels in this many processes first")
    ap.add_argument("--compile-only", action="store_true", help="only compile (fill the schedule cache), then exit")
    args = ap.parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("benchmarks/gemm.py: skipped (needs an sm_90 GPU)")
        return 0
    import egtile
    from gemm import matmul

    shapes = SHAPES[:1] if args.quick else SHAPES
    rounds = 3 if args.quick else args.rounds
    if args.jobs > 1 or args.compile_only:
        precompile([(M, N, K, dt) for dt in args.dtypes.split(",") for M, N, K in shapes], max(args.jobs, 1))
        if args.compile_only:
            return 0
    from _timing import in_turns

    _how, bench = timer(args.warm_s)
    tri = triton_matmul()
    if not callable(tri):
        print(f"Triton skipped: {tri}")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, egtile tile {TILE}")
    rows = []
    for dt in args.dtypes.split(","):
        for M, N, K in shapes:
            t0 = time.perf_counter()
            kernel = matmul(M, N, K, dtype=dt, **TILE)
            explicit = egtile.compile(kernel.kernel, target="cuda")
            compile_s = time.perf_counter() - t0
            if args.explain and (M, N, K) == shapes[0]:
                print(kernel.explain())
            g = torch.Generator(device="cuda").manual_seed(M * 7 + N * 3 + K)
            A = (torch.randn(M, K, device="cuda", generator=g) / 4).to(TORCH[dt])
            B = (torch.randn(K, N, device="cuda", generator=g) / 4).to(TORCH[dt])
            ref = A.float() @ B.float()
            contenders = {"cublas": lambda A=A, B=B: torch.matmul(A, B)}
            C = torch.full((M, N), float("nan"), dtype=TORCH[dt], device="cuda")
            explicit(A, B, C)
            torch.cuda.synchronize()
            ok = {"cublas": correct("cublas", torch.matmul(A, B), A, B, ref, K),
                  "egtile": correct(f"egtile {dt} {M}x{N}x{K}", C, A, B, ref, K)}
            contenders["egtile"] = lambda A=A, B=B, C=C: explicit(A, B, C)
            if callable(tri):
                Ct = torch.full((M, N), float("nan"), dtype=TORCH[dt], device="cuda")
                tri(A, B, Ct)
                torch.cuda.synchronize()
                ok["triton"] = correct("triton", Ct, A, B, ref, K)
                contenders["triton"] = lambda A=A, B=B, Ct=Ct: tri(A, B, Ct)
            live = {k: f for k, f in contenders.items() if ok.get(k)}
            times = in_turns({k: lambda f=f: bench(f) for k, f in live.items()}, rounds)
            flops = 2.0 * M * N * K
            line = f"{dt:8s} {M}x{N}x{K}:"
            for k in contenders:
                if k not in live:
                    line += f"  {k} WRONG (not timed)"
                    continue
                med = statistics.median(times[k])
                ratio = statistics.median(tc / t for tc, t in zip(times["cublas"], times[k])) if "cublas" in live else 0
                line += f"  {k} {flops / med / 1e9:6.0f} TFLOP/s ({ratio:4.2f}x)"
                rows.append((dt, (M, N, K), k, flops / med / 1e9, ratio))
            print(line + f"   [egtile compile {compile_s:.2f} s]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
