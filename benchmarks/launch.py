"""Benchmark: host overhead per call of a tiny kernel, egtile against torch and Triton in one process.

The work is ``C = A + B`` over 1024 float32 elements, so small that the GPU finishes each kernel in a
few microseconds and back-to-back calls measure what the host spends per call:

* egtile, plain (``benchmarks/_launch_kernels.py: add_1d``, no TMA): ``kernel(A, B, C)``, and with ``C``
  allocated by the call (``out_idx``);
* egtile, TMA (``add_tma``, a 16x64 tile, ``A`` and ``B`` loaded by TMA: two tensor maps per launch):
  the same tensors every call, and two sets of tensors in turn (tensor maps from the cache);
* torch: ``torch.add(A, B, out=C)`` and ``torch.add(A, B)`` (allocating);
* Triton: a one-program add kernel of the same 1024 elements (skipped, with a message, when Triton is
  not installed).

Method: every kernel is first checked on fresh random inputs with its output poisoned (NaN), every
element compared with ``A + B``; a wrong kernel is reported and not timed. Then, per repeat, ``--warmup``
calls, and ``--calls`` calls back to back, timed two ways: wall clock (``perf_counter`` from a
synchronized start to a synchronized end) and CUDA events recorded before the first and after the last
call (the GPU's view: when the host is the bottleneck the GPU waits for each launch, so both give the
host's cost per call). The median over ``--repeats`` repeats is printed in microseconds per call, with the
ratio to ``torch.add(out=)`` and to Triton (below 1: egtile is faster).

Also printed, to show where egtile's time goes: its argument checks alone (``kernel._accept``), its
launch alone on already checked tensors (``CudaKernel.launch``), and a bare ``cuLaunchKernelEx`` through
cuda-bindings with a prebuilt config and argument block (the floor of any launch made from Python).

Without a GPU of compute capability 9.0 it prints that it was skipped and exits 0.

    python benchmarks/launch.py [--calls 2000] [--warmup 200] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

N = 1024


def measure(fn: Callable[[], Any], calls: int, warmup: int, repeats: int) -> tuple[float, float]:
    """Median over ``repeats`` of (wall us/call, CUDA-event us/call) of ``calls`` back-to-back calls."""
    import torch

    walls, events = [], []
    for _ in range(repeats):
        for _ in range(warmup):
            fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t0) / calls * 1e6)
        events.append(start.elapsed_time(end) / calls * 1e3)
    return statistics.median(walls), statistics.median(events)


def triton_add() -> Callable[..., Any] | str:
    """A Triton ``c = a + b`` over ``n`` elements, one program per 1024, or why there is none."""
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

    def run(a, b, c, n=N):
        add_kernel[(triton.cdiv(n, 1024),)](a, b, c, n, BLOCK=1024)

    run.version = triton.__version__  # type: ignore[attr-defined]
    return run


def correct(name: str, run: Callable[..., Any], shape: tuple[int, ...], out_arg: bool = True) -> bool:
    """One call on fresh random inputs with a NaN-poisoned output; every element must equal ``A + B``."""
    import torch

    a, b = torch.randn(shape, device="cuda"), torch.randn(shape, device="cuda")
    if out_arg:
        c = torch.full(shape, float("nan"), device="cuda")
        run(a, b, c)
    else:
        c = run(a, b)
    torch.cuda.synchronize()
    ok = bool(torch.equal(c, a + b))
    print(f"  correctness {name:<44} {'ok' if ok else 'WRONG: not timed'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="back-to-back calls per repeat (default 2000)")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls before each repeat (default 200)")
    parser.add_argument("--repeats", type=int, default=7, help="repeats; the median is printed (default 7)")
    args = parser.parse_args()

    import torch

    from egtile.api import hopper_available

    if not hopper_available():
        print("benchmarks/launch.py: skipped (needs a CUDA GPU of compute capability 9.0; "
              f"torch.cuda.is_available() = {torch.cuda.is_available()})")
        return 0

    import cuda.bindings

    import egtile
    from _launch_kernels import add_1d, add_tma

    triton = triton_add()
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; cuda-bindings "
          f"{cuda.bindings.__version__}; Triton {getattr(triton, 'version', '-')}; Python {sys.version.split()[0]}")
    print(f"{args.calls} back-to-back calls after {args.warmup} warm-up calls, median of {args.repeats} repeats")
    torch.manual_seed(0)

    plain = egtile.compile(add_1d(N), target="cuda")
    plain_out = egtile.compile(add_1d(N), out_idx=[-1], target="cuda")
    tma = egtile.compile(add_tma(16, N // 16), target="cuda")
    assert not plain._built.tma and len(tma._built.tma) == 2

    ok = {
        "plain": correct("egtile add, 1024 f32 (no TMA)", plain, (N,)),
        "plain_out": correct("egtile add, out_idx", plain_out, (N,), out_arg=False),
        "tma": correct("egtile add, 16x64 f32 (2 TMA maps)", tma, (16, N // 16)),
        "torch": correct("torch.add(out=)", lambda a, b, c: torch.add(a, b, out=c), (N,)),
    }
    if callable(triton):
        ok["triton"] = correct("triton add (BLOCK 1024)", triton, (N,))
    else:
        print(f"  Triton: skipped: {triton}")

    a, b, c = (torch.randn(N, device="cuda") for _ in range(3))
    x1 = [torch.randn(16, N // 16, device="cuda") for _ in range(3)]
    x2 = [torch.randn(16, N // 16, device="cuda") for _ in range(3)]
    flip = [False]

    def tma_alternating():
        flip[0] = not flip[0]
        tma(*(x1 if flip[0] else x2))

    cases: list[tuple[str, str, Callable[[], Any]]] = [
        ("plain", "egtile kernel(A, B, C), no TMA", lambda: plain(a, b, c)),
        ("plain_out", "egtile C = kernel(A, B), no TMA", lambda: plain_out(a, b)),
        ("tma", "egtile kernel(A, B, C), 2 TMA maps", lambda: tma(*x1)),
        ("tma", "egtile TMA, two tensor sets in turn", tma_alternating),
        ("torch", "torch.add(A, B, out=C)", lambda: torch.add(a, b, out=c)),
        ("torch", "torch.add(A, B)", lambda: torch.add(a, b)),
    ]
    if callable(triton) and ok.get("triton"):
        cases.append(("triton", "triton add[(1,)](A, B, C, 1024)", lambda: triton(a, b, c)))
    results: dict[str, tuple[float, float]] = {}
    for key, name, fn in cases:
        if ok.get(key):
            results[name] = measure(fn, args.calls, args.warmup, args.repeats)

    torch_us = results.get("torch.add(A, B, out=C)", (float("nan"),) * 2)
    triton_us = results.get("triton add[(1,)](A, B, C, 1024)")
    print(f"\n{'':<40} {'wall us/call':>12} {'event us/call':>14} {'/ torch.add(out=)':>18} {'/ Triton':>9}")
    for name, (wall, event) in results.items():
        vs_triton = f"{wall / triton_us[0]:8.2f}x" if triton_us else "        -"
        print(f"{name:<40} {wall:12.2f} {event:14.2f} {wall / torch_us[0]:17.2f}x {vs_triton}")

    # where egtile's time goes (plain kernel)
    from egtile.runtime.driver import driver

    ts = (a, b, c)
    rt = plain._runtime
    plan = rt.plan(0)
    plan.launch(ts, torch.cuda.current_stream().cuda_stream)  # this thread's lane
    lane = plan._local.lane
    d = driver()
    parts = [
        ("  its argument checks alone", lambda: plain._accept(ts)),
        ("  its launch alone (checked tensors)", lambda: rt.launch(ts, a.device.index)),
        ("  bare cuLaunchKernelEx (cuda-bindings)", lambda: d.cuLaunchKernelEx(lane.config, plan.function,
                                                                              lane.address, 0)),
    ]
    print("\negtile kernel(A, B, C), no TMA, in parts:")
    for name, fn in parts:
        wall, event = measure(fn, args.calls, args.warmup, args.repeats)
        print(f"{name:<40} {wall:12.2f} {event:14.2f}")
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
