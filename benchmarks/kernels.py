"""Benchmark: egtile's example kernels against torch (and Triton) on the same inputs (CUDA only; no assertions).

Kernels (their factories are the ones in ``examples/``):

* ``elementwise_add`` (examples/elementwise_add.py), float32 at 1024², 4096², 8192², egtile blocks 32x32 and
  64x64, against ``torch.add`` and a Triton add (1024 elements per program, 4 warps; skipped with a message
  when Triton is not installed);
* ``gemm`` (examples/gemm.py: float16 inputs, float32 accumulation, float16 output) against ``A @ B``
  (cuBLAS).

Method: every side gets the same freshly generated inputs and allocates its output per call (egtile's ``out_idx``,
torch's operator, ``torch.empty_like`` for Triton). Before timing, each side's output is checked element by element
against a float64 reference with the example's tolerance, Triton's and egtile's on an output poisoned with NaN first
(egtile through the same kernel compiled without ``out_idx``); torch's is not checked. A wrong kernel is reported
and not timed. Then the sides of a case (one size) that passed take turns (benchmarks/_timing.py: a side timed first
on a cool card gains clock speed): in each of ``--rounds`` rounds, in an order drawn per round, each side is warmed
up, then called ``--iters`` times back to back with a pair of CUDA events around every call, and the round's number
is the median of those per-call times. The time reported is a side's median over the rounds (ms), with the spread
over rounds ((max - min) / median) beside it. It includes each side's host-side launch cost when that exceeds the
GPU time of the previous call (small kernels). The inputs stay resident in L2 where they fit, for all sides alike.
Elementwise rates are GB/s (3 x M x N x 4 bytes moved); ``ratio`` is a side's median / torch's median (above 1:
slower than torch).

Without a GPU of compute capability 9.0 it prints that it was skipped and exits 0.

    python benchmarks/kernels.py [--iters 100] [--warmup 10] [--rounds 5] [--quick] [--only elementwise|gemm]
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks")]

from _timing import medians_in_turns  # noqa: E402


def bench(name: str, kernel: Any, checked: Any, inputs: tuple[torch.Tensor, ...], out_dtype: torch.dtype,
          torch_fn: Callable[[], torch.Tensor], ref: torch.Tensor, tol: dict[str, Any], work: str, amount: float,
          args: argparse.Namespace) -> None:
    """``checked`` (the kernel compiled without ``out_idx``) writes into a poisoned output and is checked against
    ``ref``; then ``kernel`` (the same one, allocating its output) and ``torch_fn`` take turns."""
    from _check import check, poisoned

    out = poisoned(tuple(ref.shape), out_dtype, "cuda")
    checked(*inputs, out)
    torch.cuda.synchronize()
    if not check(name, out, ref, **tol):
        print(f"{name:<52} egtile output WRONG: not timed")
        return
    t = medians_in_turns({"egtile": lambda: kernel(*inputs), "torch": torch_fn}, args.rounds, args.iters, args.warmup)
    (t_egtile, s_egtile), (t_torch, s_torch) = t["egtile"], t["torch"]
    rate = lambda ms: amount / (ms * 1e-3) / 1e12  # TB/s or TFLOP/s
    print(f"{name:<52} egtile {t_egtile:8.4f} ms ({rate(t_egtile):6.2f} {work}, spread {s_egtile:.1%})   torch "
          f"{t_torch:8.4f} ms ({rate(t_torch):6.2f} {work}, spread {s_torch:.1%})   ratio {t_egtile / t_torch:6.2f}")


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
    triton = triton_add()
    if not callable(triton):
        print(f"elementwise_add: Triton skipped: {triton}")
    for M, N in [(1024, 1024)] if args.quick else [(1024, 1024), (4096, 4096), (8192, 8192)]:
        elementwise_case(M, N, triton, args)


def elementwise_case(M: int, N: int, triton: Callable[..., Any] | str, args: argparse.Namespace) -> None:
    """One size: check Triton's add and egtile's at each block, then time torch's and those that passed in turns;
    a line for torch (and Triton), one per egtile block."""
    from _check import check, poisoned

    A = torch.randn(M, N, device="cuda")
    B = torch.randn(M, N, device="cuda")
    ref = A.double() + B.double()
    tol = {"rtol": 2.0**-24, "atol": 0.0}  # a float32 sum is correctly rounded
    sides: dict[str, Callable[[], Any]] = {"torch": lambda: torch.add(A, B)}
    why_not: dict[str, str] = {}  # a side that is not timed: what its line says instead
    if callable(triton):
        out = triton(A, B, poisoned((M, N), torch.float32, "cuda"))
        torch.cuda.synchronize()
        if check(f"triton {M}x{N}", out, ref, **tol):
            sides["triton"] = lambda: triton(A, B)
        else:
            why_not["triton"] = "output WRONG: not timed"
    blocks = {f"egtile block {block}x{block}": block for block in (32, 64)}
    for name, block in blocks.items():
        call = egtile_add(A, B, ref, tol, block)
        if callable(call):
            sides[name] = call
        else:
            why_not[name] = call
    t = medians_in_turns(sides, args.rounds, args.iters, args.warmup)
    gbs = lambda ms: 3 * M * N * 4 / (ms * 1e-3) / 1e9  # noqa: E731
    t_torch, s_torch = t["torch"]
    line = f"elementwise_add {M}x{N} f32: torch {t_torch:8.4f} ms ({gbs(t_torch):7.0f} GB/s, spread {s_torch:.1%})"
    t_triton = None
    if "triton" in t:
        t_triton, s_triton = t["triton"]
        line += (f"   triton {t_triton:8.4f} ms ({gbs(t_triton):7.0f} GB/s, ratio {t_triton / t_torch:5.2f}, "
                 f"spread {s_triton:.1%})")
    elif "triton" in why_not:
        line += f"   triton {why_not['triton']}"
    print(line)
    for name in blocks:
        if name not in t:
            print(f"  {name}: {why_not[name]}")
            continue
        ms, spread = t[name]
        vs_triton = f"   ratio to triton {ms / t_triton:5.2f}" if t_triton else ""
        print(f"  {name:<26} {ms:8.4f} ms ({gbs(ms):7.0f} GB/s, spread {spread:.1%})   ratio {ms / t_torch:5.2f}"
              f"{vs_triton}")


def egtile_add(A: torch.Tensor, B: torch.Tensor, ref: torch.Tensor, tol: dict[str, Any],
               block: int) -> Callable[[], Any] | str:
    """egtile's add at ``block`` x ``block``, checked on a NaN-poisoned output: a call of the same kernel compiled
    with ``out_idx`` (the one timed), or why it is not timed (with the traceback when it failed to build or run)."""
    from _check import check, poisoned
    from elementwise_add import elementwise_add

    import egtile

    M, N = A.shape
    try:
        prim = elementwise_add.__wrapped__(M, N, block_M=block, block_N=block)
        checked = egtile.compile(prim, target="cuda")
        C = poisoned((M, N), torch.float32, "cuda")
        checked(A, B, C)
        torch.cuda.synchronize()
        if not check(f"egtile {M}x{N} block {block}", C, ref, **tol):
            return "output WRONG: not timed"
        kernel = egtile.compile(prim, out_idx=[-1], target="cuda")
        kernel(A, B)  # once here, so that a failing launch is reported with this block rather than raised mid-rounds
        return lambda: kernel(A, B)
    except Exception:  # noqa: BLE001  (report every kernel, then go on)
        return "FAILED to build or run:\n" + traceback.format_exc().rstrip()


def bench_gemm(args: argparse.Namespace) -> None:
    from gemm import matmul

    import egtile

    sizes = [(1024, 1024, 1024)] if args.quick else [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096)]
    for M, N, K in sizes:
        name = f"gemm {M}x{N}x{K} f16->f32 acc, 64x64x32"
        try:
            prim = matmul.__wrapped__(M, N, K)  # the example's tiles: 64x64x32, 2 stages, 128 threads
            kernel = egtile.compile(prim, out_idx=[-1], target="cuda")
            checked = egtile.compile(prim, target="cuda")
            A = torch.randn(M, K, device="cuda", dtype=torch.float16)
            B = torch.randn(K, N, device="cuda", dtype=torch.float16)
            A64, B64 = A.double(), B.double()  # the float64 reference on the GPU: fast at these sizes
            tol = {"rtol": 2.0**-11, "atol": K * 2.0**-23 * (A64.abs() @ B64.abs())}
            bench(name, kernel, checked, (A, B), torch.float16, lambda A=A, B=B: A @ B, A64 @ B64, tol, "TFLOP/s",
                  2 * M * N * K, args)
        except Exception:  # noqa: BLE001  (report every kernel, then go on)
            print(f"{name:<52} FAILED to build or run:")
            traceback.print_exc(file=sys.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=100, help="timed calls per side per round (default 100)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed calls per side first, each round (default 10)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds in which the sides of a case take turns (benchmarks/_timing.py; default 5)")
    parser.add_argument("--quick", action="store_true", help="one small size per kernel")
    parser.add_argument("--only", choices=("elementwise", "gemm"), help="run one of the two benchmarks")
    args = parser.parse_args()

    from egtile.api import hopper_available

    if not hopper_available():
        print("benchmarks/kernels.py: skipped (needs a CUDA GPU of compute capability 9.0; "
              f"torch.cuda.is_available() = {torch.cuda.is_available()})")
        return 0
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; median over {args.rounds} rounds, "
          f"the sides taking turns, of the median of {args.iters} calls after {args.warmup} warm-up calls")
    if args.only in (None, "elementwise"):
        bench_elementwise(args)
    if args.only in (None, "gemm"):
        bench_gemm(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
