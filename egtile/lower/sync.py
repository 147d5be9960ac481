"""Placement of CTA barriers (``SyncThreads``) between dependent cross-thread memory accesses.

Mechanical (no choice): walk each statement list that a thread set runs together (the whole block, or
one role of a warp-specialized loop), keep the accesses made since the last barrier, and put a barrier
before the first statement that conflicts with one of them. Two accesses conflict when they touch the
same non-local buffer, at least one writes, and they are not provably made by the same thread for each
element. "Same thread" is known in two cases:

* both sit in partitioned thread loops over the same threads and the same extents, and index the buffer
  exactly by the loop variables (so element ``i`` belongs to rank ``i % count`` in both); a leading
  stage index of a multi-versioned buffer is ignored;
* both run on the same elected thread.

Loops are handled to a fixpoint: accesses pending at the end of the body are pending again at its start
(the next iteration), and the barriers needed for that are added inside the body. A warp-specialized
region (``RoleSplit``) is one access to everything its roles touch; inside a role the barrier is a named
``bar.sync`` over the role's threads (id 1 for the consumer, 2 for the producer, PTX ISA §9.7.13.4), and
buffers guarded by the region's mbarriers are left to the mbarrier protocol. ``local`` buffers never
conflict (PTX ISA §5.1: per thread).

Conditionals: every thread that reaches an ``SIf`` reads its condition, so those reads are accesses of
the statement. Barriers go inside a side only when the condition is block-uniform (``uniform``,
:meth:`egtile.analysis.uniform.Uniformity.of`; ``bar.sync`` must be reached by every thread it counts,
PTX ISA §9.7.13.4); otherwise the whole statement is ordered from outside, and one that needs a barrier
inside raises :class:`NonUniformBarrier`. A side on data (its condition reads memory of any scope, a
uniform ``T.alloc_var`` flag too) that needs a barrier is *sealed*: a barrier first and last (:func:`_seal`),
and what was pending before the branch stays pending after it, because the side may not run; the verifier
checks sealed sides as units (``egtile.verifier.paths``).

Asynchronous reads. A wgmma's shared operands are read by the tensor core until the issuing threads'
``wait_group`` (:attr:`Acc.until_wait`): a barrier between the issue and a deferred wait leaves them pending, so
a later write of an operand is ordered by a barrier after the wait. A generic write that a barrier without
``fence.proxy.async`` ordered (the statement after it read generically) stays pending for the async proxy only
(:data:`UNFENCED`): a later wgmma or TMA store reading the buffer gets the writers' fence and a barrier.

Each scheduled node class has an *access summary* in a registry (:func:`register_accesses`): the set of
:class:`Acc` it makes, given the owner key of the context it runs in. An asynchronous copy says what its
agent touches: a TMA load writes its shared destination and reads its global source (both with no owner:
the async proxy is not the issuing thread), so a ``T.Parallel`` that writes a global tensor before a
warp-specialized loop whose TMA loads read it gets a barrier between them. Barrier placement descends
only into the constructs it knows (serial loops, conditionals, warp-specialized regions); any other node
is one statement whose summary covers its body.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from egtile.analysis import ANY_BUFFER, Access, free_vars, reads, writes
from egtile.analysis.access import walk_expr
from egtile.errors import RuleError
from egtile.ir.usersync import ExpectTx
from egtile.ir import (
    Arrive,
    Expr,
    Load,
    ArriveExpectTx,
    Copy,
    CpAsyncArrive,
    Elect,
    FenceProxyAsync,
    Gemm,
    Leaf,
    MBarrier,
    Region,
    RoleSplit,
    SeqLoop,
    SIf,
    SStmt,
    SyncThreads,
    ThreadLoop,
    ThreadRange,
    TileOp,
    TmaLoad,
    TmaStore,
    Var,
    Wait,
)
from egtile.ir.registry import Registry
from egtile.ir.wgmma import WgmmaWait
from egtile.verdict import Verdict


@dataclass(frozen=True)
class Acc:
    """One access for hazard purposes: buffer name, whether it writes, and an owner key (``None``: any
    thread may touch any element). Two accesses with the same non-``None`` owner key touch each element
    from the same thread, so they need no CTA barrier between them."""

    buffer: str
    write: bool
    owner: Any = None
    proxy: bool = False
    """An access by the async proxy (a TMA store's source, a wgmma operand, a TMA load's destination): a barrier
    that orders generic writes before it needs ``fence.proxy.async`` by the writers first (PTX ISA 9.7.13.3.2)."""
    until_wait: bool = False
    """An asynchronous read that lasts until the issuing threads' ``wgmma.wait_group`` (a wgmma operand, PTX
    ISA 9.7.15.7: the tensor core reads shared memory until the group completes): a CTA barrier between the
    issue and that wait does not order it with what follows, so it stays pending past such a barrier."""


OwnerFn = Callable[[Any], Any]
"""Maps an :class:`egtile.analysis.Access` of a tile-IR statement to its owner key (or ``None``)."""

AccessFn = Callable[[Any, "AccessSummary", OwnerFn], "set[Acc]"]
"""An access summary: ``fn(node, summary, owner_of) -> set[Acc]``."""


def _no_owner(a: Any) -> Any:
    return None


class Pending:
    """The accesses made since the last barrier, indexed by buffer, so that checking a statement against
    them looks only at the pending accesses of the buffers it touches (and of :data:`ANY_BUFFER`): a
    chain of ``n`` statements costs ``O(n)`` checks, not ``O(n^2)`` (issue 11). Immutable: ``|`` returns a
    new one."""

    __slots__ = ("by_buffer",)

    def __init__(self, by_buffer: dict[str, frozenset[Acc]] | None = None) -> None:
        self.by_buffer: dict[str, frozenset[Acc]] = {} if by_buffer is None else by_buffer

    def __or__(self, other: Pending | Iterable[Acc]) -> Pending:
        if isinstance(other, Pending):
            if not other.by_buffer:
                return self
            if not self.by_buffer:
                return other
            small, big = sorted((self.by_buffer, other.by_buffer), key=len)
            out = dict(big)
            for b, accs in small.items():
                had = out.get(b)
                out[b] = accs if had is None else had | accs
            return Pending(out)
        groups: dict[str, set[Acc]] = {}
        for a in other:
            groups.setdefault(a.buffer, set()).add(a)
        if not groups:
            return self
        out = dict(self.by_buffer)
        for b, accs in groups.items():
            had = out.get(b)
            out[b] = frozenset(accs) if had is None else had | accs
        return Pending(out)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pending) and self.by_buffer == other.by_buffer

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        return bool(self.by_buffer)

    def __iter__(self):
        for accs in self.by_buffer.values():
            yield from accs

    def against(self, a: Acc) -> Iterable[Acc]:
        """The pending accesses that may touch ``a``'s buffer."""
        if a.buffer == ANY_BUFFER:
            return iter(self)
        same = self.by_buffer.get(a.buffer, ())
        anything = self.by_buffer.get(ANY_BUFFER)
        return same if anything is None else (*same, *anything)


