"""The verifier's own model of the register-fragment and wgmma nodes (:mod:`egtile.ir.fragment`,
:mod:`egtile.ir.wgmma`), independent of the rules that produce them.

* A register fragment (``Scheduled.fragments``) is thread-private: element ``(row, col)`` belongs to thread
  ``layout.owner(row, col)[0]``. Every access of it is an event whose elements carry that owner; an access
  by another thread (a by-layout statement whose fragment layout is not the buffer's, a ``ThreadLoop`` or
  ``TileOp`` that touches a register fragment) is an L1 violation (:func:`check_fragments`).
* ``FragmentOp``: the op's accesses, element ``e`` of each region by the owner of fragment element ``e``.
* ``LayoutLoop``: the body once per element, on the element's owner, with the loop variables bound.
* ``WgmmaMma``: the operand tiles read through the async proxy by the warpgroup threads, the accumulator
  elements read and written by their owners; the layouts it names must be its buffers' (L1: a descriptor
  swizzle that is not the buffer's layout reads permuted data).
* ``WgmmaWait``: no access.

Asynchrony (an accumulator read or an operand refill before ``wait_group``): :func:`check_wgmma_waits`
checks, in every statement list, that a ``WgmmaMma`` is followed by a ``WgmmaWait`` on its threads before any
other statement of the list that touches its accumulator (L1: a read of an async write not yet complete)
or its operands, before an mbarrier arrive, which could release its operand stage to a producer (L2: a
write after a read still in flight), and before the list ends (L1).
"""

from __future__ import annotations

import numpy as np

from egtile.ir.fragment import FragmentOp, LayoutLoop
from egtile.ir.kernel import Copy, Fill, Gemm
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Elect, RoleSplit, Scheduled, SeqLoop, SIf, SStmt, ThreadLoop, TileOp, swalk,
)
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.verify.violation import Violation

NODES = (FragmentOp, LayoutLoop, WgmmaMma, WgmmaWait)


def _positions(frag, t: int) -> list[int]:
    return [r * frag.cols + c for _v, r, c in frag.elements(t)]


def tracked(s, params: set[str]) -> set[str]:
    """Kernel parameters the node writes (their accesses are tracked)."""
    out: set[str] = set()
    match s:
        case FragmentOp(op=Copy(dst=r)) | FragmentOp(op=Fill(dst=r)) | FragmentOp(op=Gemm(c=r)):
            if r.buffer.name in params:
                out.add(r.buffer.name)
        case LayoutLoop(body=body):
            from egtile.ir.kernel import AtomicAdd, Store
            from egtile.ir.scheduled import Leaf

            for x in swalk(body):
                if isinstance(x, Leaf) and isinstance(x.stmt, (Store, AtomicAdd)) and x.stmt.buffer.name in params:
                    out.add(x.stmt.buffer.name)
    return out


def trace(tr, s, a, lo: int, hi: int, env: dict, path: tuple, loop_sid) -> bool:
    """Emit ``s``'s events for agent ``a`` (threads ``[lo, hi)``) on tracer ``tr``; ``False`` if ``s`` is none
    of the nodes modelled here."""
    match s:
        case FragmentOp():
            _fragment_op(tr, s, a, lo, hi, env, path)
        case LayoutLoop():
            _layout_loop(tr, s, a, lo, hi, env, path, loop_sid)
        case WgmmaMma():
            _wgmma(tr, s, a, lo, hi, env, path)
        case WgmmaWait():
            pass
        case _:
            return False
    return True


def _owned(tr, s, lo: int, hi: int, frag) -> tuple[np.ndarray, dict[int, int]]:
    b, e = max(lo, s.threads.begin), min(hi, s.threads.end)
    pos: list[int] = []
    owner: dict[int, int] = {}
    for t in range(b, e):
        for p in _positions(frag, t - s.threads.begin):
            pos.append(p)
            owner[p] = t
    return np.array(sorted(pos), dtype=np.int64), owner


