"""Which blocks of the grid the verifier traces.

Every block runs the same schedule with other block indices, and the traces of the first and the last block hold
every synchronization path of a kernel whose synchronization does not depend on the block index: that is what the
verifier traced, and still does for such kernels. A barrier operation (an mbarrier wait, arrival or expect_tx, a TMA
load, a ``bar.sync``) under a condition or a loop bound that reads a block index (``if by != 1:`` around an
arrival, a hand-written protocol's special block), or whose stage, parity or byte count does, runs differently in the blocks that condition picks, which the
first and the last need not be: the bug of a middle block passed the verifier while the simulator deadlocked (a
fresh soundness tester's report). Only the grid dimensions those conditions read
vary (a causal attention kernel's loop bound reads ``bx`` alone: its ``by`` and ``bz`` are traced at their first and
last index, as every dimension of a kernel without such conditions is): every combination of their indices is
traced when the grid has at most :data:`ALL_BLOCKS` blocks; past that, per such dimension the first two and the last two
indices and those next to every integer the conditions compare against (``c - 1``, ``c``, ``c + 1``), all their
combinations up to :data:`MAX_CASES` blocks (first and last always among them).
"""

from __future__ import annotations

import itertools
import math

from egtile.ir.kernel import AddressOf, BinOp, Cast, Const, Load, Select, UnOp
from egtile.ir.scheduled import Arrive, ArriveExpectTx, CpAsyncArrive, Scheduled, SeqLoop, SIf, SyncThreads, TmaLoad
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


def _block_conditions(sched: Scheduled) -> list:
    """The conditions and loop bounds that read a block index and hold a barrier operation, and the barrier operations'
    own expressions that read one."""
    names = {v.name for v in sched.kernel.block_vars}
    found: list = []

    def holds_sync(stmts) -> bool:
        return any(isinstance(x, _SYNC) for x in registry.walk(tuple(stmts)))

    def visit(stmts) -> None:
        for s in stmts:
            if isinstance(s, _SYNC):  # a stage, parity or byte count computed from the block index
                for f in ("stage", "parity", "tx"):
                    e = getattr(s, f, None)
                    if e is not None and not isinstance(e, (int, str)) and free_vars(e) & names:
                        found.append(e)
            if isinstance(s, SIf) and free_vars(s.cond) & names and holds_sync((s,)):
                found.append(s.cond)
            elif isinstance(s, SeqLoop) and (free_vars(s.start) | free_vars(s.stop)) & names and holds_sync(s.body):
                found.extend((s.start, s.stop))
            for b in registry.bodies(s):
                visit(b)

    visit(sched.body)
    return found


def blocks(sched: Scheduled) -> list[tuple[int, ...]]:
    """The blocks whose traces the verifier checks (module docstring)."""
    grid = sched.kernel.grid
    if any(g <= 0 for g in grid):
        return []
    first, last = tuple(0 for _ in grid), tuple(g - 1 for g in grid)
    conds = _block_conditions(sched)
    if not conds:
        return [first] if first == last else [first, last]
    read = set().union(*(free_vars(c) for c in conds))
    # a grid dimension no condition reads changes no synchronization path: its first and last index stand for it
    # as they stand for every dimension of a kernel without such conditions (only the dimensions read multiply)
    ends = [sorted({0, g - 1}) for g in grid]
    varying = [i for i, v in enumerate(sched.kernel.block_vars) if v.name in read]
    if math.prod(grid) <= ALL_BLOCKS:
        return list(itertools.product(*(range(g) if i in varying else ends[i] for i, g in enumerate(grid))))
    consts = {v for c in conds for v in _constants(c)}
    axes = []
    for i, g in enumerate(grid):
        vals = {0, 1, g - 2, g - 1} | {c + d for c in consts for d in (-1, 0, 1)} if i in varying else set(ends[i])
        axes.append(sorted(v for v in vals if 0 <= v < g))
    out = [first, last] + [c for c in itertools.product(*axes) if c not in (first, last)]
    return list(dict.fromkeys(out))[:MAX_CASES]


__all__ = ["ALL_BLOCKS", "MAX_CASES", "blocks"]
