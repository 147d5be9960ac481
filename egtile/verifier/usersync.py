"""The verifier's models of the user-protocol nodes (:mod:`egtile.ir.usersync`).

``UserArrive`` / ``UserArriveExpectTx`` are traced as ``Arrive`` / ``ArriveExpectTx`` with the user's statement
as the event's statement (every L3/L4 report on their phases names it). ``ExpectTx`` is an arrival event of
zero threads that expects bytes: it counts toward the phase's expected transaction bytes (L3 compares them
with what the TMA loads deliver) and releases nothing (``mbarrier.expect_tx`` is no arrival, PTX ISA
9.7.13.15.11). Its effects, structure and window models are those of ``ArriveExpectTx``.
"""

from __future__ import annotations

from egtile.ir.scheduled import ArriveExpectTx
from egtile.ir.usersync import ExpectTx, UserArrive, UserArriveExpectTx
from egtile.verifier import registry
from egtile.verifier.registry import handler
from egtile.verifier.trace import Ctx, Event


@handler("trace", UserArrive)
def _user_arrive(s: UserArrive, ctx: Ctx) -> None:
    ctx.tracer.sync_event(ctx, "arrive", s.barrier, s.stage, sid=s.sid)


@handler("trace", UserArriveExpectTx)
def _user_arrive_tx(s: UserArriveExpectTx, ctx: Ctx) -> None:
    ctx.tracer.sync_event(ctx, "arrive", s.barrier, s.stage, sid=s.sid, tx=s.tx_bytes)


@handler("trace", ExpectTx)
def _expect_tx(s: ExpectTx, ctx: Ctx) -> None:
    t = ctx.tracer
    stage = t.const_int(s.stage, ctx.env, f"stage of the expect_tx on {s.barrier}", s.sid)
    t.emit(ctx.agent, Event("arrive", ctx.agent.index, s.sid, ctx.path, barrier=s.barrier, bstage=stage, count=0,
                            tx=s.tx_bytes * ctx.threads, tid=None), ctx)


for _concern in ("effects", "structure", "scan"):
    _fn = registry._HANDLERS[_concern].get(ArriveExpectTx)
    if _fn is not None:
        handler(_concern, ExpectTx)(_fn)
