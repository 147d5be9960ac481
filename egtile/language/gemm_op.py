"""``T.gemm``: ``C (+)= op(A) @ op(B)`` on tiles.

Operands are 2-D after dropping unit dimensions. After transposition A is (M, K), B is (K, N) and C is
(M, N); accumulation is in float32 (float64 when C is float64). How it runs (wgmma or a SIMT loop, which
warpgroups own which part of C) is the scheduler's choice; ``policy`` and ``k_pack`` are accepted and ignored.
"""

from __future__ import annotations

import enum
from typing import Any

from egtile.errors import DSLError, DTypeError, ShapeError
from egtile.ir.kernel import Gemm, Region
from egtile.language import tracer
from egtile.language.expr import Value
from egtile.language.operand import as_region, operand


class GemmWarpPolicy(enum.IntEnum):
    """TileLang's warp tiling policy of ``T.gemm``; accepted for compatibility, not used."""

    Square = 0
    FullRow = 1
    FullCol = 2


def _matrix(r: Region, name: str, loc) -> tuple[int, int]:
    sq = r.squeezed
    if len(r.extents) == 2:
        return r.extents[0], r.extents[1]
    if len(sq) == 2:
        return sq[0], sq[1]
    raise ShapeError(f"T.gemm: {name} ({r.buffer.name}) must be a 2-D tile, got extents {r.extents}", loc)


def _oriented(a: tuple[int, int], b: tuple[int, int], ta: bool, tb: bool) -> tuple[int, int, int, int]:
    """(M, K) of A and (K, N) of B as T.gemm reads them under the transpose flags."""
    am, ak = (a[1], a[0]) if ta else a
    bk, bn = (b[1], b[0]) if tb else b
    return am, ak, bk, bn


def _flags_that_fit(a: tuple[int, int], b: tuple[int, int], c: tuple[int, int]) -> str:
    """A hint naming the transpose flags under which the shapes would agree (a K-major B, as in Q K^T, is
    the usual slip: the user forgot transpose_B=True)."""
    fits = []
    for ta in (False, True):
        for tb in (False, True):
            am, ak, bk, bn = _oriented(a, b, ta, tb)
            if ak == bk and (am, bn) == c:
                fits.append(f"transpose_A={ta}, transpose_B={tb}")
    if not fits:
        return ""
    return "; the shapes agree with " + " or ".join(fits)


