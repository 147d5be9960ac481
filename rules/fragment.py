"""Register fragments: when a ``T.alloc_fragment`` buffer can live in registers, and how its users run then.

Hardware fact (PTX ISA §5.1 "State Spaces", §9.7.15.5.1.1 "Matrix Fragments for wgmma"): registers are
private to a thread. A fragment in registers is therefore a *layout* (:class:`egtile.layout.Fragment`):
element ``(row, col)`` exists in exactly one thread's registers, and only that thread can read or write
it. The tensor-core instructions fix such layouts for their accumulators (``wgmma.mma_async``'s D), so a
``T.gemm`` lowered to wgmma puts its accumulator in registers in the layout of its tiling
(:mod:`egtile.rules.mma`, whose declaration names the layout; the lowering collects it before lowering
anything, ``Decision.layouts``). Every other statement touching that fragment then runs *by layout*
(:mod:`egtile.ir.fragment`): each thread does the part of it that its own elements need.

A statement can run by layout exactly when each thread's part touches only its own elements
(``fragment-users-admit-registers``, derived in the e-graph over every statement touching the fragment,
from the per-statement oracle ``frag-register-blocker``):

* ``T.clear`` / ``T.fill`` of the whole fragment; ``T.copy`` from or to the whole fragment (source and
  destination elements pair by row-major position, so the owner of fragment element ``e`` moves position
  ``e``); a SIMT ``T.gemm`` accumulating into the whole fragment (each owner computes its elements from
  rows of A and columns of B in shared memory);
* a ``T.Parallel`` nest whose extents are the fragment's shape, starting at 0, in which every access of
  the fragment is ``frag[i, j]`` with ``i, j`` the nest's own variables in order, and which writes some
  non-local buffer (so that it cannot be *replicated*: a replicated loop would read elements the thread
  does not hold): iteration ``(i, j)`` runs once, on the owner of ``(i, j)``.

Everything else keeps the fragment in shared memory (egtile's default placement, always legal): a
``T.reduce_*`` over it (a cross-thread reduction), a pointer to it (``T.address_of``), a partial region,
an element access at another index, a block-level scalar access, and a fragment used as a gemm operand
A/B (register-A wgmma is not implemented). Two statements that fix different layouts of one fragment are
a :class:`~egtile.errors.ScheduleError` naming both (no conversion is implemented).

The lowerings of the statements that touch a fragment (``tile``, ``copy_simt``, ``partitioned``,
``vectorized``) ask :func:`by_layout` first; it returns the by-layout form when the fragment is in
registers.
"""

from __future__ import annotations

from egglog import Bool, String, eq

from egtile.analysis import own_reads, own_writes
from egtile.errors import ScheduleError
from egtile.ir import Const, Copy, Fill, For, Gemm, Reduce, Store, ThreadLoop, ThreadRange, Var
from egtile.ir.fragment import FragmentOp, LayoutLoop
from egtile.schedule import dataflow as D
from egtile.schedule.rule import FactSpec, Violation, stmt_condition
from egtile.schedule.schema import Stmt, fact
from egtile.verdict import Verdict

# ----------------------------------------------------------------------------------------------------
# The per-statement oracle


def _whole(r, buf) -> bool:
    return (tuple(r.extents) == tuple(buf.shape)
            and all(isinstance(o, Const) and int(o.value) == 0 for o in r.offsets))


def nest_of(ctx, sid: int) -> tuple[For, tuple[Var, ...], tuple[int, ...], frozenset[int]] | None:
    """The block-level ``T.Parallel`` around statement ``sid`` of a parallel body, with the variables and
    extents of its folded nest (perfectly nested static parallel loops, as the thread mapping folds them)
    and the sids of the folded loops; ``None`` outside one or for a symbolic range."""
    outer = None
    for a in ctx.ancestors(sid):
        if isinstance(a, For) and a.kind == "parallel" and ctx.context[a.sid] == "block":
            outer = a
    if outer is None:
        return None
    vars_: list[Var] = []
    extents: list[int] = []
    folded: set[int] = set()
    cur = outer
    while True:
        if not (isinstance(cur.start, Const) and isinstance(cur.stop, Const)):
            return None
        vars_.append(cur.var)
        extents.append(int(cur.stop.value) - int(cur.start.value))
        folded.add(cur.sid)
        if int(cur.start.value) != 0:
            return None
        inner = cur.body[0] if len(cur.body) == 1 else None
        if isinstance(inner, For) and inner.kind == "parallel" and isinstance(inner.start, Const) \
                and isinstance(inner.stop, Const):
            cur = inner
            continue
        return outer, tuple(vars_), tuple(extents), frozenset(folded)


