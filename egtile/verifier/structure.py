"""L7 divergence (and the path condition of L3): where barriers may appear.

``bar.sync id, count`` (PTX ISA 9.7.13.4) completes when ``count`` threads arrived; every thread that
executes it counts, whatever code it came from. Hence:

* a CTA barrier (``SyncThreads`` whose range exceeds the role) inside a ``RoleSplit`` role deadlocks or
  pairs with an unrelated barrier of the other role;
* a barrier inside divergent code (``Elect``, a ``ThreadLoop`` body whose threads may have no iteration,
  an ``SIf`` whose condition is not uniform) is not reached by all the threads it counts;
* the threads that reach it must be exactly its range; ``count`` must be a multiple of the warp size
  (32) and the range warp aligned; ids are 0..15, and id 0 is ``__syncthreads`` (whole block only: it has no count,
  so a block of fewer than 32 threads, ``T.Kernel(threads=1)``, uses it as any block does).

An ``SIf`` is uniform when every thread evaluates its condition to the same value
(:mod:`egtile.verifier.uniform`: block indices, serial-loop variables, loads of read-only parameters,
shared buffers and uniform locals); a barrier may sit inside a uniform ``SIf`` only. A condition that
reads memory is *data-dependent*: the verifier cannot evaluate it, so

* mbarrier operations (waits, arrivals, TMA loads) under it make the arrivals per phase depend on data: L3;
* a side of a uniform data-dependent ``SIf`` that contains a ``SyncThreads`` must begin and end with one
  (sealed, so the traces can check it as a unit, :mod:`egtile.verifier.paths`): L3 otherwise.

Roles of one ``RoleSplit`` must be disjoint and inside the block.
"""

from __future__ import annotations

import itertools

from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Elect, FenceProxyAsync, Leaf, Role, RoleSplit, Scheduled, SeqLoop, SIf,
    SStmt, SyncThreads, ThreadLoop, TileOp, TmaLoad, TmaStore, Wait,
)
from egtile.verifier import registry
from egtile.verifier.registry import handler
from egtile.verifier.uniform import has_sync, sealed, uniformity
from egtile.verifier.violation import Violation

WARP = 32
NAMED_BARRIERS = 16  # bar.sync ids 0..15 (PTX ISA 9.7.13.4)


def check_structure(sched: Scheduled) -> list[Violation]:
    w = StructureWalker(sched)
    w.walk(sched.body, 0, sched.threads, None, None, set(), None)
    return w.out


class StructureWalker:
    """The L7 walk: the threads ``[lo, hi)`` reaching each statement, the role around it, why it is
    divergent (if it is), the uniform (serial) variables, and the data-dependent ``SIf`` around it.
    Dispatches through the verifier's registry (concern ``"structure"``); a node whose model gives no
    ``structure`` hook has its bodies walked with the same state."""

    def __init__(self, sched: Scheduled) -> None:
        self.sched = sched
        self.out: list[Violation] = []
        self.uniformity = uniformity(sched)

    def walk(self, stmts: tuple[SStmt, ...], lo: int, hi: int, role: Role | None, divergent: str | None,
             serial: set[str], data_if: int | None) -> None:
        for s in stmts:
            fn = registry.lookup("structure", s)
            if fn is not None:
                fn(s, self, lo, hi, role, divergent, serial, data_if)
            else:
                for b in registry.bodies(s):
                    self.walk(b, lo, hi, role, divergent, serial, data_if)


@handler("structure", SyncThreads)
def _sync_threads(s: SyncThreads, w: StructureWalker, lo, hi, role, divergent, serial, data_if) -> None:
    _sync(s.threads, s.barrier_id, w.sched, w.out, lo, hi, role, divergent)


@handler("structure", Wait, Arrive, ArriveExpectTx, CpAsyncArrive, TmaLoad)
def _mbarrier_op(s, w: StructureWalker, lo, hi, role, divergent, serial, data_if) -> None:
    if data_if is not None:
        name = type(s).__name__
        w.out.append(Violation("L3", f"{name} on {s.barrier} is under a data-dependent condition "
                                     f"(SIf sid {data_if}): the arrivals and waits of a phase differ "
                                     "between paths", (data_if,), barrier=s.barrier))


@handler("structure", SeqLoop)
def _seq(s: SeqLoop, w: StructureWalker, lo, hi, role, divergent, serial, data_if) -> None:
    w.walk(s.body, lo, hi, role, divergent, serial | {s.var.name}, data_if)


