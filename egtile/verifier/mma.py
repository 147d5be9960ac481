"""The verifier's own model of the register-fragment and wgmma nodes (:mod:`egtile.ir.fragment`,
:mod:`egtile.ir.wgmma`), independent of the rules that produce them.

Ownership. A register fragment (``Scheduled.fragments``) is thread-private: element ``(row, col)`` belongs
to thread ``threads.begin + layout.owner(row, col)[0]``. :func:`check_fragments` proves statically that
every access of one is made by that thread, or reports L1: only by-layout statements touch it (a
``FragmentOp``, a ``LayoutLoop`` whose scalar statements access it at the iteration's own element, a wgmma
whose tiling is its layout); a ``TileOp`` splitting it by element index, a scalar statement anywhere else,
or a by-layout statement on a fragment not in registers is a violation. Since every access of a register
fragment is then its owner's, in that thread's program order, no two can race, and the trace leaves the
register fragments out (:func:`egtile.verifier.verify` does not track them; the enumerating reference
still lists their elements with their owners). What the trace does model is the shared and global side
of the by-layout statements: each element by its owner (an owner-carrying
:class:`~egtile.verifier.regions.Points` footprint).

* ``FragmentOp``: element ``e`` (row-major) of each region of the op by the owner of fragment element
  ``e``; a gemm's ``A`` and ``B`` are read whole by every running thread.
* ``LayoutLoop``: the body once per element, on the element's owner, with the loop variables bound to
  the element's coordinates (merged per statement like an enumerated ``ThreadLoop``). Its statements may access
  the loop fragment and its *peers* (2-D register fragments of the same layout, the same owner and value slot
  for every element) at the iteration's element, and the row fragments of its row projection at its row.
* ``WgmmaMma``: the operand tiles read through the async proxy by the warpgroup threads (a generic write
  of them needs ``fence.proxy.async`` by its writers, PTX ISA 9.7.13.3.2), the accumulator elements read
  (unless cleared) and written by their owners.
* ``WgmmaWait``: no access of its own; the shared-operand reads of the groups it completes are traced again at
  it (with the issue's loop variables): the tensor core reads them until then, so a later write of an operand must
  be ordered after the wait, and a CTA barrier between the issue and a deferred wait orders nothing it still reads.
* ``RowReduce``: registers only (the shuffles), except with a ``scratch`` (a row's replicas in several warps):
  the replica of each warp whose shuffle lanes are 0 writes ``scratch[g, row]``; ``RowCombine``: every replica
  reads ``scratch[0 .. groups-1, row]`` of its rows. Both as element events of their threads, so a missing CTA
  barrier between them is an L2 race; L1 checks the lanes, the groups and the scratch against the row layout.

Layout agreement (L1, :func:`check_fragments`): a wgmma's tiling is its accumulator's layout, its
descriptor swizzles are its operand buffers' layouts, and a TMA copy's tensor-map swizzle is its shared
buffer's layout: any disagreement reads or places every 16-byte chunk where no other reader looks. The
instruction a wgmma stands for exists (f16, bf16 or 8-bit float operands, an 8-bit operand K-major) and reads
each operand in the major-ness the gemm gives it (:func:`_form_problem`).

Asynchrony (PTX ISA 9.7.15.7, :func:`check_wgmma_waits`): until a ``wgmma.wait_group`` completes its group,
the accumulator registers and the shared operands belong to the tensor core. In every statement list, a
``WgmmaMma`` must be followed by a ``WgmmaWait`` on its threads before any other statement of the list that
touches its accumulator (L1: a read of an asynchronous write not yet complete) or its operands (L2), before
an mbarrier arrive, which could release its operand stage to a producer's refill (L2: a write after a read
still in flight), and before the list ends (L1). A serial loop is walked with the groups open before it, then
again with those its first trip leaves open (a group may complete in the next iteration, egtile.rules.pingpong_carry:
``P V`` of block j at the wait after ``Q K^T`` of block j+1), and leaves open those of either walk; each branch of an
``SIf`` starts with the groups open before it. A following wgmma on the same accumulator is ordered by
the tensor core (groups of one warpgroup on one accumulator complete in order). A ``wait_group N`` completes
every open group of its warpgroups but the ``N`` most recently committed (the rotated attention loop of
``egtile.rules.overlap`` waits for ``Q K^T`` with ``wait_group 1`` while ``P V`` stays in flight). The trace models above
place the accumulator accesses at issue and the operand reads at issue and again at the completing wait; this
static check is what makes that placement sound (nothing touches them in between).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from egtile.ir.fragment import FragmentOp, LayoutLoop, RowCombine, RowReduce
from egtile.ir.handshake import NamedSync
from egtile.layout.fragment import Fragment, RowFragment, row_projection
from egtile.layout.errors import LayoutError
from egtile.ir.kernel import (
    POINTER_WRITE, AddressOf, AtomicAdd, BinOp, Const, Copy, Extern, Fill, Gemm, Reduce, Region, Store,
)
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Leaf, Scheduled, SeqLoop, SIf, SStmt, TileOp, TmaLoad, TmaStore,
)
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.verifier import registry
from egtile.verifier.covariance import Cov
from egtile.verifier.regions import flat_strides
from egtile.verifier.registry import register_model
from egtile.verifier.trace import Ctx, NotConstant, _restore, _Scope, loads_in
from egtile.verifier.violation import Violation

NODES = (FragmentOp, LayoutLoop, RowReduce, RowCombine, WgmmaMma, WgmmaWait)

# ----------------------------------------------------------------------------------------------------
# Trace models


@lru_cache(maxsize=256)
def _owned(frag, begin: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """(row-major positions in the fragment, owning thread of each) of the threads ``[lo, hi)`` of a layout
    starting at thread ``begin``, sorted by position."""
    pos: list[int] = []
    own: list[int] = []
    for t in range(lo, hi):
        for _v, r, c in frag.elements(t - begin):
            pos.append(r * frag.cols + c)
            own.append(t)
    p, o = np.asarray(pos, dtype=np.int64), np.asarray(own, dtype=np.int64)
    order = np.argsort(p, kind="stable")
    return p[order], o[order]


def _by_owner(ctx: Ctx, r: Region, mode: str, sid, frag, threads, proxy: str = "generic") -> None:
    """An access of region ``r`` whose row-major element ``e`` is touched by the owner of fragment element ``e``
    (only the owners among the running threads)."""
    tracer = ctx.tracer
    name = r.buffer.name
    if name not in tracer.tracked:
        return
    b, e = max(ctx.lo, threads.begin), min(ctx.hi, threads.end)
    if b >= e:
        return
    pos, own = _owned(frag, threads.begin, b, e)
    if not len(pos):
        return
    try:
        offs = [int(tracer.const(o, ctx.env)) for o in r.offsets]
    except NotConstant:
        # a region placed by data (a gathered row: Output[TokenIndices[...], ...]): some elements, which ones
        # unknown here, as the trace records any region whose offsets it cannot evaluate
        stage = tracer.stage_const(name, r.offsets[0] if r.offsets else None, ctx.env)
        tracer.record(ctx, name, mode, sid, stage=stage, proxy=proxy, unknown=True, tid=None)
        return
    st = flat_strides(tracer.shape(name))
    rem, flat = pos.copy(), np.zeros_like(pos)
    inside = np.ones(len(pos), dtype=bool)
    for o, x, s_, n in reversed(list(zip(offs, r.extents, st, tracer.shape(name)))):
        i = o + rem % x
        inside &= (i >= 0) & (i < n)
        flat += i * s_
        rem //= x
    if r.clip and not inside.all():
        # past its tensor's edge: the elements outside are neither read (zero) nor written
        flat, own = flat[inside], own[inside]
        if not len(flat):
            return
    tracer.limits.charge_elements(len(flat))
    stage = tracer.stage_const(name, r.offsets[0] if r.offsets else None, ctx.env)
    outer, tracer.scope = tracer.scope, None  # one event of its own, not merged into an enclosing scope
    try:
        tracer.record(ctx, name, mode, sid, stage=stage, proxy=proxy, flats=flat, owners=own, tid=None)
    finally:
        tracer.scope = outer


def _points(ctx: Ctx, name: str, mode: str, sid, flats: list[int], owners: list[int]) -> None:
    """An access of elements ``flats`` of buffer ``name``, element ``k`` by thread ``owners[k]`` (one event)."""
    tracer = ctx.tracer
    if name not in tracer.tracked or not flats:
        return
    tracer.limits.charge_elements(len(flats))
    outer, tracer.scope = tracer.scope, None
    try:
        tracer.record(ctx, name, mode, sid, stage=None, proxy="generic", flats=np.asarray(flats, dtype=np.int64),
                      owners=np.asarray(owners, dtype=np.int64), tid=None)
    finally:
        tracer.scope = outer


def _box(ctx: Ctx, r: Region):
    """The ``[begin, end)`` of each coordinate region ``r`` covers (``None``: offsets the trace cannot evaluate)."""
    try:
        return tuple((o, o + n) for o, n in zip((int(ctx.tracer.const(e, ctx.env)) for e in r.offsets), r.extents))
    except NotConstant:
        return None


def _registers(ctx: Ctx, r: Region, mode: str, sid, threads) -> None:
    """An access of region ``r`` by threads ``threads`` of ``ctx``, if ``r`` is of a register fragment
    (egtile.verifier.fragorder: its owner's program order)."""
    if r.buffer.name in ctx.tracer.registers:
        ctx.tracer.fragment_access(ctx, r.buffer.name, mode, sid, max(ctx.lo, threads.begin),
                                   min(ctx.hi, threads.end), _box(ctx, r))


def _register_loads(ctx: Ctx, exprs, sid, lo: int, hi: int) -> None:
    """The register fragments expressions ``exprs`` read (whole: a load's element is its iteration's)."""
    for name in _expr_names(*exprs) & ctx.tracer.registers:
        ctx.tracer.fragment_access(ctx, name, "r", sid, lo, hi)


def _row_scratch_accesses(s, rf, lo: int, hi: int, write: bool) -> tuple[list[int], list[int]]:
    """(flat elements of the scratch, thread of each) that the cross-warpgroup row reduction ``s`` stores (``write``:
    the partial of each warp, by the replica whose shuffle lanes are 0, at ``[g % groups, row]``) or loads (every
    replica, every group's slot of its rows), for the running threads ``[lo, hi)``: the verifier's own reading of
    the node, from the row fragment's layout."""
    flats: list[int] = []
    owners: list[int] = []
    for t in range(max(lo, s.threads.begin), min(hi, s.threads.end)):
        u = t - s.threads.begin
        if u >= rf.num_threads:
            continue
        rows = [r for _k, r, _c in rf.elements(u)]
        if write:
            if any(u & m for m in s.lanes):
                continue
            g = rf.cross_warp_group(u) % s.groups
            flats += [g * rf.rows + r for r in rows]
            owners += [t] * len(rows)
        else:
            for g in range(s.groups):
                flats += [g * rf.rows + r for r in rows]
                owners += [t] * len(rows)
    return flats, owners


def _row_reduce(s: RowReduce, ctx: Ctx) -> None:
    ctx.tracer.fragment_execution(s)
    lo, hi = max(ctx.lo, s.threads.begin), min(ctx.hi, s.threads.end)
    red = s.reduce
    ctx.tracer.fragment_access(ctx, red.src.name, "r", red.sid, lo, hi)
    if not red.clear:
        ctx.tracer.fragment_access(ctx, red.dst.name, "r", red.sid, lo, hi)
    ctx.tracer.fragment_access(ctx, red.dst.name, "w", red.sid, lo, hi)
    # the shuffles touch registers only; an N split's partials go through the shared scratch
    if s.scratch is None:
        return
    rf = ctx.tracer.sched.fragment(s.reduce.dst.name)
    if isinstance(rf, RowFragment):
        _points(ctx, s.scratch.name, "w", s.sid, *_row_scratch_accesses(s, rf, ctx.lo, ctx.hi, True))


def _row_combine(s: RowCombine, ctx: Ctx) -> None:
    ctx.tracer.fragment_execution(s)
    lo, hi = max(ctx.lo, s.threads.begin), min(ctx.hi, s.threads.end)
    ctx.tracer.fragment_access(ctx, s.reduce.dst.name, "r", s.reduce.sid, lo, hi)
    ctx.tracer.fragment_access(ctx, s.reduce.dst.name, "w", s.reduce.sid, lo, hi)
    rf = ctx.tracer.sched.fragment(s.reduce.dst.name)
    if isinstance(rf, RowFragment):
        _points(ctx, s.scratch.name, "r", s.sid, *_row_scratch_accesses(s, rf, ctx.lo, ctx.hi, False))


def _fragment_op(s: FragmentOp, ctx: Ctx) -> None:
    frag = ctx.tracer.sched.fragment(s.fragment)
    if frag is None:
        return  # check_fragments reports it
    c = ctx.child(lo=max(ctx.lo, s.threads.begin), hi=min(ctx.hi, s.threads.end), tid=None)
    if c is None:
        return
    op, sid = s.op, s.sid
    c.tracer.fragment_execution(s)
    match op:
        case Fill(dst=dst, value=v):
            _register_loads(c, (v,), sid, c.lo, c.hi)
            _registers(c, dst, "w", sid, s.threads)
        case Copy(src=src, dst=dst):
            _registers(c, src, "r", sid, s.threads)
            _registers(c, dst, "w", sid, s.threads)
        case Gemm(a=ra, b=rb, c=rc, clear_accum=clear):
            _registers(c, ra, "r", sid, s.threads)
            _registers(c, rb, "r", sid, s.threads)
            if not clear:
                _registers(c, rc, "r", sid, s.threads)
            _registers(c, rc, "w", sid, s.threads)
    match op:
        case Fill(dst=dst, value=v):
            c.reads_of(v, sid)
            _by_owner(c, dst, "w", sid, frag, s.threads)
        case Copy(src=src, dst=dst):
            _by_owner(c, src, "r", sid, frag, s.threads)
            _by_owner(c, dst, "w", sid, frag, s.threads)
        case Gemm(a=ra, b=rb, c=rc, clear_accum=clear):
            c.read(ra, sid)
            c.read(rb, sid)
            if not clear:
                _by_owner(c, rc, "r", sid, frag, s.threads)
            _by_owner(c, rc, "w", sid, frag, s.threads)


def first_replica(frag, t: int) -> bool:
    """Whether thread ``t`` of a row fragment's layout is the lowest-numbered thread holding each of its rows
    (read off the layout's owner table, not its replication digits)."""
    return all(frag.owners(r)[0] == t for _v, r, _c in frag.elements(t))


def _layout_loop(s: LayoutLoop, ctx: Ctx) -> None:
    tracer = ctx.tracer
    frag = tracer.sched.fragment(s.fragment)
    if frag is None:
        return
    b, e = max(ctx.lo, s.threads.begin), min(ctx.hi, s.threads.end)
    if b >= e:
        return
    _layout_loop_registers(s, ctx, b, e)
    if not _body_touches_tracked(s, tracer.tracked):
        # every access of the body is of register fragments (untracked: check_fragments proves each is its owner's),
        # so enumerating the elements would record no event
        return
    names = [v.name for v in s.vars]
    env = ctx.env
    saved = [env.get(n) for n in names]
    loop_sid = s.sid if s.sid is not None else ctx.loop_sid
    outer = tracer.scope
    tracer.scope = scope = _Scope(False)
    try:
        n = 0
        for t in range(b, e):
            if s.once and not first_replica(frag, t - s.threads.begin):
                continue  # the row's other replicas skip the iteration (LayoutLoop.once)
            for _v, r, c in frag.elements(t - s.threads.begin):
                for name, val in zip(names, (r, c) if len(names) == 2 else (r,)):
                    env[name] = val
                child = ctx.child(lo=b, hi=e, tid=t, loop_sid=loop_sid, sym=None)
                if child is not None:
                    tracer.walk(s.body, child)
                n += 1
        tracer.limits.charge_elements(n)
        tracer.close(scope)
    finally:
        tracer.scope = outer
        for name, v in zip(names, saved):
            _restore(env, name, v)


def _layout_loop_registers(s: LayoutLoop, ctx: Ctx, lo: int, hi: int) -> None:
    """The register fragments the body's statements read and write, each statement once for every element (its
    accesses are at the iteration's element or row: egtile.verifier.fragorder compares whole fragments), the
    reads of a statement before its write; a serial loop in the body twice, at its first two iterations (what
    orders one iteration's statements against the next), with its variable bound for the statements' timestamps."""
    tracer = ctx.tracer
    env = ctx.env
    tracer.fragment_execution(s)

    def body(stmts) -> None:
        for x in stmts:
            if isinstance(x, Leaf):
                got = tracer.register_plans.get(id(x))
                if got is None:
                    got = tracer.register_plans[id(x)] = (x, _leaf_registers(x, tracer.registers))
                for name, mode, sid in got[1]:
                    tracer.fragment_access(ctx, name, mode, sid, lo, hi)
            elif isinstance(x, SIf):
                for name in sorted(_expr_names(x.cond) & tracer.registers):
                    tracer.fragment_access(ctx, name, "r", _first_sid(x), lo, hi)
                body(x.then_body)
                body(x.else_body)
            elif isinstance(x, SeqLoop):
                try:
                    start, stop = (int(tracer.const(e, env)) for e in (x.start, x.stop))
                except NotConstant:
                    start, stop = 0, 2  # bounds read from memory: two iterations stand for any
                name, saved = x.var.name, env.get(x.var.name)
                try:
                    for v in range(start, min(stop, start + 2)):
                        env[name] = v
                        body(x.body)
                finally:
                    _restore(env, name, saved)
            else:
                for b in registry.bodies(x):
                    body(b)

    body(s.body)


def _leaf_registers(x: Leaf, registers) -> tuple[tuple[str, str, int | None], ...]:
    """The register fragments leaf ``x`` reads (first) and writes."""
    out: list[tuple[str, str, int | None]] = []

    def loads(exprs, sid) -> None:
        out.extend((name, "r", sid) for name in sorted(_expr_names(*exprs) & registers))

    match x:
        case Leaf(stmt=Store(buffer=buf, indices=idx, value=v) as st) | \
                Leaf(stmt=AtomicAdd(buffer=buf, indices=idx, value=v) as st):
            loads((v, *idx), st.sid)
            if buf.name in registers:
                out.append((buf.name, "w", st.sid))
        case Leaf(stmt=Extern(args=args) as st):
            loads(args, st.sid)
            # a pointer the extern may write through (its declared mode) writes the fragment too
            out.extend((a.load.buffer.name, "w", st.sid) for a in args
                       if isinstance(a, AddressOf) and a.mode & POINTER_WRITE and a.load.buffer.name in registers)
        case _:
            pass
    return tuple(out)


def _first_sid(s: SIf):
    """The source statement an ``if`` inside a by-layout loop stands for: its own, else its first leaf's."""
    if s.sid is not None:
        return s.sid
    for x in registry.walk(tuple(s.then_body) + tuple(s.else_body)):
        if isinstance(x, Leaf):
            return getattr(x.stmt, "sid", None)
    return None


def _body_touches_tracked(s: LayoutLoop, tracked) -> bool:
    """Whether an iteration of ``s`` may record an event: an access of a tracked buffer, or an extern/atomic."""
    names: set[str] = set()
    for x in s.body:
        names |= names_touched(x)
    return bool(names & set(tracked)) or _has_extern(s.body)


def _has_extern(body) -> bool:
    return any(isinstance(x, Leaf) and isinstance(x.stmt, (Extern, AtomicAdd)) for x in registry.walk(tuple(body)))



def _wgmma(s: WgmmaMma, ctx: Ctx) -> None:
    frag = ctx.tracer.sched.fragment(s.gemm.c.buffer.name)
    if frag is None:
        return  # check_fragments reports it
    c = ctx.child(lo=max(ctx.lo, s.threads.begin), hi=min(ctx.hi, s.threads.end), tid=None)
    if c is None:
        return
    g, sid = s.gemm, s.sid
    c.tracer.fragment_execution(s)
    _registers(c, g.a, "r", sid, s.threads)
    if not g.clear_accum:
        _registers(c, g.c, "r", sid, s.threads)
    _registers(c, g.c, "w", sid, s.threads)
    c.read(g.a, sid, proxy="async")
    c.read(g.b, sid, proxy="async")
    if not g.clear_accum:
        _by_owner(c, g.c, "r", sid, frag, s.threads)
    _by_owner(c, g.c, "w", sid, frag, s.threads)
    # the tensor core reads the shared operands until the wgmma.wait_group that completes the group (PTX ISA
    # 9.7.15.7): the reads are traced again there (_wgmma_wait), with the loop variables
    ctx.tracer.inflight.setdefault(ctx.agent.index, []).append(
        (s, c.lo, c.hi, dict(ctx.env), ctx.path, ctx.loop_sid, ctx.accesses_only, ctx.tracer.sides))


def _wgmma_wait(s: WgmmaWait, ctx: Ctx) -> None:
    """No access of its own; the shared-operand reads of the groups it completes end here: each is traced again
    at the wait, so a later write of an operand must be ordered after the wait, not only after the issue (a CTA
    barrier between an issue and its deferred wait orders nothing the tensor core still reads).
    ``wait_group N`` completes every group of the waiting warpgroups but the ``N`` most recently committed."""
    tracer = ctx.tracer
    flying = tracer.inflight.get(ctx.agent.index)
    if not flying:
        return
    mine = [i for i, (w, *_rest) in enumerate(flying)
            if w.threads.begin < s.threads.end and s.threads.begin < w.threads.end]
    done = set(mine[:max(0, len(mine) - max(0, s.pending))])
    if not done:
        return
    tracer.inflight[ctx.agent.index] = [x for i, x in enumerate(flying) if i not in done]
    here = tracer.sides
    for i in sorted(done):
        w, lo, hi, env, path, loop_sid, only, sides = flying[i]
        c = Ctx(tracer, ctx.agent, lo, hi, env, path, loop_sid, None, accesses_only=only or ctx.accesses_only)
        note = (f" (read by the tensor core until the wgmma.wait_group {s.pending} that completes wgmma sid {w.sid}, "
                f"at {', '.join(f'{n}={v}' for _, n, v in ctx.path) or 'the end of the loops'})")
        # the read happens where both the issue and the wait run: the data-dependent sides of either
        tracer.sides = tuple(dict.fromkeys(sides + here))
        try:
            for r in (w.gemm.a, w.gemm.b):
                if w.a_registers and r is w.gemm.a:
                    continue  # a register A operand is read at issue
                ev = c.read(r, w.sid, proxy="async")
                if ev is not None:
                    ev.note = note
        finally:
            tracer.sides = here


def _layout_loop_effects(s: LayoutLoop, w, lo: int, hi: int, loop) -> None:
    # each element's iteration runs once, on its owner: a one-thread region, as a partitioned ThreadLoop (a row
    # fragment's replicas each write their own registers; a memory write on every replica is the L1 check's,
    # _leaf_fragment_problem)
    b, e = max(lo, s.threads.begin), min(hi, s.threads.end)
    if b < e:
        w.walk(s.body, b, b + 1, None)


def _no_effect(s, w, lo: int, hi: int, loop) -> None:
    pass  # every fragment element by its one owner; shared operands are only read


def _scan_fragment_op(s: FragmentOp, sc, scope) -> None:
    match s.op:
        case Fill(dst=d, value=v):
            sc.region(d, scope)
            sc.loads(v, scope)
        case Copy(src=a, dst=b):
            sc.region(a, scope)
            sc.region(b, scope)
        case Gemm(a=a, b=b, c=c):
            sc.region(a, scope)
            sc.region(b, scope)
            sc.region(c, scope)


def _scan_layout_loop(s: LayoutLoop, sc, scope) -> None:
    inner = scope
    for v, n in zip(s.vars, s.extents):
        inner = inner.with_var(v.name, Cov(1, 0, 0, max(n - 1, 0)))
    sc.body(s.body, inner)


def _scan_wgmma(s: WgmmaMma, sc, scope) -> None:
    sc.region(s.gemm.a, scope)
    sc.region(s.gemm.b, scope)
    sc.region(s.gemm.c, scope)


def _fragment_op_writes(s: FragmentOp) -> tuple[str, ...]:
    match s.op:
        case Copy(dst=r) | Fill(dst=r):
            return (r.buffer.name,)
        case Gemm(c=c):
            return (c.buffer.name,)
    return ()


# ``writes``: what the node itself writes (a LayoutLoop's body is walked on its own), so that a condition
# reading a parameter these never write stays block-uniform (egtile.verifier.uniform).
register_model(FragmentOp, _fragment_op, effects=_no_effect, scan=_scan_fragment_op, writes=_fragment_op_writes)
register_model(LayoutLoop, _layout_loop, bodies=lambda s: (s.body,), effects=_layout_loop_effects,
               scan=_scan_layout_loop, writes=lambda s: ())
register_model(RowReduce, _row_reduce, effects=_no_effect, scan=lambda s, sc, scope: None,
               writes=lambda s: (s.reduce.dst.name,) if s.scratch is None else (s.scratch.name,))
register_model(RowCombine, _row_combine, effects=_no_effect, scan=lambda s, sc, scope: None,
               writes=lambda s: (s.reduce.dst.name,))
register_model(WgmmaMma, _wgmma, effects=_no_effect, scan=_scan_wgmma, writes=lambda s: (s.gemm.c.buffer.name,))
register_model(WgmmaWait, _wgmma_wait, effects=_no_effect, scan=lambda s, sc, scope: None, writes=lambda s: ())

# ----------------------------------------------------------------------------------------------------
# Static checks over the schedule


def _region_names(*rs) -> set[str]:
    return {r.buffer.name for r in rs if isinstance(r, Region)}


def _expr_names(*es) -> set[str]:
    out: set[str] = set()
    for e in es:
        out |= {ld.buffer.name for ld in loads_in(e)}
        if isinstance(e, AddressOf):
            out.add(e.load.buffer.name)
    return out


def _op_names(op) -> set[str]:
    match op:
        case Copy(src=a, dst=b):
            return _region_names(a, b)
        case Fill(dst=d, value=v):
            return _region_names(d) | _expr_names(v)
        case Gemm(a=a, b=b, c=c):
            return _region_names(a, b, c)
        case Reduce(src=a, dst=b):
            return {a.name, b.name}
    return set()


def names_touched(s: SStmt) -> set[str]:
    """Every buffer ``s`` (and every statement nested in it) reads or writes: the verifier's own account,
    from the scheduled IR."""
    out: set[str] = set()
    for x in registry.walk((s,)):
        match x:
            case Leaf(stmt=Store(buffer=b, indices=idx, value=v)) | Leaf(stmt=AtomicAdd(buffer=b, indices=idx, value=v)):
                out |= {b.name} | _expr_names(v, *idx)
            case Leaf(stmt=Extern(args=args)):
                out |= _expr_names(*args)
            case TileOp(op=op) | FragmentOp(op=op):
                out |= _op_names(op)
            case WgmmaMma(gemm=g):
                out |= _region_names(g.a, g.b, g.c)
            case RowReduce(reduce=r, scratch=sc):
                out |= {r.src.name, r.dst.name} | ({sc.name} if sc is not None else set())
            case RowCombine(reduce=r, scratch=sc):
                out |= {r.dst.name, sc.name}
            case TmaLoad(src=a, dst=b) | TmaStore(src=a, dst=b):
                out |= _region_names(a, b)
            case SIf(cond=c):
                out |= _expr_names(c)
            case NamedSync(pinned_after=p):
                out |= set(p)  # the pin's store reads them (codegen/ops/pin.py)
            case _:
                pass
    return out


def check_wgmma_waits(sched: Scheduled) -> list[Violation]:
    """wgmma asynchrony (module docstring): every group is waited for before its accumulator or operands are
    touched again, before an arrive, and before its statement list ends."""
    out: list[Violation] = []

    def walk(stmts: tuple[SStmt, ...], open_: list[WgmmaMma] | None = None) -> list[WgmmaMma]:
        open_ = [] if open_ is None else open_
        for s in stmts:
            if _one_trip(s):
                # a loop of one trip is its body, run in place: groups open before it stay open in it and after
                open_ = walk(s.body, open_)
                continue
            if isinstance(s, SIf):
                # either branch runs with the groups open before it; after it, those either leaves open
                a = walk(s.then_body, list(open_))
                b = walk(s.else_body, list(open_))
                open_ = a + [w for w in b if not any(w is x for x in a)]
                continue
            if isinstance(s, SeqLoop):
                # a group may stay open across the back edge (egtile.rules.pingpong_carry: P V of block j completes
                # in iteration j + 1): the body runs with the groups open before the loop, then with those its
                # first trip leaves open (the second trip's entry; a group issued every trip is the same node, so
                # one more trip changes nothing); after the loop, those of either (zero trips: the entry's)
                again = walk(s.body, walk(s.body, list(open_)))
                open_ = open_ + [w for w in again if not any(w is x for x in open_)]
                continue
            for b in registry.bodies(s):
                report(walk(b))
            if isinstance(s, WgmmaWait):
                touch(s, set(s.pinned_after), open_)  # the pin's store reads them before the wait (codegen/ops/pin.py)
                # wait_group N (PTX ISA 9.7.15.7.3): every group of the waiting warpgroups but the N most recently
                # committed is complete; those N stay open
                mine = [i for i, w in enumerate(open_)
                        if w.threads.begin < s.threads.end and s.threads.begin < w.threads.end]
                done = set(mine[:max(0, len(mine) - max(0, s.pending))])
                open_ = [w for i, w in enumerate(open_) if i not in done]
                continue
            touch(s, names_touched(s), open_)
            if isinstance(s, WgmmaMma):
                open_.append(s)
        return open_

    def touch(s, touched: set[str], open_: list[WgmmaMma]) -> None:
        for w in open_:
            acc = {w.gemm.c.buffer.name}
            ops = {w.gemm.a.buffer.name, w.gemm.b.buffer.name}
            if isinstance(s, WgmmaMma) and s.gemm.c.buffer.name in acc and not (
                    ops - {s.gemm.a.buffer.name, s.gemm.b.buffer.name}) & touched - acc:
                continue  # chained wgmmas on one accumulator are ordered by the tensor core
            if isinstance(s, (Arrive, ArriveExpectTx, CpAsyncArrive)):
                out.append(Violation("L2", f"an mbarrier arrive follows wgmma (sid {w.sid}) before a wgmma.wait_group: "
                                           f"it may release the stage of {', '.join(sorted(ops))} the tensor core is "
                                           "still reading", (w.sid,), w.gemm.a.buffer.name))
            elif touched & (acc | ops):
                what = "a pin reads" if isinstance(s, (WgmmaWait, NamedSync)) else "a statement touches"
                out.append(Violation("L1" if touched & acc else "L2",
                                     f"{what} the accumulator or an operand of wgmma (sid {w.sid}) "
                                     "before the wgmma.wait_group that completes it", (w.sid,),
                                     w.gemm.c.buffer.name))

    def report(open_: list[WgmmaMma]) -> None:
        for w in open_:
            out.append(Violation("L1", f"wgmma (sid {w.sid}) is not completed by a wgmma.wait_group in its statement "
                                       "list: its accumulator is never known to be complete", (w.sid,), w.gemm.c.buffer.name))

    report(walk(sched.body))
    return list(dict.fromkeys(out))  # a loop body is walked twice: its violations once


def _one_trip(s) -> bool:
    """``s`` is a serial loop of exactly one trip, syntactically: ``for v in [e, e + 1)`` (the form the rotated
    attention loop binds a source iteration with, :func:`egtile.rules.overlap.at`)."""
    return (isinstance(s, SeqLoop) and isinstance(s.stop, BinOp) and s.stop.op == "+" and s.stop.a == s.start
            and isinstance(s.stop.b, Const) and s.stop.b.value == 1)


def _fragment_indices(e, frag: str, out: list) -> None:
    """The index tuples of every access of buffer ``frag`` in expression ``e``."""
    for ld in loads_in(e):
        if ld.buffer.name == frag:
            out.append(ld.indices)


def _rows_of(sched: Scheduled, loop: LayoutLoop) -> set[str]:
    """The register fragments a statement of ``loop`` may access at the iteration's row: the row fragments in
    the row projection of the loop's layout (for a loop over a row fragment: in its own layout)."""
    f = sched.fragment(loop.fragment)
    if isinstance(f, Fragment):
        try:
            proj = row_projection(f, 32)
        except LayoutError:
            return set()
    elif isinstance(f, RowFragment):
        proj = f.with_bits(32)
    else:
        return set()
    return {n for n, g in sched.fragments if isinstance(g, RowFragment) and g.with_bits(32) == proj} - {loop.fragment}


def _peers_of(sched: Scheduled, loop: LayoutLoop) -> set[str]:
    """The register fragments a statement of ``loop`` may access at the iteration's element besides the loop's
    own: the 2-D fragments whose layout is the loop fragment's (the same owner and value slot for every element,
    element widths aside: :func:`egtile.layout.operand_a.same_layout`)."""
    from egtile.layout.operand_a import same_layout

    f = sched.fragment(loop.fragment)
    if not isinstance(f, Fragment):
        return set()
    return {n for n, g in sched.fragments if n != loop.fragment and same_layout(g, f)}


def _stray_fragment(sched: Scheduled | None, loop: LayoutLoop, name: str) -> str:
    """Why register fragment ``name`` is no peer and no row of ``loop`` (for the message)."""
    f = sched.fragment(loop.fragment) if sched is not None else None
    g = sched.fragment(name) if sched is not None else None
    if isinstance(f, Fragment) and isinstance(g, Fragment):
        if (g.rows, g.cols) != (f.rows, f.cols):
            return f"its shape {g.rows}x{g.cols} is not the loop's {f.rows}x{f.cols}"
        return (f"it is laid out {g.name or 'otherwise'}, the loop {f.name or 'otherwise'}: element (i, j) of it is "
                "held by another thread or at another slot")
    return "it is not in the row projection of the loop's layout nor in its layout"


def _leaf_fragment_problem(st, regs: set[str], loop: LayoutLoop | None, sched: Scheduled | None = None) -> str | None:
    """Why scalar statement ``st`` may touch a register fragment from a thread that does not hold the element
    (``None``: it does not). In a ``LayoutLoop`` over fragment ``f`` the iteration's thread holds exactly
    ``f[i, j]`` and ``p[i, j]`` of every peer ``p`` (a 2-D fragment in ``f``'s layout) for the loop variables
    ``(i, j)``, and the rows ``r[i]`` of the row fragments in ``f``'s row projection; anywhere else no scalar
    statement may touch one. A loop over a row fragment runs each row on every replica, so its statements may
    write only row fragments of its layout and locals."""
    match st:
        case Store(buffer=b, indices=idx, value=v) | AtomicAdd(buffer=b, indices=idx, value=v):
            hit = ({b.name} | _expr_names(v, *idx)) & regs
        case Extern(args=args):
            hit = _expr_names(*args) & regs
        case _:
            return None
    replicated = loop is not None and sched is not None and isinstance(sched.fragment(loop.fragment), RowFragment)
    if replicated and loop.once:
        # the row's first replica alone runs it: memory it may store (once), registers it may not write (the other
        # replicas' copies would go stale)
        if isinstance(st, (Store, AtomicAdd)) and (st.buffer.name in regs or st.buffer.scope == "local"):
            return (f"statement {st.sid} in the loop by the row fragment {loop.fragment}, run by each row's first "
                    f"replica alone, writes {st.buffer.name} in registers, which the row's other replicas then miss")
    elif replicated:
        rows_ok = _rows_of(sched, loop) | {loop.fragment}
        if isinstance(st, Extern) or isinstance(st, AtomicAdd) or (
                st.buffer.name not in rows_ok and st.buffer.scope != "local"):
            return (f"statement {st.sid} in the loop by the row fragment {loop.fragment} writes "
                    f"{getattr(getattr(st, 'buffer', None), 'name', 'through an extern call')}, which every replica of the "
                    "row would write again")
    if not hit:
        return None
    if loop is None:
        return f"statement {st.sid} touches register fragment {sorted(hit)[0]} outside a loop by its layout"
    rows = _rows_of(sched, loop) if sched is not None else set()
    peers = _peers_of(sched, loop) if sched is not None else set()
    stray = hit - {loop.fragment} - rows - peers
    if stray:
        x = sorted(stray)[0]
        return (f"statement {st.sid} in the loop by the layout of {loop.fragment} touches another register fragment, "
                f"{x}, that is neither a peer of the loop (a 2-D fragment in its layout) nor in the row projection of "
                f"its layout: {_stray_fragment(sched, loop, x)}")
    undeclared = (hit & peers) - set(loop.peers)
    if undeclared:
        return (f"statement {st.sid} in the loop by the layout of {loop.fragment} touches peer fragment "
                f"{sorted(undeclared)[0]}, which the loop does not name among its peers (its element would not be "
                "bound to the iteration's slot)")
    own = tuple(loop.vars)
    idxs: list = []
    row_idxs: list = []
    mine = {loop.fragment} | (hit & peers)
    for e in ((v, *idx) if not isinstance(st, Extern) else tuple(st.args)):
        for p in sorted(mine):
            at: list = []
            _fragment_indices(e, p, at)
            idxs += [(p, ix) for ix in at]
        for r in rows:
            _fragment_indices(e, r, row_idxs)
    if isinstance(st, (Store, AtomicAdd)) and st.buffer.name in mine:
        idxs.append((st.buffer.name, tuple(st.indices)))
    if isinstance(st, (Store, AtomicAdd)) and st.buffer.name in rows:
        row_idxs.append(tuple(st.indices))
    if isinstance(st, Extern):
        idxs += [(a.load.buffer.name, a.load.indices) for a in st.args
                 if isinstance(a, AddressOf) and a.load.buffer.name in mine]
        if any(isinstance(a, AddressOf) and a.load.buffer.name in rows for a in st.args):
            return f"statement {st.sid} hands a pointer to a row fragment to an extern call"
    for name, ix in idxs:
        if tuple(ix) != own:
            return (f"statement {st.sid} accesses {name} at another element than the iteration's own "
                    f"({', '.join(v.name for v in own)}): the thread running it does not hold that element")
    for ix in row_idxs:
        if tuple(ix) != own[:1]:
            return (f"statement {st.sid} accesses a row fragment at another index than the iteration's row "
                    f"({own[0].name}): the thread running it may hold no replica of it")
    return None


def _unbits(f):
    from dataclasses import replace

    return f.with_bits(32) if isinstance(f, RowFragment) else replace(f, value_bits=32, name="")


def _rs_problem(sched: Scheduled, s: WgmmaMma) -> str | None:
    """Why register-A wgmma ``s`` does not read A as the instruction does (``None``: it does): A is a register
    fragment in :func:`egtile.layout.operand_a.rs_a_layout` of its shape over the tiling's warpgroups (each k16
    slice of it is the instruction's A fragment, PTX ISA 9.7.15.5.1.1.1), the tiling gives each warpgroup its
    own rows (M split), and step ``kk`` reads A's slice ``kk`` (the one B's rows ``16 kk..`` multiply)."""
    from egtile.layout.operand_a import rs_a_layout, rs_a_problems, same_layout

    g, t = s.gemm, s.tiling
    a = sched.fragment(g.a.buffer.name)
    if not isinstance(a, Fragment):
        return f"register-A wgmma (sid {s.sid}) reads A ({g.a.buffer.name}), which is not a 2-D register fragment"
    m, k = a.rows, a.cols
    if t.split != "M" and t.warpgroups > 1:
        return f"register-A wgmma (sid {s.sid}) splits its accumulator by columns over warpgroups: each would need rows of A it does not hold"
    p = rs_a_problems(m, k, t.warpgroups)
    if p:
        return f"register-A wgmma (sid {s.sid}): {p[0]}"
    if not same_layout(a, rs_a_layout(m, k, t.warpgroups)) or a.value_bits != 16 or m != t.rows:
        return (f"register-A wgmma (sid {s.sid}) reads A ({g.a.buffer.name}) as its k16 slices of "
                f"{rs_a_layout(m, k, t.warpgroups).name}, but the fragment is laid out {a.name} ({a.value_bits}-bit)")
    if tuple(s.a_k_order) != tuple(range(k // 16)):
        return (f"register-A wgmma (sid {s.sid}) reads A's k16 slices in order {list(s.a_k_order)}: step kk multiplies "
                "A columns of another slice with B's rows 16 kk..")
    return None


def _op_writes_memory(op, regs: set[str]) -> bool:
    match op:
        case Copy(dst=r) | Fill(dst=r) | Gemm(c=r):
            return r.buffer.name not in regs
    return False


def _row_reduce_problem(sched: Scheduled, s: RowReduce) -> str | None:
    """Why row reduction ``s`` is not its layouts' (``None``: it is): the source is a 2-D register fragment, the
    destination its row projection, and the shuffle lanes exactly the replication lanes of that projection
    (PTX ISA 9.7.9.6: ``shfl.sync.bfly`` reads lane ``laneid ^ mask``; a mask outside the replicas combines
    another row's partial, a missing one leaves a partial)."""
    r = s.reduce
    fs, fd = sched.fragment(r.src.name), sched.fragment(r.dst.name)
    if not isinstance(fs, Fragment) or fs != sched.fragment(s.fragment):
        return f"T.reduce (sid {r.sid}) runs by the layout of {s.fragment}, but its source {r.src.name} is not that register fragment"
    if not isinstance(fd, RowFragment):
        return f"T.reduce (sid {r.sid}) writes {r.dst.name}, which is not a row fragment in registers"
    try:
        proj = row_projection(fs, 32)
        want = proj.warp_lanes()
    except LayoutError as e:
        return f"T.reduce (sid {r.sid}): {e}"
    if fd.with_bits(32) != proj:
        return f"T.reduce (sid {r.sid}) writes {r.dst.name}, whose layout is not the row projection of {r.src.name}'s"
    if tuple(sorted(s.lanes)) != tuple(sorted(want)):
        return (f"T.reduce (sid {r.sid}) combines partials over lanes xor {list(s.lanes)}, but the replicas of each row of "
                f"{r.src.name} differ in lanes xor {list(want)}: the result mixes rows or misses a partial")
    groups = proj.cross_warp_groups
    if groups > 1 and s.scratch is None:
        return (f"T.reduce (sid {r.sid}): the replicas of each row of {r.src.name} span {groups} warp groups (warps apart: "
                "shfl.sync cannot combine them), and the reduction has no cross-warp combine")
    if s.scratch is not None:
        if groups == 1:
            return f"T.reduce (sid {r.sid}) stores partials to {s.scratch.name}, but every row's replicas are in one warp"
        why = _scratch_problem(sched, s.scratch, groups, proj.rows, r.sid)
        if why:
            return why
        if s.groups != groups:
            return (f"T.reduce (sid {r.sid}) stores the partials of {groups} warp groups per row of {r.src.name} into "
                    f"{s.groups} slot(s) of {s.scratch.name}: the groups' partials overwrite each other")
    return None


def _scratch_problem(sched: Scheduled, scratch, groups: int, rows: int, sid: int) -> str | None:
    try:
        b = sched.buffer(scratch.name)
    except KeyError:
        return f"T.reduce (sid {sid}): its scratch {scratch.name} is not a buffer of the schedule"
    if b.scope != "shared" or tuple(b.shape) != (groups, rows) or b.layout != "linear":
        return (f"T.reduce (sid {sid}): its scratch {scratch.name} is {b.scope} {tuple(b.shape)} {b.layout}, not a linear "
                f"shared buffer of {groups} x {rows} partials")
    return None


def _row_combine_problem(sched: Scheduled, s: RowCombine, before: list) -> str | None:
    """Why the cross-warpgroup combine ``s`` does not complete its row reduction (``None``: it does): an earlier
    statement of its list is the reduction storing the partials into the same scratch, and it folds every warp
    group's slot of each row (the row projection's :attr:`~egtile.layout.RowFragment.cross_warp_groups`)."""
    r = s.reduce
    rf = sched.fragment(r.dst.name)
    if not isinstance(rf, RowFragment):
        return f"the row combine (sid {r.sid}) writes {r.dst.name}, which is not a row fragment in registers"
    if not any(isinstance(x, RowReduce) and x.sid == s.sid and x.scratch == s.scratch for x in before):
        return (f"the row combine (sid {r.sid}) reads {s.scratch.name}, but no earlier statement of its list stores the "
                "row partials there")
    groups = rf.cross_warp_groups
    if s.groups != groups:
        return (f"the row combine (sid {r.sid}) folds {s.groups} partial(s) per row of {r.dst.name}, whose rows have "
                f"replicas in {groups} warp groups: it misses a partial")
    return _scratch_problem(sched, s.scratch, groups, rf.rows, r.sid)


_FP8 = ("float8_e4m3fn", "float8_e5m2")
_BITS16 = ("float16", "bfloat16")


def _form_problem(sched: Scheduled, s: WgmmaMma) -> str | None:
    """Why the instruction a wgmma node stands for does not exist, or does not read the gemm's operands as the
    gemm gives them (PTX ISA 9.7.15.5.2): the operand types are f16 x f16, bf16 x bf16 or 8-bit floats (e4m3 /
    e5m2, mixed) on both sides; A is read K-major unless the gemm transposes it, B (``K x N``) MN-major unless
    transposed; an 8-bit operand only K-major (the FP8 form has no imm-trans)."""
    from egtile.ir.dtypes import dtype

    g = s.gemm
    a, b = (dtype(sched.buffer(r.buffer.name).dtype).name for r in (g.a, g.b))
    if not ((a in _FP8 and b in _FP8) or (a == b and a in _BITS16)):
        return f"wgmma (sid {s.sid}) multiplies {a} x {b}: no wgmma.mma_async form takes these operand types"
    want = {"A": "MN" if g.trans_a else "K", "B": "K" if g.trans_b else "MN"}
    for role, got, t in (("A", s.a_major, a), ("B", s.b_major, b)):
        if got != want[role]:
            return (f"wgmma (sid {s.sid}) reads operand {role} {got}-major, but the T.gemm gives it {want[role]}-major "
                    f"(transpose_{role}={g.trans_a if role == 'A' else g.trans_b}): it would multiply the transposed tile")
        if t in _FP8 and got != "K":
            return (f"wgmma (sid {s.sid}) reads the 8-bit operand {role} ({t}) MN-major: the FP8 form has no "
                    "imm-trans, its operands are K-major only")
    return None


def check_fragments(sched: Scheduled) -> list[Violation]:
    """L1 for register fragments and layouts (module docstring): only by-layout statements in the fragment's
    own layout touch a register fragment (a scalar statement only inside a ``LayoutLoop``, at the
    iteration's own element); a wgmma's tiling is its accumulator's layout and its swizzles its operands'
    layouts; a TMA copy's swizzle is its shared buffer's layout."""
    regs = {n for n, _ in sched.fragments}
    out: list[Violation] = []

    def walk(stmts, loop: LayoutLoop | None) -> None:
        for i, s in enumerate(stmts):
            check(s, loop)
            if isinstance(s, RowCombine):
                why = _row_combine_problem(sched, s, list(stmts[:i]))
                if why:
                    out.append(Violation("L1", why, (s.sid,), s.reduce.dst.name))
            if isinstance(s, RowReduce) and s.scratch is not None and not any(
                    isinstance(x, RowCombine) and x.sid == s.sid and x.scratch == s.scratch for x in stmts[i + 1:]):
                out.append(Violation("L1", f"T.reduce (sid {s.sid}) stores its row partials to {s.scratch.name} but no "
                                           f"later statement of its list combines them into {s.reduce.dst.name}",
                                     (s.sid,), s.reduce.dst.name))
            inner = s if isinstance(s, LayoutLoop) else loop
            for b in registry.bodies(s):
                walk(b, inner)

    def check(s, loop: LayoutLoop | None) -> None:
        match s:
            case Leaf(stmt=st) if regs:
                why = _leaf_fragment_problem(st, regs, loop, sched)
                if why:
                    hit = sorted(names_touched(s) & regs) or [getattr(getattr(st, "buffer", None), "name", "")]
                    out.append(Violation("L1", why, (st.sid,), hit[0]))
            case RowReduce(reduce=r, lanes=lanes):
                why = _row_reduce_problem(sched, s)
                if why:
                    out.append(Violation("L1", why, (r.sid,), r.dst.name))
            case FragmentOp(fragment=f, op=op) if isinstance(sched.fragment(f), RowFragment) and \
                    _op_writes_memory(op, regs):
                out.append(Violation("L5", f"a statement (sid {s.sid}) by the layout of row fragment {f} writes memory: "
                                           "each row's replicas would all store it (a nonlocal effect run once per "
                                           "replica)", (s.sid,), f))
            case FragmentOp(op=Copy(src=a, dst=b)) if sched.fragment(a.buffer.name) is not None and \
                    sched.fragment(b.buffer.name) is not None:
                fa, fb = sched.fragment(a.buffer.name), sched.fragment(b.buffer.name)
                if _unbits(fa) != _unbits(fb):
                    out.append(Violation("L1", f"a copy (sid {s.sid}) between register fragments {a.buffer.name} and "
                                               f"{b.buffer.name} of different layouts: each thread would move elements "
                                               "it does not hold", (s.sid,), b.buffer.name))
            case FragmentOp(fragment=f) if sched.fragment(f) is None:
                out.append(Violation("L1", f"a statement runs by the layout of {f}, which is not a register fragment",
                                     (s.sid,), f))
            case LayoutLoop(fragment=f) if sched.fragment(f) is None:
                out.append(Violation("L1", f"a loop runs by the layout of {f}, which is not a register fragment",
                                     (s.sid,) if s.sid is not None else (), f))
            case LayoutLoop(fragment=f, peers=peers) if peers:
                for p in sorted(set(peers) - _peers_of(sched, s)):
                    out.append(Violation("L1", f"the loop (sid {s.sid}) by the layout of {f} binds {p} as a peer, but "
                                               f"{p} is not a 2-D register fragment in that layout: "
                                               f"{_stray_fragment(sched, s, p)}", (s.sid,) if s.sid is not None else (), p))
            case TileOp(op=op):
                hit = _op_names(op) & regs
                if hit:
                    out.append(Violation("L1", f"a cooperative tile op (sid {op.sid}) splits register fragment "
                                               f"{sorted(hit)[0]} by element index over threads that do not hold it",
                                         (op.sid,), sorted(hit)[0]))
            case WgmmaMma() if _form_problem(sched, s):
                out.append(Violation("L1", _form_problem(sched, s), (s.sid,), s.gemm.b.buffer.name))
            case WgmmaMma(a_registers=True):
                why = _rs_problem(sched, s)
                if why:
                    out.append(Violation("L1", why, (s.sid,), s.gemm.a.buffer.name))
                acc = sched.fragment(s.gemm.c.buffer.name)
                if acc is None or acc != s.tiling.fragment():
                    out.append(Violation("L1", f"wgmma (sid {s.sid}) writes {s.gemm.c.buffer.name} in the layout of tiling "
                                               f"{s.tiling.code}, which is not the fragment's layout", (s.sid,),
                                         s.gemm.c.buffer.name))
                layout = sched.buffer(s.gemm.b.buffer.name).layout
                if layout != s.b_swizzle:
                    out.append(Violation("L1", f"wgmma (sid {s.sid}) reads operand B ({s.gemm.b.buffer.name}) through "
                                               f"{s.b_swizzle} descriptors but the buffer is laid out {layout}", (s.sid,),
                                         s.gemm.b.buffer.name))
            case WgmmaMma():
                acc = sched.fragment(s.gemm.c.buffer.name)
                if acc is None or acc != s.tiling.fragment():
                    out.append(Violation("L1", f"wgmma (sid {s.sid}) writes {s.gemm.c.buffer.name} in the layout of tiling "
                                               f"{s.tiling.code}, which is not the fragment's layout", (s.sid,),
                                         s.gemm.c.buffer.name))
                for role, r, swz in (("A", s.gemm.a, s.a_swizzle), ("B", s.gemm.b, s.b_swizzle)):
                    layout = sched.buffer(r.buffer.name).layout
                    if layout != swz:
                        out.append(Violation("L1", f"wgmma (sid {s.sid}) reads operand {role} ({r.buffer.name}) through "
                                                   f"{swz} descriptors but the buffer is laid out {layout}", (s.sid,),
                                             r.buffer.name))
            case TmaLoad(dst=r, swizzle=swz, sid=sid) | TmaStore(src=r, swizzle=swz, sid=sid):
                layout = sched.buffer(r.buffer.name).layout
                if layout != swz:
                    out.append(Violation("L1", f"a TMA copy (sid {sid}) uses a {swz} tensor map on {r.buffer.name}, laid "
                                               f"out {layout}", (sid,) if sid is not None else (), r.buffer.name))
            case _:
                pass

    walk(sched.body, None)
    return out


__all__ = ["NODES", "check_fragments", "check_wgmma_waits", "names_touched"]
