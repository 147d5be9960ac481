"""Arithmetic of the tile statements ``T.gemm`` and ``T.reduce_*``, shared by every CPU executor.

The reference interpreter (:mod:`egtile.interp`) runs a tile statement on whole arrays; the simulator
(:mod:`egtile.sim.tileops`) runs each thread's share of it element by element. Both take the
accumulator dtype, the reduction and the fold into the old destination values from here, so that a
race-free schedule gives the interpreter's bits and a disagreement is a scheduling bug, never an
arithmetic one. Conversion to the destination dtype stays with the caller
(:func:`egtile.evaluate.cast_array` for arrays, :func:`egtile.evaluate.round_to` for one element: the
same rounding).

Semantics:

* ``Gemm`` multiplies and sums in float32 (float64 when C is float64, int64 for integer C) with numpy's
  ``@``; without ``clear_accum`` the product is added to C's old values converted to that dtype.
* ``Reduce`` accumulates a float source in the destination's accumulator dtype (float32, float64 for
  float64) and an integer source in int64, reducing the whole array along ``dim`` with numpy (one
  summation order for both executors); with ``clear=False`` the result is folded into the old
  destination values (``+`` for sum/abssum, maximum for max/absmax, minimum for min).
* Overflow and invalid operations give inf/NaN silently (numpy warnings off), as the GPU does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import Region


def accumulator(dtype: str) -> np.dtype:
    """Accumulator numpy dtype for results stored as ``dtype``: int64 for integer and bool dtypes,
    float64 for float64, float32 for every other float (float16, bfloat16, float8 included)."""
    d = lookup_dtype(dtype)
    if d.kind in ("int", "uint", "bool"):
        return np.dtype(np.int64)
    return np.dtype(np.float64 if d.name == "float64" else np.float32)


def reduce_accumulator(src_dtype: str, dst_dtype: str) -> np.dtype:
    """Accumulator of ``T.reduce_*`` from a ``src_dtype`` buffer into a ``dst_dtype`` buffer: the
    destination's float accumulator for a float source, int64 for an integer source."""
    if lookup_dtype(src_dtype).kind == "float":
        return accumulator(dst_dtype)
    return np.dtype(np.int64)


def matrix_shape(r: Region) -> tuple[int, ...]:
    """Shape of ``r`` as a ``T.gemm`` operand: its extents when it has two dimensions, else its
    extents with unit dimensions dropped (which must leave two)."""
    return r.extents if len(r.extents) == 2 else r.squeezed


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of two accumulator-dtype matrices (M x K, K x N) -> M x N, overflow silent."""
    with np.errstate(invalid="ignore", over="ignore"):
        return a @ b


def reduce_along(kind: str, x: np.ndarray, dim: int) -> np.ndarray:
    """``x`` (already in the accumulator dtype) reduced along axis ``dim`` by ``kind`` (``sum``,
    ``abssum``, ``max``, ``absmax``, ``min``); the result has ``x``'s shape without ``dim``.

    Raises:
        TypeError: an unknown ``kind`` (the IR admits only the five above).
    """
    with np.errstate(invalid="ignore", over="ignore"):
        match kind:
            case "sum":
                return np.sum(x, axis=dim)
            case "abssum":
                return np.sum(np.abs(x), axis=dim)
            case "max":
                return np.max(x, axis=dim)
            case "absmax":
                return np.max(np.abs(x), axis=dim)
            case "min":
                return np.min(x, axis=dim)
            case _:
                raise TypeError(kind)


def fold(kind: str, old: Any, new: Any, acc: np.dtype) -> Any:
    """Fold ``new`` (accumulator values: a reduction or a gemm product, ``kind`` ``"sum"``) into the
    destination's ``old`` values converted to ``acc``: ``+`` for sum/abssum, maximum for max/absmax,
    minimum for min. Works element-wise on arrays or on one element.

    Raises:
        TypeError: an unknown ``kind``.
    """
    prev = np.asarray(old).astype(acc)
    with np.errstate(invalid="ignore", over="ignore"):
        match kind:
            case "sum" | "abssum":
                return prev + new
            case "max" | "absmax":
                return np.maximum(prev, new)
            case "min":
                return np.minimum(prev, new)
            case _:
                raise TypeError(kind)
