"""Concrete enumeration of a schedule into per-agent event traces (the reference verifier).

This is the verifier egtile shipped before the symbolic one (:mod:`egtile.verifier.trace`), kept unchanged
but for one fix (a ``ThreadLoop`` with more than ``MAX_LOOP_ENUM`` iterations used to be silently truncated
to its first ``MAX_LOOP_ENUM``; it is now refused) and one addition (a vectorized ``ThreadLoop`` gives
groups of ``vector`` consecutive iterations to one rank, :class:`egtile.ir.scheduled.ThreadLoop`). It
enumerates every element and every loop iteration, so its cost grows with tile size and trip count: it
is a cross-check for tests on small kernels (``tests/test_verify_crosscheck.py``), never called by
``egtile.verify``.

The verifier does not reason per thread. It splits the block's threads into *agents*: maximal thread
ranges that no ``Role`` boundary cuts (a warp-specialized schedule has a consumer agent and a producer
agent; a schedule without roles has one agent). Statements at top level are run by every agent with
its own threads; a role's statements by the agents inside it. For every block examined, each agent's
statements are enumerated concretely (loop bounds, stage and parity expressions are evaluated; loops in
a schedule have static bounds) into a trace of events:

* ``access``: a read, write, atomic or extern-pointer access of a set of elements of a buffer (flat
  indices; ``None`` when an index depends on data: possibly any element), with the stage of a
  multi-versioned buffer for messages. Only shared/fragment buffers and the global buffers the schedule
  writes are tracked (local buffers are per thread). Accesses carry the *logical timestamp* of the
  source statement instance (:class:`SourceOrder`). A ``TileOp`` access covers the elements the agent's
  threads own (gemm and reduce operands: whole); an extern pointer stands for the elements it declares,
  accessed as declared (the ``T.call_extern`` contract).
* ``wait``, ``arrive`` (with the number of arriving threads), ``expect_tx`` (bytes), ``tma`` (a TMA
  load: an async write of its destination that completes transaction bytes), ``cp_write`` (a cp.async
  copy's async write), ``cp_arrive``, ``sync`` (a named barrier), ``fence`` (``fence.proxy.async``).

Accesses inside one execution of a ``ThreadLoop`` or ``TileOp`` are merged per buffer and statement; each
keeps, per element, the one thread that touches it (``owners``: the rank owning a tile-op element, the
thread of a partitioned iteration, the elected thread), or none when several threads do (replicated
code), so that the order analysis can tell program order within one thread from ordering across the
agent's threads. An agent that owns no element of a ``TileOp`` or no iteration
of a partitioned ``ThreadLoop`` does not access anything there.

Statements whose control flow the verifier cannot evaluate (an ``SIf`` on loaded data) contribute the
accesses of both branches; their synchronization is rejected by L3/L7 (:mod:`egtile.verifier.structure`),
except that of a sealed side of a uniform condition, kept in the traces of its depth and deeper and
dropped from the others (:mod:`egtile.verifier.paths`, the same construction as the symbolic verifier's).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from egtile.evaluate import evaluate
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import (
    AddressOf, AtomicAdd, BinOp, Cast, Copy, Expr, Extern, Fill, For, Gemm, If, Kernel, Load, Reduce, Region, Select,
    Store, UnOp,
)
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Elect, FenceProxyAsync, Leaf, RoleSplit, Scheduled, SeqLoop, SIf, SStmt,
    SyncThreads, ThreadLoop, TileOp, TmaLoad, TmaStore, Wait, swalk,
)

from egtile.verifier.paths import enter

MAX_EVENTS = 400_000
MAX_LOOP_ENUM = 1 << 16
POINTER_EVENT = {1: "r", 2: "w", 3: "x"}  # an extern pointer's event by its declared access mode (AddressOf.mode)


class NotConstant(Exception):
    """An expression depends on data or on a variable the verifier has no value for."""


def const(e: Expr, env: dict[str, int]) -> Any:
    """Value of ``e`` from ``env`` alone.

    Raises:
        NotConstant: ``e`` loads from memory or uses a variable not in ``env``.
    """

    def no_load(buf, idx):
        raise NotConstant(buf.name)

    try:
        return evaluate(e, env, no_load)
    except KeyError as err:
        raise NotConstant(str(err)) from None


def loads_in(e: Expr) -> list[Load]:
    """Every ``Load`` evaluated by ``e`` (the target of an ``AddressOf`` is not a load, its indices are)."""
    match e:
        case Load(indices=idx):
            out = [e]
            for i in idx:
                out += loads_in(i)
            return out
        case AddressOf(load=Load(indices=idx)):
            return [x for i in idx for x in loads_in(i)]
        case BinOp(a=a, b=b):
            return loads_in(a) + loads_in(b)
        case UnOp(a=a) | Cast(value=a):
            return loads_in(a)
        case Select(cond=c, a=a, b=b):
            return loads_in(c) + loads_in(a) + loads_in(b)
        case _:
            return []


# ----------------------------------------------------------------------------------------------------
# Source order: logical timestamps


class SourceOrder:
    """Logical timestamps of source-statement instances: their order in the sequential program.

    The timestamp of statement ``sid`` executed with loop variables ``env`` interleaves, from the root,
    the statement's position in each enclosing body with the value of the enclosing serial/pipelined
    loop's variable (``T.Parallel`` iterations are unordered and contribute 0). Two instances compare
    like their execution order in :mod:`egtile.interp`.

    Contract with the scheduler: a scheduled statement implementing source statement ``sid`` runs with
    the source loops' variables bound (same names) to the source iteration it implements.
    """

    def __init__(self, kernel: Kernel) -> None:
        self.levels: dict[int, tuple[tuple[int, str | None], ...]] = {}
        self._index(kernel.body, ())

    def _index(self, body, prefix) -> None:
        for i, s in enumerate(body):
            self.levels[s.sid] = prefix + ((i, None),)
            match s:
                case For(var=v, kind=kind, body=b):
                    self._index(b, prefix + ((i, None if kind == "parallel" else v.name),))
                case If(then_body=t, else_body=e):
                    self._index(t, prefix + ((i, None), (0, None)))
                    self._index(e, prefix + ((i, None), (1, None)))
                case _:
                    pass

    def stamp(self, sid: int | None, env: dict[str, int]) -> tuple[int, ...] | None:
        lv = self.levels.get(sid) if sid is not None else None
        if lv is None:
            return None
        out: list[int] = []
        for idx, var in lv[:-1]:
            out.append(idx)
            if var is None:
                out.append(0)
            elif var in env:
                out.append(int(env[var]))
            else:
                return None
        out.append(lv[-1][0])
        return tuple(out)


# ----------------------------------------------------------------------------------------------------
# Events


@dataclass(eq=False)
class Event:
    """One step of an agent's trace (fields used depend on ``kind``, see module docstring)."""

    kind: str
    agent: int
    sid: int | None
    path: tuple[tuple[int | None, str, int], ...]
    # access
    buffer: str | None = None
    stage: int | None = None
    mode: str = ""  # "r", "w", "a" (atomic), "x" (extern pointer: read and write)
    proxy: str = "generic"  # "generic" or "async" (TMA store source read / TMA, cp.async writes)
    ts: tuple[int, ...] | None = None
    elements: frozenset[int] | None = None  # flat indices touched; None: possibly any
    owners: dict[int, int] | None = None  # element -> the one thread of the agent touching it; None: any
    tid: int | None = None  # the thread that runs the event, when one does (Elect, a TMA issue)
    # barriers
    barrier: str | None = None
    bstage: int = 0
    parity: int = 0
    count: int = 0
    tx: int = 0
    sync_id: int = 0
    # filled by the order analysis
    vc: dict[int, int] = field(default_factory=dict)
    comp: int = -1
    tick: int = 0  # the agent's (or async copy's) clock at the event
    covered: int = 0  # the agent's events with a smaller tick are ordered before this one across its threads
    issuer: int = -1  # async writes: the agent that issued the copy
    accesses: list[Event] = field(default_factory=list)  # tma / cp_write: the async write(s)
    inst: Any = None  # the innermost sealed side of a data-dependent SIf around the event
    # the data-dependent SIf sides around the event, outermost first: ((execution, side), ...) with the execution
    # named by the SIf, its loop iteration and the agent (whose threads evaluate the condition)
    sides: tuple = ()

    def where(self) -> str:
        if not self.path:
            return "outside loops"
        return ", ".join(f"{n}={v}" for _, n, v in self.path)