NOTHING = Pending()


def _pairs(pending: Pending, new: Iterable[Acc]):
    """The (pending, new) pairs on the same buffer (or on :data:`ANY_BUFFER`)."""
    for a in new:
        for p in pending.against(a):
            yield p, a


def _barrier(pending: Pending, new: frozenset[Acc], threads: ThreadRange, bar_id: int) -> list[SStmt]:
    """The CTA barrier before ``new``, preceded by ``fence.proxy.async`` when it orders a generic write of a
    buffer before an async-proxy read of it (the writers execute the fence: every thread that reaches the
    barrier, PTX ISA 9.7.13.3.2)."""
    fence = any(p.write and not p.proxy and a.proxy for p, a in _pairs(pending, new))  # a generic write only
    return [FenceProxyAsync(), SyncThreads(threads, bar_id)] if fence else [SyncThreads(threads, bar_id)]


UNFENCED = ("unfenced",)
"""The owner key of a generic write that a CTA barrier without ``fence.proxy.async`` has ordered: ordered for
every generic access after that barrier, still unordered for the async proxy (a wgmma operand or TMA store
source reading it later needs its writers' fence and a barrier after it, PTX ISA 9.7.13.3.2)."""


def _conflicts(pending: Pending, new: Iterable[Acc]) -> bool:
    for p, a in _pairs(pending, new):
        if not (p.write or a.write):
            continue
        if p.owner is UNFENCED and not a.proxy:
            continue
        if p.owner is not None and p.owner == a.owner:
            continue
        return True
    return False


