"""A schedule, one block, as per-agent event traces whose accesses are symbolic footprints.

The verifier does not reason per thread. It splits the block's threads into *agents*: maximal thread
ranges that no ``Role`` boundary cuts (a warp-specialized schedule has a consumer agent and a producer
agent; a schedule without roles has one agent). Statements at top level are run by every agent with
its own threads; a role's statements by the agents inside it. For every block examined, each agent's
statements become a trace of events (loop bounds, stage and parity expressions are evaluated; loops
have static bounds):

* ``access``: a read, write, atomic or extern-pointer access of a buffer, with its
  :class:`~egtile.verifier.regions.Footprint` (the elements and, per element, the one thread touching
  it, or none), the stage of a multi-versioned buffer (for messages) and the *logical timestamp* of the
  source statement instance (:class:`SourceOrder`). Shared/fragment buffers and the global buffers the
  schedule writes are tracked; local buffers too, for value flow only (:mod:`egtile.verifier.valueflow`).
  A ``TileOp`` access covers the elements the agent's threads own (element ``e`` belongs to rank
  ``e % count``; gemm and reduce operands: whole, on every thread); an extern pointer stands for the
  elements it declares, read, written or both as declared (the ``T.call_extern`` contract,
  :class:`egtile.ir.kernel.AddressOf`, which the CPU executors enforce on the extern's model).
* ``wait``, ``arrive`` (with the number of arriving threads), ``tma`` (a TMA load: an async write of its
  destination that completes transaction bytes), ``cp_write`` (a cp.async copy's async write),
  ``cp_arrive``, ``sync`` (a named barrier), ``fence`` (``fence.proxy.async``).

Accesses inside one execution of a ``ThreadLoop`` or ``TileOp`` are merged per buffer, mode, statement
and timestamp, exactly as the enumerating verifier (:mod:`egtile.verifier.reference.trace`) merges its
element sets; a ``ThreadLoop`` is walked symbolically (:mod:`egtile.verifier.threadloop`). Serial loops
are traced iteration by iteration, except that a long loop whose body is periodic in its variable is
traced on a window of its first and last iterations (:mod:`egtile.verifier.window`, where the argument
for equivalence is written down). A ``ThreadLoop`` or SIMT tile op whose inputs did not change since its
last execution is replayed (same footprints, new timestamps) rather than walked again.

This module holds the events, the tracer and :class:`Ctx`, the interface through which every
statement's model describes it; the models of the builtin statements are in
:mod:`egtile.verifier.models` and :mod:`egtile.verifier.threadloop`, dispatched through the verifier's
registry (:mod:`egtile.verifier.registry`), where a rule author registers a model for a new node.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from egtile.evaluate import evaluate
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import (
    AddressOf, AtomicAdd, BinOp, Buffer, Cast, Copy, Expr, Extern, Fill, For, Gemm, If, Kernel, Load, Reduce, Region,
    Select, Store, UnOp, Var,
)
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Leaf, RoleSplit, Scheduled, SIf, SyncThreads, ThreadLoop, TileOp, TmaLoad,
    TmaStore, Wait,
)
from egtile.verifier import registry
from egtile.verifier.loads import loads_in
from egtile.verifier.affine import Aff, Data, NonAffine, Wraps, affine, bounds
from egtile.verifier.fragorder import FragmentAccess
from egtile.verifier.ints import Ints
from egtile.verifier.regions import NONE_OWNER, Footprint, Owner, Piece, Space, flat_strides, piece


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


def _no_load(buf, idx):
    raise NotConstant(buf.name)


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


@dataclass(eq=False, slots=True)
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
    fp: Footprint | None = None
    tid: int | None = None  # the thread that runs the event, when one does (Elect, a TMA issue)
    # barriers
    barrier: str | None = None
    bstage: int = 0
    parity: int = 0
    count: int = 0
    tx: int = 0
    sync_id: int = 0
    # windowed loops this event is in: (instance, position in the traced window, covariant?)
    rounds: tuple[tuple[Any, int, bool], ...] = ()
    # filled by the order analysis
    vc: dict = field(default_factory=dict)
    comp: int = -1
    tick: int = 0  # the agent's (or async copy's) clock at the event
    covered: int = 0  # the agent's events with a smaller tick are ordered before this one across its threads
    issuer: int = -1  # async writes: the agent that issued the copy
    accesses: list[Event] = field(default_factory=list)  # tma / cp_write: the async write(s)
    seq: int = 0  # creation order within the block (stable sort key)
    epoch: tuple | None = None  # async writes: (clock component, value) once known to have landed
    lo: int = 0  # accesses: the threads [lo, hi) running the statement
    hi: int = 0
    scope: int = 0  # accesses: the ThreadLoop / TileOp execution that made it (0: none)
    local: bool = False  # an access of a per-thread (local) buffer: value flow only
    # the innermost sealed side of a data-dependent SIf the event is in (egtile.verifier.paths.Instance)
    inst: Any = None
    note: str = ""  # said after the access in reports (a wgmma's operand read at the wait that completes it)
    # the sides of data-dependent SIfs the event is in: ((execution, side), ...), outermost first; two events on
    # different sides of one execution never both run (see :func:`exclusive`)
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


def exclusive(x: Event, y: Event) -> bool:
    """``x`` and ``y`` lie on different sides of one execution of a data-dependent ``SIf``: the tracer, which cannot
    evaluate the condition, traces both sides, but an execution runs one of them, so the two never both run and
    no order between them is required (the same two sides in different executions, e.g. loop iterations, are
    different executions and are checked)."""
    if not x.sides or not y.sides:
        return False
    mine = dict(x.sides)
    return any(mine.get(e, side) != side for e, side in y.sides)


def agents_of(sched: Scheduled) -> list[Agent]:
    """Split ``[0, threads)`` at every role boundary."""
    cuts = {0, sched.threads}
    roles = []
    for s in registry.walk(sched.body):
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
    params = {p.name for p in sched.kernel.params}
    for s in registry.walk(sched.body):
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
                m = registry.model(type(s))
                if m is not None:
                    # a registered model writes what it declares, or possibly any global
                    tracked |= {n for n in m.writes(s) if n in params} if m.writes else params
    return tracked, {n for n, _ in sched.staged}


class TraceError(Exception):
    """The schedule cannot be enumerated (a bound or barrier index that is not a constant)."""

    def __init__(self, message: str, sid: int | None = None) -> None:
        super().__init__(message)
        self.sid = sid


class Fallback(Exception):
    """The symbolic walk of a ``ThreadLoop`` body met something it does not model: enumerate it."""


# ----------------------------------------------------------------------------------------------------
# Merging the accesses of one ThreadLoop / TileOp execution


@dataclass
class _Rec:
    ev: Event
    pieces: list = field(default_factory=list)  # symbolic pieces
    flats: list = field(default_factory=list)  # listed elements (flat index) ...
    owners: list = field(default_factory=list)  # ... and the thread touching each (-1: none)
    unknown: bool = False
    stages: set = field(default_factory=set)
    tids: set = field(default_factory=set)  # the running thread of each instance (None: several; "sym")
    iters: list = field(default_factory=list)  # symbolic instances: their iteration boxes (who runs them)


class _Scope:
    """The accesses of one ThreadLoop / TileOp execution, merged by (buffer, mode, sid, proxy, ts)."""

    _n = 0

    def __init__(self, tile_op: bool) -> None:
        self.recs: dict[tuple, _Rec] = {}
        self.tile_op = tile_op
        _Scope._n += 1
        self.id = _Scope._n


@dataclass
class _Sym:
    """A ThreadLoop walked once with its variables symbolic."""

    names: tuple[str, ...]
    extents: tuple[int, ...]
    strides: tuple[int, ...]
    ranges: dict[str, tuple[int, int]]
    owner: Owner | None
    filt: tuple[int, int, int] | None


# ----------------------------------------------------------------------------------------------------
# The context handlers see


class Ctx:
    """What a statement's model sees and does: the agent, its threads, the loop variables' values.

    ``lo``/``hi``: the threads ``[lo, hi)`` running the statement; ``tid``: the one thread running it,
    if one does; ``env``: loop and block variables; ``path``: the enclosing serial-loop iterations.
    Models describe a node with :meth:`walk`, :meth:`read`, :meth:`write`, :meth:`access`,
    :meth:`element`, :meth:`wait`, :meth:`arrive`, :meth:`sync`, :meth:`fence`, :meth:`tma_load`.
    """

    def __init__(self, tracer: Tracer, agent: Agent, lo: int, hi: int, env: dict, path: tuple, loop_sid,
                 tid: int | None, sym: _Sym | None = None, accesses_only: bool = False) -> None:
        self.tracer = tracer
        self.agent = agent
        self.lo, self.hi = lo, hi
        self.env = env
        self.path = path
        self.loop_sid = loop_sid
        self.tid = tid
        self.sym = sym
        self.accesses_only = accesses_only

    @property
    def threads(self) -> int:
        """How many threads run the statement (1 when one thread does)."""
        return 1 if self.tid is not None else self.hi - self.lo

    def child(self, *, lo: int | None = None, hi: int | None = None, tid: int | None = None, path=None,
              loop_sid=None, sym: Any = False, accesses_only: bool | None = None) -> Ctx | None:
        lo = self.lo if lo is None else lo
        hi = self.hi if hi is None else hi
        if lo >= hi:
            return None
        cur = lo if hi - lo == 1 else tid
        return Ctx(self.tracer, self.agent, lo, hi, self.env, self.path if path is None else path,
                   self.loop_sid if loop_sid is None else loop_sid, cur, self.sym if sym is False else sym,
                   self.accesses_only if accesses_only is None else accesses_only)

    # -- structure ------------------------------------------------------------------------------------

    def walk(self, stmts, *, lo: int | None = None, hi: int | None = None, tid: int | None = None) -> None:
        """Run ``stmts`` on threads ``[lo, hi)`` (default: the same threads, and the same one thread if one
        runs this statement; ``tid``: the one thread of the new range that runs them)."""
        same = lo is None and hi is None and tid is None
        c = self.child(lo=lo, hi=hi, tid=self.tid if same else tid)
        if c is not None:
            self.tracer.walk(stmts, c)

    def value(self, e: Expr, what: str = "an expression", sid=None) -> int:
        """``e`` as an int (``TraceError`` when it is not a constant here)."""
        return self.tracer.const_int(e, self.env, what, sid if sid is not None else self.loop_sid)

    # -- accesses -------------------------------------------------------------------------------------

    def element(self, buf: Buffer | str, idx: tuple[Expr, ...], mode: str, sid) -> None:
        """An access of ``buf[idx]`` by the running threads (``mode``: r, w, a, x)."""
        self.tracer.element(self, buf if isinstance(buf, str) else buf.name, idx, mode, sid)

    def reads_of(self, e: Expr, sid) -> None:
        """The loads ``e`` evaluates."""
        for ld in loads_in(e):
            self.element(ld.buffer.name, ld.indices, "r", sid)

    def read(self, r: Region, sid=None, proxy: str = "generic") -> Event | None:
        """A read of region ``r`` by every running thread (no single owner unless one thread)."""
        return self.tracer.region(self, r, "r", sid, proxy=proxy)

    def write(self, r: Region, sid=None, proxy: str = "generic") -> Event | None:
        """A write of region ``r`` by the running threads."""
        return self.tracer.region(self, r, "w", sid, proxy=proxy)

    def access(self, r: Region, mode: str, sid=None, *, proxy: str = "generic", split: Any = None) -> Event | None:
        """An access of region ``r`` (``mode``: r, w, a, x) by the running threads, or, with ``split`` (a
        ``ThreadRange``), cooperatively: element ``e`` (row-major over ``r``) by rank ``e % count`` (only
        the ranks of this agent)."""
        if split is not None:
            b, e = max(self.lo, split.begin), min(self.hi, split.end)
            if b >= e or b - split.begin >= r.numel:
                return None
            split = (Owner("rank", split.begin, split.count), (split.count, b - split.begin, e - split.begin))
        return self.tracer.region(self, r, mode, sid, proxy=proxy, split=split)

    # -- synchronization ------------------------------------------------------------------------------

    def wait(self, barrier: str, stage: Expr, parity: Expr, sid=None) -> None:
        self.tracer.sync_event(self, "wait", barrier, stage, sid=sid, parity=parity)

    def arrive(self, barrier: str, stage: Expr, tx_bytes: int = 0) -> None:
        self.tracer.sync_event(self, "arrive", barrier, stage, tx=tx_bytes)

    def cp_arrive(self, barrier: str, stage: Expr) -> None:
        self.tracer.sync_event(self, "cp_arrive", barrier, stage)

    def sync(self, threads, barrier_id: int = 0) -> None:
        t = self.tracer
        t.emit(self.agent, Event("sync", self.agent.index, self.loop_sid, self.path, count=self.threads,
                                 tx=threads.count, sync_id=barrier_id, tid=self.tid), self)

    def fence(self) -> None:
        self.tracer.emit(self.agent, Event("fence", self.agent.index, self.loop_sid, self.path, tid=self.tid), self)

    def tma_load(self, src: Region, dst: Region, barrier: str, stage: Expr, sid=None,
                 tx_bytes: int | None = None) -> None:
        """An asynchronous copy of ``src`` into ``dst`` by the running thread, completing ``tx_bytes``
        (default: ``dst``'s bytes) on ``barrier[stage]`` (a TMA load, a bulk copy)."""
        self.tracer.tma_load(self, src, dst, barrier, stage, sid, tx_bytes)


# ----------------------------------------------------------------------------------------------------
# The tracer


class Tracer:
    """Builds the traces of every agent for one block."""

    def __init__(self, sched: Scheduled, agents: list[Agent], coords: tuple[int, ...], order: SourceOrder,
                 space: Space, limits, window=None, ints: Ints | None = None, tracked=None, branches=None,
                 sync_depth: int = 0, trips: dict | None = None) -> None:
        # the trip count of each runtime-bounded loop (by sid) in this trace (egtile.verifier.tripcount)
        self.trips = trips
        self.ints = ints if ints is not None else Ints()
        # sealed sides of data-dependent SIfs (egtile.verifier.uniform.Branches); those nested at most
        # sync_depth deep are traced with their synchronization (egtile.verifier.paths)
        self.branches = branches
        self.sync_depth = sync_depth
        self.inst = None
        self.sched = sched
        self.agents = agents
        self.order = order
        self.space = space
        self.limits = limits
        self.window = window
        self.tracked, self.staged = tracked if tracked is not None else tracked_buffers(sched)
        self.versions = dict(sched.staged)
        self.barrier_sizes = {b.name: b.stages for b in sched.barriers}
        # per-thread buffers: traced for value flow (egtile.verifier.valueflow), never for ordering
        self.local = {b.name for b in sched.buffers if b.scope == "local"}
        self.tracked = self.tracked | self.local
        self.scopes = 0
        self.env0 = {v.name: c for v, c in zip(sched.kernel.block_vars, coords)}
        self.traces: list[list[Event]] = [[] for _ in agents]
        self.n = 0
        self.scope: _Scope | None = None
        self.geometry: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self.rounds: list[tuple[Any, int, bool]] = []  # the windowed loops being traced
        self._free: dict[int, tuple] = {}
        self._replay: dict[tuple, list] = {}
        self._pieces: dict[tuple, Piece | None] = {}
        # per agent: the wgmma groups issued and not yet completed by a wgmma.wait_group (egtile.verifier.mma)
        self.inflight: dict[int, list] = {}
        # the data-dependent SIf sides being traced ((execution, side), ...) and the executions numbered so far
        self.sides: tuple = ()
        self.executions = 0
        # per agent, in program order: the accesses of register fragments (egtile.verifier.fragorder)
        self.registers = frozenset(n for n, _ in sched.fragments)
        self.fragment_accesses: list[list[FragmentAccess]] = [[] for _ in agents]
        self.register_plans: dict[int, tuple] = {}  # id(statement) -> (statement, its accesses of register fragments)
        self.fragment_node: tuple[Any, int] = (None, 0)  # the statement whose fragment accesses are being recorded

    def run(self) -> list[list[Event]]:
        for a in self.agents:
            ctx = Ctx(self, a, a.begin, a.end, dict(self.env0), (), None, None)
            ctx.tid = a.begin if a.end - a.begin == 1 else None
            self.walk(self.sched.body, ctx)
        return self.traces

    # -- emission -----------------------------------------------------------------------------------

    def emit(self, a: Agent, ev: Event, ctx: Ctx | None = None) -> None:
        self.n += 1
        self.limits.count_event(self.n)
        ev.seq = self.n
        ev.rounds = tuple(self.rounds)
        ev.inst = self.inst
        ev.sides = self.sides
        self.traces[a.index].append(ev)

    def fragment_execution(self, node) -> None:
        """The fragment accesses recorded next are one execution of scheduled statement ``node``."""
        self.fragment_node = (node, self.fragment_node[1] + 1)

    def fragment_access(self, ctx: Ctx, name: str, mode: str, sid, lo: int, hi: int, box=None) -> None:
        """Record an access of register fragment ``name`` by threads ``[lo, hi)`` of ``ctx``'s agent (``box``: the
        ``[begin, end)`` of each coordinate it touches; ``None``: any element)."""
        if name not in self.registers or lo >= hi:
            return
        self.n += 1
        ts = self.order.stamp(sid, ctx.env)
        self.fragment_accesses[ctx.agent.index].append(FragmentAccess(
            self.n, ts, sid, name, mode, lo, hi, box, self.sides,
            unbound=ts is None and sid is not None and sid in self.order.levels,
            node=self.fragment_node[0], execution=self.fragment_node[1]))

    def shape(self, name: str) -> tuple[int, ...]:
        got = self.geometry.get(name)
        if got is None:
            shape = self.sched.buffer(name).shape
            got = self.geometry[name] = (shape, flat_strides(shape))
        return got[0]

    # -- replaying statements whose events do not change between executions --------------------------

    def replay_key(self, s, ctx: Ctx):
        """A key under which ``s``'s events for ``ctx`` can be replayed (``None``: not replayable): the
        statement, the agent and threads, and the values of the variables its expressions read."""
        if ctx.sym is not None:
            return None
        fv = self._free.get(id(s))
        if fv is None:
            fv = self._free[id(s)] = (s, _free_vars(s))
        names = fv[1]
        if names is None:
            return None
        env = ctx.env
        try:
            vals = tuple(env[n] for n in names)
        except KeyError:
            return None
        return (id(s), ctx.agent.index, ctx.lo, ctx.hi, ctx.tid, ctx.accesses_only, vals)

    def replay(self, key, ctx: Ctx) -> bool:
        got = self._replay.get(key)
        if got is None:
            return False
        scope = _Scope(False).id  # a new execution
        for kind, buf, stage, mode, proxy, sid, fp, tid, lo, hi, local in got:
            ev = Event(kind, ctx.agent.index, sid, ctx.path, buffer=buf, stage=stage, mode=mode, proxy=proxy,
                       ts=self.order.stamp(sid, ctx.env), fp=fp, tid=tid, lo=lo, hi=hi, scope=scope, local=local)
            self.emit(ctx.agent, ev, ctx)
        return True

    def remember(self, key, ctx: Ctx, mark: int) -> None:
        evs = self.traces[ctx.agent.index][mark:]
        if all(ev.kind == "access" for ev in evs):
            self._replay[key] = [(ev.kind, ev.buffer, ev.stage, ev.mode, ev.proxy, ev.sid, ev.fp, ev.tid, ev.lo,
                                  ev.hi, ev.local) for ev in evs]

    def const(self, e: Expr, env: dict) -> Any:
        """Value of ``e`` from ``env`` alone (``NotConstant`` if it loads or uses an unbound variable)."""
        try:
            return self.ints.value(e, env, _no_load)
        except KeyError as err:
            raise NotConstant(str(err)) from None

    def const_int(self, e: Expr, env: dict, what: str, sid) -> int:
        try:
            return int(self.const(e, env))
        except NotConstant as err:
            raise TraceError(f"{what} is not a constant at {env} ({err})", sid) from None

    def stage_const(self, name: str, first: Expr | None, env: dict) -> int | None:
        if name not in self.staged or first is None:
            return None
        try:
            stage = int(self.const(first, env))
        except NotConstant:
            return None
        versions = self.versions.get(name)
        if versions is not None and not 0 <= stage < versions:
            # the hardware has no such version: the access lands in another buffer's shared memory
            raise TraceError(f"stage {stage} of {name} at {env} is out of range: it has {versions} versions", None)
        return stage

    def barrier_stage(self, barrier: str, stage: Expr, env: dict, what: str, sid) -> int:
        """The barrier of array ``barrier`` an operation names; out of range is a schedule that cannot run (an
        mbarrier operation on an address outside the array: PTX ISA 9.7.13.15, the object must be an
        initialized mbarrier)."""
        s = self.const_int(stage, env, what, sid)
        n = self.barrier_sizes.get(barrier)
        if n is not None and not 0 <= s < n:
            raise TraceError(f"{what} is {s} at {env}, out of range for mbarrier array {barrier} of {n}", sid)
        return s

    # -- accesses ------------------------------------------------------------------------------------

    def record(self, ctx: Ctx, buf: str, mode: str, sid, *, stage: int | None, proxy: str = "generic",
               pieces=(), unknown: bool = False, flats=None, owners=None, iters=None, kind: str = "access",
               tid: Any = "ctx") -> Event | None:
        """Record an access (merged with an equal one of the same ThreadLoop / TileOp execution).

        ``pieces``: symbolic pieces; ``flats``/``owners``: listed elements; ``unknown``: possibly any
        element; ``iters``: for an access of a symbolic ThreadLoop body, its iteration box (which threads
        run it: the event's ``tid`` when there is one)."""
        if buf not in self.tracked:
            return None
        tid = ctx.tid if tid == "ctx" else tid
        ts = self.order.stamp(sid, ctx.env)
        scope = self.scope
        ev = Event(kind, ctx.agent.index, sid, ctx.path, buffer=buf, stage=stage, mode=mode, proxy=proxy, ts=ts,
                   tid=None if tid == "sym" else tid, lo=ctx.lo, hi=ctx.hi, scope=scope.id if scope else 0,
                   local=buf in self.local)
        if kind == "async_write" or scope is None:
            ev.fp = self.finish(buf, list(pieces), unknown, flats, owners)
            if kind == "async_write":
                ev.rounds = tuple(self.rounds)
                ev.inst = self.inst
                return ev  # performed by the copy, not by the agent: attached to its tma / cp_write event
            self.emit(ctx.agent, ev, ctx)
            return ev
        key = (buf, mode, sid, proxy, ts)
        rec = scope.recs.get(key)
        out: Event | None = None
        if rec is None:
            rec = scope.recs[key] = _Rec(ev)
            self.emit(ctx.agent, ev, ctx)
            out = ev
        rec.pieces += pieces
        rec.unknown |= unknown
        if flats is not None:
            rec.flats.append(flats)
            rec.owners.append(owners)
        if iters is not None:
            rec.iters.append(iters)
        rec.stages.add(stage)
        rec.tids.add(tid)
        return out

    def finish(self, buf: str, pieces: list, unknown: bool, flats, owners) -> Footprint:
        shape = self.shape(buf)
        if unknown:
            return self.space.footprint(shape, (), True)
        if flats is not None and len(flats):
            pts = self.space.points(shape, np.asarray(flats, dtype=np.int64), np.asarray(owners, dtype=np.int64))
            pieces = pieces + [pts]
        return self.space.footprint(shape, pieces)

    def close(self, scope: _Scope) -> None:
        """Give each merged access of ``scope`` its footprint, stage and thread."""
        for (buf, *_), rec in scope.recs.items():
            flats = owners = None
            if rec.flats:
                flats = np.concatenate([np.asarray(f, dtype=np.int64).reshape(-1) for f in rec.flats])
                owners = np.concatenate([np.asarray(o, dtype=np.int64).reshape(-1) for o in rec.owners])
            ev = rec.ev
            ev.fp = self.finish(buf, rec.pieces, rec.unknown, flats, owners)
            ev.stage = rec.stages.pop() if len(rec.stages) == 1 else None
            if scope.tile_op or len(rec.tids) != 1 or None in rec.tids:
                ev.tid = None
            elif rec.tids == {"sym"}:
                ev.tid = self.space.single_owner([p for p in rec.iters if p is not None])
            else:
                ev.tid = next(iter(rec.tids))

    def element(self, ctx: Ctx, buf: str, idx: tuple[Expr, ...], mode: str, sid) -> None:
        """An access of ``buf[idx]``: one element when the indices are constants here."""
        if buf not in self.tracked:
            return
        if ctx.sym is not None:
            self.sym_element(ctx, buf, idx, mode, sid)
            return
        shape = self.shape(buf)
        try:
            vals = [int(self.const(i, ctx.env)) for i in idx]
        except NotConstant:
            vals = None
        stage = self.stage_const(buf, idx[0] if idx else None, ctx.env)
        if vals is None or len(vals) != len(shape):
            self.record(ctx, buf, mode, sid, stage=stage, unknown=True)
            return
        if any(not 0 <= v < n for v, n in zip(vals, shape)):
            # outside the buffer: no element is accessed here (a load under a T.if_then_else guard that is false
            # at this point; an unguarded one is the executors' ShapeError at run time), and its flat index
            # could name another element
            return
        owner = ctx.tid
        if self.scope is not None and not self.scope.tile_op:
            # inside an enumerated ThreadLoop: list the element (merged into Points at the end)
            st = flat_strides(shape)
            self.record(ctx, buf, mode, sid, stage=stage, flats=[sum(v * s for v, s in zip(vals, st))],
                        owners=[owner if owner is not None else NONE_OWNER])
            return
        p = piece(tuple((v, 1, 1) for v in vals), (0,) * len(vals), (), 0,
                  Owner("const", owner) if owner is not None else None, None)
        self.record(ctx, buf, mode, sid, stage=stage, pieces=[p])

    def region(self, ctx: Ctx, r: Region, mode: str, sid, *, proxy: str = "generic", kind: str = "access",
               split=None, owner_tid: int | None = None, tid: Any = "ctx") -> Event | None:
        """An access of region ``r``: by ``split``'s ranks (element ``e`` to rank ``e % count``, only the
        ranks of this agent), by the one thread ``owner_tid``, or by the running threads."""
        name = r.buffer.name
        if name not in self.tracked:
            return None
        try:
            offs = [int(self.const(o, ctx.env)) for o in r.offsets]
        except NotConstant:
            offs = None
        stage = self.stage_const(name, r.offsets[0] if r.offsets else None, ctx.env)
        if offs is None:
            return self.record(ctx, name, mode, sid, stage=stage, proxy=proxy, kind=kind, unknown=True, tid=tid)
        pkey = (id(r), tuple(offs), split, owner_tid, ctx.tid)
        if pkey in self._pieces:
            p = self._pieces[pkey]
        else:
            pst = flat_strides(r.extents)
            dims = tuple((o, 1, e) for o, e in zip(offs, r.extents))
            pos0 = 0
            if r.clip:
                # past its tensor's edge only the box's elements inside the tensor are accessed (the others read
                # as zero / are dropped); each keeps its position in the whole box, which decides its owner
                box = r.inside(tuple(offs))
                dims = tuple((o + lo, 1, hi - lo) for o, (lo, hi) in zip(offs, box))
                pos0 = sum(lo * c for (lo, _), c in zip(box, pst))
            if split is not None:
                owner, filt = split
            elif owner_tid is not None:
                owner, filt = Owner("const", owner_tid), None
            elif ctx.tid is not None:
                owner, filt = Owner("const", ctx.tid), None
            else:
                owner, filt = None, None
            p = self._pieces[pkey] = piece(dims, pst, (), pos0, owner, filt)
        return self.record(ctx, name, mode, sid, stage=stage, proxy=proxy, kind=kind, pieces=[p] if p else [],
                           tid=tid)

    def whole(self, ctx: Ctx, b: Buffer, mode: str, sid, split=None) -> None:
        if b.name not in self.tracked:
            return
        self.region(ctx, Region.full(b), mode, sid, split=split)

    # -- symbolic ThreadLoop bodies --------------------------------------------------------------------

    def sym_element(self, ctx: Ctx, buf: str, idx: tuple[Expr, ...], mode: str, sid) -> None:
        sym = ctx.sym
        if any(a > b for a, b in sym.ranges.values()):
            return  # a guard no iteration passes
        shape = self.shape(buf)
        try:
            affs: list[Aff] | None = [affine(i, ctx.env, sym.ranges) for i in idx]
        except Data:
            affs = None
        except Wraps:
            raise
        except NonAffine as err:
            raise Fallback(str(err)) from None
        stage = None
        if buf in self.staged and idx:
            try:
                lo, hi = bounds(affs[0] if affs is not None else affine(idx[0], ctx.env, sym.ranges), sym.ranges)
                stage = lo if lo == hi else None
            except (Data, NonAffine):
                stage = None
        iters = self.sym_iterations(sym)
        if affs is None or len(affs) != len(shape):
            self.record(ctx, buf, mode, sid, stage=stage, unknown=True, iters=iters, tid="sym")
            return
        inside = True
        for a, n in zip(affs, shape):
            lo, hi = bounds(a, sym.ranges)
            inside = inside and 0 <= lo and hi < n
        p = self.sym_piece(affs, sym) if inside else False  # else listed, without the elements outside
        if p is not False:
            self.record(ctx, buf, mode, sid, stage=stage, pieces=[p] if p is not None else [], iters=iters,
                        tid="sym")
        else:
            flats, owners = self.sym_points(affs, sym, shape)
            self.record(ctx, buf, mode, sid, stage=stage, flats=flats, owners=owners, iters=iters, tid="sym")

    @staticmethod
    def sym_iterations(sym: _Sym) -> Piece | None:
        """The iteration box of a symbolic ThreadLoop access, as a piece over the loop's variables."""
        dims, pos0 = [], 0
        for n, st in zip(sym.names, sym.strides):
            lo, hi = sym.ranges[n]
            dims.append((0, 1, hi - lo + 1))
            pos0 += st * lo
        return piece(tuple(dims), sym.strides, (), pos0, sym.owner, sym.filt)

    def sym_piece(self, affs: list[Aff], sym: _Sym):
        """The elements ``affs`` reach over the (restricted) iteration box as a :class:`Piece` (``None``
        when empty; ``False`` when the map is not monomial)."""
        used: set[str] = set()
        dims, pcoef = [], []
        pos0 = 0
        for a in affs:
            if a.is_const:
                dims.append((a.const, 1, 1))
                pcoef.append(0)
                continue
            if len(a.terms) != 1 or a.terms[0][0] in used:
                return False
            v, c = a.terms[0]
            used.add(v)
            lo, hi = sym.ranges[v]
            st = sym.strides[sym.names.index(v)]
            if c > 0:
                dims.append((a.const + c * lo, c, hi - lo + 1))
                pcoef.append(st)
                pos0 += st * lo
            else:
                dims.append((a.const + c * hi, -c, hi - lo + 1))
                pcoef.append(-st)
                pos0 += st * hi
        free = []
        for k, n in enumerate(sym.names):
            if n not in used:
                lo, hi = sym.ranges[n]
                free.append((hi - lo + 1, sym.strides[k]))
                pos0 += sym.strides[k] * lo
        return piece(tuple(dims), tuple(pcoef), tuple(free), pos0, sym.owner, sym.filt)

    def sym_points(self, affs: list[Aff], sym: _Sym, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """The elements and owners of an affine but not monomial access, listed."""
        sizes = [sym.ranges[n][1] - sym.ranges[n][0] + 1 for n in sym.names]
        total = int(np.prod(sizes)) if sizes else 1
        self.limits.charge_elements(total)
        axes = np.meshgrid(*[np.arange(sym.ranges[n][0], sym.ranges[n][1] + 1, dtype=np.int64) for n in sym.names],
                           indexing="ij")
        vals = {n: ax.reshape(-1) for n, ax in zip(sym.names, axes)}
        pos = np.zeros(total, dtype=np.int64)
        for k, n in enumerate(sym.names):
            pos += sym.strides[k] * vals[n]
        flat = np.zeros(total, dtype=np.int64)
        inside = np.ones(total, dtype=bool)
        for a, st, size in zip(affs, flat_strides(shape), shape):
            x = np.full(total, a.const, dtype=np.int64)
            for n, c in a.terms:
                x += c * vals[n]
            flat += x * st
            inside &= (x >= 0) & (x < size)
        o = sym.owner
        if o is None:
            own = np.full(total, NONE_OWNER, dtype=np.int64)
        elif o.kind == "const":
            own = np.full(total, o.base, dtype=np.int64)
        else:
            own = o.of(pos % o.modulus)
        keep = inside  # an element outside the buffer is not accessed (see element())
        if sym.filt is not None:
            m = pos % sym.filt[0]
            keep = keep & (m >= sym.filt[1]) & (m < sym.filt[2])
        return flat[keep], own[keep]

    # -- synchronization -------------------------------------------------------------------------------

    def sync_event(self, ctx: Ctx, kind: str, barrier: str, stage: Expr, *, sid=None, parity=None,
                   tx: int = 0) -> None:
        n = ctx.threads
        if kind == "wait":
            ev = Event("wait", ctx.agent.index, sid if sid is not None else ctx.loop_sid, ctx.path, barrier=barrier,
                       bstage=self.barrier_stage(barrier, stage, ctx.env, f"stage of the wait on {barrier}", sid),
                       parity=self.const_int(parity, ctx.env, f"parity of the wait on {barrier}", sid) & 1,
                       count=n, tid=ctx.tid)
        else:
            what = "a cp.async arrive" if kind == "cp_arrive" else "an arrive"
            at = sid if sid is not None else ctx.loop_sid  # the user's arrive names its own statement
            ev = Event(kind, ctx.agent.index, at, ctx.path, barrier=barrier,
                       bstage=self.barrier_stage(barrier, stage, ctx.env, f"stage of {what} on {barrier}", at), count=n,
                       tx=tx * n, tid=ctx.tid)
        self.emit(ctx.agent, ev, ctx)

    def tma_load(self, ctx: Ctx, src: Region, dst: Region, barrier: str, stage: Expr, sid,
                 tx_bytes: int | None = None) -> None:
        nbytes = dst.numel * lookup_dtype(dst.buffer.dtype).bytes if tx_bytes is None else int(tx_bytes)
        for _ in range(ctx.threads):  # every thread that reaches it issues one copy (L5 flags n > 1)
            t = ctx.tid if ctx.tid is not None else ctx.lo
            ev = Event("tma", ctx.agent.index, sid, ctx.path, barrier=barrier,
                       bstage=self.barrier_stage(barrier, stage, ctx.env, f"stage of the TMA load on {barrier}", sid),
                       tx=nbytes, tid=t)
            self.emit(ctx.agent, ev, ctx)
            self.region(ctx, src, "r", sid)
            w = self.region(ctx, dst, "w", sid, proxy="async", kind="async_write", owner_tid=t)
            if w is not None:
                ev.accesses.append(w)

    # -- statements ----------------------------------------------------------------------------------

    def walk(self, stmts, ctx: Ctx) -> None:
        for s in stmts:
            fn = registry.lookup("trace", s)
            if fn is None:
                sid = getattr(s, "sid", None)
                raise TypeError(f"the verifier has no model of scheduled node {type(s).__module__}.{type(s).__name__}"
                                f"{f' (statement {sid})' if sid is not None else ''}: register one with "
                                f"egtile.verifier.register_model({type(s).__name__}, ...) beside its emitter, semantics "
                                "and listing (docs/rules.md, 'Tutorial: a new instruction from outside egtile')")
            if ctx.sym is not None and fn not in _SYMBOLIC:
                raise Fallback(f"{type(s).__name__} in a ThreadLoop body")
            if ctx.accesses_only and (isinstance(s, _SYNC) or getattr(registry.model(type(s)), "synchronizes", False)):
                continue
            fn(s, ctx)


_SYNC = (Wait, Arrive, ArriveExpectTx, CpAsyncArrive, SyncThreads, TmaLoad)
_SYMBOLIC: set = set()  # trace handlers that support a symbolic ThreadLoop body


def symbolic(fn):
    """Mark a trace handler as able to run inside a symbolic ``ThreadLoop`` body (its accesses go through
    :meth:`Ctx.element`, whose iteration variables may be symbolic)."""
    _SYMBOLIC.add(fn)
    return fn


# ----------------------------------------------------------------------------------------------------
# Replay keys


def _expr_vars(e: Expr, out: set[str]) -> None:
    match e:
        case Var(name=n):
            out.add(n)
        case BinOp(a=a, b=b):
            _expr_vars(a, out)
            _expr_vars(b, out)
        case UnOp(a=a) | Cast(value=a):
            _expr_vars(a, out)
        case Select(cond=c, a=a, b=b):
            _expr_vars(c, out)
            _expr_vars(a, out)
            _expr_vars(b, out)
        case Load(indices=idx):
            for i in idx:
                _expr_vars(i, out)
        case AddressOf(load=ld):
            _expr_vars(ld, out)
        case _:
            pass


def _free_vars(s) -> tuple[str, ...] | None:
    """The variables a ThreadLoop of leaves and guards, or a SIMT tile op, reads from its environment
    (``None``: another statement, whose events are not replayed)."""
    out: set[str] = set()
    bound: set[str] = set()

    def leaf(st) -> None:
        match st:
            case Store(indices=idx, value=v) | AtomicAdd(indices=idx, value=v):
                for i in idx:
                    _expr_vars(i, out)
                _expr_vars(v, out)
            case Extern(args=args):
                for x in args:
                    _expr_vars(x, out)

    def body(stmts) -> bool:
        for x in stmts:
            if type(x) is Leaf:
                leaf(x.stmt)
            elif type(x) is SIf:
                _expr_vars(x.cond, out)
                if not (body(x.then_body) and body(x.else_body)):
                    return False
            else:
                return False
        return True

    if type(s) is ThreadLoop:
        bound |= {v.name for v in s.vars}
        if not body(s.body):
            return None
    elif type(s) is TileOp:
        op = s.op
        regions = []
        match op:
            case Copy(src=a, dst=b):
                regions = [a, b]
            case Fill(dst=b, value=v):
                regions = [b]
                _expr_vars(v, out)
            case Gemm(a=a, b=b, c=c):
                regions = [a, b, c]
            case Reduce():
                regions = []
        for r in regions:
            for o in r.offsets:
                _expr_vars(o, out)
    else:
        return None
    return tuple(sorted(out - bound))


def _restore(env: dict, name: str, saved) -> None:
    if saved is None:
        env.pop(name, None)
    else:
        env[name] = saved
