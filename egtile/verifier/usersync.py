"""The verifier's models of the user-protocol nodes (:mod:`egtile.ir.usersync`).

``UserArrive`` / ``UserArriveExpectTx`` are traced as ``Arrive`` / ``ArriveExpectTx`` with the user's statement
as the event's statement (every L3/L4 report on their phases names it). ``ExpectTx`` is an arrival event of
zero threads that expects bytes: it counts toward the phase's expected transaction bytes (L3 compares them
with what the TMA loads deliver) and releases nothing (``mbarrier.expect_tx`` is no arrival, PTX ISA
9.7.13.15.11). Its effects, structure and window models are those of ``ArriveExpectTx``.

``UserCpAsyncArrive`` (``T.cp_async_barrier_noinc``) is traced as ``CpAsyncArrive`` with the user's statement: a
``cp_arrive`` event of the running threads, whose phase is the epoch of the agent's cp.async writes issued before it.
``CpAsyncCopy`` (``T.ptx_cp_async``, one thread's cp.async) reads its global source as the running thread and
writes its shared destination asynchronously: a ``cp_write`` event whose write becomes visible with the phase of
the agent's next ``cp_arrive`` (as a ``cp_async`` tile op's). The verifier groups cp.async writes by agent (role),
not by thread: a role whose every thread arrives after its copies (TileLang's producer) is modelled exactly; one
thread's copy released by another thread's arrival is the simulator's to catch (it tracks each thread's
cp.async sequence). Under a symbolic ``ThreadLoop`` walk it asks for the enumerated walk (one thread per
iteration, the owner known).
"""

from __future__ import annotations

from egtile.ir.scheduled import ArriveExpectTx, CpAsyncArrive, CpAsyncCopy
from egtile.ir.usersync import ExpectTx, UserArrive, UserArriveExpectTx, UserCpAsyncArrive
from egtile.verifier.violation import Violation
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
                            tx=s.tx_bytes * ctx.threads, tid=ctx.tid), ctx)


@handler("trace", UserCpAsyncArrive)
def _user_cp_arrive(s: UserCpAsyncArrive, ctx: Ctx) -> None:
    ctx.tracer.sync_event(ctx, "cp_arrive", s.barrier, s.stage, sid=s.sid)


@handler("trace", CpAsyncCopy)
def _cp_async_copy(s: CpAsyncCopy, ctx: Ctx) -> None:
    t = ctx.tracer
    for tid in ([ctx.tid] if ctx.tid is not None else range(ctx.lo, ctx.hi)):  # each running thread issues one
        c = ctx.child(lo=tid, hi=tid + 1)
        t.region(c, s.src, "r", s.sid)
        w = t.region(c, s.dst, "w", s.sid, proxy="async", kind="async_write", owner_tid=tid)
        if w is not None:
            t.emit(ctx.agent, Event("cp_write", ctx.agent.index, s.sid, ctx.path, accesses=[w], tid=tid), c)


@handler("effects", CpAsyncCopy)
def _cp_async_effects(s: CpAsyncCopy, w, lo: int, hi: int, loop) -> None:
    # one copy per thread that runs it: a copy made by several threads at the same destination is the user's
    # write-after-write, which the data order (L2) reports; replicated code with a per-thread copy is legal
    pass


@handler("structure", CpAsyncCopy)
def _cp_async_structure(s: CpAsyncCopy, w, lo, hi, role, divergent, serial, data_if) -> None:
    if role is None:
        w.out.append(Violation("L7", f"T.ptx_cp_async (sid {s.sid}) outside a role of a hand-written protocol",
                               (s.sid,) if s.sid is not None else (), s.dst.buffer.name))


for _concern in ("effects", "structure", "scan"):
    _fn = registry._HANDLERS[_concern].get(ArriveExpectTx)
    if _fn is not None:
        handler(_concern, ExpectTx)(_fn)
    _fn = registry._HANDLERS[_concern].get(CpAsyncArrive)
    if _fn is not None and UserCpAsyncArrive not in registry._HANDLERS[_concern]:
        handler(_concern, UserCpAsyncArrive)(_fn)
