"""Cooperative tile statements (``TileOp``): element ``e`` of the destination belongs to rank
``e % threads.count``; ``simt`` runs synchronously (:mod:`egtile.sim.tileops`), ``cp_async`` copies
asynchronously (:mod:`.cp_async`)."""

from __future__ import annotations

from egtile.ir.kernel import Copy, Fill, Gemm, Reduce
from egtile.ir.scheduled import TileOp
from egtile.sim.ops.cp_async import cp_async_copy
from egtile.sim.semantics import register_semantics
from egtile.sim.tileops import run_simt


def _writes(s: TileOp) -> list[str]:
    match s.op:
        case Copy(dst=r) | Fill(dst=r) | Gemm(c=r):
            return [r.buffer.name]
        case Reduce(dst=b):
            return [b.name]
    return []


@register_semantics(TileOp, writes=_writes)
def tile_op(m, s: TileOp, th):
    if th.tid not in s.threads:
        return None
    op = s.op
    rank, count = th.tid - s.threads.begin, s.threads.count
    what = f"{type(op).__name__} (sid {op.sid}) in block {m.coords}"
    th.sid = op.sid
    if s.inst == "simt":
        run_simt(m, op, th, rank, count, what)
        return None
    return cp_async_copy(m, s, th, rank, count, what)
