"""Positions of the first read and the last access of a set of buffers in a statement sequence.

Definitions. For a set of buffer names ``B`` and a statement sequence ``stmts``:

1. ``earliest_read(B, stmts)`` is the smallest index ``i`` such that ``stmts[i]`` may read a buffer of
   ``B`` (per :func:`egtile.analysis.access.reads`, so a pointer handed to an extern call counts, and a
   pointer of unknown target reads every buffer), or ``None`` when no statement does.
2. ``last_access(B, stmts)`` is the largest index ``i`` such that ``stmts[i]`` may read or write a
   buffer of ``B``, or ``None``.

Compound statements count as one position (their whole body). ``B`` is taken whole: the consumer's
wait on a ``full`` mbarrier must precede the first read of ANY buffer the barrier guards, whatever kind
of producer (TMA, cp.async, SIMT) fills it. TileLang's seed bug 2 took this minimum over TMA-loaded
buffers only, so a SIMT-produced buffer was read before the wait. Likewise the consumer's arrive on an
``empty`` mbarrier must follow the last access of every guarded buffer.

Conservative choice: any may-read counts (reads are over-approximated by ``reads``), which can only
move the first read earlier and the last access later, i.e. the wait earlier and the arrive later.

In the e-graph the barrier rules do not compute these positions: they move the wait and release markers
statement by statement past statements that touch no guarded buffer (:mod:`egtile.rules.barrier`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from egtile.analysis.access import names, overlaps, reads, writes
from egtile.ir import Buffer, Stmt


def buffer_names(buffers: Iterable[str | Buffer]) -> frozenset[str]:
    """Names of ``buffers`` (names or :class:`Buffer` records).

    Raises:
        TypeError: ``buffers`` is a single string (a common slip: it would iterate over characters).
    """
    if isinstance(buffers, (str, Buffer)):
        raise TypeError(f"expected an iterable of buffer names, got the single {type(buffers).__name__} "
                        f"{buffers!r}; wrap it in a list")
    return frozenset(b.name if isinstance(b, Buffer) else b for b in buffers)


def earliest_read(buffers: Iterable[str | Buffer], stmts: Sequence[Stmt]) -> int | None:
    """Index of the first statement of ``stmts`` that may read any of ``buffers``; ``None`` if none does.

    Args:
        buffers: buffer names (or :class:`Buffer` records), all producer kinds together.
        stmts: a statement sequence, e.g. a pipelined loop body.
    """
    want = buffer_names(buffers)
    for i, s in enumerate(stmts):
        if overlaps(want, names(reads(s))):
            return i
    return None


def last_access(buffers: Iterable[str | Buffer], stmts: Sequence[Stmt]) -> int | None:
    """Index of the last statement of ``stmts`` that may read or write any of ``buffers``; ``None`` if none.

    Args:
        buffers: buffer names (or :class:`Buffer` records).
        stmts: a statement sequence.
    """
    want = buffer_names(buffers)
    for i in range(len(stmts) - 1, -1, -1):
        s = stmts[i]
        if overlaps(want, names(reads(s)) | names(writes(s))):
            return i
    return None
