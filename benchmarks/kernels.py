"""Benchmark: egtile's example kernels against torch (and Triton) on the same inputs (CUDA only; no assertions).

Kernels (their factories are the ones in ``examples/``):

* ``elementwise_add`` (examples/elementwise_add.py), float32 at 1024², 4096², 8192², egtile blocks 32x32 and
  64x64, against ``torch.add`` and a Triton add (1024 elements per program, 4 warps; skipped with a message
  when Triton is not installed);
* ``gemm`` (examples/gemm.py: float16 inputs, float32 accumulation, float16 output) against ``A @ B``
  (cuBLAS).

Method: every side gets the same freshly generated inputs and allocates its output per call (egtile's
``out_idx``, torch's operator, ``torch.empty_like`` for Triton). Before timing, each side's output is
checked element by element against a float64 reference with the example's tolerance, egtile's and
Triton's on an output poisoned with NaN first (egtile through the same kernel compiled without
``out_idx``); a wrong kernel is reported and not timed. Each side is warmed up, then called ``--iters``
times back to back with a pair of CUDA events around every call; the time reported is the median of those
per-call times (ms). It includes each side's host-side launch cost when that exceeds the GPU time of the
previous call (small kernels). The inputs stay resident in L2 where they fit, for all sides alike.
Elementwise rates are GB/s (3 x M x N x 4 bytes moved); ``ratio`` is a side's median / torch's median
(above 1: slower than torch).

Without a GPU of compute capability 9.0 it prints that it was skipped and exits 0.

    python benchmarks/kernels.py [--iters 100] [--warmup 10] [--quick] [--only elementwise|gemm]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))


def median_ms(fn: Callable[[], Any], iters: int, warmup: int) -> float:
    """Median over ``iters`` calls of the CUDA-event time of one call of ``fn``, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def bench(name: str, kernel: Any, inputs: tuple[torch.Tensor, ...], torch_fn: Callable[[], torch.Tensor],
          ref: torch.Tensor, tol: dict[str, Any], work: str, amount: float, args: argparse.Namespace) -> None:
    from _check import check

    out = kernel(*inputs)
    torch.cuda.synchronize()
    if not check(name, out, ref, **tol):
        print(f"{name:<52} egtile output WRONG: not timed")
        return
    t_egtile = median_ms(lambda: kernel(*inputs), args.iters, args.warmup)
    t_torch = median_ms(torch_fn, args.iters, args.warmup)
    rate = lambda ms: amount / (ms * 1e-3) / 1e12  # TB/s or TFLOP/s
    print(f"{name:<52} egtile {t_egtile:8.4f} ms ({rate(t_egtile):6.2f} {work})   torch {t_torch:8.4f} ms "
          f"({rate(t_torch):6.2f} {work})   ratio {t_egtile / t_torch:6.2f}")


def triton_add() -> Callable[..., Any] | str:
    """``c = triton_add(a, b)``: a Triton elementwise add (1024 elements per program), or why there is none."""
    try:
        import triton
        import triton.language as tl
    except ImportError as e:
        return f"Triton is not installed ({e})"

    @triton.jit
    def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)

    def run(a, b, c=None):
        c = torch.empty_like(a) if c is None else c
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, c, a.numel(), BLOCK=1024)
        return c

    return run