def _fragment_op(tr, s: FragmentOp, a, lo, hi, env, path) -> None:
    frag = tr.sched.fragment(s.fragment)
    if frag is None:
        return
    owned, owner = _owned(tr, s, lo, hi, frag)
    if not len(owned):
        return
    op, sid = s.op, s.sid
    outer, tr.merge = tr.merge, {}
    saved, tr.cur_tid = tr.cur_tid, None
    of = owner.__getitem__
    match op:
        case Fill(dst=dst, value=v):
            tr.expr_reads(a, v, sid, path, env)
            tr.region(a, dst, "w", sid, path, env, owned=owned, owner_of=of)
        case Copy(src=src, dst=dst):
            tr.region(a, src, "r", sid, path, env, owned=owned, owner_of=of)
            tr.region(a, dst, "w", sid, path, env, owned=owned, owner_of=of)
        case Gemm(a=ra, b=rb, c=rc, clear_accum=clear):
            tr.region(a, ra, "r", sid, path, env)
            tr.region(a, rb, "r", sid, path, env)
            if not clear:
                tr.region(a, rc, "r", sid, path, env, owned=owned, owner_of=of)
            tr.region(a, rc, "w", sid, path, env, owned=owned, owner_of=of)
    tr.cur_tid = saved
    tr.merge = outer


def _layout_loop(tr, s: LayoutLoop, a, lo, hi, env, path, loop_sid) -> None:
    frag = tr.sched.fragment(s.fragment)
    if frag is None:
        return
    b, e = max(lo, s.threads.begin), min(hi, s.threads.end)
    names = [v.name for v in s.vars]
    saved = [env.get(n) for n in names]
    outer, tr.merge = tr.merge, {}
    for t in range(b, e):
        for _v, r, c in frag.elements(t - s.threads.begin):
            env[names[0]], env[names[1]] = r, c
            tr.walk(s.body, a, b, e, env, path, s.sid if s.sid is not None else loop_sid, t)
    tr.merge = outer
    for n, v in zip(names, saved):
        if v is None:
            env.pop(n, None)
        else:
            env[n] = v


def _wgmma(tr, s: WgmmaMma, a, lo, hi, env, path) -> None:
    frag = tr.sched.fragment(s.gemm.c.buffer.name)
    if frag is None:
        return
    owned, owner = _owned(tr, s, lo, hi, frag)
    if not len(owned):
        return
    g, sid = s.gemm, s.sid
    outer, tr.merge = tr.merge, {}
    saved, tr.cur_tid = tr.cur_tid, None
    tr.region(a, g.a, "r", sid, path, env, proxy="async")
    tr.region(a, g.b, "r", sid, path, env, proxy="async")
    if not g.clear_accum:
        tr.region(a, g.c, "r", sid, path, env, owned=owned, owner_of=owner.__getitem__)
    tr.region(a, g.c, "w", sid, path, env, owned=owned, owner_of=owner.__getitem__)
    tr.cur_tid = saved
    tr.merge = outer


# ----------------------------------------------------------------------------------------------------
# Static checks over the schedule


def _touches(s: SStmt, bufs: set[str]) -> bool:
    from egtile.analysis import names, reads, writes
    from egtile.ir.scheduled import Leaf

    for x in swalk((s,)):
        if isinstance(x, Leaf) and (names(reads(x.stmt)) | names(writes(x.stmt))) & bufs:
            return True
        op = getattr(x, "op", None) if isinstance(x, (TileOp, FragmentOp)) else None
        if op is not None and (names(reads(op)) | names(writes(op))) & bufs:
            return True
        if isinstance(x, WgmmaMma) and {x.gemm.a.buffer.name, x.gemm.b.buffer.name, x.gemm.c.buffer.name} & bufs:
            return True
        if isinstance(x, LayoutLoop) and any(_touches(y, bufs) for y in x.body):
            return True
        src = getattr(x, "src", None)
        dst = getattr(x, "dst", None)
        if any(getattr(getattr(r, "buffer", None), "name", None) in bufs for r in (src, dst)):
            return True
    return False