def gemm(A: Any, B: Any, C: Any, transpose_A: bool = False, transpose_B: bool = False,  # noqa: N803
         policy: GemmWarpPolicy = GemmWarpPolicy.Square, clear_accum: bool = False, k_pack: int = 1,
         wg_wait: int = 0, mbar: Any = None) -> None:
    """``T.gemm(A, B, C, transpose_A, transpose_B, clear_accum)``.

    Raises:
        ShapeError: operands that are not 2-D, or M/N/K that disagree (the message gives all shapes).
        DTypeError: A and B of different dtypes.
        DSLError: a global-memory C, an accumulator that is also operand A or B, or ``mbar`` (manual wgmma
            synchronization).
    """
    loc = tracer.user_loc()
    trace = tracer.current("T.gemm")
    trace.require_kernel("T.gemm")
    if mbar is not None:
        raise DSLError("T.gemm(mbar=...) is not supported", loc)
    ra = as_region(operand(A, "T.gemm", "A", loc), "T.gemm", loc)
    rb = as_region(operand(B, "T.gemm", "B", loc), "T.gemm", loc)
    rc = as_region(operand(C, "T.gemm", "C", loc), "T.gemm", loc)
    am, ak = _matrix(ra, "A", loc)
    bk, bn = _matrix(rb, "B", loc)
    cm, cn = _matrix(rc, "C", loc)
    a_shape, b_shape = (am, ak), (bk, bn)
    am, ak, bk, bn = _oriented(a_shape, b_shape, transpose_A, transpose_B)
    if ak != bk or am != cm or bn != cn:
        raise ShapeError(
            f"T.gemm: shapes do not agree; expected A (M, K) = ({cm}, K), B (K, N) = (K, {cn}), C (M, N) with the "
            f"same K, got A ({am}, {ak}), B ({bk}, {bn}), C ({cm}, {cn}) after transpose_A={bool(transpose_A)}, "
            f"transpose_B={bool(transpose_B)}{_flags_that_fit(a_shape, b_shape, (cm, cn))}", loc)
    fp8 = ("float8_e4m3fn", "float8_e5m2")
    if ra.buffer.dtype != rb.buffer.dtype and not (ra.buffer.dtype in fp8 and rb.buffer.dtype in fp8):
        # Every MMA instruction takes one input type for A and B, and TileLang's T.gemm requires it too;
        # accepting the pair would fix a conversion (to which type?) that the user never wrote. The one
        # exception is the 8-bit floats: wgmma's FP8 form takes e4m3 x e5m2 (PTX ISA 9.7.15.5.2), and both
        # widen exactly to float32, so the product is fixed without a conversion.
        raise DTypeError(f"T.gemm: operands A ({ra.buffer.name}: {ra.buffer.dtype}) and B ({rb.buffer.name}: "
                         f"{rb.buffer.dtype}) have different dtypes; T.gemm multiplies operands of one type. Copy one "
                         f"into a buffer of the other's dtype with T.copy first", loc)
    if rc.buffer.scope == "global":
        raise DSLError(f"T.gemm: accumulator C ({rc.buffer.name}) must be a fragment, shared or local buffer, not "
                       "a global tensor", loc)
    for name, r in (("A", ra), ("B", rb)):
        if r.buffer.name == rc.buffer.name:
            # C's elements are rewritten while the threads computing other elements still read the operand:
            # no order of the cooperative update reproduces C += A @ B (every instruction egtile could pick,
            # SIMT or MMA, reads operand tiles while accumulators are stored).
            raise DSLError(f"T.gemm: operand {name} and the accumulator C are the same buffer ({rc.buffer.name}); the "
                           f"result would depend on the order threads update C. Copy the operand into another buffer "
                           f"first", loc)
    trace.emit(Gemm(trace.sid(), ra, rb, rc, bool(transpose_A), bool(transpose_B), bool(clear_accum), loc), "T.gemm")


def wgmma_gemm(A: Any, B: Any, C: Any, transpose_A: bool = False, transpose_B: bool = False,  # noqa: N803
               policy: GemmWarpPolicy = GemmWarpPolicy.Square, clear_accum: bool = False,
               annotations: Any = None) -> None:
    """``T.wgmma_gemm(A, B, C, transpose_A, transpose_B, policy, clear_accum)``: TileLang's explicitly asynchronous
    Hopper GEMM (``wgmma.mma_async`` without the ``wgmma.wait_group`` that ``T.gemm`` adds; the user waits with
    ``T.wait_wgmma(n)``). egtile runs it as ``T.gemm``, which completes before the next statement: a stronger
    order than TileLang's, with the same values for every program that waits before it reads ``C`` (PTX ISA
    9.7.15.5: reading the accumulator of an unfinished ``wgmma`` is undefined).

    ``clear_accum`` may be a condition known only when the kernel runs (``clear_accum=(j == 0)`` in a
    ``T.unroll`` loop, as TileLang allows): the product then clears ``C`` where it holds."""
    if isinstance(clear_accum, Value):
        from egtile.language.control import Else, If

        with If(clear_accum):
            gemm(A, B, C, transpose_A, transpose_B, policy, True)
        with Else():
            gemm(A, B, C, transpose_A, transpose_B, policy, False)
        return
    gemm(A, B, C, transpose_A, transpose_B, policy, clear_accum)


def wait_wgmma(id: int) -> None:  # noqa: A002 - TileLang's parameter name
    """``T.wait_wgmma(n)``: wait until at most ``n`` ``T.wgmma_gemm`` groups are pending
    (``wgmma.wait_group n``, PTX ISA 9.7.15.7). egtile's ``T.wgmma_gemm`` has completed when it returns, so
    nothing is pending and there is nothing to wait for."""
    tracer.current("T.wait_wgmma").require_kernel("T.wait_wgmma")
