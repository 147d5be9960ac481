"""L5: statements with a nonlocal effect run once per logical instance.

A scalar statement (``Leaf``) is *nonlocal* when running it twice differs from running it once as seen
by other threads: it writes a ``shared``, ``fragment`` or ``global`` buffer, it is an atomic, or it calls
an extern that receives ``T.address_of`` of a non-local element or that takes no pointer and is not
declared pure (its effect is invisible to us, e.g. a counter or ``printf``). This definition is the
verifier's own, re-derived from ``ir.Scheduled`` (it does not import :mod:`egtile.analysis`).

L5 requires every nonlocal leaf to run on exactly one thread per instance: under a ``partitioned``
``ThreadLoop`` (each iteration once), under ``Elect``, or in a region run by one thread. A ``replicated``
``ThreadLoop`` with a nonlocal body runs each iteration on every thread of its range: that is TileLang's
seed bug 1. TMA loads and stores must likewise be issued by one thread.
"""

from __future__ import annotations

from egtile import externs
from egtile.ir.kernel import AddressOf, AtomicAdd, Extern, Store
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Elect, FenceProxyAsync, Leaf, RoleSplit, Scheduled, SeqLoop, SIf, SStmt,
    SyncThreads, ThreadLoop, TileOp, TmaLoad, TmaStore, Wait,
)
from egtile.verifier import registry
from egtile.verifier.registry import handler
from egtile.verifier.violation import Violation


def nonlocal_reason(stmt: Store | AtomicAdd | Extern, sched: Scheduled) -> str | None:
    """Why ``stmt`` has a nonlocal effect, or ``None`` if its effect is thread-local."""

    def scope(name: str) -> str:
        try:
            return sched.buffer(name).scope
        except KeyError:
            return "global"  # unknown buffers are treated as visible to everyone

    match stmt:
        case Store(buffer=b):
            s = scope(b.name)
            return None if s == "local" else f"it stores to {s} buffer {b.name}"
        case AtomicAdd(buffer=b):
            return f"it is an atomic add on {b.name}"
        case Extern(name=name, args=args, pure=pure):
            ptrs = [a.load.buffer.name for a in args if isinstance(a, AddressOf)]
            shared = [p for p in ptrs if scope(p) != "local"]
            if shared:
                return f"extern {name!r} receives T.address_of({shared[0]}[...]), a {scope(shared[0])} element"
            if ptrs:
                return None
            model = externs.registered(name)
            if pure or (model is not None and model.pure):
                return None
            return f"extern {name!r} takes no pointer and is not declared pure"
    return None


def check_effects(sched: Scheduled) -> list[Violation]:
    """L5 violations of ``sched``."""
    w = EffectsWalker(sched)
    w.walk(sched.body, 0, sched.threads, None)
    return w.out + _twice(sched, sched.body)


def _twice(sched: Scheduled, stmts: tuple[SStmt, ...]) -> list[Violation]:
    """A statement with a nonlocal effect that one statement list runs twice, as two siblings implementing the same
    source statement over the same statements (``T.Parallel`` lowered twice in a row, a leaf repeated): each
    instance would run twice, with nothing between to tell them apart (a software pipeline's prologue runs its
    other iterations in a loop of its own, fission's parts hold different statements, versions are the two sides of
    an ``if``). A rule author's mutant emitting a ``T.Parallel`` twice passed the verifier (the simulator's
    repeated-iteration check caught it)."""
    out: list[Violation] = []
    seen: dict[tuple, SStmt] = {}
    for s in stmts:
        key = None
        if isinstance(s, Leaf) and nonlocal_reason(s.stmt, sched) is not None:
            key = ("leaf", s.stmt.sid)
        elif isinstance(s, ThreadLoop) and s.sid is not None:
            leaves = [x.stmt for x in _walk(s) if isinstance(x, Leaf)]
            if any(nonlocal_reason(st, sched) is not None for st in leaves):
                key = ("loop", s.sid, tuple(sorted({st.sid for st in leaves})))
        if key is not None:
            if key in seen:
                sid = key[1]
                out.append(Violation("L5", f"statement {sid} is run twice (two copies of it in one statement "
                                           "list): each of its instances, which has a nonlocal effect, would run "
                                           "twice", (sid,), None))
            seen[key] = s
        for b in registry.bodies(s):
            out += _twice(sched, b)
    return out


def _walk(s: SStmt):
    stack = [s]
    while stack:
        x = stack.pop()
        yield x
        for b in registry.bodies(x):
            stack.extend(b)