@dataclass(frozen=True)
class Agent:
    index: int
    begin: int
    end: int
    name: str

    @property
    def count(self) -> int:
        return self.end - self.begin


def agents_of(sched: Scheduled) -> list[Agent]:
    """Split ``[0, threads)`` at every role boundary."""
    cuts = {0, sched.threads}
    roles = []
    for s in swalk(sched.body):
        if isinstance(s, RoleSplit):
            for r in s.roles:
                cuts |= {max(0, min(sched.threads, r.threads.begin)), max(0, min(sched.threads, r.threads.end))}
                roles.append(r)
    edges = sorted(cuts)
    out = []
    for b, e in itertools.pairwise(edges):
        covering = [r.name for r in roles if r.threads.begin <= b and e <= r.threads.end]
        name = "/".join(dict.fromkeys(covering)) or f"threads {b}-{e - 1}"
        out.append(Agent(len(out), b, e, name))
    return out


def tracked_buffers(sched: Scheduled) -> tuple[set[str], set[str]]:
    """(buffers whose accesses are tracked, multi-versioned buffers)."""
    tracked = {b.name for b in sched.buffers if b.scope in ("shared", "fragment")}
    # a row fragment is replicated: each holder's copy is its own register (egtile.layout.RowFragment), never
    # shared, so its accesses are not events (check_fragments proves each is its holder's)
    from egtile.layout.fragment import RowFragment

    tracked -= {n for n, f in sched.fragments if isinstance(f, RowFragment)}
    params = {p.name for p in sched.kernel.params}
    for s in swalk(sched.body):
        match s:
            case Leaf(stmt=Store(buffer=b)) | Leaf(stmt=AtomicAdd(buffer=b)):
                if b.name in params:
                    tracked.add(b.name)
            case Leaf(stmt=Extern(args=args)):
                tracked |= {a.load.buffer.name for a in args if isinstance(a, AddressOf) and a.load.buffer.name in params}
            case TileOp(op=Copy(dst=r)) | TileOp(op=Fill(dst=r)) | TileOp(op=Gemm(c=r)) | TmaStore(dst=r):
                if r.buffer.name in params:
                    tracked.add(r.buffer.name)
            case TileOp(op=Reduce(dst=b)):
                if b.name in params:
                    tracked.add(b.name)
            case _:
                from egtile.verifier.reference import mma

                tracked |= mma.tracked(s, params)
    return tracked, {n for n, _ in sched.staged}


