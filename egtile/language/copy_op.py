"""``T.copy`` and ``T.async_copy``: element-wise copies between regions of any scopes.

Semantics: synchronous (``dst`` holds the data at the next statement), row-major over the extents
with unit dimensions dropped, which must match on both sides; values convert to ``dst``'s dtype as a
store does. Which instruction moves the data (TMA, cp.async, SIMT loads/stores) is the scheduler's
choice; ``prefer_instruction`` / ``disable_tma`` / ``T.async_copy`` only record the user's request.
"""

from __future__ import annotations

from typing import Any

from egtile.errors import DSLError, ShapeError
from egtile.ir.kernel import Copy, Load, Store
from egtile.language import tracer
from egtile.language.operand import operand, resolve_pair

_PREFER = {None: "auto", "auto": "auto", "tma": "tma", "cp_async": "cp_async", "cp.async": "cp_async",
           "sync": "simt", "simt": "simt"}


def _copy(src: Any, dst: Any, prefer: str, what: str) -> None:
    loc = tracer.user_loc()
    trace = tracer.current(what)
    trace.require_kernel(what)
    a = operand(src, what, "src", loc)
    b = operand(dst, what, "dst", loc)
    if isinstance(a, Load) and isinstance(b, Load):
        # TileLang lowers a scalar-to-scalar copy to a plain store.
        resolve_pair(a, b, what, loc)
        trace.emit(Store(trace.sid(), b.buffer, b.indices, a, loc), what)
        return
    ra, rb = resolve_pair(a, b, what, loc)
    if ra.squeezed != rb.squeezed:
        raise ShapeError(f"{what}: src {ra.buffer.name} region extents {ra.extents} and dst {rb.buffer.name} region "
                         f"extents {rb.extents} differ (unit dimensions ignored: expected {rb.squeezed}, "
                         f"got {ra.squeezed})", loc)
    trace.emit(Copy(trace.sid(), ra, rb, prefer, loc), what)  # type: ignore[arg-type]


def copy(src: Any, dst: Any, *, coalesced_width: int | None = None, disable_tma: bool = False,
         eviction_policy: str | None = None, prefer_instruction: str | None = None, annotations: Any = None,
         loop_layout: Any = None) -> None:
    """``T.copy(src, dst)``: copy a tile.

    Args:
        src, dst: a buffer, a region ``buf[a:b, k]`` or a start point ``buf[i, j]`` (the tile starting
            there with the other operand's shape).
        disable_tma: request a non-TMA copy (recorded as ``prefer="simt"``).
        prefer_instruction: ``"tma"``, ``"cp_async"`` or ``"sync"`` (SIMT); ``None`` lets the rules choose.

    Raises:
        ShapeError: extents that differ, or a region statically out of its buffer's range.
        DSLError: unknown ``prefer_instruction``, or ``prefer_instruction="tma"`` with ``disable_tma``.
    """
    loc = tracer.user_loc()
    if prefer_instruction not in _PREFER:
        raise DSLError(f"T.copy: prefer_instruction must be one of 'tma', 'cp_async', 'sync', got "
                       f"{prefer_instruction!r}", loc)
    prefer = _PREFER[prefer_instruction]
    if disable_tma:
        if prefer == "tma":
            raise DSLError("T.copy: prefer_instruction='tma' contradicts disable_tma=True", loc)
        if prefer == "auto":
            prefer = "simt"
    _copy(src, dst, prefer, "T.copy")


def async_copy(src: Any, dst: Any, **_: Any) -> None:
    """``T.async_copy(src, dst)``: a copy the user asks to run with ``cp.async`` (PTX ISA 9.7.9.25).
    Same operands and semantics as :func:`copy`."""
    _copy(src, dst, "cp_async", "T.async_copy")