@handler("structure", SIf)
def _if(s: SIf, w: StructureWalker, lo, hi, role, divergent, serial, data_if) -> None:
    u = w.uniformity
    if u.static(s.cond, serial):
        div, dif = divergent, data_if
    else:
        reasons = u.reasons(s.cond, serial)
        div = divergent if not reasons else (
            divergent or f"an SIf on a non-uniform condition (sid {s.sid}: {'; '.join(reasons)})")
        dif = data_if if data_if is not None else (s.sid if s.sid is not None else -1)
        if div is None:
            for name, side in (("then", s.then_body), ("else", s.else_body)):
                if has_sync(side) and not sealed(side):
                    w.out.append(Violation(
                        "L3", f"the {name} side of the SIf on data (sid {s.sid}) contains a CTA barrier but does "
                              "not begin and end with one: a side with barriers under a data-dependent condition "
                              "must be sealed (its accesses are checked against the rest only through the seal)",
                        (s.sid,) if s.sid is not None else (), barrier="bar.sync"))
    w.walk(s.then_body, lo, hi, role, div, serial, dif)
    w.walk(s.else_body, lo, hi, role, div, serial, dif)


@handler("structure", Elect)
def _elect(s: Elect, w: StructureWalker, lo, hi, role, divergent, serial, data_if) -> None:
    tr = s.threads
    w.walk(s.body, tr.begin, tr.begin + 1, role, divergent or "an Elect (one thread)", serial, data_if)


@handler("structure", ThreadLoop)
def _thread_loop(s: ThreadLoop, w: StructureWalker, lo, hi, role, divergent, serial, data_if) -> None:
    tr = s.threads
    w.walk(s.body, tr.begin, tr.end, role,
           divergent or f"a ThreadLoop body (sid {s.sid}), which threads without an iteration skip", serial, data_if)


@handler("structure", RoleSplit)
def _role_split(s: RoleSplit, w: StructureWalker, lo, hi, role, divergent, serial, data_if) -> None:
    _roles(s.roles, s.sid, w.sched, w.out)
    for r in s.roles:
        w.walk(r.body, r.threads.begin, r.threads.end, r, divergent, serial, data_if)


@handler("structure", Leaf, TileOp, TmaStore, FenceProxyAsync)
def _plain(s, w: StructureWalker, lo, hi, role, divergent, serial, data_if) -> None:
    pass


def _sync(tr, bid, sched, out, lo, hi, role, divergent) -> None:
    name = f"bar.sync {bid}"
    whole_block = bid == 0 and tr.begin == 0 and tr.count == sched.threads
    # __syncthreads (bar.sync 0 without a count) takes every thread of the CTA, so a block of 1..16 threads may use it;
    # a count, which must be whole warps (PTX ISA 9.7.13.4), is only given for part of a block
    if (tr.count % WARP or tr.begin % WARP) and not whole_block:
        out.append(Violation("L7", f"{name} counts threads [{tr.begin}, {tr.end}); named barriers count whole warps: "
                                   f"the count must be a multiple of {WARP} and the range warp aligned",
                             barrier=name))
    if not 0 <= bid < NAMED_BARRIERS:
        out.append(Violation("L7", f"barrier id {bid} is outside 0..{NAMED_BARRIERS - 1}", barrier=name))
    if bid == 0 and (tr.begin != 0 or tr.count != sched.threads):
        out.append(Violation("L7", f"barrier id 0 is __syncthreads (all {sched.threads} threads) but is used for "
                                   f"threads [{tr.begin}, {tr.end})", barrier=name))
    if role is not None and not (role.threads.begin <= tr.begin and tr.end <= role.threads.end):
        out.append(Violation("L7", f"{name} for threads [{tr.begin}, {tr.end}) is inside role {role.name!r} "
                                   f"(threads [{role.threads.begin}, {role.threads.end})): the other role's threads "
                                   "never reach it, so it deadlocks or pairs with an unrelated barrier",
                             barrier=name))
    elif divergent is not None:
        out.append(Violation("L7", f"{name} is inside {divergent}: not every thread it counts reaches it",
                             barrier=name))
    elif (lo, hi) != (tr.begin, tr.end):
        out.append(Violation("L7", f"{name} counts threads [{tr.begin}, {tr.end}) but is reached by threads "
                                   f"[{lo}, {hi})", barrier=name))


def _roles(roles: tuple[Role, ...], sid, sched: Scheduled, out: list[Violation]) -> None:
    spans = sorted((r.threads.begin, r.threads.end, r.name) for r in roles)
    for (b0, e0, n0), (b1, e1, n1) in itertools.pairwise(spans):
        if b1 < e0:
            out.append(Violation("L7", f"roles {n0!r} [{b0}, {e0}) and {n1!r} [{b1}, {e1}) overlap",
                                 (sid,) if sid is not None else ()))
    for b, e, n in spans:
        if b < 0 or e > sched.threads:
            out.append(Violation("L7", f"role {n!r} [{b}, {e}) is outside the block's {sched.threads} threads",
                                 (sid,) if sid is not None else ()))
