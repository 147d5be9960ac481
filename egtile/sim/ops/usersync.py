"""Simulator semantics of the user-protocol nodes (:mod:`egtile.ir.usersync`): those of ``Arrive`` and
``ArriveExpectTx``, with the thread's statement set to the user's (a report names it), and ``ExpectTx``
(``mbarrier.expect_tx``, PTX ISA 9.7.13.15.11: transaction bytes, no arrival). The state machine is
:mod:`egtile.sim.mbarrier`."""

from __future__ import annotations

from egtile.ir.usersync import ExpectTx, UserArrive, UserArriveExpectTx
from egtile.sim.ops.sync import arrive, arrive_expect_tx
from egtile.sim.semantics import register_semantics


@register_semantics(UserArrive)
def user_arrive(m, s: UserArrive, th):
    th.sid = s.sid
    return arrive(m, s, th)


@register_semantics(UserArriveExpectTx)
def user_arrive_expect_tx(m, s: UserArriveExpectTx, th):
    th.sid = s.sid
    return arrive_expect_tx(m, s, th)


@register_semantics(ExpectTx)
def expect_tx(m, s: ExpectTx, th):
    th.sid = s.sid
    bar = m.barrier(s.barrier)
    m.expect_tx(bar, m.stage_of(bar, s.stage, th, "ExpectTx"), s.tx_bytes)
    return m.PREEMPT
