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
    Elect, Leaf, RoleSplit, Scheduled, SeqLoop, SIf, SStmt, ThreadLoop, TileOp, TmaLoad, TmaStore,
)
from egtile.verify.violation import Violation


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
    out: list[Violation] = []
    _walk(sched.body, 0, sched.threads, sched, out, None)
    return out


def _walk(stmts: tuple[SStmt, ...], lo: int, hi: int, sched: Scheduled, out: list[Violation],
          loop: ThreadLoop | None) -> None:
    n = hi - lo
    if n <= 0:
        return
    for s in stmts:
        match s:
            case Leaf(stmt=st):
                reason = nonlocal_reason(st, sched)
                if reason is not None and n > 1:
                    if loop is not None:
                        out.append(Violation(
                            "L5", f"the replicated ThreadLoop (sid {loop.sid}) runs every iteration on each of its "
                                  f"{n} threads, but its body statement {st.sid} has a nonlocal effect ({reason}): "
                                  "each iteration must run once (partitioned mapping)",
                            tuple(x for x in (loop.sid, st.sid) if x is not None), _buffer_of(st)))
                    else:
                        out.append(Violation(
                            "L5", f"statement {st.sid} has a nonlocal effect ({reason}) and runs on {n} threads "
                                  f"[{lo}, {hi}); it must run once (Elect or a partitioned ThreadLoop)",
                            (st.sid,), _buffer_of(st)))
            case SeqLoop(body=b):
                _walk(b, lo, hi, sched, out, loop)
            case SIf(then_body=t, else_body=e):
                _walk(t, lo, hi, sched, out, loop)
                _walk(e, lo, hi, sched, out, loop)
            case Elect(threads=tr, body=b):
                if lo <= tr.begin < hi:
                    _walk(b, tr.begin, tr.begin + 1, sched, out, loop)
            case RoleSplit(roles=roles):
                for r in roles:
                    _walk(r.body, max(lo, r.threads.begin), min(hi, r.threads.end), sched, out, loop)
            case ThreadLoop(threads=tr, mapping=mapping, body=b):
                b_lo, b_hi = max(lo, tr.begin), min(hi, tr.end)
                if mapping == "partitioned":
                    # each iteration runs on one thread; model it as a one-thread region
                    if b_lo < b_hi:
                        _walk(b, b_lo, b_lo + 1, sched, out, None)
                else:
                    _walk(b, b_lo, b_hi, sched, out, s)
            case TmaLoad(sid=sid) | TmaStore(sid=sid):
                if n > 1:
                    kind = "TMA load" if isinstance(s, TmaLoad) else "TMA store"
                    out.append(Violation("L5", f"the {kind} (sid {sid}) is issued by {n} threads [{lo}, {hi}); "
                                               "it must be issued by one (Elect)",
                                         (sid,) if sid is not None else (),
                                         s.dst.buffer.name))
            case TileOp():
                pass  # split by element: every element once
            case _:
                pass


def _buffer_of(st) -> str | None:
    match st:
        case Store(buffer=b) | AtomicAdd(buffer=b):
            return b.name
        case Extern(args=args):
            for a in args:
                if isinstance(a, AddressOf):
                    return a.load.buffer.name
    return None