def _after_barrier(pending: Pending, placed: list[SStmt], inflight: frozenset[Acc]) -> Pending:
    """What is still pending right after the barrier statements ``placed``: the reads of wgmmas in flight
    (:attr:`Acc.until_wait`), and, when ``placed`` has no ``fence.proxy.async``, the generic writes it ordered,
    for the async proxy only (:data:`UNFENCED`)."""
    if any(isinstance(x, FenceProxyAsync) for x in placed):
        return NOTHING | inflight
    return NOTHING | inflight | frozenset(Acc(p.buffer, True, UNFENCED) for p in pending if p.write and not p.proxy)


ACCESSES: Registry[AccessFn] = Registry("egtile.lower.sync access summaries", "access summary",
                                        "egtile.lower.sync.register_accesses", RuleError)


def register_accesses(cls: type, fn: AccessFn | None = None, *, replace: bool = False):
    """Register the access summary of scheduled-IR node class ``cls``: ``fn(node, summary, owner_of)``
    returns the :class:`Acc` set the node makes (helpers on :class:`AccessSummary`: ``region``, ``leaf``,
    ``body``). Used directly (returns ``fn``) or as a decorator ``@register_accesses(MyNode)``.

    Raises:
        RuleError: ``cls`` already has a summary and ``replace`` is false.
    """
    def add(f: AccessFn):
        ACCESSES.register(cls, f, replace=replace)
        return f

    return add if fn is None else add(fn)


def unregister_accesses(cls: type) -> AccessFn:
    """Remove the access summary of ``cls`` registered last (the one it shadowed, if any, is in force again)."""
    return ACCESSES.unregister(cls)


