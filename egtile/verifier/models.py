"""Trace models of the builtin scheduled statements (what each one does for one agent).

Each handler is registered in the verifier's registry next to its definition (``@handler("trace",
...)``); the ``ThreadLoop`` model and the guards of its body are in :mod:`egtile.verifier.threadloop`. The
semantics are those of :mod:`egtile.ir.scheduled` (and of the enumerating verifier,
:mod:`egtile.verifier.reference.trace`, which the tests compare against).
"""

from __future__ import annotations

from egtile.ir.kernel import AddressOf, AtomicAdd, Copy, Extern, Fill, Gemm, Reduce, Store
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Elect, FenceProxyAsync, Leaf, RoleSplit, SeqLoop, SIf, SyncThreads,
    ThreadLoop, TileOp, TmaLoad, TmaStore, Wait,
)
from egtile.verifier.loads import loads_in
from egtile.verifier.paths import enter
from egtile.verifier.regions import Owner
from egtile.verifier.registry import handler
from egtile.verifier.threadloop import sym_if
from egtile.verifier.trace import Ctx, Event, Fallback, NotConstant, TraceError, _restore, _Scope, symbolic

POINTER_EVENT = {1: "r", 2: "w", 3: "x"}
"""The trace event of an extern pointer by its declared access mode (egtile.ir.kernel.AddressOf.mode)."""


@handler("bodies", SeqLoop, ThreadLoop, Elect)
def _bodies_single(s) -> tuple:
    return (s.body,)


@handler("bodies", SIf)
def _bodies_if(s: SIf) -> tuple:
    return (s.then_body, s.else_body)


@handler("bodies", RoleSplit)
def _bodies_roles(s: RoleSplit) -> tuple:
    return tuple(r.body for r in s.roles)


@handler("trace", Leaf)
@symbolic
def _leaf(s: Leaf, ctx: Ctx) -> None:
    st = s.stmt
    match st:
        case Store(buffer=b, indices=idx, value=v, sid=sid):
            ctx.reads_of(v, sid)
            for i in idx:
                ctx.reads_of(i, sid)
            ctx.element(b.name, idx, "w", sid)
        case AtomicAdd(buffer=b, indices=idx, value=v, sid=sid):
            ctx.reads_of(v, sid)
            for i in idx:
                ctx.reads_of(i, sid)
            ctx.element(b.name, idx, "a", sid)
        case Extern(args=args, sid=sid):
            for x in args:
                ctx.reads_of(x, sid)
                if isinstance(x, AddressOf):
                    # the T.call_extern contract: the callee touches the elements the pointer declares, as declared
                    for idx in x.element_indices():
                        ctx.element(x.load.buffer.name, idx, POINTER_EVENT[x.mode], sid)
        case _:
            raise TypeError(f"not a leaf statement: {st!r}")


@handler("trace", SeqLoop)
@symbolic
def _seq_loop(s: SeqLoop, ctx: Ctx) -> None:
    tracer = ctx.tracer
    var, sid = s.var, s.sid
    try:
        b = int(tracer.const(s.start, ctx.env))
        if tracer.trips is not None and sid in tracer.trips and loads_in(s.stop):
            e = b + tracer.trips[sid]  # a representative count of a runtime bound (egtile.verifier.tripcount)
            ctx.reads_of(s.stop, sid)  # every running thread reads the bound once, before the first iteration
        else:
            e = int(tracer.const(s.stop, ctx.env))
    except NotConstant as err:
        if ctx.sym is not None:
            raise Fallback("a serial loop bound depends on the ThreadLoop") from None
        raise TraceError(f"loop over {var.name} (sid {sid}) has a bound that is not a constant ({err})", sid) from None
    env = ctx.env
    saved = env.get(var.name)
    window = tracer.window.plan(s, b, e, ctx) if (tracer.window is not None and ctx.sym is None) else None
    its = window.iterations if window is not None else range(b, e)
    tracer.limits.count_iterations(len(its) if hasattr(its, "__len__") else e - b, s)
    for pos, k in enumerate(its):
        env[var.name] = k
        c = Ctx(tracer, ctx.agent, ctx.lo, ctx.hi, env, ctx.path + ((sid, var.name, k),), sid, ctx.tid, ctx.sym,
                ctx.accesses_only)
        if window is not None:
            tracer.rounds.append(window.tag(pos, k))
        try:
            tracer.walk(s.body, c)
        finally:
            if window is not None:
                tracer.rounds.pop()
    _restore(env, var.name, saved)


