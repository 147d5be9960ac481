"""Per-thread ``cp.async`` (PTX ISA 9.7.9.25): a ``cp_async`` tile copy reads the thread's share of the
global source now and queues its shared writes as one batch of the thread's cp.async group;
``cp.async.mbarrier.arrive.noinc`` (9.7.9.25.3.3) arrives once every batch the thread issued before it
has landed."""

from __future__ import annotations

from egtile.errors import SimulationError
from egtile.ir.kernel import Copy
from egtile.ir.scheduled import CpAsyncArrive, TileOp
from egtile.sim.semantics import register_semantics


def cp_async_copy(m, s: TileOp, th, rank: int, count: int, what: str):
    """This thread's share of a ``cp_async`` tile copy (called by the ``TileOp`` semantics)."""
    op = s.op
    if not isinstance(op, Copy) or m.mem(op.src.buffer.name, th).scope != "global" \
            or m.mem(op.dst.buffer.name, th).scope not in ("shared", "fragment"):
        raise SimulationError(f"{what}: cp_async copies global -> shared only (PTX ISA 9.7.9.25)")
    writes = m.gather(op.src, op.dst, th, op.sid, what, op="cp.async", rank=rank, count=count)
    m.issue_cp_async(th, op.sid, writes)
    return m.PREEMPT


@register_semantics(CpAsyncArrive)
def cp_async_arrive(m, s: CpAsyncArrive, th):
    bar = m.barrier(s.barrier)
    m.cp_async_arrive(bar, m.stage_of(bar, s.stage, th, "CpAsyncArrive"), th)
    return m.PREEMPT
