"""Lower an extracted schedule tree to ``ir.Scheduled``: mechanical, no choices.

Every decision constructor has exactly one lowering (the execution model is the docstring of
:mod:`egtile.ir.scheduled`):

==================  =====================================================================================
``elect``           ``Elect(running threads, Leaf(stmt))``
``replicate``       ``Leaf(stmt)``
``copy_simt/tile``  ``TileOp(stmt, "simt", running threads)``
``partitioned``     ``ThreadLoop(vars, extents, "partitioned", running threads, body)``; perfectly nested
                    ``T.Parallel`` loops fold into one thread loop; a non-zero start is substituted
``replicated``      the same with ``"replicated"``
``loop/serial``     ``SeqLoop``; ``branch``: ``SIf``
``ws``              ``RoleSplit(consumer [0, T), producer [T, T+128))``, each running the loop; produced
                    buffers get ``num_stages`` versions (stage = leading index); ``full_i``/``empty_i``
                    mbarrier arrays of ``num_stages``; the producer waits ``empty[stage]`` with parity
                    ``parity ^ 1`` first
``tma_load``        ``Elect(producer, ArriveExpectTx(full, stage, dst bytes), TmaLoad(...))``: 1 arrival
``cp_async_load``   ``TileOp(copy, "cp_async", producer)``, ``CpAsyncArrive(full, stage)``: 128 arrivals
``simt_load``       ``TileOp(copy, "simt", producer)``, ``Arrive(full, stage)``: 128 arrivals
``simt_produce``    the statement on the producer threads, then ``Arrive(full, stage)``: 128 arrivals
``wait_full``       ``Wait(full, stage, parity)``; ``release_empty``: ``Arrive(empty, stage)``
``swp``             software pipeline on the running threads (:mod:`egtile.rules.software_pipeline`):
                    ``SeqLoop(k, start, min(stop, start+S-1), issue)`` (prologue), then
                    ``SeqLoop(kk, start, stop, [SeqLoop(k, kk+S-1, min(stop, kk+S), issue),
                    SeqLoop(k, kk, kk+1, consumers)])`` with ``kk`` a fresh variable; produced buffers get
                    ``S`` versions and one ``full_i`` array; inside it ``wait_full`` is
                    ``Wait(full, stage, parity)`` and ``release_empty`` is ``SyncThreads(running threads)``
                    (nothing when the rule's ``war_barrier`` is 0: the mutant)
``tma_prefetch``    ``Elect(running, ArriveExpectTx(full, stage, dst bytes), TmaLoad(...))``: 1 arrival
``cp_async_prefetch`` ``TileOp(copy, "cp_async", running)``, ``CpAsyncArrive(full, stage)``: one arrival
                    per running thread
==================  =====================================================================================

``full``'s arrive count is the sum of the arrivals its producer items make (plus the rule's
``full_adjust``, 0 for the real rule); ``empty``'s is the consumer thread count. Stage and parity come
from :func:`egtile.lower.phase.phase_exprs` with the phase convention the rule chose. The launch has
``kernel.threads + 128`` threads when any loop is warp-specialized. CTA barriers are then placed by
:func:`egtile.lower.sync.place_syncs`, which leaves the stages of software-pipelined loops to the
mbarriers and CTA barriers their lowering put there (``ordered``).

Every statement that implements a source statement runs with the source loop variable bound to the
iteration it implements (the contract of :class:`egtile.verify.trace.SourceOrder`): that is why the
software pipeline rebinds ``k`` in one-or-zero-trip inner loops instead of substituting ``k + S - 1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from egtile.schedule.decode import Node
from egtile.schedule.facts import FactContext
from egtile.lower.irmap import restage, substitute
from egtile.schedule.schema import PRODUCER_THREADS
from egtile.lower.sync import place_syncs
from egtile.errors import ScheduleError
from egtile.ir import (
    Arrive,
    ArriveExpectTx,
    BinOp,
    Buffer,
    Const,
    Copy,
    CpAsyncArrive,
    Elect,
    Expr,
    For,
    If,
    Leaf,
    MBarrier,
    Role,
    RoleSplit,
    Scheduled,
    SeqLoop,
    SIf,
    SStmt,
    SyncThreads,
    ThreadLoop,
    ThreadRange,
    TileOp,
    TmaLoad,
    Var,
    Wait,
    dtype,
)
from egtile.lower.phase import phase_exprs


@dataclass(frozen=True)
class _Ctx:
    threads: ThreadRange
    staged: dict[str, tuple[Buffer, Expr]] = field(default_factory=dict)


class _Lowerer:
    def __init__(self, facts: FactContext, warp_specialized: bool) -> None:
        self.facts = facts
        self.kernel = facts.kernel
        self.total = self.kernel.threads + (PRODUCER_THREADS if warp_specialized else 0)
        self.barriers: list[MBarrier] = []
        self.staged: dict[str, Buffer] = {}
        self.stages: dict[str, int] = {}
        self.ordered: set[str] = set()

    # -- helpers

    def stmt(self, sid: int, ctx: _Ctx):
        return restage(self.facts.stmts[sid], ctx.staged)

    def block(self, nodes: tuple[Node, ...], ctx: _Ctx) -> tuple[SStmt, ...]:
        out: list[SStmt] = []
        for n in nodes:
            out.extend(self.node(n, ctx))
        return tuple(out)

    # -- block-level constructors

    def node(self, n: Node, ctx: _Ctx) -> list[SStmt]:
        match n.op:
            case "elect":
                return [Elect(ctx.threads, (Leaf(self.stmt(n.sid, ctx)),))]
            case "replicate":
                return [Leaf(self.stmt(n.sid, ctx))]
            case "copy_simt" | "tile":
                return [TileOp(self.stmt(n.sid, ctx), "simt", ctx.threads)]
            case "partitioned" | "replicated":
                return [self.thread_loop(n, ctx)]
            case "loop" | "serial":
                loop = self.facts.stmts[n.sid]
                assert isinstance(loop, For)
                # The bounds, like every expression a lowered statement keeps, see staged buffers with
                # their stage index (restage), so the head is restaged like the leaves.
                head = restage(For(loop.sid, loop.var, loop.start, loop.stop, loop.kind, ()), ctx.staged)
                assert isinstance(head, For)
                body = self.block(n.lists[0], ctx)
                return [SeqLoop(loop.var, head.start, head.stop, body,
                                unroll=loop.kind == "unroll", sid=n.sid)]
            case "branch":
                s = self.facts.stmts[n.sid]
                assert isinstance(s, If)
                head = restage(If(s.sid, s.cond, (), ()), ctx.staged)
                assert isinstance(head, If)
                return [SIf(head.cond, self.block(n.lists[0], ctx), self.block(n.lists[1], ctx),
                            sid=n.sid)]
            case "ws":
                return [self.warp_specialize(n, ctx)]
            case "swp":
                return self.software_pipeline(n, ctx)
        raise ScheduleError(f"cannot lower {n.op!r} (statement sid {n.subject}) at block level: it is "
                            + ("still undecided" if n.op in ("scalar", "copy", "par", "pipelined", "produce")
                               else "not a block-level schedule constructor"))

    # -- thread loops

    def thread_loop(self, n: Node, ctx: _Ctx) -> ThreadLoop:
        loop = self.facts.stmts[n.sid]
        assert isinstance(loop, For)
        vars_: list[Var] = []
        extents: list[int] = []
        shifts: dict[str, Expr] = {}
        nodes = n.lists[0]
        cur = loop
        while True:
            start, stop = cur.start, cur.stop
            if not (isinstance(start, Const) and isinstance(stop, Const)):
                raise ScheduleError(f"T.Parallel over {cur.var.name} (sid {cur.sid}) needs a static range", cur.loc)
            vars_.append(cur.var)
            extents.append(max(0, int(stop.value) - int(start.value)))
            if int(start.value) != 0:
                shifts[cur.var.name] = BinOp("+", cur.var, start)
            # Fold a perfectly nested T.Parallel into the same iteration space.
            if len(nodes) == 1 and nodes[0].op == "inner_loop":
                inner = self.facts.stmts[nodes[0].sid]
                if isinstance(inner, For) and inner.kind == "parallel" and isinstance(inner.start, Const) \
                        and isinstance(inner.stop, Const):
                    cur = inner
                    nodes = nodes[0].lists[0]
                    continue
            break
        body = self.thread_body(nodes, ctx, shifts)
        mapping = "partitioned" if n.op == "partitioned" else "replicated"
        return ThreadLoop(tuple(vars_), tuple(extents), mapping, ctx.threads, body, sid=n.sid)

    def thread_body(self, nodes: tuple[Node, ...], ctx: _Ctx, shifts: dict[str, Expr]) -> tuple[SStmt, ...]:
        out: list[SStmt] = []
        for n in nodes:
            s = self.facts.stmts[n.sid]
            match n.op:
                case "leaf":
                    out.append(Leaf(substitute(restage(s, ctx.staged), shifts)))
                case "inner_loop":
                    assert isinstance(s, For)
                    head = substitute(restage(For(s.sid, s.var, s.start, s.stop, s.kind, ()), ctx.staged), shifts)
                    assert isinstance(head, For)
                    inner = {k: v for k, v in shifts.items() if k != s.var.name}
                    out.append(SeqLoop(s.var, head.start, head.stop, self.thread_body(n.lists[0], ctx, inner),
                                       unroll=s.kind == "unroll", sid=s.sid))
                case "inner_branch":
                    assert isinstance(s, If)
                    head = substitute(restage(If(s.sid, s.cond, (), ()), ctx.staged), shifts)
                    assert isinstance(head, If)
                    out.append(SIf(head.cond, self.thread_body(n.lists[0], ctx, shifts),
                                   self.thread_body(n.lists[1], ctx, shifts), sid=s.sid))
                case _:
                    raise ScheduleError(f"cannot lower {n.op!r} (sid {n.subject}) inside a T.Parallel body")
        return tuple(out)

    # -- multi-versioning

    def _stage_buffers(self, loop_sid: int, stages: int, stage: Expr, ctx: _Ctx) -> tuple[tuple[str, ...], _Ctx]:
        """Give every buffer the loop's producers write ``stages`` versions; the context that indexes them."""
        guarded = tuple(sorted(self.facts.guarded(loop_sid)))
        staged = dict(ctx.staged)
        for name in guarded:
            b = self.kernel.buffer(name)
            sb = Buffer(b.name, (stages, *b.shape), b.dtype, b.scope, b.layout)
            self.staged[name] = sb
            self.stages[name] = stages
            staged[name] = (sb, stage)
        return guarded, _Ctx(ctx.threads, staged)

    def _fresh_var(self, base: Var) -> Var:
        taken = {v.name for v in self.kernel.block_vars}
        for s in self.facts.stmts.values():
            if isinstance(s, For):
                taken.add(s.var.name)
        name = f"{base.name}_sw"
        while name in taken:
            name += "_"
        return Var(name, base.dtype)

    # -- software pipelining

    def software_pipeline(self, n: Node, ctx: _Ctx) -> list[SStmt]:
        loop = self.facts.stmts[n.sid]
        assert isinstance(loop, For)
        (war_barrier,) = n.params
        prefetches, consumers = n.lists
        S = loop.num_stages
        k = loop.var
        full = f"full_{sum(1 for b in self.barriers if b.kind == 'full')}"
        stage, parity = phase_exprs(k, loop.start, S)
        guarded, sctx = self._stage_buffers(n.sid, S, stage, ctx)
        self.ordered |= set(guarded)
        threads = ctx.threads

        arrivals = 0
        issue: list[SStmt] = []
        for item in prefetches:
            match item.op:
                case "tma_prefetch" | "cp_async_prefetch":
                    stmts, n_arrive = self._async_copy(item, sctx, threads, full, stage)
                    issue += stmts
                    arrivals += n_arrive
                case _:
                    raise ScheduleError(f"cannot lower prefetch item {item.op!r} (sid {item.subject}) of pipelined "
                                        f"loop sid {n.sid}: its asynchronous instruction is undecided")
        body: list[SStmt] = []
        for item in consumers:
            match item.op:
                case "wait_full":
                    body.append(Wait(full, stage, parity))
                case "release_empty":
                    if int(war_barrier):
                        body.append(SyncThreads(threads))
                case _:
                    body += self.node(item, sctx)
        self.barriers.append(MBarrier(full, S, arrivals, "full", guarded))

        one, ahead = Const(1), Const(S - 1)
        kk = self._fresh_var(k)
        prologue = SeqLoop(k, loop.start, BinOp("min", loop.stop, BinOp("+", loop.start, ahead)), tuple(issue))
        main = SeqLoop(kk, loop.start, loop.stop, (
            SeqLoop(k, BinOp("+", kk, ahead), BinOp("min", loop.stop, BinOp("+", kk, Const(S))), tuple(issue)),
            SeqLoop(k, kk, BinOp("+", kk, one), tuple(body)),
        ), sid=n.sid)
        return [prologue, main]

    def _async_copy(self, item: Node, ctx: _Ctx, threads: ThreadRange, full: str,
                    stage: Expr) -> tuple[list[SStmt], int]:
        """An asynchronous copy completing on ``full[stage]``, and the arrivals it makes there: TMA is one
        elected thread's arrive.expect_tx (1 arrival + the destination's bytes) then the tile load; cp.async is
        every thread's copies then its cp.async.mbarrier.arrive.noinc (one arrival per thread)."""
        c = self.stmt(item.sid, ctx)
        assert isinstance(c, Copy)
        if item.op in ("tma_load", "tma_prefetch"):
            nbytes = c.dst.numel * dtype(c.dst.buffer.dtype).bytes
            return [Elect(threads, (ArriveExpectTx(full, stage, nbytes),
                                    TmaLoad(c.src, c.dst, full, stage, sid=item.sid)))], 1
        return [TileOp(c, "cp_async", threads), CpAsyncArrive(full, stage)], threads.count

    # -- warp specialization

    def warp_specialize(self, n: Node, ctx: _Ctx) -> RoleSplit:
        loop = self.facts.stmts[n.sid]
        assert isinstance(loop, For)
        dec, inc, adjust, phase = n.params
        producers, consumers = n.lists
        S = loop.num_stages
        idx = sum(1 for b in self.barriers if b.kind == "full")
        full, empty = f"full_{idx}", f"empty_{idx}"
        stage, parity = phase_exprs(loop.var, loop.start, S, str(phase))
        guarded, sctx = self._stage_buffers(n.sid, S, stage, ctx)
        consumer_t = ThreadRange(0, self.kernel.threads)
        producer_t = ThreadRange(self.kernel.threads, PRODUCER_THREADS)
        pctx, cctx = _Ctx(producer_t, sctx.staged), _Ctx(consumer_t, sctx.staged)

        arrivals = 0
        pbody: list[SStmt] = [Wait(empty, stage, BinOp("^", parity, Const(1)))]
        for item in producers:
            match item.op:
                case "tma_load" | "cp_async_load":
                    stmts, n_arrive = self._async_copy(item, pctx, producer_t, full, stage)
                    pbody += stmts
                    arrivals += n_arrive
                case "simt_load":
                    pbody += [TileOp(self.stmt(item.sid, pctx), "simt", producer_t), Arrive(full, stage)]
                    arrivals += producer_t.count
                case "simt_produce":
                    pbody += self.node(item.kids[0], pctx)
                    pbody.append(Arrive(full, stage))
                    arrivals += producer_t.count
                case _:
                    raise ScheduleError(f"cannot lower producer item {item.op!r} (sid {item.subject}) of pipelined "
                                        f"loop sid {n.sid}: its instruction is undecided")
        if all(item.op == "tma_load" for item in producers):
            # Only the elected thread has work, so it alone waits on empty[s]: idle producer threads that
            # waited without ever arriving could fall two phases behind and then wait on an aliased parity
            # (try_wait.parity sees only the phase parity, PTX ISA 9.7.13.15.16) and hang.
            pbody = [Elect(producer_t, (pbody[0], *(s for e in pbody[1:] for s in e.body)))]
        cbody: list[SStmt] = []
        for item in consumers:
            match item.op:
                case "wait_full":
                    cbody.append(Wait(full, stage, parity))
                case "release_empty":
                    cbody.append(Arrive(empty, stage))
                case _:
                    cbody += self.node(item, cctx)
        self.barriers.append(MBarrier(full, S, arrivals + int(adjust), "full", guarded))
        self.barriers.append(MBarrier(empty, S, consumer_t.count, "empty", guarded))

        def role_loop(body: list[SStmt]) -> tuple[SStmt, ...]:
            return (SeqLoop(loop.var, loop.start, loop.stop, tuple(body), sid=n.sid),)

        consumer = Role("consumer", consumer_t, ("inc", int(inc)) if int(inc) else None, role_loop(cbody))
        producer = Role("producer", producer_t, ("dec", int(dec)) if int(dec) else None, role_loop(pbody))
        return RoleSplit((consumer, producer), sid=n.sid)


def lower(body: tuple[Node, ...], facts: FactContext) -> Scheduled:
    """The scheduled kernel of an extracted body (see the module docstring).

    Raises:
        ScheduleError: the tree still holds an undecided constructor, or a constructor where it cannot
            be lowered (e.g. a user rule that rewrote into the wrong context).
    """
    ws = any(n.op == "ws" for top in body for n in top.walk())
    lw = _Lowerer(facts, ws)
    everyone = ThreadRange(0, lw.total)
    stmts = lw.block(body, _Ctx(everyone))
    buffers = tuple(lw.staged.get(b.name, b) for b in facts.kernel.allocs)
    stmts = place_syncs(stmts, everyone, barriers=tuple(lw.barriers), ordered=frozenset(lw.ordered))
    return Scheduled(facts.kernel, lw.total, buffers, tuple(lw.barriers), stmts,
                     staged=tuple(lw.stages.items()))
