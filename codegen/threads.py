"""Mapping iterations onto threads: the partitioned loop and the thread-range guard.

Both ``ThreadLoop(mapping="partitioned")`` and every ``TileOp`` give iteration (or element) ``i`` of
``[0, n)`` to the thread of rank ``i % count`` in its range ``[begin, begin + count)``, i.e. thread
``begin + r`` runs ``i = r, r + count, ...`` (:mod:`egtile.ir.scheduled`). The row-major digits of a flat
index are :meth:`egtile.ir.scheduled.ThreadLoop.iteration_c` (:func:`egtile.ir.scheduled.unflatten_c`).
"""

from __future__ import annotations

from egtile.ir.scheduled import ThreadRange

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error

TID = "eg_tid"


def covers(outer: ThreadRange, inner: ThreadRange) -> bool:
    return outer.begin <= inner.begin and inner.end <= outer.end


def range_test(r: ThreadRange) -> str:
    """C condition ``tid in r``."""
    if r.count == 1:
        return f"{TID} == {r.begin}"
    if r.begin == 0:
        return f"{TID} < {r.end}"
    return f"{TID} >= {r.begin} && {TID} < {r.end}"


def guarded(body: list[str], r: ThreadRange, ctx: Ctx, what: str, sid: int | None, *, exact: bool) -> list[str]:
    """``body`` run only by the threads of ``r`` among those that reach it (``ctx.threads``).

    Raises:
        CodegenError: ``exact`` (every thread of ``r`` must take part, as in a partitioned loop) and
            some thread of ``r`` cannot reach the statement.
    """
    if exact and not covers(ctx.threads, r):
        raise codegen_error(
            ctx, f"{what} is split over threads [{r.begin}, {r.end}) but only threads "
                 f"[{ctx.threads.begin}, {ctx.threads.end}) reach it, so iterations of the missing threads "
                 f"would never run", sid)
    if covers(r, ctx.threads):
        return body
    return [f"if ({range_test(r)}) {{", *indent(body), "}"]


def rank(r: ThreadRange) -> str:
    return TID if r.begin == 0 else f"({TID} - {r.begin})"


def partitioned_for(counter: str, n: int, r: ThreadRange) -> str:
    """Header of the loop over this thread's share of ``[0, n)``."""
    if r.count == 1:
        return f"for (int {counter} = 0; {counter} < {n}; ++{counter}) {{"
    return f"for (int {counter} = {rank(r)}; {counter} < {n}; {counter} += {r.count}) {{"


def indent(lines: list[str], n: int = 1) -> list[str]:
    pad = "  " * n
    return [pad + ln if ln else ln for ln in lines]