class EffectsWalker:
    """The L5 walk: which threads run each statement (``[lo, hi)``) and the replicated ``ThreadLoop``
    around it, if any. Dispatches through the verifier's registry (concern ``"effects"``); a node whose
    model gives no ``effects`` hook has its bodies walked on the same threads."""

    def __init__(self, sched: Scheduled) -> None:
        self.sched = sched
        self.out: list[Violation] = []

    def walk(self, stmts: tuple[SStmt, ...], lo: int, hi: int, loop: ThreadLoop | None) -> None:
        if hi - lo <= 0:
            return
        for s in stmts:
            fn = registry.lookup("effects", s)
            if fn is not None:
                fn(s, self, lo, hi, loop)
            else:
                for b in registry.bodies(s):
                    self.walk(b, lo, hi, loop)


@handler("effects", Leaf)
def _leaf(s: Leaf, w: EffectsWalker, lo: int, hi: int, loop) -> None:
    st = s.stmt
    n = hi - lo
    reason = nonlocal_reason(st, w.sched)
    if reason is None or n <= 1:
        return
    if loop is not None:
        w.out.append(Violation(
            "L5", f"the replicated ThreadLoop (sid {loop.sid}) runs every iteration on each of its "
                  f"{n} threads, but its body statement {st.sid} has a nonlocal effect ({reason}): "
                  "each iteration must run once (partitioned mapping)",
            tuple(x for x in (loop.sid, st.sid) if x is not None), _buffer_of(st)))
    else:
        w.out.append(Violation(
            "L5", f"statement {st.sid} has a nonlocal effect ({reason}) and runs on {n} threads "
                  f"[{lo}, {hi}); it must run once (Elect or a partitioned ThreadLoop)",
            (st.sid,), _buffer_of(st)))


@handler("effects", SeqLoop)
def _seq(s: SeqLoop, w: EffectsWalker, lo: int, hi: int, loop) -> None:
    w.walk(s.body, lo, hi, loop)


@handler("effects", SIf)
def _if(s: SIf, w: EffectsWalker, lo: int, hi: int, loop) -> None:
    w.walk(s.then_body, lo, hi, loop)
    w.walk(s.else_body, lo, hi, loop)


@handler("effects", Elect)
def _elect(s: Elect, w: EffectsWalker, lo: int, hi: int, loop) -> None:
    tr = s.threads
    if lo <= tr.begin < hi:
        w.walk(s.body, tr.begin, tr.begin + 1, loop)


@handler("effects", RoleSplit)
def _roles(s: RoleSplit, w: EffectsWalker, lo: int, hi: int, loop) -> None:
    for r in s.roles:
        w.walk(r.body, max(lo, r.threads.begin), min(hi, r.threads.end), loop)


@handler("effects", ThreadLoop)
def _thread_loop(s: ThreadLoop, w: EffectsWalker, lo: int, hi: int, loop) -> None:
    tr = s.threads
    b_lo, b_hi = max(lo, tr.begin), min(hi, tr.end)
    if s.mapping == "partitioned":
        # each iteration runs on one thread; model it as a one-thread region
        if b_lo < b_hi:
            w.walk(s.body, b_lo, b_lo + 1, None)
    else:
        w.walk(s.body, b_lo, b_hi, s)


@handler("effects", TmaLoad, TmaStore)
def _tma(s, w: EffectsWalker, lo: int, hi: int, loop) -> None:
    n = hi - lo
    if n > 1:
        kind = "TMA load" if isinstance(s, TmaLoad) else "TMA store"
        w.out.append(Violation("L5", f"the {kind} (sid {s.sid}) is issued by {n} threads [{lo}, {hi}); "
                                     "it must be issued by one (Elect)",
                               (s.sid,) if s.sid is not None else (), s.dst.buffer.name))


@handler("effects", TileOp, Wait, Arrive, ArriveExpectTx, CpAsyncArrive, SyncThreads, FenceProxyAsync)
def _no_effect(s, w: EffectsWalker, lo: int, hi: int, loop) -> None:
    pass  # tile ops are split by element (every element once); synchronization has no data effect


def _buffer_of(st) -> str | None:
    match st:
        case Store(buffer=b) | AtomicAdd(buffer=b):
            return b.name
        case Extern(args=args):
            for a in args:
                if isinstance(a, AddressOf):
                    return a.load.buffer.name
    return None
