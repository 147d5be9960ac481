"""Lowering of a hand-written barrier protocol (TileLang's warp-specialization API) to ``ir.Scheduled``.

A kernel that uses ``T.ws`` / ``T.alloc_barrier`` / ``T.mbarrier_*`` / ``T.tma_copy(barrier=)``
(:mod:`egtile.ir.protocol`) fixes its own roles and synchronization. egtile keeps that protocol verbatim: the
e-graph does not schedule such a kernel (it could move a wait or an arrive, re-stage a buffer, or add a
producer warpgroup, each of which changes the user's protocol). The lowering is mechanical:

* **Roles.** A maximal run of top-level statements made only of ``T.ws`` blocks (and the serial loops and
  branches around them) becomes one ``RoleSplit`` with one role per warpgroup ``g`` of the block (threads
  ``[128 g, 128 g + 128)``); role ``g``'s body is the run *projected* on ``g``: loops and branches kept,
  ``T.ws`` blocks that name ``g`` inlined, the others dropped. This is the per-thread meaning of TileLang's
  ``T.ws(g)`` (``if tx in warpgroup g``): a thread runs the same statements in the same order either way.
  A loop that also holds statements outside every ``T.ws`` stays at the block level, each run of its
  ``T.ws`` blocks a ``RoleSplit`` of its own; statements outside every ``T.ws`` run on all the block's
  threads.
* **Barriers.** Each ``T.alloc_barrier`` becomes one ``MBarrier`` array (``stages`` = barriers, the one
  arrival count); waits, arrivals and ``expect_tx`` become ``Wait`` / ``UserArrive`` / ``ExpectTx`` /
  ``UserArriveExpectTx`` with the user's barrier index as stage and the user's parity, run by exactly the
  threads that reach them (:mod:`egtile.ir.usersync`).
* **Copies.** ``T.tma_copy(src, dst, barrier=b)`` becomes, on the role's first thread, ``expect_tx(b,
  bytes(dst))`` then a ``TmaLoad`` completing those bytes on ``b`` (TileLang's contract). Other tile ops
  run as cooperative SIMT tile ops of the threads that reach them (element ``e`` by rank ``e % count``);
  ``T.Parallel`` nests as partitioned thread loops; a scalar statement on one thread (``Elect``).
* **Proxy fences.** A ``T.tma_copy`` into a buffer that ordinary loads or stores also touch gets a
  ``fence.proxy.async`` on its issuing thread before the copy (:mod:`egtile.lower.proxy`), as every TMA load egtile
  schedules: the user's ``T.fence_proxy_async()`` is never needed.
* **CTA barriers** that egtile's own work split needs (a cooperative tile op whose result other threads of
  the same role read) are placed by :func:`egtile.lower.sync.place_syncs`, as for every schedule: named
  barriers within a role, never across roles, and never for a buffer a ``T.tma_copy`` fills (the user's
  mbarriers order those). The user's protocol is the only order between roles, so a missing wait or
  arrive stays visible to the verifier and the simulator (:mod:`egtile.verifier.protocol`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from egtile.errors import ScheduleError, SourceLoc, UnsupportedError
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import (
    AtomicAdd, BinOp, Const, Copy, Extern, Fill, For, Gemm, If, Kernel, Reduce, Region, Stmt, Store, walk,
)
from egtile.ir.printer import format_scheduled, parallel_nest
from egtile.ir.protocol import (
    WARPGROUP, BarrierAlloc, BarrierArrive, BarrierCopy, BarrierExpectTx, BarrierWait, CpAsync, CpAsyncArriveNoinc,
    RoleBlock, uses_protocol,
)
from egtile.ir.scheduled import (
    CpAsyncCopy, Decision, Elect, FenceProxyAsync, Leaf, MBarrier, Role, RoleSplit, Scheduled, SeqLoop, SIf, SStmt,
    ThreadLoop, ThreadRange, TileOp, TmaLoad, Wait, swalk,
)
from egtile.ir.usersync import ExpectTx, UserArrive, UserArriveExpectTx, UserCpAsyncArrive

RULE = "hand-written-protocol"


@dataclass(frozen=True)
class ProtocolSchedule:
    """What scheduling a hand-specialized kernel gives (the counterpart of ``egtile.optimize``'s
    ``ScheduleResult``): the kernel, its schedule, and :meth:`explain`."""

    kernel: Kernel
    scheduled: Scheduled
    cost: int = 0

    def explain(self) -> str:
        lines = [f"kernel {self.kernel.name!r}: hand-written warp specialization. The user's roles (T.ws) and "
                 "mbarrier protocol are fixed: egtile lowers them verbatim and the e-graph does not re-schedule "
                 "this kernel (no waits or arrivals moved, no buffers re-staged, no producer warpgroup added). "
                 "The verifier and the simulator check the protocol itself.",
                 "decisions:"]
        for d in self.scheduled.decisions:
            at = f" (sid {d.sid})" if d.sid is not None else ""
            lines.append(f"  {d.rule}{at}: {d.choice}: {d.reason}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return format_scheduled(self.scheduled)


def schedule_protocol(kernel: Kernel) -> ProtocolSchedule:
    """Lower a hand-specialized kernel (module docstring): an ``ir.Kernel``, or a ``@T.prim_func`` (its ``.kernel``).

    Raises:
        UnsupportedError: a construct this lowering does not handle, at the user's line.
    """
    kernel = getattr(kernel, "kernel", kernel)  # a PrimFunc, as egtile.simulate accepts it
    return _Lowering(kernel).run()


class _Lowering:
    def __init__(self, kernel: Kernel) -> None:
        self.k = kernel
        self.everyone = ThreadRange(0, kernel.threads)
        self.decisions: list[Decision] = []

    # -- barriers ---------------------------------------------------------------------------------------

    def barriers(self) -> tuple[MBarrier, ...]:
        guards: dict[str, set[str]] = {}
        for s in walk(self.k.body):
            if isinstance(s, BarrierCopy):
                guards.setdefault(s.barrier, set()).add(s.dst.buffer.name)
        out = []
        for s in self.k.body:
            if not isinstance(s, BarrierAlloc):
                continue
            if len(set(s.counts)) != 1:
                raise UnsupportedError(f"T.alloc_barrier({list(s.counts)}): egtile's barrier arrays have one arrival "
                                       "count; allocate one array per count", s.loc)
            out.append(MBarrier(s.name, len(s.counts), s.counts[0], "other", tuple(sorted(guards.get(s.name, ())))))
        return tuple(out)

    # -- body -------------------------------------------------------------------------------------------

    def run(self) -> ProtocolSchedule:
        from egtile.lower.proxy import fence_tma_loads
        from egtile.lower.sync import NonUniformBarrier, place_syncs

        if self.k.threads % WARPGROUP:
            # the user's first barrier statement is the construct that needs warpgroups (roles, arrive counts)
            first = next((st for st in walk(self.k.body)
                          if isinstance(st, (BarrierAlloc, BarrierWait, BarrierArrive, BarrierExpectTx,
                                             CpAsyncArriveNoinc))), None)
            raise UnsupportedError(f"kernel {self.k.name!r}: a hand-written barrier protocol (T.alloc_barrier, "
                                   f"T.tma_copy(barrier=), T.mbarrier_*) needs whole warpgroups (multiples of "
                                   f"{WARPGROUP} threads), threads={self.k.threads}",
                                   first.loc if first is not None and first.loc is not None else self.k.loc)
        barriers = self.barriers()
        _check_not_unrolled(self.k.body)
        body: list[SStmt] = []
        run: list[Stmt] = []
        for s in self.k.body:
            if isinstance(s, BarrierAlloc):
                continue
            if _has_roles(s) and _pure(s):
                run.append(s)
                continue
            body += self.split(run)
            run = []
            body += self.mixed((s,), self.everyone) if _has_roles(s) else self.stmt(s, self.everyone)
        body += self.split(run)
        try:
            # Inside a role, statements run in the user's order, and egtile's own work split of a tile op must
            # keep it: a cooperative read of a buffer (a T.gemm operand) then the role's elected T.tma_copy into
            # it (TileLang's wgmma is one warpgroup instruction, done for all its threads at T.wait_wgmma) needs
            # a named barrier between them. So the TMA-filled buffers are tracked inside roles like any other;
            # a barrier after a TMA *issue* orders nothing of the asynchronous write, which only the user's
            # mbarrier wait orders (the verifier and simulator check that).
            unguarded = tuple(dataclasses.replace(b, guards=()) for b in barriers)
            synced = place_syncs(tuple(body), self.everyone, barriers=unguarded)
            placed = fence_tma_loads(synced)
        except NonUniformBarrier as err:
            sid = err.args[0]
            raise ScheduleError(f"kernel {self.k.name!r}: a branch that threads may take differently needs a CTA "
                                f"barrier inside ({err.args[1]})", self._loc(sid)) from None
        fences = sum(isinstance(x, FenceProxyAsync) for x in swalk(placed)) - \
            sum(isinstance(x, FenceProxyAsync) for x in swalk(synced))
        if fences:
            self.decisions.append(Decision(RULE, None, "fence.proxy.async", "a T.tma_copy fills a buffer that "
                                           "ordinary loads or stores also touch: its issuing thread executes "
                                           "fence.proxy.async before the copy, so that the TMA load (async proxy) is "
                                           "ordered after those accesses (PTX ISA 9.7.13.3.2)"))
        self.decisions.insert(0, Decision(RULE, None, "verbatim", "the kernel writes its own roles and mbarrier "
                                          "protocol; egtile keeps it as written and checks it"))
        sched = Scheduled(self.k, self.k.threads, self.k.allocs, barriers, placed, (), tuple(self.decisions))
        return ProtocolSchedule(self.k, sched)

    def split(self, run: list[Stmt]) -> list[SStmt]:
        if not run:
            return []
        roles = []
        for g in range(self.k.threads // WARPGROUP):
            threads = ThreadRange(g * WARPGROUP, WARPGROUP)
            body = self.project(tuple(run), g)
            if body:
                roles.append(Role(f"wg{g}", threads, None, tuple(body)))
        first = run[0]
        self.decisions.append(Decision(RULE, first.sid, "roles " + ", ".join(r.name for r in roles),
                                       "the T.ws blocks of these statements, one role per warpgroup (each runs its "
                                       "own blocks in program order)"))
        return [RoleSplit(tuple(roles), first.sid)]

    def mixed(self, stmts: tuple[Stmt, ...], threads: ThreadRange) -> list[SStmt]:
        """Statements that mix ``T.ws`` blocks with statements of all threads (a ``T.copy`` outside every ``T.ws``
        in the loop): loops and branches stay at the block level, and each run of consecutive ``T.ws`` blocks is
        a ``RoleSplit`` of its own, so that the CTA barriers the block-level statements need go between them."""
        out: list[SStmt] = []
        group: list[Stmt] = []
        for s in stmts:
            if isinstance(s, RoleBlock):
                group.append(s)
                continue
            out += self.split(group)
            group = []
            if not _has_roles(s):
                out += self.stmt(s, threads)
            elif isinstance(s, For):
                if s.kind == "parallel":
                    raise UnsupportedError("T.ws inside T.Parallel: a role block must be at the block level (in "
                                           "serial loops and branches)", s.loc)
                self._loop_note(s)
                out.append(SeqLoop(s.var, s.start, s.stop, tuple(self.mixed(s.body, threads)), s.kind == "unroll",
                                   s.sid))
            elif isinstance(s, If):
                out.append(SIf(s.cond, tuple(self.mixed(s.then_body, threads)),
                               tuple(self.mixed(s.else_body, threads)), s.sid))
        out += self.split(group)
        return out

    def project(self, stmts: tuple[Stmt, ...], g: int) -> list[SStmt]:
        """``stmts`` as warpgroup ``g``'s threads run them."""
        out: list[SStmt] = []
        for s in stmts:
            if isinstance(s, RoleBlock):
                if g in s.groups:
                    t = ThreadRange(s.groups[0] * WARPGROUP, len(s.groups) * WARPGROUP)
                    out += self.body(s.then_body, t)
            elif not _has_roles(s):
                out += self.stmt(s, self.everyone)
            elif isinstance(s, For):
                if s.kind == "parallel":
                    raise UnsupportedError("T.ws inside T.Parallel: a role block must be at the block level (in "
                                           "serial loops and branches)", s.loc)
                self._loop_note(s)
                inner = self.project(s.body, g)
                if inner:
                    out.append(SeqLoop(s.var, s.start, s.stop, tuple(inner), s.kind == "unroll", s.sid))
            elif isinstance(s, If):
                t, e = self.project(s.then_body, g), self.project(s.else_body, g)
                if t or e:
                    out.append(SIf(s.cond, tuple(t), tuple(e), s.sid))
            else:  # pragma: no cover - only loops and branches hold statements
                raise UnsupportedError(f"statement {s.sid} cannot hold a T.ws block", getattr(s, "loc", None))
        return out

    def body(self, stmts: tuple[Stmt, ...], threads: ThreadRange) -> list[SStmt]:
        out: list[SStmt] = []
        for s in stmts:
            out += self.stmt(s, threads)
        return out

    def stmt(self, s: Stmt, threads: ThreadRange) -> list[SStmt]:
        """``s`` run by ``threads`` (each thread that reaches a barrier statement runs it)."""
        match s:
            case BarrierWait(barrier=b, index=i, parity=p, sid=sid):
                # the parity is one bit: every executor (and the PTX operand) sees the user's value modulo 2
                bit = p if isinstance(p, Const) and p.value in (0, 1) else BinOp("&", p, Const(1))
                return [Wait(b, i, bit, sid)]
            case BarrierArrive(barrier=b, index=i, sid=sid):
                return [UserArrive(b, i, sid)]
            case BarrierExpectTx(barrier=b, index=i, tx_bytes=tx, arrive=arrive, sid=sid):
                return [UserArriveExpectTx(b, i, tx, sid) if arrive else ExpectTx(b, i, tx, sid)]
            case CpAsyncArriveNoinc(barrier=b, index=i, sid=sid):
                return [UserCpAsyncArrive(b, i, sid)]
            case CpAsync():
                return [self.cp_async(s)]  # per-thread: every thread that reaches it issues it
            case BarrierCopy():
                return [self.tma(s, threads)]
            case RoleBlock():
                raise UnsupportedError("T.ws inside a T.ws block or under per-thread code is not supported", s.loc)
            case BarrierAlloc():
                raise UnsupportedError("T.alloc_barrier must be at the top level of the T.Kernel body", s.loc)
            case Copy() | Fill() | Gemm() | Reduce():
                return [TileOp(s, "simt", threads)]
            case Store(buffer=b) if b.scope == "local":
                return [Leaf(s)]  # a per-thread variable: every thread that reaches it keeps its own copy
            case Store() | AtomicAdd() | Extern():
                return [Elect(threads, (Leaf(s),))]
            case For(kind="parallel"):
                return [self.parallel(s, threads)]
            case For():
                self._loop_note(s)
                return [SeqLoop(s.var, s.start, s.stop, tuple(self.body(s.body, threads)), s.kind == "unroll", s.sid)]
            case If():
                return [SIf(s.cond, tuple(self.body(s.then_body, threads)), tuple(self.body(s.else_body, threads)),
                            s.sid)]
        raise UnsupportedError(f"statement {getattr(s, 'sid', '?')} ({type(s).__name__}) in a hand-specialized "
                               "kernel", getattr(s, "loc", None))

    def tma(self, s: BarrierCopy, threads: ThreadRange) -> SStmt:
        from egtile.analysis import tma_eligibility

        ok = tma_eligibility(Copy(s.sid, s.src, s.dst, "tma", s.loc))
        pieces = [(s.src, s.dst)]
        if not ok.ok:
            pieces = _dense_pieces(s.src, s.dst)
            if pieces is None or not all(tma_eligibility(Copy(s.sid, a, b, "tma", s.loc)).ok for a, b in pieces):
                raise UnsupportedError(f"T.tma_copy: this copy cannot be a TMA load: {'; '.join(ok.reasons)}", s.loc)
        nbytes = s.dst.numel * lookup_dtype(s.dst.buffer.dtype).bytes
        how = "issues the TMA load" if len(pieces) == 1 else \
            (f"issues it as {len(pieces)} TMA loads, one per contiguous run of {s.dst.buffer.name} (a TMA box lands "
             "densely in shared memory, and this destination is a strided part of its buffer)")
        self.decisions.append(Decision(RULE, s.sid, "tma", f"the user's T.tma_copy: the first thread of threads "
                                       f"[{threads.begin}, {threads.end}) expects {nbytes} bytes on "
                                       f"{s.barrier}[...] and {how}"))
        return Elect(threads, (ExpectTx(s.barrier, s.index, nbytes, s.sid),
                               *(TmaLoad(a, b, s.barrier, s.index, s.sid) for a, b in pieces)))

    def parallel(self, s: For, threads: ThreadRange) -> SStmt:
        loops, inner = parallel_nest(s)
        body: list[SStmt] = []
        for x in inner:
            body.append(self._scalar(x))
        extents = []
        for f in loops:
            lo, hi = f.start, f.stop
            if not (getattr(lo, "value", None) == 0 and isinstance(getattr(hi, "value", None), int)):
                raise UnsupportedError("T.Parallel with bounds not known at trace time in a hand-specialized kernel",
                                       f.loc)
            extents.append(int(hi.value))
        return ThreadLoop(tuple(f.var for f in loops), tuple(extents), "partitioned", threads, tuple(body), s.sid)

    def _scalar(self, x: Stmt) -> SStmt:
        match x:
            case Store() | AtomicAdd() | Extern():
                return Leaf(x)
            case CpAsync():
                return self.cp_async(x)
            case If(cond=c, then_body=t, else_body=e) if not isinstance(x, RoleBlock):
                return SIf(c, tuple(self._scalar(y) for y in t), tuple(self._scalar(y) for y in e), x.sid)
            case For(kind="serial" | "unroll" | "pipelined") if not _has_roles(x):
                # a serial loop of per-thread code (a role's producer `for r in T.serial(4):` over its rows): each
                # thread runs it in order (egtile.language.roles)
                self._loop_note(x)
                return SeqLoop(x.var, x.start, x.stop, tuple(self._scalar(y) for y in x.body), x.kind == "unroll",
                               x.sid)
        raise UnsupportedError(f"statement {getattr(x, 'sid', '?')} inside a T.Parallel of a hand-specialized kernel: "
                               "only element statements (stores, atomics, calls, T.ptx_cp_async, T.If, serial loops "
                               "of them)", getattr(x, "loc", None))

    def cp_async(self, s: CpAsync) -> SStmt:
        """The user's ``T.ptx_cp_async``: one ``cp.async`` of ``s.nbytes`` by each thread that reaches it."""
        if not any(d.sid == s.sid for d in self.decisions):
            self.decisions.append(Decision(RULE, s.sid, "cp_async", f"the user's T.ptx_cp_async: each thread that runs "
                                           f"it issues one {s.nbytes}-byte cp.async.{'cg' if s.nbytes == 16 else 'ca'}"
                                           ".shared.global, completed by its T.cp_async_barrier_noinc"))
        return CpAsyncCopy(s.src, s.dst, s.nbytes, s.sid)

    def _loop_note(self, s: For) -> None:
        if s.kind == "pipelined" and s.num_stages > 0 and not any(d.sid == s.sid for d in self.decisions):
            self.decisions.append(Decision(RULE, s.sid, "serial", f"T.Pipelined(num_stages={s.num_stages}) over "
                                           "hand-written roles runs as written: the stages are the user's (the "
                                           "barrier arrays and staged buffers)"))

    def _loc(self, sid: int | None) -> SourceLoc | None:
        for st in walk(self.k.body):
            if st.sid == sid:
                return st.loc
        return self.k.loc


