"""The enumerating reference verifier's model of the register-fragment and wgmma nodes (:mod:`egtile.ir.fragment`,
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

The same semantics as the symbolic verifier's model (:mod:`egtile.verifier.mma`, which also holds the static
checks of ownership and of wgmma asynchrony that both verifiers run).
"""

from __future__ import annotations

import numpy as np

from egtile.ir.fragment import FragmentOp, LayoutLoop, RowCombine, RowReduce
from egtile.ir.kernel import Copy, Fill, Gemm
from egtile.ir.scheduled import swalk
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.verifier.mma import first_replica


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
        case RowReduce():
            _row_reduce(tr, s, a, lo, hi, env, path)
            if s.scratch is not None:
                _row_scratch(tr, s, a, lo, hi, env, path, "w")
        case RowCombine():
            _row_scratch(tr, s, a, lo, hi, env, path, "r")
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
        if s.once and not first_replica(frag, t - s.threads.begin):
            continue  # a row's iteration on its lowest-numbered owner alone (LayoutLoop.once)
        for _v, r, c in frag.elements(t - s.threads.begin):
            env[names[0]] = r
            if len(names) > 1:
                env[names[1]] = c
            tr.walk(s.body, a, b, e, env, path, s.sid if s.sid is not None else loop_sid, t)
    tr.merge = outer
    for n, v in zip(names, saved):
        if v is None:
            env.pop(n, None)
        else:
            env[n] = v


def _row_reduce(tr, s: RowReduce, a, lo, hi, env, path) -> None:
    # each thread reads its own elements of the source (the row fragment it writes is its own register copy)
    frag = tr.sched.fragment(s.fragment)
    if frag is None:
        return
    owned, owner = _owned(tr, s, lo, hi, frag)
    if not len(owned):
        return
    from egtile.ir.kernel import Region
    from egtile.ir.kernel import Const

    src = s.reduce.src
    whole = Region(src, tuple(Const(0, "int32") for _ in src.shape), tuple(src.shape))
    outer, tr.merge = tr.merge, {}
    saved, tr.cur_tid = tr.cur_tid, None
    tr.region(a, whole, "r", s.sid, path, env, owned=owned, owner_of=owner.__getitem__)
    tr.cur_tid = saved
    tr.merge = outer


def _row_scratch(tr, s, a, lo, hi, env, path, mode: str) -> None:
    # the cross-warpgroup partials of a row reduction: stored by the replica of each warp whose shuffle lanes are 0
    # at [group, row], loaded by every replica from every group's slot of its rows
    from egtile.ir.kernel import Region

    rf = tr.sched.fragment(s.reduce.dst.name)
    if rf is None:
        return
    mine: dict[int, list[int]] = {}
    for t in range(max(lo, s.threads.begin), min(hi, s.threads.end)):
        u = t - s.threads.begin
        if u >= rf.num_threads:
            continue
        rows = [r for _k, r, _c in rf.elements(u)]
        if mode == "w":
            if any(u & m for m in s.lanes):
                continue
            slots = [rf.cross_warp_group(u) % s.groups]
        else:
            slots = list(range(s.groups))
        mine[t] = sorted(g * rf.rows + r for g in slots for r in rows)
    outer = tr.merge
    saved, tr.cur_tid = tr.cur_tid, None
    for t, flats in mine.items():  # one event per thread: several replicas read one element, and a wrong slot would
        tr.merge = {}              # have two threads write one
        tr.region(a, Region.full(s.scratch), mode, s.sid, path, env, owned=np.array(flats, dtype=np.int64),
                  owner_of=lambda _p, t=t: t)
    tr.cur_tid = saved
    tr.merge = outer


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
    if s.a_registers:
        # register A: the tensor core reads each element from its owner's registers (egtile.ir.wgmma)
        fa = tr.sched.fragment(g.a.buffer.name)
        if fa is not None:
            a_owned, a_owner = _owned(tr, s, lo, hi, fa)
            tr.region(a, g.a, "r", sid, path, env, owned=a_owned, owner_of=a_owner.__getitem__)
    else:
        tr.region(a, g.a, "r", sid, path, env, proxy="async")
    tr.region(a, g.b, "r", sid, path, env, proxy="async")
    if not g.clear_accum:
        tr.region(a, g.c, "r", sid, path, env, owned=owned, owner_of=owner.__getitem__)
    tr.region(a, g.c, "w", sid, path, env, owned=owned, owner_of=owner.__getitem__)
    tr.cur_tid = saved
    tr.merge = outer


__all__ = ["trace", "tracked"]