def _bodies(s: SStmt):
    match s:
        case SeqLoop(body=b) | ThreadLoop(body=b) | Elect(body=b) | LayoutLoop(body=b):
            yield b
        case SIf(then_body=t, else_body=e):
            yield t
            yield e
        case RoleSplit(roles=roles):
            for r in roles:
                yield r.body


def check_wgmma_waits(sched: Scheduled) -> list[Violation]:
    """L2 for wgmma (module docstring): every group is waited for before its accumulator or operands are
    touched again, before an arrive, and before its statement list ends."""
    out: list[Violation] = []

    def walk(stmts: tuple[SStmt, ...]) -> None:
        open_: list[WgmmaMma] = []
        for s in stmts:
            for b in _bodies(s):
                walk(b)
            if isinstance(s, WgmmaWait):
                if s.pending == 0:
                    open_ = [w for w in open_ if not (w.threads.begin < s.threads.end and s.threads.begin < w.threads.end)]
                continue
            for w in open_:
                acc = {w.gemm.c.buffer.name}
                ops = {w.gemm.a.buffer.name, w.gemm.b.buffer.name}
                if isinstance(s, WgmmaMma) and s.gemm.c.buffer.name in acc and not (_touches(s, ops - {
                        s.gemm.a.buffer.name, s.gemm.b.buffer.name})):
                    continue  # chained wgmmas on one accumulator are ordered by the tensor core
                if isinstance(s, (Arrive, ArriveExpectTx, CpAsyncArrive)):
                    out.append(Violation("L2", f"an mbarrier arrive follows wgmma (sid {w.sid}) before a wgmma.wait_group: "
                                               f"it may release the stage of {', '.join(sorted(ops))} the tensor core is "
                                               "still reading", (w.sid,), w.gemm.a.buffer.name))
                elif _touches(s, acc | ops):
                    out.append(Violation("L1" if _touches(s, acc) else "L2", f"a statement touches the accumulator or an operand of wgmma (sid {w.sid}) "
                                               "before the wgmma.wait_group that completes it", (w.sid,),
                                         w.gemm.c.buffer.name))
            if isinstance(s, WgmmaMma):
                open_.append(s)
        for w in open_:
            out.append(Violation("L1", f"wgmma (sid {w.sid}) is not completed by a wgmma.wait_group in its statement "
                                       "list: its accumulator is never known to be complete", (w.sid,), w.gemm.c.buffer.name))

    walk(sched.body)
    return out


def check_fragments(sched: Scheduled) -> list[Violation]:
    """L1 for register fragments and layouts: only by-layout statements in the fragment's own layout touch a
    register fragment; a wgmma's tiling is its accumulator's layout and its swizzles its operands' layouts; a
    TMA copy's swizzle is its shared buffer's layout."""
    from egtile.ir.scheduled import Leaf, TmaLoad, TmaStore

    regs = {n for n, _ in sched.fragments}
    out: list[Violation] = []
    for s in swalk(sched.body):
        match s:
            case FragmentOp(fragment=f) if sched.fragment(f) is None:
                out.append(Violation("L1", f"a statement runs by the layout of {f}, which is not a register fragment",
                                     (s.sid,), f))
            case TileOp(op=op):
                from egtile.analysis import names, reads, writes

                hit = (names(reads(op)) | names(writes(op))) & regs
                if hit:
                    out.append(Violation("L1", f"a cooperative tile op (sid {op.sid}) splits register fragment "
                                               f"{sorted(hit)[0]} by element index over threads that do not hold it",
                                         (op.sid,), sorted(hit)[0]))
            case ThreadLoop(body=body, sid=sid):
                if any(_touches(x, regs) for x in body if isinstance(x, Leaf)):
                    out.append(Violation("L1", f"a thread loop (sid {sid}) touches a register fragment by iteration "
                                               "index; only the thread holding an element may access it",
                                         (sid,) if sid is not None else ()))
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
    return out


__all__ = ["NODES", "check_fragments", "check_wgmma_waits", "trace", "tracked"]