# ----------------------------------------------------------------------------------------------------
# The tracer


class TraceError(Exception):
    """The schedule cannot be enumerated (a bound or barrier index that is not a constant)."""

    def __init__(self, message: str, sid: int | None = None) -> None:
        super().__init__(message)
        self.sid = sid


class Tracer:
    """Builds the traces of every agent for one block."""

    def __init__(self, sched: Scheduled, agents: list[Agent], coords: tuple[int, ...], order: SourceOrder,
                 branches=None, sync_depth: int = 0) -> None:
        self.branches = branches  # egtile.verifier.uniform.Branches: the sealed sides
        self.sync_depth = sync_depth  # sealed sides at most this deep keep their synchronization
        self.inst = None  # the innermost sealed side being enumerated
        self.quiet = 0  # > 0: inside a data-dependent side whose synchronization is dropped
        self.sides: tuple = ()  # the data-dependent sides being walked (Event.sides)
        self.sched = sched
        self.agents = agents
        self.order = order
        self.tracked, self.staged = tracked_buffers(sched)
        self.env0 = {v.name: c for v, c in zip(sched.kernel.block_vars, coords)}
        self.traces: list[list[Event]] = [[] for _ in agents]
        self.n = 0
        self.merge: dict | None = None  # accesses of the current ThreadLoop / TileOp execution, by key
        self.cur_tid: int | None = None  # the one thread running the current statement instance, if one
        self.geometry: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}

    def run(self) -> list[list[Event]]:
        for a in self.agents:
            self.walk(self.sched.body, a, a.begin, a.end, dict(self.env0), (), None)
        return self.traces

    # -- emission -----------------------------------------------------------------------------------

    def emit(self, a: Agent, ev: Event) -> None:
        ev.inst = self.inst
        ev.sides = self.sides
        self.n += 1
        if self.n > MAX_EVENTS:
            raise TraceError(f"the schedule enumerates to more than {MAX_EVENTS} events per block; the verifier "
                             "is meant for test-sized kernels")
        self.traces[a.index].append(ev)

    def strides(self, name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        got = self.geometry.get(name)
        if got is None:
            shape = self.sched.buffer(name).shape
            st, acc = [], 1
            for e in reversed(shape):
                st.append(acc)
                acc *= e
            got = self.geometry[name] = (shape, tuple(reversed(st)))
        return got

    def stage_of(self, name: str, first: Expr | None, env: dict) -> int | None:
        if name not in self.staged or first is None:
            return None
        try:
            return int(const(first, env))
        except NotConstant:
            return None

    def access(self, a: Agent, buf: str, mode: str, sid, path, env, *, elements: frozenset[int] | None,
               stage: int | None, proxy: str = "generic", kind: str = "access",
               owners: dict[int, int] | None = None) -> Event | None:
        """Record an access (merged with an equal one of the same ThreadLoop / TileOp execution).

        ``owners`` maps each element to the thread touching it; by default every element belongs to the
        one thread running the current statement instance, or to no single thread."""
        if buf not in self.tracked:
            return None
        if owners is None and elements is not None and self.cur_tid is not None:
            owners = dict.fromkeys(elements, self.cur_tid)
        ev = Event(kind, a.index, sid, path, buffer=buf, stage=stage, mode=mode, proxy=proxy,
                   ts=self.order.stamp(sid, env), elements=elements, owners=owners, tid=self.cur_tid)
        if kind == "async_write":
            ev.inst = self.inst
            return ev  # performed by the copy, not by the agent: attached to its tma / cp_write event
        if self.merge is not None:
            key = (buf, mode, sid, proxy, ev.ts)
            old = self.merge.get(key)
            if old is not None:
                old.elements = None if old.elements is None or elements is None else old.elements | elements
                old.owners = _merge_owners(old.owners, owners)
                if old.tid != self.cur_tid:
                    old.tid = None
                if old.stage != stage:
                    old.stage = None
                return None
            self.merge[key] = ev
        self.emit(a, ev)
        return ev

    def element(self, buf: str, idx: tuple[Expr, ...], mode: str, a: Agent, sid, path, env) -> None:
        """An access of ``buf[idx]``: one element when the indices are constants here."""
        if buf not in self.tracked:
            return
        elements = None
        try:
            shape, st = self.strides(buf)
            vals = [int(const(i, env)) for i in idx]
            if len(vals) == len(shape):
                elements = frozenset((sum(v * s for v, s in zip(vals, st)),))
        except NotConstant:
            pass
        self.access(a, buf, mode, sid, path, env, elements=elements,
                    stage=self.stage_of(buf, idx[0] if idx else None, env))

    def region_flats(self, r: Region, env: dict) -> np.ndarray | None:
        """Flat indices of the elements of ``r``, row-major (``None`` if the offsets are not constant)."""
        try:
            offs = [int(const(o, env)) for o in r.offsets]
        except NotConstant:
            return None
        _, st = self.strides(r.buffer.name)
        flats = np.zeros(1, dtype=np.int64)
        for o, e, s_ in zip(offs, r.extents, st):
            flats = (flats[:, None] + (o + np.arange(e, dtype=np.int64))[None, :] * s_).reshape(-1)
        if r.clip:
            # past its tensor's edge: the box's elements outside the tensor are not accessed (-1)
            ok = np.ones(1, dtype=bool)
            for o, e, n in zip(offs, r.extents, r.buffer.shape):
                i = o + np.arange(e, dtype=np.int64)
                ok = (ok[:, None] & ((i >= 0) & (i < n))[None, :]).reshape(-1)
            flats = np.where(ok, flats, -1)
        return flats

    def region(self, a, r: Region, mode, sid, path, env, proxy="generic", kind="access",
               owned: np.ndarray | None = None, owner_of=None) -> Event | None:
        """An access of region ``r`` (only the elements at positions ``owned``, if given; ``owner_of``
        maps a position to the thread that touches it)."""
        if r.buffer.name not in self.tracked:
            return None
        flats = self.region_flats(r, env)
        elements, owners = None, None
        if flats is not None:
            pos = np.arange(len(flats)) if owned is None else owned
            pos = [p for p in pos if flats[p] >= 0]  # a clipped region's elements outside its tensor
            elements = frozenset(int(flats[p]) for p in pos)
            if owner_of is not None:
                owners = {int(flats[p]): owner_of(int(p)) for p in pos}
        return self.access(a, r.buffer.name, mode, sid, path, env, elements=elements,
                           stage=self.stage_of(r.buffer.name, r.offsets[0] if r.offsets else None, env),
                           proxy=proxy, kind=kind, owners=owners)

    def whole(self, a, b, mode, sid, path, env) -> None:
        self.access(a, b.name, mode, sid, path, env,
                    elements=frozenset(range(b.numel)) if b.name in self.tracked else None, stage=None)

    def expr_reads(self, a, e: Expr, sid, path, env) -> None:
        for ld in loads_in(e):
            self.element(ld.buffer.name, ld.indices, "r", a, sid, path, env)

    # -- statements ---------------------------------------------------------------------------------

    def walk(self, stmts: tuple[SStmt, ...], a: Agent, lo: int, hi: int, env: dict, path: tuple, loop_sid,
             tid: int | None = None) -> None:
        """Enumerate ``stmts`` for agent ``a`` whose threads ``[lo, hi)`` run them (each instance on the
        one thread ``tid`` inside a partitioned ThreadLoop)."""
        if lo >= hi:
            return
        saved_tid = self.cur_tid
        self.cur_tid = lo if hi - lo == 1 else tid
        try:
            self._walk(stmts, a, lo, hi, env, path, loop_sid)
        finally:
            self.cur_tid = saved_tid

    def _walk(self, stmts: tuple[SStmt, ...], a: Agent, lo: int, hi: int, env: dict, path: tuple, loop_sid) -> None:
        n = 1 if self.cur_tid is not None else hi - lo
        tid = self.cur_tid
        for s in stmts:
            if self.quiet and isinstance(s, _SYNC):
                continue
            match s:
                case Leaf(stmt=st):
                    self.leaf(st, a, env, path)
                case SeqLoop(var=var, start=start, stop=stop, body=body, sid=sid):
                    try:
                        b, e = int(const(start, env)), int(const(stop, env))
                    except NotConstant as err:
                        raise TraceError(f"loop over {var.name} (sid {sid}) has a bound that is not a constant "
                                         f"({err})", sid) from None
                    saved = env.get(var.name)
                    for k in range(b, e):
                        env[var.name] = k
                        self.walk(body, a, lo, hi, env, path + ((sid, var.name, k),), sid, tid)
                    _restore(env, var.name, saved)
                case ThreadLoop():
                    self.thread_loop(s, a, lo, hi, env, path, loop_sid)
                case TileOp():
                    self.tile_op(s, a, lo, hi, env, path)
                case Elect(threads=tr, body=body):
                    if lo <= tr.begin < hi:
                        self.walk(body, a, tr.begin, tr.begin + 1, env, path, loop_sid)
                case Wait(barrier=b, stage=st, parity=par, sid=sid):
                    self.emit(a, Event("wait", a.index, sid if sid is not None else loop_sid, path, barrier=b,
                                       bstage=self.const_int(st, env, f"stage of the wait on {b}", sid),
                                       parity=self.const_int(par, env, f"parity of the wait on {b}", sid) & 1,
                                       count=n, tid=tid))
                case Arrive(barrier=b, stage=st):
                    self.emit(a, Event("arrive", a.index, loop_sid, path, barrier=b,
                                       bstage=self.const_int(st, env, f"stage of an arrive on {b}", loop_sid), count=n,
                                       tid=tid))
                case ArriveExpectTx(barrier=b, stage=st, tx_bytes=tx):
                    self.emit(a, Event("arrive", a.index, loop_sid, path, barrier=b,
                                       bstage=self.const_int(st, env, f"stage of an arrive on {b}", loop_sid),
                                       count=n, tx=tx * n, tid=tid))
                case CpAsyncArrive(barrier=b, stage=st):
                    self.emit(a, Event("cp_arrive", a.index, loop_sid, path, barrier=b,
                                       bstage=self.const_int(st, env, f"stage of a cp.async arrive on {b}", loop_sid),
                                       count=n, tid=tid))
                case TmaLoad(src=src, dst=dst, barrier=b, stage=st, sid=sid):
                    nbytes = dst.numel * lookup_dtype(dst.buffer.dtype).bytes
                    for _ in range(n):  # every thread that reaches it issues one copy (L5 flags n > 1)
                        ev = Event("tma", a.index, sid, path, barrier=b,
                                   bstage=self.const_int(st, env, f"stage of the TMA load on {b}", sid), tx=nbytes,
                                   tid=tid if tid is not None else lo)
                        self.emit(a, ev)
                        self.region(a, src, "r", sid, path, env)
                        w = self.region(a, dst, "w", sid, path, env, proxy="async", kind="async_write",
                                        owner_of=lambda p, t=ev.tid: t)
                        if w is not None:
                            ev.accesses.append(w)
                case TmaStore(src=src, dst=dst, sid=sid):
                    self.region(a, src, "r", sid, path, env, proxy="async")
                    self.region(a, dst, "w", sid, path, env, proxy="async")
                case SyncThreads(threads=tr, barrier_id=bid):
                    self.emit(a, Event("sync", a.index, loop_sid, path, count=n, tx=tr.count, sync_id=bid, tid=tid))
                case FenceProxyAsync():
                    self.emit(a, Event("fence", a.index, loop_sid, path, tid=tid))
                case SIf(cond=c, then_body=t, else_body=e, sid=sid):
                    try:
                        taken = const(c, env)
                    except NotConstant:
                        self.expr_reads(a, c, sid, path, env)
                        # data-dependent branch: accesses of both sides, no synchronization (L3/L7 reject it)
                        # but that of a sealed side in the traces of its depth (egtile.verifier.paths)
                        flags = self.branches.of(s) if self.branches is not None else (False, False)
                        for side, body, sealed in ((0, t, flags[0]), (1, e, flags[1])):
                            outer, quiet, sides = self.inst, self.quiet, self.sides
                            if sealed:
                                self.inst = enter(outer, s, side, path)
                            if not (sealed and self.inst[0] <= self.sync_depth):
                                self.quiet += 1
                            self.sides = (*sides, ((sid, path, a.index), side))
                            try:
                                self.walk(body, a, lo, hi, env, path, loop_sid, tid)
                            finally:
                                self.inst, self.quiet, self.sides = outer, quiet, sides
                        continue
                    self.walk(t if taken else e, a, lo, hi, env, path, loop_sid, tid)
                case RoleSplit(roles=roles):
                    quiet, self.quiet = self.quiet, 0  # as before: roles keep their synchronization
                    try:
                        for r in roles:
                            b, e = max(lo, r.threads.begin), min(hi, r.threads.end)
                            if b < e:
                                self.walk(r.body, a, b, e, env, path, loop_sid)
                    finally:
                        self.quiet = quiet
                case _:
                    from egtile.verifier.reference import mma  # the register-fragment and wgmma nodes' model

                    if not mma.trace(self, s, a, lo, hi, env, path, loop_sid):
                        raise TypeError(f"not a scheduled statement: {s!r}")

    def const_int(self, e: Expr, env: dict, what: str, sid) -> int:
        try:
            return int(const(e, env))
        except NotConstant as err:
            raise TraceError(f"{what} is not a constant at {env} ({err})", sid) from None

    def leaf(self, st, a: Agent, env: dict, path: tuple) -> None:
        match st:
            case Store(buffer=b, indices=idx, value=v, sid=sid):
                self.expr_reads(a, v, sid, path, env)
                for i in idx:
                    self.expr_reads(a, i, sid, path, env)
                self.element(b.name, idx, "w", a, sid, path, env)
            case AtomicAdd(buffer=b, indices=idx, value=v, sid=sid):
                self.expr_reads(a, v, sid, path, env)
                for i in idx:
                    self.expr_reads(a, i, sid, path, env)
                self.element(b.name, idx, "a", a, sid, path, env)
            case Extern(args=args, sid=sid):
                for x in args:
                    self.expr_reads(a, x, sid, path, env)
                    if isinstance(x, AddressOf):
                        # the T.call_extern contract: the callee touches the elements the pointer declares, as declared
                        for idx in x.element_indices():
                            self.element(x.load.buffer.name, idx, POINTER_EVENT[x.mode], a, sid, path, env)
            case _:
                raise TypeError(f"not a leaf statement: {st!r}")

    def thread_loop(self, s: ThreadLoop, a: Agent, lo: int, hi: int, env: dict, path: tuple, loop_sid) -> None:
        tr = s.threads
        b, e = max(lo, tr.begin), min(hi, tr.end)
        if b >= e:
            return
        total = 1
        for x in s.extents:
            total *= x
        w = max(1, getattr(s, "vector", 1))  # vectorized: groups of w consecutive iterations per rank
        if s.mapping == "partitioned":
            r0, r1 = b - tr.begin, e - tr.begin
            its = [i for i in range(total // w * w) if r0 <= (i // w) % tr.count < r1]
            e = min(e, tr.begin + total // w)  # ranks past the last group get no iteration
        else:
            its = list(range(total))
        if not its:
            return
        if len(its) > MAX_LOOP_ENUM:
            raise TraceError(f"ThreadLoop (sid {s.sid}) has {len(its)} iterations; the reference verifier enumerates "
                             f"at most {MAX_LOOP_ENUM}", s.sid)
        names = [v.name for v in s.vars]
        saved = [env.get(n_) for n_ in names]
        outer_merge = self.merge
        self.merge = {}
        for i in its:
            rem = i
            vals = []
            for x in reversed(s.extents):
                vals.append(rem % x)
                rem //= x
            for n_, v in zip(names, reversed(vals)):
                env[n_] = v
            tid = tr.begin + (i // w) % tr.count if s.mapping == "partitioned" else None
            self.walk(s.body, a, b, e, env, path, s.sid if s.sid is not None else loop_sid, tid)
        self.merge = outer_merge
        for n_, v in zip(names, saved):
            _restore(env, n_, v)

    def tile_op(self, s: TileOp, a: Agent, lo: int, hi: int, env: dict, path: tuple) -> None:
        tr = s.threads
        b, e = max(lo, tr.begin), min(hi, tr.end)
        op = s.op
        nel = _elements(op)
        if b >= e or b - tr.begin >= nel:
            return  # this agent owns no element
        ranks = np.arange(nel) % tr.count
        owned = np.nonzero((ranks >= b - tr.begin) & (ranks < e - tr.begin))[0]
        sid = op.sid
        outer_merge = self.merge
        self.merge = {}
        saved_tid, self.cur_tid = self.cur_tid, None  # each element on its own thread (owner_of)

        def owner_of(p: int) -> int:
            return tr.begin + p % tr.count

        match op:
            case Copy(src=src, dst=dst):
                self.region(a, src, "r", sid, path, env, owned=owned, owner_of=owner_of)
                if s.inst == "cp_async":
                    w = self.region(a, dst, "w", sid, path, env, proxy="async", kind="async_write", owned=owned,
                                    owner_of=owner_of)
                    if w is not None:
                        self.emit(a, Event("cp_write", a.index, sid, path, accesses=[w]))
                else:
                    self.region(a, dst, "w", sid, path, env, owned=owned, owner_of=owner_of)
            case Fill(dst=dst, value=v):
                self.expr_reads(a, v, sid, path, env)
                self.region(a, dst, "w", sid, path, env, owned=owned, owner_of=owner_of)
            case Gemm(a=ra, b=rb, c=rc, clear_accum=clear):
                # operands: whole regions, on every thread (a thread's outputs need whole rows and columns)
                self.region(a, ra, "r", sid, path, env)
                self.region(a, rb, "r", sid, path, env)
                if not clear:
                    self.region(a, rc, "r", sid, path, env, owned=owned, owner_of=owner_of)
                self.region(a, rc, "w", sid, path, env, owned=owned, owner_of=owner_of)
            case Reduce(src=src, dst=dst, clear=clear):
                self.whole(a, src, "r", sid, path, env)
                mine = {int(x): owner_of(int(x)) for x in owned}  # dst is a whole buffer: element e is flat e
                if not clear:
                    self.access(a, dst.name, "r", sid, path, env, elements=frozenset(mine), stage=None, owners=mine)
                self.access(a, dst.name, "w", sid, path, env, elements=frozenset(mine), stage=None, owners=mine)
        self.cur_tid = saved_tid
        self.merge = outer_merge


def _merge_owners(a: dict[int, int] | None, b: dict[int, int] | None) -> dict[int, int] | None:
    """Owners of a merged access: ``None`` (no single thread) as soon as an element has two."""
    if a is None or b is None:
        return None
    out = dict(a)
    for f, t in b.items():
        if out.setdefault(f, t) != t:
            return None
    return out


def _elements(op) -> int:
    match op:
        case Copy(dst=r) | Fill(dst=r) | Gemm(c=r):
            return r.numel
        case Reduce(dst=b):
            return b.numel
    return 0


def _restore(env: dict, name: str, saved) -> None:
    if saved is None:
        env.pop(name, None)
    else:
        env[name] = saved


_SYNC = (Wait, Arrive, ArriveExpectTx, CpAsyncArrive, SyncThreads, TmaLoad)
