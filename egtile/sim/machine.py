"""One block of a scheduled kernel: explicit threads as Python generators, mbarriers, async copies.

Each thread runs the block's statements (``ir.Scheduled`` execution model) in a generator that yields
at every synchronization and async point: before a ``Wait`` or ``SyncThreads`` (a request the scheduler
grants or blocks on) and after every arrive, async-copy issue, TMA store and ``cp.async`` tile op (a
plain preemption point). Everything between two yields runs atomically, which is sound for race
detection because races are decided by happens-before, not by the interleaving; the interleaving only
decides which values are read, and the policy (:mod:`egtile.sim.policy`) picks it.

Async copies (TMA loads, ``cp.async``) are queued at issue with the source already read; the policy
decides when each completes. Completion writes the destination, then credits the mbarrier
(``complete_tx``) or releases the issuing thread's deferred ``cp.async.mbarrier.arrive.noinc``.

Each statement runs through the semantics registered for its class (:mod:`egtile.sim.semantics`;
egtile's own in :mod:`egtile.sim.ops`), which uses only the handler API of :class:`Block`.

Dynamic effect tracking for repeated iterations: a thread marks itself when it writes non-local memory,
performs an atomic, or calls an extern that receives a non-local pointer or is not declared pure (the
definition of a nonlocal effect in ``docs/soundness.md``). Each ``ThreadLoop`` iteration (and each leaf
outside any ``ThreadLoop``) whose execution had such an effect is recorded with its loop environment; an
entry recorded by more than one thread is a repeated nonlocal iteration.
"""

from __future__ import annotations

import bisect
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from egtile import limits
from egtile.errors import EgtileError, SimulationError, SourceLoc
from egtile.evaluate import poison, round_to
from egtile.ir.kernel import Buffer, Copy, Expr, Region, Store, walk
from egtile.ir.scheduled import Leaf, RoleSplit, Scheduled, SStmt, TileOp, swalk
from egtile.layout.fragment import RowFragment
from egtile.sim.clocks import SlotLayout, join
from egtile.sim.compiled import compile_expr
from egtile.sim.mbarrier import MBarrierState, NamedBarrier
from egtile.sim.memory import Agent, Mem, RaceLog, Shadow
from egtile.sim.report import BarrierError, BlockedThread, Deadlock, RepeatedIteration
from egtile.sim.semantics import SEMANTICS
from egtile.sim.tileops import copy_elements, region_flats

MISSING = object()
"""The saved value of a loop variable the environment did not have (see :meth:`Block.restore`)."""
# set on an error once a statement has added its sid and user line, so enclosing statements leave it alone
_LOCATED = "_sim_located"


# ----------------------------------------------------------------------------------------------------
# Static view of a schedule


class Program:
    """What every block of one schedule shares: buffers, barrier specs, clock layout, compiled
    expressions."""

    def store_parts(self, s: Store):
        """(value fn, index fns, buffer name, description) of a ``Store``, compiled once."""
        hit = self._compiled.get(id(s))
        if hit is None or hit[0] is not s:
            parts = (compile_expr(s.value), tuple(compile_expr(i) for i in s.indices), s.buffer.name,
                     f"statement {s.sid}")
            hit = self._compiled[id(s)] = (s, parts)
        return hit[1]

    def compiled(self, e: Expr):
        hit = self._compiled.get(id(e))
        if hit is None or hit[0] is not e:
            hit = self._compiled[id(e)] = (e, compile_expr(e))
        return hit[1]

    def __init__(self, sched: Scheduled) -> None:
        if sched.threads > 1024 or sched.threads < 1:
            raise SimulationError(f"schedule of {sched.kernel.name!r} launches {sched.threads} threads per block; "
                                  "expected 1..1024 (CUDA limit)", sched.kernel.loc)
        self.sched = sched
        self.threads = sched.threads
        # the user's line of each tile-IR statement, for runtime errors (scheduled statements carry only sids)
        self.locs: dict[int, SourceLoc] = {st.sid: st.loc for st in walk(sched.kernel.body) if st.loc is not None}
        self.buffers: dict[str, Buffer] = {b.name: b for b in sched.kernel.params}
        for b in sched.buffers:
            self.buffers[b.name] = b
        self.slots = SlotLayout.build(sched.threads, [(b.name, b.stages) for b in sched.barriers])
        self.written_globals = self._written_globals(sched)
        # the role each thread takes in the first warp-specialized region (policies rank threads by it
        # before they enter the region)
        self.home_role = [""] * sched.threads
        for s in swalk(sched.body):
            if isinstance(s, RoleSplit):
                for r in s.roles:
                    for t in range(max(0, r.threads.begin), min(sched.threads, r.threads.end)):
                        self.home_role[t] = r.name
                break
        self._compiled: dict[int, tuple[Expr, Any]] = {}
        # register fragments: element (flat, row-major) -> the thread that holds it (egtile.ir.fragment)
        self.owners: dict[str, np.ndarray] = {}
        # row fragments (replicated, egtile.layout.RowFragment): each holder keeps its own copy of its rows
        self.row_frags: dict[str, Any] = {}
        for name, frag in sched.fragments:
            if isinstance(frag, RowFragment):
                self.row_frags[name] = frag
                continue
            own = np.empty(frag.rows * frag.cols, dtype=np.int64)
            for t in range(frag.num_threads):
                for _v, r, c in frag.elements(t):
                    own[r * frag.cols + c] = t
            self.owners[name] = own

    def _written_globals(self, sched: Scheduled) -> set[str]:
        """Kernel parameters the schedule may write (only those need shadow state), from each statement's
        ``Semantics.writes``; also checks that every statement has semantics.

        Raises:
            SimulationError: a statement whose class has no registered semantics (names it and the registry).
        """
        import egtile.sim.ops  # noqa: F401  (egtile's own semantics; already loaded by egtile.sim)

        out: set[str] = set()
        for s in swalk(sched.body):
            sem = SEMANTICS.get(type(s))
            if sem is None:
                sid = _sid_of(s)
                raise SimulationError(f"schedule of {sched.kernel.name!r}: {SEMANTICS.missing(type(s))}",
                                      self.locs.get(sid) if sid is not None else sched.kernel.loc)
            if sem.writes is not None:
                out.update(sem.writes(s))
        return {n for n in out if any(p.name == n for p in sched.kernel.params)}


