"""Per-thread ``cp.async`` (PTX ISA 9.7.9.25): a ``cp_async`` tile copy reads the thread's share of the
global source now and queues its shared writes as one batch of the thread's cp.async group;
``cp.async.mbarrier.arrive.noinc`` (9.7.9.25.3.3) arrives once every batch the thread issued before it
has landed. A hand-written protocol's ``T.ptx_cp_async`` (``CpAsyncCopy``) is one such batch of one thread,
its ``T.cp_async_barrier_noinc`` (``UserCpAsyncArrive``) that thread's arrival; the destination's writes land with
the copy's completion, ordered (their clocks) before the arrival they wait for, so a read of the destination by
a thread that did not wait for that arrival's phase is a race."""

from __future__ import annotations

from egtile.errors import SimulationError
from egtile.ir.kernel import Copy
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.scheduled import CpAsyncArrive, CpAsyncCopy, TileOp
from egtile.ir.usersync import UserCpAsyncArrive
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


@register_semantics(UserCpAsyncArrive)
def user_cp_async_arrive(m, s: UserCpAsyncArrive, th):
    th.sid = s.sid
    return cp_async_arrive(m, s, th)


@register_semantics(CpAsyncCopy)
def cp_async_user_copy(m, s: CpAsyncCopy, th):
    """One thread's ``cp.async`` of ``s.nbytes``: the source read now, the destination written at completion. The
    addresses must be aligned to the copy's size (PTX ISA 9.7.9.25.3.1): the element offsets are checked here."""
    th.sid = s.sid
    what = f"T.ptx_cp_async ({s.nbytes} bytes)"
    for r in (s.src, s.dst):
        esize = lookup_dtype(r.buffer.dtype).bytes
        idx = [int(m.ev(o, th)) for o in r.offsets]
        flat = 0
        for i, n in zip(idx, r.buffer.shape):
            flat = flat * n + i
        if (flat * esize) % s.nbytes:
            raise SimulationError(f"{what}: {r.buffer.name}{idx} is at byte offset {flat * esize} of its buffer, not a "
                                  f"multiple of {s.nbytes}: cp.async needs both addresses aligned to its size")
    if m.mem(s.src.buffer.name, th).scope != "global" or m.mem(s.dst.buffer.name, th).scope != "shared":
        raise SimulationError(f"{what}: cp.async copies global -> shared only (PTX ISA 9.7.9.25)")
    writes = m.gather(s.src, s.dst, th, s.sid, what, op="cp.async")
    m.issue_cp_async(th, s.sid, writes)
    return m.PREEMPT
