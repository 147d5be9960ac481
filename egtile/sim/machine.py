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

Dynamic effect tracking for repeated iterations: a thread marks itself when it writes non-local memory,
performs an atomic, or calls an extern that receives a non-local pointer or is not declared pure (the
definition of a nonlocal effect in ``docs/soundness.md``). Each ``ThreadLoop`` iteration (and each leaf
outside any ``ThreadLoop``) whose execution had such an effect is recorded with its loop environment; an
entry recorded by more than one thread is a repeated nonlocal iteration.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from egtile import externs, limits
from egtile.errors import EgtileError, ShapeError, SimulationError, SourceLoc
from egtile.evaluate import poison, round_to
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import (
    AddressOf, AtomicAdd, Buffer, Copy, Expr, Extern, Fill, Gemm, Load, Reduce, Store, walk,
)
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Elect, FenceProxyAsync, Leaf, RoleSplit, Scheduled, SeqLoop, SIf, SStmt,
    SyncThreads, ThreadLoop, TileOp, TmaLoad, TmaStore, Wait, swalk,
)
from egtile.sim.clocks import SlotLayout, join
from egtile.sim.compiled import compile_expr
from egtile.sim.mbarrier import MBarrierState, NamedBarrier
from egtile.sim.memory import Agent, Mem, RaceLog, Shadow
from egtile.sim.report import BarrierError, BlockedThread, Deadlock, RepeatedIteration
from egtile.sim.tileops import copy_elements, region_flats, run_simt

_MISSING = object()
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
        self.written_globals = _written_globals(sched)
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


