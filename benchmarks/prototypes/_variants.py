"""What the text-patch prototypes share: a kernel built from patched CUDA, and the check-then-time protocol.

A prototype takes the CUDA egtile generated for a kernel (the ``_built`` of ``egtile.compile``'s result),
rewrites it by text into the schedule it wants to measure, and compares the variants on the same inputs: each one
is first run into a NaN-poisoned output and checked against the reference (a wrong variant is never timed), then
all are timed in interleaved rounds, so clock and thermal drift hit every contender alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch


def variant(kernel, src: str, name: str, fast_math: bool = False, **launch):
    """``kernel`` (what ``egtile.compile`` returned) rebuilt from the CUDA source ``src`` through egtile's NVRTC
    path, as a ``CudaKernel``; ``launch`` replaces fields of its launch (``grid=``, ``smem_bytes=``)."""
    from egtile.codegen import nvrtc
    from egtile.runtime import CudaKernel

    built = kernel._built
    out = nvrtc.compile_cuda(src, f"{built.symbol}_{name}.cu", fast_math=fast_math)
    b2 = dataclasses.replace(built, source=src, cubin=out.cubin, log=out.log, cache_hit=False, **launch)
    return CudaKernel(b2, kernel.scheduled)


def check_then_time(kernels: dict[str, Callable], args: tuple, out_like: torch.Tensor,
                    check: Callable[[str, torch.Tensor], bool], timer: Callable[[Callable], float],
                    rounds: int) -> dict[str, list[float] | None]:
    """Run each of ``kernels`` (called as ``k(*args, out)``) once into a NaN-filled output and ``check(name, got)``
    its result (what it returns when that is a tensor of the output's shape, as a reference library's call does,
    else ``out``); then ``rounds`` rounds of ``timer(fn)`` (ms) over those that passed, the variants taking turns
    (benchmarks/_timing.py). Returns the times per name, ``None`` for a variant that failed its check."""
    from _timing import in_turns

    times: dict[str, list[float] | None] = {}
    for name, kern in kernels.items():
        out = torch.full_like(out_like, float("nan"))
        res = kern(*args, out)
        torch.cuda.synchronize()
        got = res if isinstance(res, torch.Tensor) and res.shape == out.shape else out
        times[name] = [] if check(name, got) else None

    def timed(kern):
        out = torch.empty_like(out_like)
        return lambda: timer(lambda: kern(*args, out))
    got = in_turns({name: timed(kernels[name]) for name, t in times.items() if t is not None}, rounds)
    times.update(got)
    return times
