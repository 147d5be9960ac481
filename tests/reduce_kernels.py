"""Reduction kernels for the tests of ``T.reduce_*`` emission (tests/test_norms.py, tests/test_norms_gpu.py).

``reduce_kernel`` reduces a ``(rows, cols)`` fragment along ``dim`` into a fragment (``clear`` or not) and writes
it out; its shapes pick each split of :func:`codegen.ops.tileop.reduce_plan` (serial, warp, block).
"""

from __future__ import annotations

import torch

from egtile import language as T

KINDS = ("sum", "max", "min", "abssum", "absmax")


def reduce_kernel(kind: str, rows: int, cols: int, dim: int = 1, clear: bool = True, threads: int = 128,
                  dtype: str = "float32", blocks: int = 2):
    """``Out[b, :] = reduce_kind(X[b], dim)`` (plus ``Init[b, :]`` folded in when not ``clear``) for ``blocks``
    blocks."""
    n_out = rows if dim == 1 else cols

    @T.prim_func
    def main(X: T.Tensor((blocks * rows, cols), dtype), Init: T.Tensor((blocks, n_out), "float32"),
             Out: T.Tensor((blocks, n_out), "float32")):
        with T.Kernel(blocks, threads=threads) as bx:
            x = T.alloc_fragment((rows, cols), dtype)
            r = T.alloc_fragment((n_out,), "float32")
            for i, j in T.Parallel(rows, cols):
                x[i, j] = X[bx * rows + i, j]
            if not clear:
                for i in T.Parallel(n_out):
                    r[i] = Init[bx, i]
            getattr(T, f"reduce_{kind}")(x, r, dim=dim, clear=clear)
            for i in T.Parallel(n_out):
                Out[bx, i] = r[i]

    return main


def reference(kind: str, X: torch.Tensor, Init: torch.Tensor, rows: int, dim: int, clear: bool) -> torch.Tensor:
    """The float64 reference of :func:`reduce_kernel`."""
    blocks = Init.shape[0]
    x = X.double().reshape(blocks, rows, -1)
    ax = 1 + dim
    out = {"sum": lambda: x.sum(ax), "max": lambda: x.amax(ax), "min": lambda: x.amin(ax),
           "abssum": lambda: x.abs().sum(ax), "absmax": lambda: x.abs().amax(ax)}[kind]()
    if clear:
        return out
    i = Init.double()
    return {"sum": out + i, "abssum": out + i, "max": torch.maximum(out, i), "min": torch.minimum(out, i),
            "absmax": torch.maximum(out, i)}[kind]


def tolerance(kind: str, X: torch.Tensor, Init: torch.Tensor, rows: int, dim: int) -> dict:
    """Sums: float32 accumulation, at most (extent + 1) ulps of the sum of magnitudes; max/min: exact."""
    if kind in ("max", "min", "absmax"):
        return {"rtol": 0.0, "atol": 0.0}
    blocks = Init.shape[0]
    mag = X.double().abs().reshape(blocks, rows, -1).sum(1 + dim) + Init.double().abs()
    extent = X.shape[1] if dim == 1 else rows
    return {"rtol": 0.0, "atol": (extent + 1) * 2.0**-24 * mag}