def _own_index(a, vars_: tuple[Var, ...]) -> bool:
    r = a.region
    if r is None or any(e != 1 for e in r.extents) or len(r.offsets) != len(vars_):
        return False
    return all(isinstance(o, Var) and o.name == v.name for o, v in zip(r.offsets, vars_))


def register_blocker(ctx, s) -> Verdict:
    """``frag-register-blocker``: statement ``s`` (a leaf) touches a fragment in a way that no register layout
    can serve (module docstring); the verdict's reasons say how. Holds (``ok``) when it blocks."""
    if isinstance(s, (For,)) or not hasattr(s, "sid"):
        return Verdict.fail("not a leaf statement")
    accesses = [(a, False) for a in own_reads(s)] + [(a, True) for a in own_writes(s)]
    frags = [(a, w) for a, w in accesses if a.scope == "fragment"]
    if not frags:
        return Verdict.fail("touches no fragment")
    if any(a.via_pointer for a, _ in frags):
        return Verdict(True, ("hands a pointer to a fragment to an extern call",))
    if ctx.context.get(s.sid) == "thread":
        nest = nest_of(ctx, s.sid)
        if nest is None:
            return Verdict(True, ("touches a fragment inside a T.Parallel whose nest is not static from 0",))
        _outer, vars_, extents, _ = nest
        for a, _w in frags:
            buf = ctx.kernel.buffer(a.buffer)
            if tuple(buf.shape) != extents:
                return Verdict(True, (f"a T.Parallel over {extents} touches fragment {a.buffer} of shape "
                                      f"{tuple(buf.shape)}",))
            if not _own_index(a, vars_):
                return Verdict(True, (f"accesses fragment {a.buffer} at another index than the loop's own element "
                                      f"({', '.join(v.name for v in vars_)})",))
        return Verdict.fail("every fragment access is at the iteration's own element")
    match s:
        case Reduce():
            return Verdict(True, ("T.reduce over a fragment is a cross-thread reduction",))
        case Gemm(a=ra, b=rb, c=rc):
            if ra.buffer.scope == "fragment" or rb.buffer.scope == "fragment":
                return Verdict(True, ("a fragment is a T.gemm operand A/B (register-A wgmma is not implemented)",))
            if not _whole(rc, ctx.kernel.buffer(rc.buffer.name)):
                return Verdict(True, ("the T.gemm accumulator is a part of the fragment",))
            return Verdict.fail("accumulates into the whole fragment")
        case Copy() | Fill():
            regions = [r for r in ((s.src, s.dst) if isinstance(s, Copy) else (s.dst,)) if r.buffer.scope == "fragment"]
            if any(not _whole(r, ctx.kernel.buffer(r.buffer.name)) for r in regions):
                return Verdict(True, ("touches a part of a fragment",))
            if isinstance(s, Copy) and s.src.buffer.scope == "fragment" and s.dst.buffer.scope == "fragment" \
                    and s.src.buffer.name != s.dst.buffer.name:
                return Verdict(True, ("copies one fragment into another (two layouts)",))
            return Verdict.fail("moves the whole fragment")
        case Store():
            return Verdict(True, ("a block-level scalar store touches a fragment",))
        case _:
            return Verdict(True, (f"a block-level {type(s).__name__} touches a fragment",))


REGISTER_BLOCKER = FactSpec(
    "frag-register-blocker", "the statement touches a fragment in a way no register layout serves: a reduction, a "
    "pointer, a partial region, another element than a T.Parallel iteration's own, a gemm operand A/B "
    "(egtile.rules.fragment)", register_blocker, scope="any")

# ----------------------------------------------------------------------------------------------------
# The condition (derived in the e-graph): every user of the written fragment admits a register layout


def _explain_users(ctx, sid: int) -> str:
    out = []
    for a, _b, buf in ctx.witnesses("fragment-users-admit-registers", sid):
        if a >= 0 and a in ctx.facts.stmts:
            v = ctx.encoding.verdicts.get(("frag-register-blocker", a))
            why = "; ".join(v.reasons) if v is not None and v.reasons else "it reads it without writing a non-local buffer"
            out.append(f"{ctx.describe(a)} keeps fragment {buf} in shared memory: {why}")
    return "; ".join(dict.fromkeys(out)) or "a statement keeps the fragment in shared memory"


