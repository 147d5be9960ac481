"""Simulator semantics of the warpgroup handshake (:mod:`egtile.ir.handshake`): a thread of warpgroup ``w``
runs ``bar.sync ids[w], count`` (a request that blocks until the round has ``count`` threads, syncing and
arriving; :meth:`egtile.sim.machine.Block.sync`) or ``bar.arrive ids[w], count`` (counted without waiting,
:meth:`egtile.sim.machine.Block.bar_arrive`); PTX ISA 9.7.13.4. A sync whose round never completes is the
simulator's deadlock report, naming the handshake's statement; arrivals left in a round at block exit are a
barrier error."""

from __future__ import annotations

from egtile.ir.handshake import NamedArrive, NamedSync
from egtile.sim.semantics import register_semantics


@register_semantics(NamedSync)
def named_sync(m, s: NamedSync, th):
    i = s.barrier_of(th.tid)
    if i is None:
        return None
    th.sid = s.sid
    return (m.sync(i, s.count, s.sid),)


@register_semantics(NamedArrive)
def named_arrive(m, s: NamedArrive, th):
    i = s.barrier_of(th.tid)
    if i is None:
        return None
    th.sid = s.sid
    m.bar_arrive(th, i, s.count, s.sid)
    return m.PREEMPT