def _sid_of(s: SStmt) -> int | None:
    if isinstance(s, Leaf):
        return s.stmt.sid
    if isinstance(s, TileOp):
        return s.op.sid
    return getattr(s, "sid", None)


# ----------------------------------------------------------------------------------------------------
# Threads, requests, async operations


class ThreadState:
    """One simulated thread."""

    def __init__(self, tid: int, slots: SlotLayout, env: dict[str, int]) -> None:
        self.tid = tid
        self.vc = slots.zeros()
        # mbarrier.init, fence.mbarrier_init and the CTA barrier before the body: every thread has
        # synchronized with every other once (clock 1), then starts its own epoch 2.
        self.vc[: slots.threads] = 1
        self.vc[tid] = 2
        self.agent = Agent(tid, 2, tid, self.vc, fences=0)
        self.env: dict[str, Any] = dict(env)
        self.role = ""
        self.home = ""  # the role it will take (set by the block)
        self.load = None  # load(buffer, index) for expression evaluation (set by the block)
        self.locals: dict[str, Mem] = {}
        self.cp_seq = 0
        self.cp_open: set[int] = set()
        self.cp_deferred: list[tuple[MBarrierState, int, np.ndarray, int, int | None]] = []
        self.cp_arrived = 0  # the cp.async batches an arrival of this thread covers (seq <= cp_arrived)
        self.effect = False
        self.loop_depth = 0  # ThreadLoop nesting
        self.sid: int | None = None
        self.gen: Generator | None = None
        self.req: WaitReq | SyncReq | None = None
        self.done = False

    def tick(self) -> None:
        """Start a new epoch after a release (arrive, async issue, barrier)."""
        self.vc[self.tid] += 1
        self.agent.clock = int(self.vc[self.tid])


@dataclass
class WaitReq:
    bar: MBarrierState
    stage: int
    parity: int
    sid: int | None


@dataclass
class SyncReq:
    barrier_id: int
    count: int
    sid: int | None


@dataclass
class AsyncOp:
    """An issued asynchronous copy, completed when the policy says: credited to ``bar[stage]`` with
    ``complete_tx`` (a TMA load) or, without ``bar``, a batch of the issuer's cp.async group ``seq``."""

    kind: str  # the access kind in race reports: "tma-load", "cp.async", ...
    tid: int
    sid: int | None
    vc: np.ndarray
    writes: list[tuple[Mem, int, Any]]
    bar: MBarrierState | None = None
    stage: int = 0
    nbytes: int = 0
    seq: int = 0
    proxy: bool = False  # an async-proxy write (a TMA load): the generic accesses it overwrites need a fence


class IndexedSet:
    """A set of ints with O(1) add, remove and indexed access (for random choice)."""

    def __init__(self, items=()) -> None:
        self.items: list[int] = []
        self.pos: dict[int, int] = {}
        for x in items:
            self.add(x)

    def add(self, x: int) -> None:
        if x not in self.pos:
            self.pos[x] = len(self.items)
            self.items.append(x)

    def discard(self, x: int) -> None:
        i = self.pos.pop(x, None)
        if i is None:
            return
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.pos[last] = i

    def __contains__(self, x: int) -> bool:
        return x in self.pos

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):
        return iter(self.items)


# ----------------------------------------------------------------------------------------------------
# The block


@dataclass
class BlockOutcome:
    deadlock: Deadlock | None
    repeated: list[RepeatedIteration]
    barrier_errors: list[BarrierError] = field(default_factory=list)
    steps: int = 0