class AccessSummary:
    """What the summaries share: which buffers are tracked at all, and the owner keys of thread mappings.

    Attributes:
        staged: multi-versioned buffers (their leading stage index is ignored for ownership).
        ignore: buffers whose accesses are ordered by other means (mbarrier-guarded stages, buffers the
            lowering orders itself): not tracked.
    """

    def __init__(self, staged: frozenset[str], ignore: frozenset[str]) -> None:
        self.staged = staged
        self.ignore = ignore

    def keep(self, scope: str, name: str) -> bool:
        """Whether accesses of buffer ``name`` (of ``scope``) can need a CTA barrier."""
        return scope != "local" and name not in self.ignore

    def of(self, s: SStmt, owner_of: OwnerFn = _no_owner) -> set[Acc]:
        """The accesses of scheduled statement ``s`` run in a context whose owner keys ``owner_of`` gives.

        Raises:
            RuleError: ``s``'s class has no registered access summary.
        """
        return ACCESSES.lookup(type(s))(s, self, owner_of)

    def body(self, stmts: Iterable[SStmt], owner_of: OwnerFn = _no_owner) -> set[Acc]:
        """The union of the accesses of ``stmts``."""
        out: set[Acc] = set()
        for b in stmts:
            out |= self.of(b, owner_of)
        return out

    def leaf(self, stmt, owner_of: OwnerFn) -> set[Acc]:
        """The accesses of tile-IR statement ``stmt`` (:func:`egtile.analysis.reads` / ``writes``)."""
        out: set[Acc] = set()
        for group, is_write in ((reads(stmt), False), (writes(stmt), True)):
            for a in group:
                if self.keep(a.scope, a.buffer):
                    out.add(Acc(a.buffer, is_write, owner_of(a)))
        return out

    def region(self, region: Region, *, write: bool, owner: Any = None, proxy: bool = False) -> set[Acc]:
        """One access of ``region``'s buffer (nothing when the buffer is not tracked); ``proxy``: made through the
        async proxy (a TMA or bulk copy's write, a TMA store's read)."""
        b = region.buffer
        return {Acc(b.name, write, owner, proxy=proxy)} if self.keep(b.scope, b.name) else set()

    def tile_owner(self, op, t: ThreadRange) -> OwnerFn:
        """Owner keys inside a cooperative tile op over threads ``t``."""
        # A cooperative tile op gives element e of its destination region to rank e % count; an access of
        # exactly that region (a Gemm's accumulator, a Copy's equally shaped source) has the same owner.
        dst = op.c if isinstance(op, Gemm) else getattr(op, "dst", None)
        if not isinstance(dst, Region):
            return _no_owner
        regions = [dst] + ([op.src] if isinstance(op, Copy) and op.src.extents == dst.extents else [])

        def owner(a) -> Any:
            for r in regions:
                if a.region == r:
                    return ("tile", t.begin, t.count, r.buffer.name, r.offsets, r.extents)
            return None
        return owner

    def thread_loop_owner(self, vars_: tuple[Var, ...], extents: tuple[int, ...], t: ThreadRange,
                          vector: int = 1) -> OwnerFn:
        """Owner keys inside a partitioned thread loop over ``vars_`` / ``extents`` on threads ``t`` (groups of
        ``vector`` consecutive iterations per thread: a different element -> thread map for each width)."""
        names = tuple(v.name for v in vars_)

        def owner(a) -> Any:
            # Element -> thread is fixed when every loop variable is one whole index and the other
            # indices do not depend on them (they are the same for every thread).
            r = a.region
            if r is None or any(e != 1 for e in r.extents):
                return None
            positions = []
            for n in names:
                hits = [d for d, o in enumerate(r.offsets) if isinstance(o, Var) and o.name == n]
                if len(hits) != 1:
                    return None
                positions.append(hits[0])
            others = [o for d, o in enumerate(r.offsets) if d not in positions]
            if any(set(names) & free_vars(o) for o in others):
                return None
            return ("thread-loop", t.begin, t.count, extents, tuple(positions), vector)
        return owner


# ----------------------------------------------------------------------------------------------------
# egtile's own nodes


@register_accesses(Leaf)
def _leaf(s: Leaf, acc: AccessSummary, owner_of: OwnerFn) -> set[Acc]:
    return acc.leaf(s.stmt, owner_of)


@register_accesses(TileOp)
def _tile_op(s: TileOp, acc: AccessSummary, owner_of: OwnerFn) -> set[Acc]:
    return acc.leaf(s.op, acc.tile_owner(s.op, s.threads))


@register_accesses(TmaLoad)
def _tma_load(s: TmaLoad, acc: AccessSummary, owner_of: OwnerFn) -> set[Acc]:
    # The async proxy writes the shared box and reads the global source after the issuing thread moved on
    # (PTX ISA 9.7.9.27): neither access belongs to a thread. The box is written through the async proxy: a generic
    # write a barrier orders before it needs its writers' fence.proxy.async too.
    return acc.region(s.dst, write=True, proxy=True) | acc.region(s.src, write=False)


@register_accesses(TmaStore)
def _tma_store(s: TmaStore, acc: AccessSummary, owner_of: OwnerFn) -> set[Acc]:
    # The issuing thread waits for the read of its shared source (wait_group.read 0, PTX ISA 9.7.9.28), so
    # that read is the issuer's; the global write completes asynchronously.
    src = acc.region(s.src, write=False, owner=owner_of(Access(s.src.buffer.name, s.src.buffer.scope, s.src)))
    return {Acc(a.buffer, a.write, a.owner, proxy=True) for a in src} | acc.region(s.dst, write=True)


@register_accesses(Elect)
def _elect(s: Elect, acc: AccessSummary, owner_of: OwnerFn) -> set[Acc]:
    key = ("elect", s.threads.begin)
    return acc.body(s.body, lambda a: key)