def _written_globals(sched: Scheduled) -> set[str]:
    """Global buffers the schedule may write: only those need shadow state."""
    out: set[str] = set()
    for s in swalk(sched.body):
        match s:
            case Leaf(stmt=Store(buffer=b)) | Leaf(stmt=AtomicAdd(buffer=b)):
                out.add(b.name)
            case Leaf(stmt=Extern(args=args)):
                out |= {a.load.buffer.name for a in args if isinstance(a, AddressOf)}
            case TileOp(op=Copy(dst=r)) | TileOp(op=Fill(dst=r)) | TileOp(op=Gemm(c=r)) | TmaStore(dst=r):
                out.add(r.buffer.name)
            case TileOp(op=Reduce(dst=b)):
                out.add(b.name)
            case _:
                pass
    return {n for n in out if any(p.name == n for p in sched.kernel.params)}


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
        self.cp_deferred: list[tuple[MBarrierState, int, np.ndarray, int]] = []
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
    """An issued TMA load or cp.async batch, completed when the policy says."""

    kind: str  # "tma-load" | "cp.async"
    tid: int
    sid: int | None
    vc: np.ndarray
    writes: list[tuple[Mem, int, Any]]
    bar: MBarrierState | None = None
    stage: int = 0
    nbytes: int = 0
    seq: int = 0


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
    """The dynamic state of one block and the semantics of each scheduled statement."""

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
            if b.scope in ("shared", "fragment"):
                self.mems[b.name] = Mem(b, poison(b.dtype, b.shape).reshape(-1), shadowed=True)
        self.shadow = Shadow(prog.slots, log)
        self.shadow.block = coords
        self.bars = {b.name: MBarrierState(b, prog.slots) for b in prog.sched.barriers}
        self.named: dict[int, NamedBarrier] = {}
        env = {v.name: c for v, c in zip(prog.sched.kernel.block_vars, coords)}
        self.threads = [ThreadState(t, prog.slots, env) for t in range(prog.threads)]
        for th in self.threads:
            th.home = prog.home_role[th.tid]
            th.load = self._loader(th)
        self.fences = [0] * prog.threads
        self.runnable = IndexedSet(range(prog.threads))
        self.asyncs: list[AsyncOp] = []
        self.iters: dict[tuple, list[int]] = {}
        self.flats_cache: dict[tuple, np.ndarray] = {}  # region flat indices (regions live in the schedule)
        self.errors: list[BarrierError] = []
        self.last: int | None = None
        for th in self.threads:
            th.gen = self.run(prog.sched.body, th)

    # -- memory (the tile-op context) ---------------------------------------------------------------

    def mem(self, name: str, th: ThreadState) -> Mem:
        m = self.mems.get(name)
        if m is not None:
            return m
        m = th.locals.get(name)
        if m is None:
            b = self.prog.buffers.get(name)
            if b is None:
                raise SimulationError(f"statement {th.sid} accesses buffer {name!r}, which is neither a kernel "
                                      "parameter nor in Scheduled.buffers")
            m = Mem(b, poison(b.dtype, b.shape).reshape(-1), shadowed=False)
            th.locals[name] = m
        return m

    def ev(self, e: Expr, th: ThreadState) -> Any:
        return self.prog.compiled(e)(th.env, th.load)

    def _loader(self, th: ThreadState):
        return lambda buf, idx: self._load(buf, idx, th)

    def _load(self, buf: Buffer, idx: tuple[int, ...], th: ThreadState) -> Any:
        m = self.mem(buf.name, th)
        return self.read(m, m.flat(idx, f"statement {th.sid}"), th, th.sid)

    def read(self, m: Mem, f: int, th: ThreadState, sid: int | None, op: str = "read") -> Any:
        if m.shadowed:
            self.shadow.read(m, f, th.agent, sid, op)
        return m.get(f)

    def write(self, m: Mem, f: int, value: Any, th: ThreadState, sid: int | None, op: str = "write") -> None:
        if m.shadowed:
            self.shadow.write(m, f, th.agent, sid, op)
        if m.scope != "local":
            th.effect = True
        m.set(f, value)

    def atomic_add(self, m: Mem, f: int, value: Any, th: ThreadState, sid: int | None) -> Any:
        if m.shadowed:
            self.shadow.atomic(m, f, th.agent, sid)
        th.effect = True
        old = m.get(f)
        m.set(f, round_to(m.dtype, old + round_to(m.dtype, value)))
        return old

    # -- leaves -------------------------------------------------------------------------------------

    def leaf(self, s: Store | AtomicAdd | Extern, th: ThreadState) -> None:
        th.sid = s.sid
        if type(s) is Store:  # the hot path: compiled once per statement
            fv, fis, name, what = self.prog.store_parts(s)
            env, load = th.env, th.load
            val = fv(env, load)
            m = self.mems.get(name) or self.mem(name, th)
            f = m.flat(tuple(int(g(env, load)) for g in fis), what)
            if m.shadowed:
                self.shadow.write(m, f, th.agent, s.sid, "write")
            if m.scope != "local":
                th.effect = True
            m.data[f] = m.rnd(val)
            return
        match s:
            case Store(buffer=b, indices=idx, value=v):
                val = self.ev(v, th)
                m = self.mem(b.name, th)
                self.write(m, m.flat(tuple(int(self.ev(i, th)) for i in idx), f"statement {s.sid}"), val, th, s.sid)
            case AtomicAdd(buffer=b, indices=idx, value=v):
                val = self.ev(v, th)
                m = self.mem(b.name, th)
                f = m.flat(tuple(int(self.ev(i, th)) for i in idx), f"statement {s.sid}")
                self.atomic_add(m, f, val, th, s.sid)
            case Extern(name=name, args=args, pure=pure):
                model = externs.lookup(name, s.loc)
                values = []
                pointers = 0
                for a in args:
                    if isinstance(a, AddressOf):
                        values.append(self._pointer(a.load, th, s.sid))
                        pointers += 1
                        if self.mem(a.load.buffer.name, th).scope != "local":
                            th.effect = True
                    else:
                        values.append(self.ev(a, th))
                if pointers == 0 and not (pure or model.pure):
                    th.effect = True  # an opaque call whose count matters (see module docstring)
                model.fn(*values)
            case _:
                raise TypeError(f"not a leaf statement: {s!r}")

    def _pointer(self, ld: Load, th: ThreadState, sid: int | None) -> externs.Pointer:
        m = self.mem(ld.buffer.name, th)
        idx = tuple(int(self.ev(i, th)) for i in ld.indices)
        f = m.flat(idx, f"statement {sid}")
        return externs.Pointer(
            m.name, idx, dtype=m.dtype,
            load=lambda: self.read(m, f, th, sid),
            store=lambda v: self.write(m, f, v, th, sid),
            atomic_add=lambda v: self.atomic_add(m, f, v, th, sid))

    # -- statements ---------------------------------------------------------------------------------

    def run(self, stmts: tuple[SStmt, ...], th: ThreadState) -> Generator:
        """Run ``stmts`` as thread ``th``; yields requests (see module docstring).

        Raises:
            EgtileError: an error while running a statement, re-raised with the innermost enclosing
                statement's sid, thread and block in the message and its user line (``SourceLoc``).
        """
        for s in stmts:
            self.budget[0] -= 1
            if self.budget[0] < 0:
                raise limits.step_error(self.prog.sched.kernel.name, self.max_steps, "simulator")
            try:
                match s:
                    case Leaf(stmt=st):
                        if th.loop_depth == 0:
                            th.effect = False
                            self.leaf(st, th)
                            if th.effect:
                                key = (("leaf", st.sid), tuple(th.env.items()), ())
                                self.iters.setdefault(key, []).append(th.tid)
                        else:
                            self.leaf(st, th)
                    case SeqLoop(var=var, start=start, stop=stop, body=body):
                        lo, hi = int(self.ev(start, th)), int(self.ev(stop, th))
                        saved = th.env.get(var.name, _MISSING)
                        for k in range(lo, hi):
                            th.env[var.name] = k
                            yield from self.run(body, th)
                        self._restore(th, var.name, saved)
                    case ThreadLoop():
                        yield from self.thread_loop(s, th)
                    case TileOp():
                        if th.tid in s.threads:
                            yield from self.tile_op(s, th)
                    case Elect(threads=tr, body=body):
                        if th.tid == tr.begin:
                            yield from self.run(body, th)
                    case Wait(barrier=name, stage=st, parity=par, sid=sid):
                        bar = self.bars[name]
                        stage = self._stage(bar, st, th, "Wait")
                        yield WaitReq(bar, stage, int(self.ev(par, th)), sid)
                    case Arrive(barrier=name, stage=st):
                        bar = self.bars[name]
                        self._arrive(bar, self._stage(bar, st, th, "Arrive"), th.vc, th)
                        yield None
                    case ArriveExpectTx(barrier=name, stage=st, tx_bytes=n):
                        bar = self.bars[name]
                        stage = self._stage(bar, st, th, "ArriveExpectTx")
                        bar.expect_tx(stage, n)
                        self._arrive(bar, stage, th.vc, th)
                        yield None
                    case TmaLoad():
                        self.tma_load(s, th)
                        yield None
                    case TmaStore():
                        self.tma_store(s, th)
                        yield None
                    case CpAsyncArrive(barrier=name, stage=st):
                        bar = self.bars[name]
                        self.cp_async_arrive(bar, self._stage(bar, st, th, "CpAsyncArrive"), th)
                        yield None
                    case SyncThreads(threads=tr, barrier_id=bid):
                        yield SyncReq(bid, tr.count, th.sid)
                    case FenceProxyAsync():
                        th.agent.fences += 1
                        self.fences[th.tid] += 1
                    case SIf(cond=c, then_body=t, else_body=e):
                        yield from self.run(t if self.ev(c, th) else e, th)
                    case RoleSplit(roles=roles):
                        for r in roles:
                            if th.tid in r.threads:
                                prev, th.role = th.role, r.name
                                yield from self.run(r.body, th)
                                th.role = prev
                                break
                    case _:
                        raise TypeError(f"not a scheduled statement: {s!r}")
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
        match s:
            case Leaf(stmt=st):
                sid, own = st.sid, st.loc
            case TileOp(op=op):
                sid, own = op.sid, op.loc
            case _:
                sid, own = getattr(s, "sid", None), None
        if sid is None:
            return err
        loc = err.loc or self.prog.locs.get(sid) or own
        located = type(err)(f"{err.message} (statement {sid}, thread {th.tid}, block {self.coords})", loc)
        setattr(located, _LOCATED, True)
        return located

    @staticmethod
    def _restore(th: ThreadState, name: str, saved: Any) -> None:
        if saved is _MISSING:
            th.env.pop(name, None)
        else:
            th.env[name] = saved

    def _stage(self, bar: MBarrierState, e: Expr, th: ThreadState, what: str) -> int:
        s = int(self.ev(e, th))
        bar.check_stage(s, f"{what} on {bar.name} (thread {th.tid}, block {self.coords})")
        return s

    def thread_loop(self, s: ThreadLoop, th: ThreadState) -> Generator:
        tr = s.threads
        if th.tid not in tr:
            return
        total = 1
        for e in s.extents:
            total *= e
        its = range(th.tid - tr.begin, total, tr.count) if s.mapping == "partitioned" else range(total)
        names = [v.name for v in s.vars]
        saved = [th.env.get(n, _MISSING) for n in names]
        env_key = tuple(th.env.items())
        outer_effect = th.effect
        th.loop_depth += 1
        for i in its:
            rem = i
            vals = []
            for e in reversed(s.extents):
                vals.append(rem % e)
                rem //= e
            vals.reverse()
            for n, v in zip(names, vals):
                th.env[n] = v
            th.effect = False
            yield from self.run(s.body, th)
            if th.effect:
                outer_effect = True
                self.iters.setdefault((("loop", s.sid), env_key, tuple(zip(names, vals))), []).append(th.tid)
        th.loop_depth -= 1
        th.effect = outer_effect
        for n, v in zip(names, saved):
            self._restore(th, n, v)

    def tile_op(self, s: TileOp, th: ThreadState) -> Generator:
        op = s.op
        rank, count = th.tid - s.threads.begin, s.threads.count
        what = f"{type(op).__name__} (sid {op.sid}) in block {self.coords}"
        th.sid = op.sid
        if s.inst == "simt":
            run_simt(self, op, th, rank, count, what)
            return
        if not isinstance(op, Copy) or self.mem(op.src.buffer.name, th).scope != "global" \
                or self.mem(op.dst.buffer.name, th).scope not in ("shared", "fragment"):
            raise SimulationError(f"{what}: cp_async copies global -> shared only (PTX ISA 9.7.9.25)")
        writes = copy_elements(self, op, th, rank, count, what, src_op="cp.async")
        th.cp_seq += 1
        th.cp_open.add(th.cp_seq)
        self.asyncs.append(AsyncOp("cp.async", th.tid, op.sid, th.vc.copy(), writes, seq=th.cp_seq))
        th.tick()
        yield None

    # -- async copies and barriers ------------------------------------------------------------------

    def tma_load(self, s: TmaLoad, th: ThreadState) -> None:
        what = f"TmaLoad (sid {s.sid}) in block {self.coords}"
        th.sid = s.sid
        if self.mem(s.src.buffer.name, th).scope != "global" or \
                self.mem(s.dst.buffer.name, th).scope not in ("shared", "fragment"):
            raise SimulationError(f"{what}: a TMA load copies a global region into shared memory")
        bar = self.bars[s.barrier]
        stage = self._stage(bar, s.stage, th, "TmaLoad")
        writes = copy_elements(self, Copy(s.sid or -1, s.src, s.dst), th, 0, 1, what, src_op="tma-load")
        nbytes = s.dst.numel * lookup_dtype(s.dst.buffer.dtype).bytes
        self.asyncs.append(AsyncOp("tma-load", th.tid, s.sid, th.vc.copy(), writes, bar, stage, nbytes))
        th.tick()

    def tma_store(self, s: TmaStore, th: ThreadState) -> None:
        what = f"TmaStore (sid {s.sid}) in block {self.coords}"
        th.sid = s.sid
        if s.src.squeezed != s.dst.squeezed:
            raise ShapeError(f"{what}: extents {s.src.extents} -> {s.dst.extents} differ")
        sm, sf = region_flats(self, s.src, th, what)
        dm, df = region_flats(self, s.dst, th, what)
        for a, b in zip(sf, df):
            self.shadow.proxy_read(sm, int(a), th.agent, s.sid, self.fences)
            self.write(dm, int(b), sm.get(int(a)), th, s.sid, "tma-store")
        th.tick()

    def cp_async_arrive(self, bar: MBarrierState, stage: int, th: ThreadState) -> None:
        upto = th.cp_seq
        vc = th.vc.copy()
        slot = self.prog.slots.cp_slot(th.tid)
        vc[slot] = max(vc[slot], upto)
        if any(q <= upto for q in th.cp_open):
            th.cp_deferred.append((bar, stage, vc, upto))
        else:
            self._arrive(bar, stage, vc, th)
            return
        th.tick()

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
        if op.kind == "tma-load":
            slot, clock = op.bar.completion_epoch(op.stage)
        else:
            slot, clock = self.prog.slots.cp_slot(op.tid), op.seq
        agent = Agent(slot, clock, op.tid, op.vc)
        for m, f, v in op.writes:
            if m.shadowed:
                self.shadow.write(m, f, agent, op.sid, op.kind)
            m.set(f, v)
        if op.kind == "tma-load":
            self._wake(op.bar.complete_tx(op.stage, op.nbytes))
            return
        th = self.threads[op.tid]
        th.cp_open.discard(op.seq)
        keep = []
        for bar, stage, vc, upto in th.cp_deferred:
            if any(q <= upto for q in th.cp_open):
                keep.append((bar, stage, vc, upto))
            else:
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
        if len(nb.arrived) >= nb.count:
            for t in nb.arrived:
                o = self.threads[t]
                join(o.vc, nb.acc)
                o.tick()
                o.req = None
                self.runnable.add(t)
            nb.arrived = []
            nb.acc = self.prog.slots.zeros()
            nb.generation += 1

    def blocking_point(self, th: ThreadState) -> BlockedThread:
        req = th.req
        if isinstance(req, WaitReq):
            point = (f"Wait {req.bar.name}[{req.stage}] parity {req.parity} (sid {req.sid}): "
                     f"{req.bar.describe(req.stage)}")
            return BlockedThread(th.tid, th.role, point, req.sid)
        if isinstance(req, SyncReq):
            nb = self.named.get(req.barrier_id)
            n = len(nb.arrived) if nb else 0
            point = f"bar.sync {req.barrier_id} (count {req.count}): {n} of {req.count} threads arrived"
            return BlockedThread(th.tid, th.role, point, req.sid)
        return BlockedThread(th.tid, th.role, "unknown", th.sid)

    def finish(self, deadlocked: bool) -> BlockOutcome:
        """Reports of this block once no thread can run."""
        deadlock = None
        if deadlocked:
            deadlock = Deadlock(self.coords, tuple(self.blocking_point(th) for th in self.threads if not th.done))
        else:
            while self.asyncs:  # copies never waited for still land
                self.complete(0)
            for bar in self.bars.values():
                for stage, phase, msg in bar.leftovers():
                    self.errors.append(BarrierError(self.coords, bar.name, stage, phase, msg))
        for bar in self.bars.values():
            for stage, phase, msg in bar.errors:
                self.errors.append(BarrierError(self.coords, bar.name, stage, phase, msg))
        repeated = []
        for (what, env, it), tids in self.iters.items():
            if len(tids) > 1:
                repeated.append(RepeatedIteration(self.coords, what[1], it, env, tuple(tids)))
        return BlockOutcome(deadlock, repeated, self.errors)