def bench_elementwise(args: argparse.Namespace) -> None:
    from _check import check, poisoned
    from elementwise_add import elementwise_add

    import egtile

    triton = triton_add()
    if not callable(triton):
        print(f"elementwise_add: Triton skipped: {triton}")
    sizes = [(1024, 1024)] if args.quick else [(1024, 1024), (4096, 4096), (8192, 8192)]
    tol = {"rtol": 2.0**-24, "atol": 0.0}  # a float32 sum is correctly rounded
    for M, N in sizes:
        A = torch.randn(M, N, device="cuda")
        B = torch.randn(M, N, device="cuda")
        ref = A.double() + B.double()
        nbytes = 3 * M * N * 4
        gbs = lambda ms: nbytes / (ms * 1e-3) / 1e9  # noqa: E731
        t_torch = median_ms(lambda: torch.add(A, B), args.iters, args.warmup)
        line = f"elementwise_add {M}x{N} f32: torch {t_torch:8.4f} ms ({gbs(t_torch):7.0f} GB/s)"
        t_triton = None
        if callable(triton):
            out = triton(A, B, poisoned((M, N), torch.float32, "cuda"))
            torch.cuda.synchronize()
            if check(f"triton {M}x{N}", out, ref, **tol):
                t_triton = median_ms(lambda: triton(A, B), args.iters, args.warmup)
                line += (f"   triton {t_triton:8.4f} ms ({gbs(t_triton):7.0f} GB/s, ratio {t_triton / t_torch:5.2f})")
            else:
                line += "   triton output WRONG: not timed"
        print(line)
        for block in (32, 64):
            name = f"  egtile block {block}x{block}"
            try:
                prim = elementwise_add.__wrapped__(M, N, block_M=block, block_N=block)
                checked = egtile.compile(prim, target="cuda")
                C = poisoned((M, N), torch.float32, "cuda")
                checked(A, B, C)
                torch.cuda.synchronize()
                if not check(f"egtile {M}x{N} block {block}", C, ref, **tol):
                    print(f"{name}: output WRONG: not timed")
                    continue
                kernel = egtile.compile(prim, out_idx=[-1], target="cuda")
                t = median_ms(lambda: kernel(A, B), args.iters, args.warmup)
                vs_triton = f"   ratio to triton {t / t_triton:5.2f}" if t_triton else ""
                print(f"{name:<28} {t:8.4f} ms ({gbs(t):7.0f} GB/s)   ratio {t / t_torch:5.2f}{vs_triton}")
            except Exception:  # noqa: BLE001  (report every kernel, then go on)
                print(f"{name}: FAILED to build or run:")
                traceback.print_exc(file=sys.stdout)


def bench_gemm(args: argparse.Namespace) -> None:
    from gemm import matmul

    import egtile

    sizes = [(1024, 1024, 1024)] if args.quick else [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096)]
    for M, N, K in sizes:
        name = f"gemm {M}x{N}x{K} f16->f32 acc, 64x64x32"
        try:
            prim = matmul.__wrapped__(M, N, K)  # the example's tiles: 64x64x32, 2 stages, 128 threads
            kernel = egtile.compile(prim, out_idx=[-1], target="cuda")
            A = torch.randn(M, K, device="cuda", dtype=torch.float16)
            B = torch.randn(K, N, device="cuda", dtype=torch.float16)
            A64, B64 = A.double(), B.double()  # the float64 reference on the GPU: fast at these sizes
            tol = {"rtol": 2.0**-11, "atol": K * 2.0**-23 * (A64.abs() @ B64.abs())}
            bench(name, kernel, (A, B), lambda A=A, B=B: A @ B, A64 @ B64, tol, "TFLOP/s", 2 * M * N * K, args)
        except Exception:  # noqa: BLE001  (report every kernel, then go on)
            print(f"{name:<52} FAILED to build or run:")
            traceback.print_exc(file=sys.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=100, help="timed calls per side (default 100)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed calls per side first (default 10)")
    parser.add_argument("--quick", action="store_true", help="one small size per kernel")
    parser.add_argument("--only", choices=("elementwise", "gemm"), help="run one of the two benchmarks")
    args = parser.parse_args()

    from egtile.api import hopper_available

    if not hopper_available():
        print("benchmarks/kernels.py: skipped (needs a CUDA GPU of compute capability 9.0; "
              f"torch.cuda.is_available() = {torch.cuda.is_available()})")
        return 0
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; median of {args.iters} calls "
          f"after {args.warmup} warm-up calls")
    if args.only in (None, "elementwise"):
        bench_elementwise(args)
    if args.only in (None, "gemm"):
        bench_gemm(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
