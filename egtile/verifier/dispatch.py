"""L10: a reordered dispatch (``Scheduled.reversed_dims``, made by egtile.analysis.dispatch_order) is unobservable.

Binding a grid dimension's block index as ``n - 1 - blockIdx`` runs the same blocks (a bijection of ``0..n-1``) in
another order. Checked here without the analysis that chose it (the verifier imports no egtile.analysis): the
dimensions must exist, and no block may observe another: the kernel's tile IR holds no atomic, no impure extern,
and no global buffer that one statement writes and any statement reads (a read of another block's result, or a
flag an earlier block sets, would see a different history under the new order).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass

from egtile.ir.kernel import AtomicAdd, Buffer, Extern, Load, Region, Store, walk
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


def check_dispatch(sched: Scheduled) -> list[Violation]:
    dims = sched.reversed_dims
    if not dims:
        return []
    k = sched.kernel
    bad = [d for d in dims if not 0 <= d < len(k.grid)]
    if bad:
        return [Violation("L10", f"reversed dispatch of grid dimension {bad[0]}, but the grid has {len(k.grid)}")]
    glob = {b.name for b in k.params} | {b.name for b in k.allocs if b.scope == "global"}
    written: dict[str, int] = {}
    read: dict[str, int] = {}
    for s in walk(k.body):
        if isinstance(s, AtomicAdd) or (isinstance(s, Extern) and not s.pure):
            what = "an atomic" if isinstance(s, AtomicAdd) else f"the impure extern {s.name}"
            return [Violation("L10", f"the block order of grid dimension {dims[0]} is reversed, but {what} lets "
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
        return [Violation("L10", f"the block order of grid dimension {dims[0]} is reversed, but global buffer {name} "
                                 f"is written (sid {written[name]}) and read (sid {read[name]}): a block may read "
                                 "another block's result, in an order the reversal changes",
                          (written[name], read[name]), buffer=name)]
    return []


__all__ = ["check_dispatch"]
