"""Shared command line and result checking of the example kernels (not an example itself).

Every example script:

* reads ``--target`` (``auto``, ``interp``, ``sim``, ``cuda``; default ``auto``) and ``--small`` (sizes the
  reference interpreter and the simulator finish in about a second) with :func:`parse_args`, which ignores
  options it does not know, so an example can be imported by a benchmark or a test runner;
* allocates its tensors on ``kernel.device`` (``"cuda"`` for target ``cuda``, else ``"cpu"``);
* checks every output element against a float64 torch reference with :func:`check`, on an output tensor it
  filled with NaN first (:func:`poisoned`), so an element the kernel never writes cannot pass;
* prints one ``<name>  target=<target>  PASS|FAIL`` line (:func:`report`) and exits 1 on failure.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch

TARGETS = ("auto", "interp", "sim", "cuda")


def parse_args(description: str | None = None, argv: list[str] | None = None) -> argparse.Namespace:
    """``--target`` (default ``"auto"``) and ``--small``; unknown options are ignored."""
    parser = argparse.ArgumentParser(description=(description or "").strip().splitlines()[0] if description else None)
    parser.add_argument("--target", choices=TARGETS, default="auto",
                        help="where the kernel runs: auto (cuda on an sm_90 GPU, else the CPU simulator), interp "
                             "(reference interpreter), sim (scheduled kernel in the CPU simulator), cuda")
    parser.add_argument("--small", action="store_true",
                        help="small sizes, so that the interpreter and the simulator finish in about a second")
    args, _unknown = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    return args


def poisoned(shape: tuple[int, ...], dtype: torch.dtype, device: Any) -> torch.Tensor:
    """A tensor of NaN (floats) or of a wild value (integers): whatever the kernel does not write stays visible."""
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.full(shape, -0x5A5A5A5B, dtype=dtype, device=device)


def check(what: str, got: torch.Tensor, ref: torch.Tensor, *, rtol: float | torch.Tensor,
          atol: float | torch.Tensor) -> bool:
    """Whether every element satisfies ``|got - ref| <= atol + rtol * |ref|`` (and is finite).

    Args:
        what: name printed with a mismatch.
        got: the kernel's output (any device, any dtype); compared in float64 on the CPU.
        ref: the float64 reference, same shape.
        rtol, atol: scalars, or tensors (any device) broadcastable to ``ref`` (per-element error bounds).

    On a mismatch prints how many elements are off, the worst one and its index.
    """
    g = got.detach().to("cpu", torch.float64)
    r = ref.detach().to("cpu", torch.float64)
    if g.shape != r.shape:
        print(f"  {what}: shape {tuple(g.shape)}, expected {tuple(r.shape)}")
        return False
    rtol, atol = (t.detach().to("cpu", torch.float64) if isinstance(t, torch.Tensor) else t for t in (rtol, atol))
    err = (g - r).abs()
    bound = atol + rtol * r.abs()
    bad = ~(err <= bound)  # NaN compares False, so an unwritten (poisoned) element is bad
    if not bool(bad.any()):
        return True
    n_bad = int(bad.sum())
    err_nan = torch.where(torch.isnan(err), torch.full_like(err, float("inf")), err)
    worst = int(torch.argmax(torch.where(bad, err_nan, torch.zeros_like(err_nan))))
    idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), r.shape))
    b = bound if isinstance(bound, float) else float(bound.expand_as(r)[idx])
    print(f"  {what}: {n_bad} of {r.numel()} elements off; worst at {idx}: got {float(g[idx])!r}, "
          f"expected {float(r[idx])!r} (allowed error {b:.3g})")
    return False


def report(name: str, target: str, ok: bool) -> int:
    """Print the result line; the exit status for ``sys.exit``."""
    print(f"{name}  target={target}  {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1