@register_accesses(ThreadLoop)
def _thread_loop(s: ThreadLoop, acc: AccessSummary, owner_of: OwnerFn) -> set[Acc]:
    fn = acc.thread_loop_owner(s.vars, s.extents, s.threads, s.vector) if s.mapping == "partitioned" else _no_owner
    return acc.body(s.body, fn)


@register_accesses(SeqLoop)
def _seq_loop(s: SeqLoop, acc: AccessSummary, owner_of: OwnerFn) -> set[Acc]:
    # Inside a per-thread context the loop's accesses keep their owner only if they do not depend on the
    # inner loop (analysis widening turns them into regions, which lose it). Its bounds' reads (a trip count
    # read from memory) are every thread's, as a condition's.
    return cond_reads(s.start, acc) | cond_reads(s.stop, acc) | acc.body(s.body, owner_of)


def cond_reads(e: Expr, acc: AccessSummary) -> set[Acc]:
    """The reads of a condition: every thread that reaches it loads the same elements (no owner)."""
    return {Acc(x.buffer.name, False) for x in walk_expr(e)
            if isinstance(x, Load) and acc.keep(x.buffer.scope, x.buffer.name)}


@register_accesses(SIf)
def _sif(s: SIf, acc: AccessSummary, owner_of: OwnerFn) -> set[Acc]:
    return cond_reads(s.cond, acc) | acc.body(s.then_body + s.else_body, owner_of)


@register_accesses(RoleSplit)
def _role_split(s: RoleSplit, acc: AccessSummary, owner_of: OwnerFn) -> set[Acc]:
    # roles run concurrently: no element belongs to one thread across the region, except a register
    # fragment's (its owner holds it whatever role it runs)
    return {Acc(a.buffer, a.write, a.owner if isinstance(a.owner, tuple) and a.owner[:1] == ("fragment",) else None,
                a.proxy) for r in s.roles for a in acc.body(r.body)}


def _none(s: Any, acc: AccessSummary, owner_of: OwnerFn) -> set[Acc]:
    return set()


for _cls in (Wait, Arrive, ArriveExpectTx, CpAsyncArrive, SyncThreads, FenceProxyAsync, ExpectTx):
    register_accesses(_cls, _none)  # synchronization only: no buffer access


class NonUniformBarrier(Exception):
    """A block-level ``T.If`` whose condition threads may evaluate differently needs a CTA barrier inside."""

    def __init__(self, sid: int | None, reason: str) -> None:
        super().__init__(sid, reason)
        self.sid = sid
        self.reason = reason


def _reads_memory(e: Expr) -> bool:
    """Does ``e`` load from any buffer (a condition on data, whichever scope it reads)?"""
    return any(isinstance(x, Load) for x in walk_expr(e))


def no_loads(e: Expr) -> Verdict:
    """The conservative uniformity of a condition when the kernel's facts are not at hand: no memory reads."""
    loads = sorted({x.buffer.name for x in walk_expr(e) if isinstance(x, Load)})
    return Verdict.of([f"it reads {b}" for b in loads])


def _seal(branch: tuple[SStmt, ...], threads: ThreadRange, bar_id: int, acc: AccessSummary,
          barriers: dict[str, MBarrier],
          uniform: Callable[[Expr], Verdict]) -> tuple[tuple[SStmt, ...], Pending]:
    """A side of a data-dependent uniform branch that needs a barrier, *sealed*: a CTA barrier first and last.

    The verifier cannot know which executions of a data-dependent side run; with the seal, every access
    inside one execution is ordered with everything before and after it for the threads running it,
    whichever other executions run, so it checks the side as a unit (``egtile.verifier.paths``). Inside,
    placement starts from nothing pending (the start barrier) and leaves nothing (the end barrier)."""
    seal = SyncThreads(threads, bar_id)
    placed, _ = _place(branch, NOTHING, threads, bar_id, acc, barriers, uniform)
    body = list(placed)
    while body and isinstance(body[0], SyncThreads):
        body.pop(0)
    while body and isinstance(body[-1], SyncThreads):
        body.pop()
    return (seal, *body, seal), NOTHING