def _check_not_unrolled(body: tuple[Stmt, ...]) -> None:
    """Refuse one barrier statement traced twice on the same barrier at the same loop level.

    The verifier tells a barrier's phases apart by the iterations of the loops around its arrivals (``docs/
    soundness.md``, L3). A Python ``for ko in range(n)`` with ints unrolls while tracing, so the arrivals of
    every round land at one loop level and would read as one phase: a false report. TileLang's ``range`` is a
    serial loop; egtile's is ``T.serial(n)`` (or ``T.Pipelined``).

    Raises:
        UnsupportedError: at the second instance's line.
    """

    seen: set[tuple] = set()

    def visit(stmts: tuple[Stmt, ...], chain: tuple[int, ...]) -> None:
        for s in stmts:
            if isinstance(s, (BarrierWait, BarrierArrive, BarrierExpectTx, BarrierCopy, CpAsyncArriveNoinc)) \
                    and s.loc is not None \
                    and isinstance(s.index, Const):
                key = (s.loc.file, s.loc.line, s.loc.col, chain, s.barrier, s.index.value)
                if key in seen:
                    raise UnsupportedError(f"this statement on barrier {s.barrier}[{s.index.value}] is traced more "
                                           "than once at the same loop level: a Python `range` loop (or a helper "
                                           "called twice) unrolls while tracing, and egtile tells a barrier's "
                                           "phases apart by loop iteration; write the loop as T.serial(n) "
                                           "(TileLang's `range` is a serial loop)", s.loc)
                seen.add(key)
            if isinstance(s, For):
                visit(s.body, chain + (s.sid,))
            elif isinstance(s, If):
                visit(s.then_body, chain)
                visit(s.else_body, chain)

    visit(body, ())