def _user_violations(w):
    # w.st: the gemm whose accumulator would move to registers; w.b: that accumulator (the buffer it writes)
    acc = (D.writes(w.st, w.b), D.scope(w.b, String("fragment")))
    yield Violation((*acc, D.leaf(w.x, w.i), D.reads(w.x, w.b), fact(String("frag-register-blocker"), w.i)), w.i,
                    -1, w.b)
    yield Violation((*acc, D.leaf(w.x, w.i), D.writes(w.x, w.b), fact(String("frag-register-blocker"), w.i)), w.i,
                    -1, w.b)
    # a T.Parallel that touches it and writes only local buffers could be replicated
    yield Violation((*acc, eq(w.x).to(Stmt.par(w.i, w.blk)), D.reads(w.x, w.b),
                     eq(D.nonlocal_(w.x)).to(Bool(False))), w.i, -1, w.b)


USERS_ADMIT_REGISTERS = stmt_condition(
    "fragment-users-admit-registers",
    "every statement that touches the accumulator can run by its register layout (egtile.rules.fragment)",
    _user_violations, _explain_users, oracles=(REGISTER_BLOCKER,))

# ----------------------------------------------------------------------------------------------------
# Lowering by layout (called by the lowerings of tile, copy_simt, partitioned and vectorized)


def _fragments_of(stmt, lw) -> list[tuple[str, object]]:
    names = sorted({a.buffer for a in (*own_reads(stmt), *own_writes(stmt))
                    if a.scope == "fragment" and lw.fragment(a.buffer) is not None})
    return [(n, lw.fragment(n)) for n in names]


def _the_fragment(stmt, lw, what: str):
    frags = _fragments_of(stmt, lw)
    if not frags:
        return None
    if len({f for _, f in frags}) > 1:
        raise ScheduleError(f"{what} touches register fragments {', '.join(n for n, _ in frags)} with different "
                            "layouts; a statement runs by one layout", getattr(stmt, "loc", None))
    return frags[0]


def _threads(f, ctx, sid, lw) -> ThreadRange:
    t = ThreadRange(0, f.num_threads)
    if not (ctx.threads.begin <= t.begin and t.end <= ctx.threads.end):
        raise ScheduleError(f"statement sid {sid} touches a register fragment held by threads [0, {t.end}) but runs on "
                            f"threads [{ctx.threads.begin}, {ctx.threads.end})", lw.facts.stmts[sid].loc)
    return t


def tile_by_layout(sid: int, lw, ctx) -> list | None:
    """A ``T.fill`` / ``T.copy`` / SIMT ``T.gemm`` touching a register fragment, run by its layout
    (``None``: no register fragment; lower it as usual)."""
    stmt = lw.stmt(sid, ctx)
    hit = _the_fragment(lw.facts.stmts[sid], lw, f"statement sid {sid}")
    if hit is None:
        return None
    name, f = hit
    if not isinstance(stmt, (Copy, Fill, Gemm)):
        raise ScheduleError(f"{type(stmt).__name__} (sid {sid}) cannot run by the layout of register fragment {name}",
                            lw.facts.stmts[sid].loc)
    return [FragmentOp(stmt, name, _threads(f, ctx, sid, lw))]


def op_by_layout(stmt, lw, ctx) -> list | None:
    """Tile statement ``stmt`` (built by a lowering, already restaged) run by the layout of the register
    fragment it touches (``None``: it touches none)."""
    hit = _the_fragment(stmt, lw, f"statement sid {stmt.sid}")
    if hit is None:
        return None
    name, f = hit
    return [FragmentOp(stmt, name, _threads(f, ctx, stmt.sid, lw))]


def parallel_by_layout(n, lw, ctx, loops: list) -> list | None:
    """A ``T.Parallel`` nest (already lowered to ``loops``, one ``ThreadLoop``) touching a register fragment,
    as a :class:`LayoutLoop` (``None``: no register fragment)."""
    from egtile.ir import walk

    src = lw.facts.stmts[n.sid]
    frags: dict[str, object] = {}
    for st in walk((src,)):
        if not isinstance(st, For):
            for name, f in _fragments_of(st, lw):
                frags[name] = f
    if not frags:
        return None
    if len(set(frags.values())) > 1:
        raise ScheduleError(f"T.Parallel (sid {n.sid}) touches register fragments {', '.join(frags)} with different "
                            "layouts", src.loc)
    name, f = next(iter(frags.items()))
    (tl,) = loops
    if not isinstance(tl, ThreadLoop) or tuple(tl.extents) != (f.rows, f.cols):
        raise ScheduleError(f"T.Parallel (sid {n.sid}) over {getattr(tl, 'extents', '?')} does not cover register "
                            f"fragment {name} ({f.rows}x{f.cols})", src.loc)
    return [LayoutLoop(tl.vars, tl.extents, name, _threads(f, ctx, n.sid, lw), tl.body, sid=n.sid)]


__all__ = ["REGISTER_BLOCKER", "USERS_ADMIT_REGISTERS", "nest_of", "op_by_layout", "parallel_by_layout",
           "register_blocker", "tile_by_layout"]