_HAS_BARRIER: dict[int, tuple[SStmt, bool]] = {}


def _has_barrier(stmts: tuple[SStmt, ...]) -> bool:
    """Does ``stmts`` hold a :class:`SyncThreads` at any depth (what ``swalk`` reaches)? Memoized per compound
    statement by identity: each nesting level of :func:`_place` asks about the bodies it just placed, which
    hold the inner levels' (the same objects), so a walk per level was O(n^2) in the nesting depth."""
    for s in stmts:
        if isinstance(s, SyncThreads):
            return True
        if isinstance(s, (SeqLoop, ThreadLoop, Elect, SIf, RoleSplit)):
            hit = _HAS_BARRIER.get(id(s))
            if hit is None or hit[0] is not s:
                got = _has_barrier_children(s)
                if len(_HAS_BARRIER) >= 8192:
                    _HAS_BARRIER.clear()
                hit = _HAS_BARRIER[id(s)] = (s, got)
            if hit[1]:
                return True
    return False


def _has_barrier_children(s: SStmt) -> bool:
    match s:
        case SeqLoop(body=b) | ThreadLoop(body=b) | Elect(body=b):
            return _has_barrier(b)
        case SIf(then_body=t, else_body=e):
            return _has_barrier(t) or _has_barrier(e)
        case RoleSplit(roles=roles):
            return any(_has_barrier(r.body) for r in roles)
    return False


def _place(stmts: tuple[SStmt, ...], pending: Pending, threads: ThreadRange, bar_id: int,
           acc: AccessSummary, barriers: dict[str, MBarrier],
           uniform: Callable[[Expr], Verdict] = no_loads) -> tuple[tuple[SStmt, ...], Pending]:
    out: list[SStmt] = []
    # reads of issued wgmmas whose wait_group has not run yet (Acc.until_wait): a barrier leaves them pending.
    # The lowering puts a deferred wait in its gemm's list, past plain statements only (egtile.lower.mma_wait),
    # so they never cross into a nested list.
    inflight: frozenset[Acc] = frozenset()
    for s in stmts:
        match s:
            case SyncThreads():
                out.append(s)
                pending = _after_barrier(pending, [s], inflight)
            case SeqLoop(body=body):
                # every thread reads the bounds once, at the loop's entry (a trip count read from shared memory
                # or a local: egtile.verifier.tripcount): ordered after the writes before the loop, and before
                # the body's writes, as a condition's reads
                reads_b = frozenset(cond_reads(s.start, acc) | cond_reads(s.stop, acc))
                if _conflicts(pending, reads_b):
                    placed = _barrier(pending, reads_b, threads, bar_id)
                    out += placed
                    pending = _after_barrier(pending, placed, inflight)
                start = pending | reads_b
                new_body, end = _place(body, start, threads, bar_id, acc, barriers, uniform)
                for _ in range(8):
                    again, end2 = _place(body, start | end, threads, bar_id, acc, barriers, uniform)
                    if again == new_body and end2 == end:
                        break
                    new_body, end = again, end2
                out.append(SeqLoop(s.var, s.start, s.stop, new_body, s.unroll, s.sid))
                pending = start | end
            case SIf(cond=c, then_body=t, else_body=e):
                reads_c = frozenset(cond_reads(c, acc))
                if _conflicts(pending, reads_c):
                    placed = _barrier(pending, reads_c, threads, bar_id)
                    out += placed
                    pending = _after_barrier(pending, placed, inflight)
                pending = pending | reads_c
                verdict = uniform(c)
                if verdict.ok:
                    # Every thread takes the same branch: a CTA barrier inside is reached by all of them.
                    sides = []
                    for branch in (t, e):
                        placed, end = _place(branch, pending, threads, bar_id, acc, barriers, uniform)
                        # on data: its condition reads memory, also a per-thread local (a uniform T.alloc_var
                        # flag) whose reads need no barrier and so are not in reads_c; the verifier's own test
                        # (egtile.verifier.uniform: a condition with a load is not static)
                        if _reads_memory(c) and _has_barrier(placed):
                            # the seal orders the side with everything around it; what was pending before
                            # stays pending after: the side may not run, and the verifier orders pairs
                            # across a data-dependent branch without its barriers
                            placed, _ = _seal(branch, threads, bar_id, acc, barriers, uniform)
                            end = pending
                        sides.append((placed, end))
                    (nt, pt), (ne, pe) = sides
                    out.append(SIf(c, nt, ne, s.sid))
                    pending = pt | pe
                    continue
                # Threads may disagree: order the whole statement from outside, and it must need no
                # barrier inside (bar.sync must be reached by every thread it counts, PTX ISA 9.7.13.4).
                mine = frozenset(acc.body(t + e))
                if _conflicts(pending, mine):
                    placed = _barrier(pending, mine, threads, bar_id)
                    out += placed
                    # the barrier is before the statement: its condition reads come after
                    pending = _after_barrier(pending, placed, inflight) | reads_c
                for branch in (t, e):
                    placed, _ = _place(branch, NOTHING, threads, bar_id, acc, barriers, uniform)
                    if _has_barrier(placed):
                        raise NonUniformBarrier(s.sid, "; ".join(verdict.reasons))
                out.append(s)
                pending = pending | mine
            case RoleSplit(roles=roles):
                mine = frozenset(acc.of(s))
                if _conflicts(pending, mine):
                    placed = _barrier(pending, mine, threads, bar_id)
                    out += placed
                    pending = _after_barrier(pending, placed, inflight)
                guarded = frozenset(g for b in barriers.values() for g in b.guards)
                inner = AccessSummary(acc.staged, acc.ignore | guarded)
                new_roles = []
                for i, r in enumerate(roles):
                    body, _ = _place(r.body, NOTHING, r.threads, i + 1, inner, barriers, uniform)
                    new_roles.append(type(r)(r.name, r.threads, r.setmaxnreg, body))
                out.append(RoleSplit(tuple(new_roles), s.sid))
                pending = pending | mine
            case _:
                mine = frozenset(acc.of(s))
                if _conflicts(pending, mine):
                    placed = _barrier(pending, mine, threads, bar_id)
                    out += placed
                    pending = _after_barrier(pending, placed, inflight)
                out.append(s)
                pending = pending | mine
                if isinstance(s, WgmmaWait):
                    if s.pending == 0:  # every group of these threads is complete (PTX ISA 9.7.15.7.3)
                        inflight = frozenset()
                else:
                    inflight |= {a for a in mine if a.until_wait}
    return tuple(out), pending