class Block:
    """The dynamic state of one block, and the API that statement semantics use.

    The handler API (:mod:`egtile.sim.semantics`; every handler receives the block ``m``, the node and the
    thread ``th``, a :class:`ThreadState` with ``tid``, ``role``, ``env`` (variable -> value) and ``sid``,
    the statement id errors name, which a handler sets when it starts):

    * control: :meth:`run` (a nested statement list, a generator), :data:`PREEMPT`, :meth:`ev`
      (an expression's value in ``th``'s environment); thread sets are ``egtile.ir.ThreadRange`` values
      (``th.tid in threads``);
    * memory, race-checked: :meth:`mem`, :meth:`region`, :meth:`read`, :meth:`write`, :meth:`atomic_add`,
      :meth:`gather` (this thread's share of a region copy's source values), :meth:`proxy_read` and
      :meth:`fence_proxy_async` (async-proxy reads and the fence they need);
    * mbarriers: :meth:`barrier`, :meth:`stage_of`, :meth:`arrive`, :meth:`expect_tx`, :meth:`complete_tx`,
      :meth:`wait` (a request to yield); CTA barriers: :meth:`sync` (a request to yield);
    * asynchronous copies, completed when the policy says: :meth:`issue_async` (completes transaction
      bytes on an mbarrier stage, like a TMA load), :meth:`issue_cp_async` and :meth:`cp_async_arrive`
      (per-thread ``cp.async`` groups);
    * errors: raise :class:`~egtile.errors.SimulationError` (or ``ShapeError``, ...); :meth:`run` adds the
      statement, thread, block and user line.
    """

    PREEMPT: tuple[None] = (None,)
    """Return this from a handler to yield one plain preemption point after the statement."""

    def __init__(self, prog: Program, coords: tuple[int, ...], globals_: dict[str, Mem], log: RaceLog,
                 budget: list[int] | None = None) -> None:
        self.prog = prog
        self.coords = coords
        # statements every thread may still run in this simulate() call, shared by its blocks
        # (EGTILE_MAX_CPU_STEPS, egtile.limits): a step never blocks, so a long serial loop is one
        # scheduling step and only this counter bounds it
        self.budget = budget if budget is not None else [limits.limit("EGTILE_MAX_CPU_STEPS")]
        self.max_steps = self.budget[0]
        self.mems: dict[str, Mem] = dict(globals_)
        for m in globals_.values():
            if m.shadowed:
                m.reset_shadow()
        for b in prog.sched.buffers:
            if b.scope in ("shared", "fragment") and b.name not in prog.row_frags:
                self.mems[b.name] = Mem(b, poison(b.dtype, b.shape).reshape(-1), shadowed=True)
                self.mems[b.name].owner = prog.owners.get(b.name)
        self.shadow = Shadow(prog.slots, log)
        self.shadow.block = coords
        self.bars = {b.name: MBarrierState(b, prog.slots) for b in prog.sched.barriers}
        self.named: dict[int, NamedBarrier] = {}
        env = {v.name: c for v, c in zip(prog.sched.kernel.block_vars, coords)}
        self.threads = [ThreadState(t, prog.slots, env) for t in range(prog.threads)]
        for th in self.threads:
            th.home = prog.home_role[th.tid]
            th.load = self._loader(th)
        # each thread's fence.proxy.async: (its clock at each, its vector clock at each)
        self.fence_log: dict[int, tuple[list[int], list[np.ndarray]]] = {}
        self.runnable = IndexedSet(range(prog.threads))
        self.asyncs: list[AsyncOp] = []
        self.iters: dict[tuple, list[int]] = {}
        self.flats_cache: dict[tuple, np.ndarray] = {}  # region flat indices (regions live in the schedule)
        self.errors: list[BarrierError] = []
        self.last: int | None = None
        # run when no thread can run any more, before the leftover checks (async work that still completes)
        self.at_finish: list = []
        # asynchronous completions credited to a phase: (barrier, stage, the phase count once that phase
        # completes, sid, what: "a TMA load" | "a cp.async arrival")
        self.landed: list[tuple[MBarrierState, int, int, int | None, str]] = []
        self.cp_issued: list[tuple[int, int, int | None]] = []  # (tid, seq, sid) of every cp.async batch
        for th in self.threads:
            th.gen = self.run(prog.sched.body, th)

    # -- memory -------------------------------------------------------------------------------------

    def mem(self, name: str, th: ThreadState) -> Mem:
        """The storage of buffer ``name`` as ``th`` sees it (a ``local`` buffer is per thread, created
        poisoned on first use).

        Raises:
            SimulationError: ``name`` is neither a kernel parameter nor a scheduled buffer.
        """
        m = self.mems.get(name)
        if m is not None:
            return m
        m = th.locals.get(name)
        if m is None and name in self.prog.row_frags:
            m = th.locals[name] = self._row_copy(name, th)
        if m is None:
            b = self.prog.buffers.get(name)
            if b is None:
                raise SimulationError(f"statement {th.sid} accesses buffer {name!r}, which is neither a kernel "
                                      "parameter nor in Scheduled.buffers")
            m = Mem(b, poison(b.dtype, b.shape).reshape(-1), shadowed=False)
            th.locals[name] = m
        return m

    def _row_copy(self, name: str, th: ThreadState) -> Mem:
        """``th``'s own copy of row fragment ``name``: poisoned, and only the rows it holds are accessible (a
        replica is a register of its holder; another row is no register of this thread)."""
        frag = self.prog.row_frags[name]
        b = self.prog.buffers[name]
        m = Mem(replace(b, scope="local"), poison(b.dtype, b.shape).reshape(-1), shadowed=False)
        own = np.full(frag.rows, -1, dtype=np.int64)
        if th.tid < frag.num_threads:
            for _v, r, _c in frag.elements(th.tid):
                own[r] = th.tid
        m.owner = own
        m.name = name
        return m

    def ev(self, e: Expr, th: ThreadState) -> Any:
        """The value of expression ``e`` for ``th`` (its loads are race-checked reads)."""
        return self.prog.compiled(e)(th.env, th.load)

    def _loader(self, th: ThreadState):
        return lambda buf, idx: self._load(buf, idx, th)

    def _load(self, buf: Buffer, idx: tuple[int, ...], th: ThreadState) -> Any:
        m = self.mem(buf.name, th)
        return self.read(m, m.flat(idx, f"statement {th.sid}"), th, th.sid)

    def region(self, r: Region, th: ThreadState, what: str) -> tuple[Mem, np.ndarray]:
        """The buffer of region ``r`` and the flat indices of its elements, row-major (offsets evaluated
        for ``th``).

        Raises:
            ShapeError: the region leaves its buffer (``what`` names the statement).
        """
        return region_flats(self, r, th, what)

    def _not_owner(self, m: Mem, f: int, th: ThreadState, what: str) -> SimulationError:
        if m.owner[f] < 0:
            return SimulationError(f"thread {th.tid} {what} element {m.unflat(f)} of row fragment {m.name}, of which it "
                                   "holds no replica (a register is private to its thread)")
        return SimulationError(f"thread {th.tid} {what} element {m.unflat(f)} of register fragment {m.name}, which only "
                               f"thread {int(m.owner[f])} holds (a register is private to its thread)")

    def read(self, m: Mem, f: int, th: ThreadState, sid: int | None, op: str = "read") -> Any:
        """Element ``f`` of ``m``, read by ``th`` (race-checked when ``m`` is shadowed; an element of a
        register fragment only by the thread that holds it).

        Raises:
            SimulationError: ``th`` reads an element of a register fragment another thread holds.
        """
        if m.owner is not None and m.owner[f] != th.tid:
            raise self._not_owner(m, f, th, "reads")
        if m.shadowed:
            self.shadow.read(m, f, th.agent, sid, op)
        return m.get(f)

    def write(self, m: Mem, f: int, value: Any, th: ThreadState, sid: int | None, op: str = "write") -> None:
        """Store ``value`` (rounded to ``m``'s dtype) into element ``f`` of ``m`` as ``th``.

        Raises:
            SimulationError: ``th`` writes an element of a register fragment another thread holds.
        """
        if m.owner is not None and m.owner[f] != th.tid:
            raise self._not_owner(m, f, th, "writes")
        if m.shadowed:
            self.shadow.write(m, f, th.agent, sid, op)
        if m.scope != "local":
            th.effect = True
        m.set(f, value)

    def read_many(self, m: Mem, flats: np.ndarray, th: ThreadState, sid: int | None, op: str = "read") -> np.ndarray:
        """:meth:`read` of the elements ``flats`` (an int array) of ``m`` in order, as one call: their values (``m``'s
        storage array type). Raises as :meth:`read` does, naming the first element ``th`` does not hold."""
        if m.owner is not None:
            bad = m.owner[flats] != th.tid
            if bad.any():
                raise self._not_owner(m, int(flats[int(bad.argmax())]), th, "reads")
        if m.shadowed:
            self.shadow.read_many(m, flats.tolist(), th.agent, sid, op)
        return m.data[flats]

    def write_many(self, m: Mem, flats: np.ndarray, values: np.ndarray, th: ThreadState, sid: int | None,
                   op: str = "write") -> None:
        """:meth:`write` of ``values`` (already converted to ``m``'s dtype: :func:`egtile.evaluate.cast_array`) into
        the distinct elements ``flats`` of ``m``, in order, as one call."""
        if m.owner is not None:
            bad = m.owner[flats] != th.tid
            if bad.any():
                raise self._not_owner(m, int(flats[int(bad.argmax())]), th, "writes")
        if m.shadowed:
            self.shadow.write_many(m, flats.tolist(), th.agent, sid, op)
        if m.scope != "local":
            th.effect = True
        m.data[flats] = values

    def quiet(self, m: Mem, flats: np.ndarray, th: ThreadState, read: bool) -> bool:
        """Whether ``th`` may read (``read``) and then write each element of ``flats`` of ``m`` as one batch: it holds
        them all, and no check would report (:meth:`Shadow.quiet`), so the batch leaves what the per-element
        accesses would and reports nothing."""
        if m.owner is not None and (m.owner[flats] != th.tid).any():
            return False
        return not m.shadowed or self.shadow.quiet(m, flats, th.agent, read, True)

    def atomic_add(self, m: Mem, f: int, value: Any, th: ThreadState, sid: int | None) -> Any:
        """``atomicAdd`` of ``value`` to element ``f`` of ``m`` as ``th``; returns the old value."""
        if m.owner is not None and m.owner[f] != th.tid:
            raise self._not_owner(m, f, th, "updates")
        if m.shadowed:
            self.shadow.atomic(m, f, th.agent, sid)
        th.effect = True
        old = m.get(f)
        m.set(f, round_to(m.dtype, old + round_to(m.dtype, value)))
        return old

    def gather(self, src: Region, dst: Region, th: ThreadState, sid: int, what: str, *, op: str = "read",
               rank: int = 0, count: int = 1) -> list[tuple[Mem, int, Any]]:
        """Read the source elements of copy ``src -> dst`` that destination elements ``rank, rank + count,
        ...`` (row-major) need, as ``th`` with access kind ``op``; returns ``(dst mem, flat, value)`` to
        write, now (:meth:`write`) or at an async completion (:meth:`issue_async`).

        Raises:
            ShapeError: the extents differ once unit dimensions are dropped, or a region leaves its buffer.
        """
        return copy_elements(self, Copy(sid, src, dst), th, rank, count, what, src_op=op)

    def proxy_read(self, m: Mem, f: int, th: ThreadState, sid: int | None) -> Any:
        """Element ``f`` of ``m`` read through the async proxy (a TMA store's source): race-checked, and a
        generic-proxy write with no ``fence.proxy.async`` on its causality path to the read is a ``proxy`` race."""
        self.shadow.proxy_read(m, f, th.agent, sid, self.fence_cover(th.vc))
        return m.get(f)

    def fence_proxy_async(self, th: ThreadState) -> None:
        """``fence.proxy.async`` by ``th``: its earlier generic-proxy writes are visible to the async proxy."""
        # the fence ends the thread's epoch: an access of the epoch comes before it, one of the next after it, and
        # an agent that knows the epoch knows the fence (a release ends an epoch too)
        clocks, snaps = self.fence_log.setdefault(th.tid, ([], []))
        clocks.append(int(th.vc[th.tid]))
        snaps.append(th.vc.copy())
        th.tick()

    def fence_cover(self, vc: np.ndarray) -> np.ndarray | None:
        """The join of the clocks of the ``fence.proxy.async`` that happen before an agent with clock ``vc`` (for
        each thread, its latest such fence: a thread's fence clocks only grow); ``None`` if there is none. An
        access of slot ``s`` at clock ``c`` is fenced for that agent when the result's ``[s] >= c``."""
        out = None
        for tid, (clocks, snaps) in self.fence_log.items():
            k = bisect.bisect_right(clocks, int(vc[tid])) - 1
            if k >= 0:
                out = snaps[k].copy() if out is None else np.maximum(out, snaps[k], out=out)
        return out

    # -- barriers -----------------------------------------------------------------------------------

    def barrier(self, name: str) -> MBarrierState:
        """The mbarrier array ``name`` of this block.

        Raises:
            SimulationError: the schedule declares no such array.
        """
        try:
            return self.bars[name]
        except KeyError:
            raise SimulationError(f"mbarrier {name!r} is used but not declared in Scheduled.barriers") from None

    def stage_of(self, bar: MBarrierState, e: Expr, th: ThreadState, what: str) -> int:
        """The value of stage expression ``e`` for ``th``, checked against ``bar``'s stages.

        Raises:
            SimulationError: the stage is out of range (``what`` names the statement kind).
        """
        s = int(self.ev(e, th))
        bar.check_stage(s, f"{what} on {bar.name} (thread {th.tid}, block {self.coords})")
        return s

    def arrive(self, bar: MBarrierState, stage: int, th: ThreadState) -> None:
        """One arrival of ``th`` on ``bar[stage]``: a release of everything ``th`` did so far (a waiter of
        the phase it completes acquires it); ``th`` starts a new epoch."""
        self._arrive(bar, stage, th.vc, th)

    def expect_tx(self, bar: MBarrierState, stage: int, nbytes: int) -> None:
        """``expect_tx``: ``bar[stage]``'s current phase also waits for ``nbytes`` transaction bytes."""
        bar.expect_tx(stage, nbytes)

    def complete_tx(self, bar: MBarrierState, stage: int, nbytes: int) -> None:
        """``complete_tx`` of ``nbytes`` on ``bar[stage]`` (wakes the waiters if the phase completes)."""
        self._wake(bar.complete_tx(stage, nbytes))

    def wait(self, bar: MBarrierState, stage: int, parity: int, sid: int | None) -> WaitReq:
        """The request to yield for ``mbarrier.try_wait.parity``: the thread blocks until the phase of
        parity ``parity`` of ``bar[stage]`` has completed, then acquires its clock."""
        return WaitReq(bar, stage, parity, sid)

    def sync(self, barrier_id: int, count: int, sid: int | None) -> SyncReq:
        """The request to yield for ``bar.sync barrier_id, count``."""
        return SyncReq(barrier_id, count, sid)

    # -- asynchronous copies ------------------------------------------------------------------------

    def issue_async(self, th: ThreadState, sid: int | None, writes: list[tuple[Mem, int, Any]], *, op: str,
                    barrier: MBarrierState, stage: int, tx_bytes: int) -> None:
        """Issue an asynchronous copy whose ``writes`` land when the policy completes it, as an agent of
        ``barrier[stage]``'s current phase (ordered only after what ``th`` did before issuing), then
        credit ``tx_bytes`` with ``complete_tx`` (PTX ISA ``.mbarrier::complete_tx::bytes``). ``op`` names
        the access in race reports (``"tma-load"``). ``th`` starts a new epoch."""
        # a TMA load writes through the async proxy: the generic accesses it overwrites need a fence.proxy.async on
        # their causality path to the issue (PTX ISA 9.7.13.3.2), checked when it lands against the issuer's clock
        self.asyncs.append(AsyncOp(op, th.tid, sid, th.vc.copy(), writes, barrier, stage, tx_bytes, proxy=True))
        th.tick()

    def issue_cp_async(self, th: ThreadState, sid: int | None, writes: list[tuple[Mem, int, Any]],
                       op: str = "cp.async") -> None:
        """Issue a batch of ``th``'s ``cp.async`` copies: the writes land when the policy completes them, as
        the agent of ``th``'s cp.async group; a later :meth:`cp_async_arrive` of ``th`` fires after them."""
        th.cp_seq += 1
        th.cp_open.add(th.cp_seq)
        self.cp_issued.append((th.tid, th.cp_seq, sid))
        self.asyncs.append(AsyncOp(op, th.tid, sid, th.vc.copy(), writes, seq=th.cp_seq))
        th.tick()

    def cp_async_arrive(self, bar: MBarrierState, stage: int, th: ThreadState) -> None:
        """``cp.async.mbarrier.arrive.noinc``: an arrival on ``bar[stage]`` once every ``cp.async`` ``th``
        issued so far has completed (deferred until then)."""
        upto = th.cp_seq
        th.cp_arrived = upto
        vc = th.vc.copy()
        slot = self.prog.slots.cp_slot(th.tid)
        vc[slot] = max(vc[slot], upto)
        if any(q <= upto for q in th.cp_open):
            th.cp_deferred.append((bar, stage, vc, upto, th.sid))
        else:
            self.landed.append((bar, stage, bar.phase[stage] + 1, th.sid, "a cp.async arrival"))
            self._arrive(bar, stage, vc, th)
            return
        th.tick()

    # -- statements ---------------------------------------------------------------------------------

    def run(self, stmts: tuple[SStmt, ...], th: ThreadState) -> Generator:
        """Run ``stmts`` as thread ``th``, each through its registered semantics; yields requests (see
        the module docstring).

        Raises:
            EgtileError: an error while running a statement, re-raised with the innermost enclosing
                statement's sid, thread and block in the message and its user line (``SourceLoc``).
        """
        table = SEMANTICS.table
        for s in stmts:
            self.budget[0] -= 1
            if self.budget[0] < 0:
                raise limits.step_error(self.prog.sched.kernel.name, self.max_steps, "simulator")
            try:
                sem = table.get(type(s)) or SEMANTICS.lookup(type(s))
                requests = sem.run(self, s, th)
                if requests is not None:
                    yield from requests
            except EgtileError as err:
                located = self._locate(err, s, th)
                if located is err:
                    raise
                raise located from None

    def _locate(self, err: EgtileError, s: SStmt, th: ThreadState) -> EgtileError:
        """``err`` naming statement ``s`` (sid, thread, block) and carrying its user line; ``err`` itself
        when ``s`` has no sid (barrier operations the schedule added: the enclosing statement names it)
        or when a statement nested in ``s`` already named itself."""
        if getattr(err, _LOCATED, False):
            return err
        sid = _sid_of(s)
        if sid is None:
            return err
        own = s.stmt.loc if isinstance(s, Leaf) else s.op.loc if isinstance(s, TileOp) else None
        loc = err.loc or self.prog.locs.get(sid) or own
        located = type(err)(f"{err.message} (statement {sid}, thread {th.tid}, block {self.coords})", loc)
        setattr(located, _LOCATED, True)
        return located

    @staticmethod
    def restore(th: ThreadState, name: str, saved: Any) -> None:
        """Put variable ``name`` of ``th`` back to ``saved`` (:data:`MISSING`: remove it), after a loop."""
        if saved is MISSING:
            th.env.pop(name, None)
        else:
            th.env[name] = saved

    def _arrive(self, bar: MBarrierState, stage: int, vc: np.ndarray, th: ThreadState | None) -> None:
        self._wake(bar.arrive(stage, vc))
        if th is not None:
            th.tick()

    def _wake(self, tids: list[int]) -> None:
        for t in tids:
            self.runnable.add(t)

    def complete(self, i: int) -> None:
        """Complete the ``i``-th pending async copy: write its data, then credit its barrier."""
        op = self.asyncs.pop(i)
        if op.bar is not None:
            slot, clock = op.bar.completion_epoch(op.stage)
        else:
            slot, clock = self.prog.slots.cp_slot(op.tid), op.seq
        agent = Agent(slot, clock, op.tid, op.vc)
        cover = self.fence_cover(op.vc) if op.proxy else None  # the fences the issue knows of
        writes = op.writes
        i, n = 0, len(writes)
        while i < n:  # each run of consecutive writes to one buffer as one batch (the same checks, in order)
            m = writes[i][0]
            j = i + 1
            while j < n and writes[j][0] is m:
                j += 1
            if m.shadowed:
                if op.proxy:
                    self.shadow.unfenced(m, [f for _, f, _ in writes[i:j]], agent, op.sid, cover, op.kind, reads=True)
                if j - i > 1:
                    self.shadow.write_many(m, [f for _, f, _ in writes[i:j]], agent, op.sid, op.kind)
                else:
                    self.shadow.write(m, writes[i][1], agent, op.sid, op.kind)
            for _, f, v in writes[i:j]:
                m.set(f, v)
            i = j
        if op.bar is not None:
            self.landed.append((op.bar, op.stage, op.bar.phase[op.stage] + 1, op.sid, "a TMA load"))
            self._wake(op.bar.complete_tx(op.stage, op.nbytes))
            return
        th = self.threads[op.tid]
        th.cp_open.discard(op.seq)
        keep = []
        for bar, stage, vc, upto, sid in th.cp_deferred:
            if any(q <= upto for q in th.cp_open):
                keep.append((bar, stage, vc, upto, sid))
            else:
                self.landed.append((bar, stage, bar.phase[stage] + 1, sid, "a cp.async arrival"))
                self._arrive(bar, stage, vc, None)
        th.cp_deferred = keep

    # -- scheduling ---------------------------------------------------------------------------------

    def step(self, tid: int) -> None:
        """Run thread ``tid`` until its next yield (or until it blocks)."""
        th = self.threads[tid]
        self.last = tid
        req = th.req
        while True:
            if isinstance(req, WaitReq):
                if not req.bar.ready(req.stage, req.parity):
                    self.runnable.discard(tid)
                    req.bar.waiters[req.stage].append(tid)
                    th.req = req
                    return
                clock = req.bar.acquired(req.stage)
                if clock is not None:
                    join(th.vc, clock)
                th.req = None
            try:
                req = th.gen.send(None)
            except StopIteration:
                th.done = True
                th.req = None
                self.runnable.discard(tid)
                return
            if req is None:
                return
            if isinstance(req, SyncReq):
                self._sync(th, req)
                return
            # a WaitReq: check it now (loop), so a wait that is already satisfied does not cost a step

    def _sync(self, th: ThreadState, req: SyncReq) -> None:
        nb = self.named.get(req.barrier_id)
        if nb is None:
            nb = self.named[req.barrier_id] = NamedBarrier(req.barrier_id, req.count, self.prog.slots.zeros())
        if not nb.arrived:
            nb.count = req.count
        elif nb.count != req.count:
            self.errors.append(BarrierError(self.coords, f"bar.sync {req.barrier_id}", 0, nb.generation,
                                            f"thread {th.tid} arrives with thread count {req.count} while "
                                            f"{len(nb.arrived)} threads wait with count {nb.count}"))
        nb.arrived.append(th.tid)
        join(nb.acc, th.vc)
        th.req = req
        self.runnable.discard(th.tid)
        self._complete_round(nb)

    def bar_arrive(self, th: ThreadState, barrier_id: int, count: int, sid: int | None) -> None:
        """``bar.arrive barrier_id, count`` (PTX ISA 9.7.13.4): ``th`` counts toward the current round of the
        named barrier without waiting; its earlier accesses are released to the threads the round wakes."""
        nb = self.named.get(barrier_id)
        if nb is None:
            nb = self.named[barrier_id] = NamedBarrier(barrier_id, count, self.prog.slots.zeros())
        if not nb.arrived and not nb.arrivals:
            nb.count = count
        elif nb.count != count:
            self.errors.append(BarrierError(self.coords, f"bar.arrive {barrier_id}", 0, nb.generation,
                                            f"thread {th.tid} arrives with thread count {count} (sid {sid}) while "
                                            f"the round has count {nb.count}"))
        nb.arrivals += 1
        nb.arrive_sids.append(sid)
        join(nb.acc, th.vc)
        th.tick()
        self._complete_round(nb)

    def _complete_round(self, nb: NamedBarrier) -> None:
        if len(nb.arrived) + nb.arrivals >= nb.count:
            for t in nb.arrived:
                o = self.threads[t]
                join(o.vc, nb.acc)
                o.tick()
                o.req = None
                self.runnable.add(t)
            nb.arrived = []
            nb.arrivals = 0
            nb.arrive_sids = []
            nb.acc = self.prog.slots.zeros()
            nb.generation += 1

    def blocking_point(self, th: ThreadState) -> BlockedThread:
        req = th.req
        if isinstance(req, WaitReq):
            loc = self.prog.locs.get(req.sid) if req.sid is not None else None
            at = f", {loc.file}:{loc.line}" if loc is not None else ""  # the user's line of a hand-written wait
            point = (f"Wait {req.bar.name}[{req.stage}] parity {req.parity} (sid {req.sid}{at}): "
                     f"{req.bar.describe(req.stage)}")
            return BlockedThread(th.tid, th.role, point, req.sid)
        if isinstance(req, SyncReq):
            nb = self.named.get(req.barrier_id)
            n = len(nb.arrived) if nb else 0
            point = f"bar.sync {req.barrier_id} (count {req.count}): {n} of {req.count} threads arrived"
            return BlockedThread(th.tid, th.role, point, req.sid)
        return BlockedThread(th.tid, th.role, "unknown", th.sid)

    def _unobserved_copies(self) -> list[BarrierError]:
        """Asynchronous copies whose completion no wait of the block observed: a phase a TMA load or a cp.async
        arrival completed that no wait saw complete, and cp.async batches no arrival of their thread covers.
        Nothing orders such a copy before the block's exit, so its bytes may land after the block's shared memory
        has passed to the next block on the SM. egtile asks every asynchronous copy to be waited for (CUTLASS's
        pipelines drain theirs before the kernel exits: ``producer_tail``); a copy no one reads is also wasted
        bandwidth."""
        out, seen = [], set()
        for bar, stage, phases, sid, what in self.landed:
            if bar.observed[stage] >= phases or (bar.name, stage, phases) in seen:
                continue
            seen.add((bar.name, stage, phases))
            out.append(BarrierError(
                self.coords, bar.name, stage, phases - 1,
                f"{what} (statement {sid}) completes this phase, but no thread waits for it before the block "
                f"exits: the copy may still be in flight when the block's shared memory passes to the next block "
                f"on the SM. Wait on {bar.name}[{stage}] (parity {(phases - 1) & 1}) before the block ends, or do "
                f"not issue the copy", sid))
        sids = sorted({sid for tid, seq, sid in self.cp_issued if seq > self.threads[tid].cp_arrived} - {None})
        if sids:
            out.append(BarrierError(
                self.coords, "cp.async", 0, -1,
                f"cp.async copies (statement {', '.join(map(str, sids))}) that no T.cp_async_barrier_noinc of their "
                "thread follows: nothing observes their completion, and the block may exit while they are in "
                "flight", sids[0]))
        return out

    def finish(self, deadlocked: bool) -> BlockOutcome:
        """Reports of this block once no thread can run."""
        deadlock = None
        if deadlocked:
            deadlock = Deadlock(self.coords, tuple(self.blocking_point(th) for th in self.threads if not th.done))
        else:
            while self.asyncs:  # copies never waited for still land
                self.complete(0)
            for fn in self.at_finish:
                fn(self)
            for bar in self.bars.values():
                for stage, phase, msg in bar.leftovers():
                    self.errors.append(BarrierError(self.coords, bar.name, stage, phase, msg))
            self.errors += self._unobserved_copies()
            for nb in self.named.values():  # bar.arrive rounds no bar.sync completed
                if nb.arrivals:
                    sids = sorted({x for x in nb.arrive_sids if x is not None})
                    self.errors.append(BarrierError(
                        self.coords, f"bar {nb.barrier_id}", 0, nb.generation,
                        f"incomplete at block exit: {nb.arrivals}/{nb.count} threads arrived (bar.arrive of sid "
                        f"{', '.join(map(str, sids)) or '?'}) in a round no thread completed: the handshake's "
                        "arrivals and syncs do not pair up"))
        for bar in self.bars.values():
            for stage, phase, msg in bar.errors:
                self.errors.append(BarrierError(self.coords, bar.name, stage, phase, msg))
        repeated = []
        for (what, env, it), tids in self.iters.items():
            if len(tids) > 1:
                repeated.append(RepeatedIteration(self.coords, what[1], it, env, tuple(tids)))
        return BlockOutcome(deadlock, repeated, self.errors)