def _pure(s: Stmt) -> bool:
    """Is every statement under ``s`` inside a ``T.ws`` block (loops and branches of role blocks only)? Such a
    statement's roles are hoisted into one ``RoleSplit`` (each role runs its own loop)."""
    if isinstance(s, RoleBlock):
        return True
    if isinstance(s, For):
        return s.kind != "parallel" and all(_pure(x) for x in s.body)
    if isinstance(s, If):
        return all(_pure(x) for x in s.then_body + s.else_body)
    return False


def _has_roles(s: Stmt) -> bool:
    return any(isinstance(x, RoleBlock) for x in walk((s,)))


def _cp_async_accesses(s: CpAsyncCopy, acc, owner_of):
    # The thread's cp.async unit writes the shared destination after the thread moved on (PTX ISA 9.7.9.25), so
    # neither access belongs to the thread, as for a TMA load; only the user's mbarrier orders the write.
    return acc.region(s.dst, write=True) | acc.region(s.src, write=False)


def _register() -> None:
    from egtile.lower.sync import register_accesses

    register_accesses(CpAsyncCopy, _cp_async_accesses)


_register()

__all__ = ["ProtocolSchedule", "RULE", "schedule_protocol", "uses_protocol"]


_MAX_TMA_PIECES = 256  # a hand-written copy split further than this is a layout to rethink, not a protocol