def place_syncs(stmts: tuple[SStmt, ...], everyone: ThreadRange, *, barriers: tuple[MBarrier, ...] = (),
                staged: frozenset[str] = frozenset(), ordered: frozenset[str] = frozenset(),
                uniform: Callable[[Expr], Verdict] = no_loads) -> tuple[SStmt, ...]:
    """``stmts`` (a block's body, run by ``everyone``) with ``SyncThreads`` added where needed.

    Args:
        stmts: the lowered body.
        everyone: all threads of the block.
        barriers: the schedule's mbarriers (their guarded buffers are ordered by them inside roles).
        staged: names of multi-versioned buffers (their leading stage index is ignored for ownership).
        ordered: buffers whose every access the lowering has already ordered itself, everywhere (the
            stages of a software-pipelined loop: private to the loop, read-after-write through ``full``
            mbarriers, write-after-read through the CTA barrier it placed); they are not tracked.
        uniform: whether a block-level ``SIf`` condition is block-uniform
            (:meth:`egtile.analysis.uniform.Uniformity.of`); a barrier goes inside such a branch, while a
            branch on a condition threads may disagree on is ordered from outside.

    Raises:
        NonUniformBarrier: a branch on a condition that is not block-uniform needs a barrier inside.
    """
    staged = staged | frozenset(g for b in barriers for g in b.guards)
    acc = AccessSummary(staged, ordered)
    out, _ = _place(stmts, NOTHING, everyone, 0, acc, {b.name: b for b in barriers}, uniform)
    return out
