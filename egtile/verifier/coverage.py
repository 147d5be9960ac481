"""L11: every statement of the kernel is in its schedule, and a ``T.Parallel`` mapped onto threads runs every iteration.

A schedule may run a statement on other threads, with another instruction, in another place or twice (the
versions of a versioned statement), but never drop it: a dropped store leaves its output unwritten, a dropped
fill leaves a buffer holding what it held before. Checked here from ``ir.Scheduled`` alone: every tile-IR
statement of the kernel that does something (a store, copy, fill, gemm, reduction, atomic, extern call, or a
barrier operation of a hand-written protocol) must appear in the schedule, as the statement itself inside a
scheduled node or as the ``sid`` of the node that implements it. The one sanctioned absence: the zero writer (a
``T.fill`` or a ``T.Parallel`` store) of a wgmma accumulator folded into the wgmma's ``scale-d = 0`` (a ``WgmmaMma``
that clears where its kernel's ``T.gemm`` accumulates; L9's fold check proves the writer wrote 0).

Every iteration, too: a :class:`~egtile.ir.scheduled.ThreadLoop` that implements a ``T.Parallel`` nest runs its
variables over ``[0, extent)`` (a loop starting at ``c`` has ``var + c`` substituted), so each extent must be the
source loop's ``stop - start``, and a vectorized one hands out whole groups of ``vector`` iterations, so its trip
count must be a multiple of the width (``ThreadLoop.owned``; the tail would never run). A schedule that cuts one
iteration leaves its output element unwritten, which no order or race check sees: nothing else touches it.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass

from egtile.ir.kernel import AtomicAdd, Const, Copy, Extern, Fill, For, Gemm, If, Reduce, Store, walk
from egtile.ir.protocol import BarrierArrive, BarrierExpectTx, BarrierWait
from egtile.ir.scheduled import Scheduled, ThreadLoop, swalk
from egtile.ir.wgmma import WgmmaMma
from egtile.verifier.violation import Violation

_DOING = (Store, Copy, Fill, Gemm, Reduce, AtomicAdd, Extern, BarrierWait, BarrierArrive, BarrierExpectTx)


def _scheduled_sids(obj: object, out: set[int], seen: set[int]) -> None:
    """Every ``sid`` named anywhere in the scheduled tree ``obj`` (nodes and the tile statements they carry)."""
    if isinstance(obj, (tuple, list)):
        for x in obj:
            _scheduled_sids(x, out, seen)
        return
    if not is_dataclass(obj) or isinstance(obj, type) or id(obj) in seen:
        return
    seen.add(id(obj))
    sid = getattr(obj, "sid", None)
    if isinstance(sid, int) and not isinstance(sid, bool):
        out.add(sid)
    for f in fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, (tuple, list)) or (is_dataclass(value) and not isinstance(value, type)):
            _scheduled_sids(value, out, seen)


def _folded_fills(sched: Scheduled) -> set[str]:
    """Accumulators whose zero fill a wgmma's ``scale-d = 0`` replaces (the kernel's gemm accumulates)."""
    gemms = {s.sid: s for s in walk(sched.kernel.body) if isinstance(s, Gemm)}
    return {s.gemm.c.buffer.name for s in swalk(sched.body)
            if isinstance(s, WgmmaMma) and s.gemm.clear_accum and s.sid in gemms and not gemms[s.sid].clear_accum}


def check_coverage(sched: Scheduled) -> list[Violation]:
    """L11 violations of ``sched``: one per kernel statement the schedule does not hold."""
    present: set[int] = set()
    _scheduled_sids(sched.body, present, set())
    folded = _folded_fills(sched)
    out: list[Violation] = []
    for s in walk(sched.kernel.body):
        if isinstance(s, (For, If)) or not isinstance(s, _DOING) or s.sid in present:
            continue
        if (isinstance(s, Fill) and s.dst.buffer.name in folded) or (isinstance(s, Store) and s.buffer.name in folded):
            continue  # the zero writer a scale-d = 0 wgmma replaces (L9 proves it wrote 0)
        out.append(Violation("L11", f"statement {s.sid} ({type(s).__name__}) of the kernel is not in the schedule: "
                                    "its effect would never happen", (s.sid,)))
    return out + _iterations(sched)


def _nest(loop: For) -> list[For]:
    """``loop`` and the parallel loops perfectly nested in it, outermost first."""
    out = [loop]
    while len(out[-1].body) == 1 and isinstance(out[-1].body[0], For) and out[-1].body[0].kind == "parallel":
        out.append(out[-1].body[0])
    return out


def _iterations(sched: Scheduled) -> list[Violation]:
    """A ``ThreadLoop`` runs every iteration of the ``T.Parallel`` nest it implements (module docstring)."""
    loops = {s.sid: s for s in walk(sched.kernel.body) if isinstance(s, For) and s.kind == "parallel"}
    out: list[Violation] = []
    for tl in swalk(sched.body):
        if not isinstance(tl, ThreadLoop) or tl.sid not in loops:
            continue
        src = loops[tl.sid]
        for var, extent, loop in zip(tl.vars, tl.extents, _nest(src)):
            if var.name != loop.var.name or not (isinstance(loop.start, Const) and isinstance(loop.stop, Const)):
                break
            want = int(loop.stop.value) - int(loop.start.value)
            if extent != max(want, 0):
                out.append(Violation("L11", f"the threads running `for {var.name} in T.Parallel(...)` (statement "
                                            f"{tl.sid}) take {var.name} over {extent} values where the loop has "
                                            f"{want}: iterations would never run (or run twice)", (tl.sid,)))
        if tl.mapping == "partitioned" and tl.vector > 1 and tl.trip_count % tl.vector:
            out.append(Violation("L11", f"`T.Parallel` statement {tl.sid} is vectorized by {tl.vector} over "
                                        f"{tl.trip_count} iterations: the threads take whole groups of {tl.vector}, so "
                                        f"the last {tl.trip_count % tl.vector} would never run", (tl.sid,)))
    return out


__all__ = ["check_coverage"]
