"""Synchronization: mbarrier wait / arrive / arrive.expect_tx (PTX ISA 9.7.13.15), CTA barriers
(``bar.sync``, 9.7.13.4) and ``fence.proxy.async`` (9.7.13.3.2). The state machines are
:mod:`egtile.sim.mbarrier`."""

from __future__ import annotations

from egtile.ir.scheduled import Arrive, ArriveExpectTx, FenceProxyAsync, SyncThreads, Wait
from egtile.sim.semantics import register_semantics


@register_semantics(Wait)
def wait(m, s: Wait, th):
    bar = m.barrier(s.barrier)
    stage = m.stage_of(bar, s.stage, th, "Wait")
    # a wait the schedule added (no statement of its own) is named by its barrier's pipelined loop
    sid = s.sid if s.sid is not None else bar.spec.loop
    return (m.wait(bar, stage, int(m.ev(s.parity, th)), sid),)


@register_semantics(Arrive)
def arrive(m, s: Arrive, th):
    bar = m.barrier(s.barrier)
    m.arrive(bar, m.stage_of(bar, s.stage, th, "Arrive"), th)
    return m.PREEMPT


@register_semantics(ArriveExpectTx)
def arrive_expect_tx(m, s: ArriveExpectTx, th):
    bar = m.barrier(s.barrier)
    stage = m.stage_of(bar, s.stage, th, "ArriveExpectTx")
    m.expect_tx(bar, stage, s.tx_bytes)
    m.arrive(bar, stage, th)
    return m.PREEMPT


@register_semantics(SyncThreads)
def sync_threads(m, s: SyncThreads, th):
    # a barrier the schedule added names the statement the thread ran last
    return (m.sync(s.barrier_id, s.threads.count, th.sid),)


@register_semantics(FenceProxyAsync)
def fence_proxy_async(m, s: FenceProxyAsync, th) -> None:
    m.fence_proxy_async(th)
