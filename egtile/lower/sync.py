"""Placement of CTA barriers (``SyncThreads``) between dependent cross-thread memory accesses.

Mechanical (no choice): walk each statement list that a thread set runs together (the whole block, or
one role of a warp-specialized loop), keep the accesses made since the last barrier, and put a barrier
before the first statement that conflicts with one of them. Two accesses conflict when they touch the
same non-local buffer, at least one writes, and they are not provably made by the same thread for each
element. "Same thread" is known in two cases:

* both sit in partitioned thread loops over the same threads and the same extents, and index the buffer
  exactly by the loop variables (so element ``i`` belongs to rank ``i % count`` in both); a leading
  stage index of a multi-versioned buffer is ignored;
* both run on the same elected thread.

Loops are handled to a fixpoint: accesses pending at the end of the body are pending again at its start
(the next iteration), and the barriers needed for that are added inside the body. A warp-specialized
region (``RoleSplit``) is one access to everything its roles touch; inside a role the barrier is a named
``bar.sync`` over the role's threads (id 1 for the consumer, 2 for the producer, PTX ISA §9.7.13.4), and
buffers guarded by the region's mbarriers are left to the mbarrier protocol. ``local`` buffers never
conflict (PTX ISA §5.1: per thread).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from egtile.analysis import ANY_BUFFER, free_vars, reads, writes
from egtile.ir import (
    Copy,
    Elect,
    Gemm,
    Leaf,
    MBarrier,
    Region,
    RoleSplit,
    SeqLoop,
    SIf,
    SStmt,
    SyncThreads,
    ThreadLoop,
    ThreadRange,
    TileOp,
    TmaLoad,
    Var,
)


@dataclass(frozen=True)
class Acc:
    """One access for hazard purposes: buffer name, whether it writes, and an owner key (``None``: any
    thread may touch any element)."""

    buffer: str
    write: bool
    owner: Any = None


def _conflicts(pending: frozenset[Acc], new: frozenset[Acc]) -> bool:
    for p in pending:
        for a in new:
            same = p.buffer == a.buffer or ANY_BUFFER in (p.buffer, a.buffer)
            if not same or not (p.write or a.write):
                continue
            if p.owner is not None and p.owner == a.owner:
                continue
            return True
    return False


class _Accesses:
    def __init__(self, staged: frozenset[str], ignore: frozenset[str]) -> None:
        self.staged = staged
        self.ignore = ignore

    def _keep(self, scope: str, name: str) -> bool:
        return scope != "local" and name not in self.ignore

    def leaf(self, stmt, owner_of) -> set[Acc]:
        out: set[Acc] = set()
        for group, is_write in ((reads(stmt), False), (writes(stmt), True)):
            for a in group:
                if self._keep(a.scope, a.buffer):
                    out.add(Acc(a.buffer, is_write, owner_of(a)))
        return out

    def of(self, s: SStmt, owner_of=lambda a: None) -> set[Acc]:
        match s:
            case Leaf(stmt=stmt):
                return self.leaf(stmt, owner_of)
            case TileOp(op=op, threads=t):
                return self.leaf(op, self._tile_owner(op, t))
            case TmaLoad(dst=dst):
                n = dst.buffer.name
                return {Acc(n, True)} if self._keep(dst.buffer.scope, n) else set()
            case Elect(threads=t, body=body):
                key = ("elect", t.begin)
                return set().union(*(self.of(b, lambda a: key) for b in body)) if body else set()
            case ThreadLoop(vars=vars_, extents=ext, mapping=m, threads=t, body=body):
                fn = self._owner_fn(vars_, ext, t) if m == "partitioned" else (lambda a: None)
                return set().union(*(self.of(b, fn) for b in body)) if body else set()
            case SeqLoop(body=body):
                # Inside a per-thread context the loop's accesses keep their owner only if they do not
                # depend on the inner loop (analysis widening turns them into regions, which lose it).
                return set().union(*(self.of(b, owner_of) for b in body)) if body else set()
            case SIf(then_body=t, else_body=e):
                return set().union(*(self.of(b, owner_of) for b in t + e)) if t + e else set()
            case RoleSplit(roles=roles):
                out: set[Acc] = set()
                for r in roles:
                    for b in r.body:
                        out |= {Acc(a.buffer, a.write) for a in self.of(b)}
                return out
            case _:
                return set()

    def _tile_owner(self, op, t: ThreadRange):
        # A cooperative tile op gives element e of its destination region to rank e % count; an access of
        # exactly that region (a Gemm's accumulator, a Copy's equally shaped source) has the same owner.
        dst = op.c if isinstance(op, Gemm) else getattr(op, "dst", None)
        if not isinstance(dst, Region):
            return lambda a: None
        regions = [dst] + ([op.src] if isinstance(op, Copy) and op.src.extents == dst.extents else [])

        def owner(a) -> Any:
            for r in regions:
                if a.region == r:
                    return ("tile", t.begin, t.count, r.buffer.name, r.offsets, r.extents)
            return None
        return owner

    def _owner_fn(self, vars_: tuple[Var, ...], extents: tuple[int, ...], t: ThreadRange):
        names = tuple(v.name for v in vars_)

        def owner(a) -> Any:
            # Element -> thread is fixed when every loop variable is one whole index and the other
            # indices do not depend on them (they are the same for every thread).
            r = a.region
            if r is None or any(e != 1 for e in r.extents):
                return None
            positions = []
            for n in names:
                hits = [d for d, o in enumerate(r.offsets) if isinstance(o, Var) and o.name == n]
                if len(hits) != 1:
                    return None
                positions.append(hits[0])
            others = [o for d, o in enumerate(r.offsets) if d not in positions]
            if any(set(names) & free_vars(o) for o in others):
                return None
            return ("thread-loop", t.begin, t.count, extents, tuple(positions))
        return owner


def _place(stmts: tuple[SStmt, ...], pending: frozenset[Acc], threads: ThreadRange, bar_id: int,
           acc: _Accesses, barriers: dict[str, MBarrier]) -> tuple[tuple[SStmt, ...], frozenset[Acc]]:
    out: list[SStmt] = []
    for s in stmts:
        match s:
            case SyncThreads():
                out.append(s)
                pending = frozenset()
            case SeqLoop(body=body):
                start = pending
                new_body, end = _place(body, start, threads, bar_id, acc, barriers)
                for _ in range(8):
                    again, end2 = _place(body, start | end, threads, bar_id, acc, barriers)
                    if again == new_body and end2 == end:
                        break
                    new_body, end = again, end2
                out.append(SeqLoop(s.var, s.start, s.stop, new_body, s.unroll, s.sid))
                pending = start | end
            case SIf(then_body=t, else_body=e):
                nt, pt = _place(t, pending, threads, bar_id, acc, barriers)
                ne, pe = _place(e, pending, threads, bar_id, acc, barriers)
                out.append(SIf(s.cond, nt, ne, s.sid))
                pending = pt | pe
            case RoleSplit(roles=roles):
                mine = frozenset(acc.of(s))
                if _conflicts(pending, mine):
                    out.append(SyncThreads(threads, bar_id))
                    pending = frozenset()
                guarded = frozenset(g for b in barriers.values() for g in b.guards)
                inner = _Accesses(acc.staged, acc.ignore | guarded)
                new_roles = []
                for i, r in enumerate(roles):
                    body, _ = _place(r.body, frozenset(), r.threads, i + 1, inner, barriers)
                    new_roles.append(type(r)(r.name, r.threads, r.setmaxnreg, body))
                out.append(RoleSplit(tuple(new_roles), s.sid))
                pending = pending | mine
            case _:
                mine = frozenset(acc.of(s))
                if _conflicts(pending, mine):
                    out.append(SyncThreads(threads, bar_id))
                    pending = frozenset()
                out.append(s)
                pending = pending | mine
    return tuple(out), pending


def place_syncs(stmts: tuple[SStmt, ...], everyone: ThreadRange, *, barriers: tuple[MBarrier, ...] = (),
                staged: frozenset[str] = frozenset(), ordered: frozenset[str] = frozenset()) -> tuple[SStmt, ...]:
    """``stmts`` (a block's body, run by ``everyone``) with ``SyncThreads`` added where needed.

    Args:
        stmts: the lowered body.
        everyone: all threads of the block.
        barriers: the schedule's mbarriers (their guarded buffers are ordered by them inside roles).
        staged: names of multi-versioned buffers (their leading stage index is ignored for ownership).
        ordered: buffers whose every access the lowering has already ordered itself, everywhere (the
            stages of a software-pipelined loop: private to the loop, read-after-write through ``full``
            mbarriers, write-after-read through the CTA barrier it placed); they are not tracked.
    """
    staged = staged | frozenset(g for b in barriers for g in b.guards)
    acc = _Accesses(staged, ordered)
    out, _ = _place(stmts, frozenset(), everyone, 0, acc, {b.name: b for b in barriers})
    return out