@handler("trace", TileOp)
def _tile_op(s: TileOp, ctx: Ctx) -> None:
    tracer = ctx.tracer
    tr = s.threads
    b, e = max(ctx.lo, tr.begin), min(ctx.hi, tr.end)
    op = s.op
    nel = _elements(op)
    if b >= e or b - tr.begin >= nel:
        return  # this agent owns no element
    split = (Owner("rank", tr.begin, tr.count), (tr.count, b - tr.begin, e - tr.begin))
    sid = op.sid
    key = tracer.replay_key(s, ctx) if s.inst != "cp_async" else None
    if key is not None and tracer.replay(key, ctx):
        return
    mark = len(tracer.traces[ctx.agent.index])
    outer = tracer.scope
    tracer.scope = scope = _Scope(True)
    c = Ctx(tracer, ctx.agent, ctx.lo, ctx.hi, ctx.env, ctx.path, ctx.loop_sid, None, None, ctx.accesses_only)
    try:
        match op:
            case Copy(src=src, dst=dst):
                tracer.region(c, src, "r", sid, split=split)
                if s.inst == "cp_async":
                    w = tracer.region(c, dst, "w", sid, proxy="async", kind="async_write", split=split)
                    if w is not None:
                        tracer.emit(ctx.agent, Event("cp_write", ctx.agent.index, sid, ctx.path, accesses=[w]), c)
                else:
                    tracer.region(c, dst, "w", sid, split=split)
            case Fill(dst=dst, value=v):
                c.reads_of(v, sid)
                tracer.region(c, dst, "w", sid, split=split)
            case Gemm(a=ra, b=rb, c=rc, clear_accum=clear):
                # operands: whole regions, on every thread (a thread's outputs need whole rows and columns)
                tracer.region(c, ra, "r", sid)
                tracer.region(c, rb, "r", sid)
                if not clear:
                    tracer.region(c, rc, "r", sid, split=split)
                tracer.region(c, rc, "w", sid, split=split)
            case Reduce(src=src, dst=dst, clear=clear):
                tracer.whole(c, src, "r", sid)
                if not clear:
                    tracer.whole(c, dst, "r", sid, split=split)
                tracer.whole(c, dst, "w", sid, split=split)
        tracer.close(scope)
    finally:
        tracer.scope = outer
    if key is not None:
        tracer.remember(key, ctx, mark)


@handler("trace", Elect)
def _elect(s: Elect, ctx: Ctx) -> None:
    tr = s.threads
    if ctx.lo <= tr.begin < ctx.hi:
        c = ctx.child(lo=tr.begin, hi=tr.begin + 1)
        if c is not None:
            ctx.tracer.walk(s.body, c)


@handler("trace", Wait)
def _wait(s: Wait, ctx: Ctx) -> None:
    ctx.wait(s.barrier, s.stage, s.parity, s.sid)


@handler("trace", Arrive)
def _arrive(s: Arrive, ctx: Ctx) -> None:
    ctx.arrive(s.barrier, s.stage)


@handler("trace", ArriveExpectTx)
def _arrive_tx(s: ArriveExpectTx, ctx: Ctx) -> None:
    ctx.arrive(s.barrier, s.stage, s.tx_bytes)


@handler("trace", CpAsyncArrive)
def _cp_arrive(s: CpAsyncArrive, ctx: Ctx) -> None:
    ctx.cp_arrive(s.barrier, s.stage)


@handler("trace", TmaLoad)
def _tma_load(s: TmaLoad, ctx: Ctx) -> None:
    ctx.tma_load(s.src, s.dst, s.barrier, s.stage, s.sid)


@handler("trace", TmaStore)
def _tma_store(s: TmaStore, ctx: Ctx) -> None:
    ctx.tracer.region(ctx, s.src, "r", s.sid, proxy="async")
    ctx.tracer.region(ctx, s.dst, "w", s.sid, proxy="async")


@handler("trace", SyncThreads)
def _sync(s: SyncThreads, ctx: Ctx) -> None:
    ctx.sync(s.threads, s.barrier_id)


@handler("trace", FenceProxyAsync)
def _fence(s: FenceProxyAsync, ctx: Ctx) -> None:
    ctx.fence()


@handler("trace", SIf)
@symbolic
def _sif(s: SIf, ctx: Ctx) -> None:
    c = s.cond
    if ctx.sym is not None:
        sym_if(s, ctx)
        return
    tracer = ctx.tracer
    try:
        taken = tracer.const(c, ctx.env)
    except NotConstant:
        ctx.reads_of(c, s.sid)
        # data-dependent branch: accesses of both sides; the synchronization of a sealed side only when
        # this trace keeps its depth (egtile.verifier.paths), none of any other side (L3/L7 reject it)
        flags = tracer.branches.of(s) if tracer.branches is not None else (False, False)
        tracer.executions += 1
        execution = tracer.executions  # the two sides of this execution exclude each other (trace.exclusive)
        # each side starts with the wgmma groups in flight before it; after it, those either leaves in flight
        flying = {k: list(v) for k, v in tracer.inflight.items()}
        left: dict[int, list] = {}
        for side, body, sealed in ((0, s.then_body, flags[0]), (1, s.else_body, flags[1])):
            outer, outer_sides = tracer.inst, tracer.sides
            if sealed:
                tracer.inst = enter(outer, s, side, ctx.path)
            tracer.sides = outer_sides + ((execution, side),)
            tracer.inflight = {k: list(v) for k, v in flying.items()}
            try:
                keep = sealed and not ctx.accesses_only and tracer.inst[0] <= tracer.sync_depth
                a = ctx if keep else ctx.child(accesses_only=True, tid=ctx.tid)
                if a is not None:
                    tracer.walk(body, a)
            finally:
                tracer.inst, tracer.sides = outer, outer_sides
                for k, v in tracer.inflight.items():
                    mine = left.setdefault(k, [])
                    mine += [x for x in v if not any(x is y for y in mine)]
        tracer.inflight = left
        return
    tracer.walk(s.then_body if taken else s.else_body, ctx)


@handler("trace", RoleSplit)
def _role_split(s: RoleSplit, ctx: Ctx) -> None:
    for r in s.roles:
        b, e = max(ctx.lo, r.threads.begin), min(ctx.hi, r.threads.end)
        if b < e:
            c = ctx.child(lo=b, hi=e, tid=None)
            if c is not None:
                ctx.tracer.walk(r.body, c)


def _elements(op) -> int:
    match op:
        case Copy(dst=r) | Fill(dst=r) | Gemm(c=r):
            return r.numel
        case Reduce(dst=b):
            return b.numel
    return 0
