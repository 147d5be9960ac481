"""A tile op into a per-thread buffer: every thread runs it whole, as element stores.

A ``local`` buffer (``T.alloc_var``, ``T.alloc_local``; TileLang's ``local`` / ``local.var`` scopes) has one
private copy per thread. ``T.fill(v, x)`` / ``T.clear(v)`` / ``T.copy(src, v)`` on it therefore set *every*
thread's copy (TileLang lowers them to a loop each thread runs over its own registers). egtile's tile ops
are cooperative: their work is split by output element across the threads (``ir.scheduled.TileOp``), so
each element of a per-thread destination would be set on one thread only and read stale on the others
(the verifier's L1 reports it: "the write wrote each element on one thread"). The tracer instead emits the
op as one ``Store`` per element, at the op's own point: a block-level store to a local buffer is replicated
on every thread of the block (``egtile.analysis.uniform``), which is the meaning above.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from egtile.errors import SourceLoc, UnsupportedError
from egtile.ir.kernel import BinOp, Const, Expr, Region, Store
from egtile.language import tracer

#: Elements of a per-thread tile op emitted as stores (a local buffer lives in registers: tens of
#: elements in practice); beyond this the op is refused rather than unrolled into thousands of statements.
MAX_ELEMENTS = 1024


def is_per_thread(r: Region) -> bool:
    """Does ``r`` lie in a per-thread (``local``) buffer?"""
    return r.buffer.scope == "local"


def points(r: Region) -> list[tuple[Expr, ...]]:
    """The indices of ``r``'s elements, row-major over its extents."""

    def at(off: Expr, t: int) -> Expr:
        if t == 0:
            return off
        if isinstance(off, Const) and type(off.value) is int:
            return Const(off.value + t)
        return BinOp("+", off, Const(t))

    return [tuple(at(o, t) for o, t in zip(r.offsets, ts)) for ts in itertools.product(*(range(e) for e in r.extents))]


def emit_stores(trace: tracer.Trace, dst: Region, value: Callable[[int], Expr], what: str,
                loc: SourceLoc | None) -> None:
    """Emit ``dst[e] = value(k)`` for the ``k``-th element ``e`` of ``dst`` (row-major).

    Raises:
        UnsupportedError: ``dst`` has more than :data:`MAX_ELEMENTS` elements.
    """
    if dst.numel > MAX_ELEMENTS:
        raise UnsupportedError(f"{what} into the per-thread buffer {dst.buffer.name} of {dst.numel} elements: egtile "
                               f"runs a tile op into a local buffer on every thread as element stores, at most "
                               f"{MAX_ELEMENTS}; write a T.serial loop of element stores, or use a fragment", loc)
    for k, idx in enumerate(points(dst)):
        trace.emit(Store(trace.sid(), dst.buffer, idx, value(k), loc), what)


__all__ = ["MAX_ELEMENTS", "emit_stores", "is_per_thread", "points"]