def _dense_pieces(src: Region, dst: Region) -> list[tuple[Region, Region]] | None:
    """``src -> dst`` as copies whose destinations are each one contiguous run of shared memory (what a TMA box
    fills, PTX ISA 9.7.9.27), split along the outermost non-unit dimension until they are; ``None`` past
    ``_MAX_TMA_PIECES`` pieces. The pieces write exactly the elements of ``dst``, each from its own source."""
    from egtile.analysis.producer import _is_dense

    todo, out = [(src, dst)], []
    while todo:
        a, b = todo.pop()
        if _is_dense(b):
            out.append((a, b))
            continue
        da = next(d for d, e in enumerate(a.extents) if e != 1)
        db = next(d for d, e in enumerate(b.extents) if e != 1)
        if len(out) + len(todo) + b.extents[db] > _MAX_TMA_PIECES:
            return None
        for i in reversed(range(b.extents[db])):
            todo.append((_slice(a, da, i), _slice(b, db, i)))
    return out


def _slice(r: Region, d: int, i: int) -> Region:
    off = r.offsets[d] if i == 0 else BinOp("+", r.offsets[d], Const(i, "int32"))
    return Region(r.buffer, r.offsets[:d] + (off,) + r.offsets[d + 1:], r.extents[:d] + (1,) + r.extents[d + 1:],
                  r.clip)
