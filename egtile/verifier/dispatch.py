"""L10: a reordered dispatch (``Scheduled.dispatch``, made by egtile.analysis.dispatch_order) runs every block once
and is unobservable.

A :class:`egtile.ir.dispatch.DispatchOrder` binds the block indices to expressions of the launch position.
Checked here without the analysis that chose it (the verifier imports no egtile.analysis): the expressions,
evaluated here by their own arithmetic at every launch position of the grid, give every block of the grid exactly
once; and no block may observe another: the kernel's tile IR holds no atomic, no impure extern, and no global
buffer that one statement writes and any statement reads (a read of another block's result, or a flag an earlier
block sets, would see a different history under the new order).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from math import prod

import numpy as np

from egtile.ir.dispatch import LAUNCH
from egtile.ir.kernel import AtomicAdd, BinOp, Buffer, Const, Extern, Load, Region, Store, Var, walk
from egtile.ir.scheduled import Scheduled
from egtile.verifier.violation import Violation

# the fields through which a tile-IR statement writes a buffer (every other buffer it names, it reads)
_WRITES = {"Store": ("buffer",), "Copy": ("dst",), "Fill": ("dst",), "Gemm": ("c",), "Reduce": ("dst",)}


def _named(obj: object, out: set[str]) -> None:
    if isinstance(obj, Buffer):
        out.add(obj.name)
    elif isinstance(obj, Load):
        out.add(obj.buffer.name)
        _named(obj.indices, out)
    elif isinstance(obj, Region):
        out.add(obj.buffer.name)
        _named(obj.offsets, out)
    elif isinstance(obj, tuple):
        for x in obj:
            _named(x, out)
    elif is_dataclass(obj) and not isinstance(obj, type):
        for f in fields(obj):
            if f.name not in ("loc", "body", "then_body", "else_body"):
                _named(getattr(obj, f.name), out)


MAX_BLOCKS = 1 << 22  # grids whose every launch position is evaluated (larger orders are refused)
_ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.floor_divide, "%": np.remainder}


def _launch_values(e, lin: np.ndarray) -> np.ndarray:
    """``e`` at every launch position ``lin`` (int64; the order's operands are never negative, so ``/`` and ``%``
    floor)."""
    match e:
        case Const(value=v) if isinstance(v, int) and not isinstance(v, bool):
            return np.full(lin.shape, v, dtype=np.int64)
        case Var(name=n) if n == LAUNCH:
            return lin
        case BinOp(op=op, a=a, b=b) if op in _ARITH:
            return _ARITH[op](_launch_values(a, lin), _launch_values(b, lin))
    raise ValueError(f"{e!r} is not integer arithmetic of the launch position")


def _bijection(sched: Scheduled) -> str | None:
    """Why the order's block indices miss or repeat a block of the grid (None: each block runs once)."""
    grid = tuple(int(n) for n in sched.kernel.grid)
    order = sched.dispatch
    if order.grid != grid:
        return f"the order is for grid {order.grid}, the kernel's grid is {grid}"
    if not 0 <= order.heavy < len(grid):
        return f"its heavy dimension {order.heavy} is not a dimension of the {len(grid)}-D grid"
    total = prod(grid)
    if total > MAX_BLOCKS:
        return f"the grid has {total} blocks, more than the {MAX_BLOCKS} this check evaluates"
    lin = np.arange(total, dtype=np.int64)
    try:
        idx = [_launch_values(e, lin) for e in order.indices()]
    except ValueError as err:
        return str(err)
    if len(idx) != len(grid):
        return f"the order binds {len(idx)} block indices, the grid has {len(grid)} dimensions"
    flat = np.zeros(total, dtype=np.int64)
    stride = 1
    for d, (v, n) in enumerate(zip(idx, grid)):
        if v.min() < 0 or v.max() >= n:
            return f"block index {d} leaves 0 .. {n - 1} (it reaches {int(v.min())} .. {int(v.max())})"
        flat += v * stride
        stride *= n
    seen = np.bincount(flat, minlength=total)
    if (seen != 1).any():
        miss = int(np.flatnonzero(seen == 0)[0])
        return f"{int((seen == 0).sum())} block(s) never run (the first: linear block {miss}) and others run twice"
    return None


def check_dispatch(sched: Scheduled) -> list[Violation]:
    if sched.dispatch is None:
        return []
    k = sched.kernel
    heavy = sched.dispatch.heavy
    why = _bijection(sched)
    if why is not None:
        return [Violation("L10", f"the dispatch order (heaviest first along grid dimension {heavy}) does not run "
                                 f"every block of the grid once: {why}")]
    glob = {b.name for b in k.params} | {b.name for b in k.allocs if b.scope == "global"}
    written: dict[str, int] = {}
    read: dict[str, int] = {}
    for s in walk(k.body):
        if isinstance(s, AtomicAdd) or (isinstance(s, Extern) and not s.pure):
            what = "an atomic" if isinstance(s, AtomicAdd) else f"the impure extern {s.name}"
            return [Violation("L10", f"the block order of grid dimension {heavy} is changed, but {what} lets "
                                     "blocks observe each other's order", (s.sid,))]
        wfields = _WRITES.get(type(s).__name__, ())
        for f in fields(s):
            if f.name in ("loc", "sid", "body", "then_body", "else_body"):
                continue
            names: set[str] = set()
            value = getattr(s, f.name)
            if f.name in wfields:
                target = value.buffer if isinstance(value, Region) else value
                written.setdefault(target.name, s.sid)
                if type(s).__name__ == "Gemm":
                    read.setdefault(target.name, s.sid)  # C (+)= A B reads C
                if isinstance(value, Region):
                    _named(value.offsets, names)
            else:
                _named(value, names)
            for n in names:
                read.setdefault(n, s.sid)
    for name in sorted(written.keys() & read.keys() & glob):
        return [Violation("L10", f"the block order of grid dimension {heavy} is changed, but global buffer {name} "
                                 f"is written (sid {written[name]}) and read (sid {read[name]}): a block may read "
                                 "another block's result, in an order the new dispatch changes",
                          (written[name], read[name]), buffer=name)]
    return []


__all__ = ["check_dispatch"]
