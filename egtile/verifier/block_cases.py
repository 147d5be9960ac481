"""Which blocks of the grid the verifier traces.

Every block runs the same schedule with other block indices, and the traces of the first and the last block hold
every path of a kernel whose control flow does not depend on the block index: that is what the verifier traced, and
still does for such kernels. Two kinds of condition make blocks differ:

* a barrier operation (an mbarrier wait, arrival or expect_tx, a TMA load, a ``bar.sync``) under a condition or a
  loop bound that reads a block index (``if by != 1:`` around an arrival, a hand-written protocol's special block),
  or whose stage, parity or byte count does, runs differently in the blocks that condition picks, which the first
  and the last need not be: the bug of a middle block passed the verifier while the simulator deadlocked (a fresh
  soundness tester's report);
* a statement-level ``if`` on a block index without a barrier operation (``if bx == 1:`` around a ``T.Parallel``)
  runs its side only in the blocks it picks: a register fragment's misorder inside it passed the verifier (another
  tester's report, 2026-12-07). The guards inside a ``ThreadLoop`` or a ``LayoutLoop`` body (a ragged tile's
  ``if by * 64 + i < M``) are per element: the traced blocks evaluate them for every element, and they do not count.

Only the grid dimensions such conditions read vary (a causal attention kernel's loop bound reads ``bx`` alone: its
``by`` and ``bz`` are traced at their first and last index, as every dimension of a kernel without such conditions
is). A dimension a barrier condition reads is traced at every index when the grid has at most :data:`ALL_BLOCKS`
blocks; otherwise, and for a dimension only a statement-level ``if`` reads, at its first two and last two indices and
those next to every integer the conditions compare against (``c - 1``, ``c``, ``c + 1``); all their combinations, at
most :data:`MAX_CASES` blocks (first and last always among them).
"""

from __future__ import annotations

import itertools
import math

from egtile.ir.kernel import AddressOf, BinOp, Cast, Const, Load, Select, UnOp
from egtile.ir.fragment import LayoutLoop
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Scheduled, SeqLoop, SIf, SyncThreads, ThreadLoop, TmaLoad,
)
from egtile.ir.scheduled import Wait
from egtile.verifier import registry
from egtile.verifier.uniform import _vars as free_vars

def _constants(e) -> list[int]:
    """The integer constants of expression ``e`` (the verifier reads the IR itself: it imports none of the analyses)."""
    match e:
        case Const(value=v):
            return [int(v)] if type(v) is int else []
        case BinOp(a=a, b=b):
            return _constants(a) + _constants(b)
        case UnOp(a=a) | Cast(value=a):
            return _constants(a)
        case Select(cond=c, a=a, b=b):
            return _constants(c) + _constants(a) + _constants(b)
        case Load(indices=idx):
            return [c for i in idx for c in _constants(i)]
        case AddressOf(load=ld):
            return _constants(ld)
    return []


#: grids of at most this many blocks are traced whole when the synchronization depends on the block index
ALL_BLOCKS = 256
#: the most blocks traced for a larger grid
MAX_CASES = 256

_SYNC = (Arrive, ArriveExpectTx, CpAsyncArrive, SyncThreads, TmaLoad, Wait)


def _block_conditions(sched: Scheduled) -> tuple[list, list]:
    """``(sync, sides)``: the conditions and loop bounds that read a block index and hold a barrier operation, with
    the barrier operations' own expressions that read one; and the conditions of the other statement-level ``if``s
    that read one (outside the per-element bodies of a ``ThreadLoop`` or a ``LayoutLoop``, whose guards the traced
    blocks evaluate element by element)."""
    names = {v.name for v in sched.kernel.block_vars}
    sync: list = []
    sides: list = []

    def holds_sync(stmts) -> bool:
        return any(isinstance(x, _SYNC) for x in registry.walk(tuple(stmts)))

    def visit(stmts, per_element: bool) -> None:
        for s in stmts:
            if isinstance(s, _SYNC):  # a stage, parity or byte count computed from the block index
                for f in ("stage", "parity", "tx"):
                    e = getattr(s, f, None)
                    if e is not None and not isinstance(e, (int, str)) and free_vars(e) & names:
                        sync.append(e)
            if isinstance(s, SIf) and free_vars(s.cond) & names:
                if holds_sync((s,)):
                    sync.append(s.cond)
                elif not per_element:
                    sides.append(s.cond)
            elif isinstance(s, SeqLoop) and (free_vars(s.start) | free_vars(s.stop)) & names and holds_sync(s.body):
                sync.extend((s.start, s.stop))
            inner = per_element or isinstance(s, (ThreadLoop, LayoutLoop))
            for b in registry.bodies(s):
                visit(b, inner)

    visit(sched.body, False)
    return sync, sides


def _reads(conds, block_vars) -> set[int]:
    read = set().union(*(free_vars(c) for c in conds)) if conds else set()
    return {i for i, v in enumerate(block_vars) if v.name in read}


def blocks(sched: Scheduled) -> list[tuple[int, ...]]:
    """The blocks whose traces the verifier checks (module docstring)."""
    grid = sched.kernel.grid
    if any(g <= 0 for g in grid):
        return []
    first, last = tuple(0 for _ in grid), tuple(g - 1 for g in grid)
    sync, sides = _block_conditions(sched)
    if not sync and not sides:
        return [first] if first == last else [first, last]
    bv = sched.kernel.block_vars
    # a grid dimension no condition reads changes no path through the kernel: its first and last index stand for it
    # as they stand for every dimension of a kernel without such conditions (only the dimensions read multiply)
    every = _reads(sync, bv) if math.prod(grid) <= ALL_BLOCKS else set()
    near = _reads(sync + sides, bv)
    consts = {v for c in sync + sides for v in _constants(c)}
    axes = []
    for i, g in enumerate(grid):
        if i in every:
            vals = set(range(g))
        elif i in near:
            vals = {0, 1, g - 2, g - 1} | {c + d for c in consts for d in (-1, 0, 1)}
        else:
            vals = {0, g - 1}
        axes.append(sorted(v for v in vals if 0 <= v < g))
    out = list(itertools.product(*axes))
    if len(out) > MAX_CASES:
        out = [first, last] + [c for c in out if c not in (first, last)][:MAX_CASES - 2]
    return out


__all__ = ["ALL_BLOCKS", "MAX_CASES", "blocks"]
