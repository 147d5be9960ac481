"""Register fragments in each thread's program order.

A register fragment (``Scheduled.fragments``) is thread-private: :func:`egtile.verifier.mma.check_fragments` proves
that only each element's owner touches it, so no two accesses race and the order analysis leaves fragments out.
What that leaves open is the owner's own program order. The sequential program's read of fragment element ``x``
observes the last write of ``x`` before it; in the schedule the owner observes the last write *it executed* before
the read. A schedule that runs the read first (an elementwise ``T.Parallel`` on an accumulator moved above its
``T.gemm``, a copy of the accumulator out before its K loop) reads an older value, and one that runs a write
before an earlier read of the same element (or two writes the other way round) hands the read, or the code after
both, a value the sequential program never has there. No barrier can fix either: the statements are in the
wrong order on one thread.

Definition. The tracer records every access of a register fragment (:class:`FragmentAccess`) per agent, in the
agent's program order (``seq``), with the logical timestamp ``ts`` of the source statement instance it implements
(:class:`egtile.verifier.trace.SourceOrder`), the threads ``[lo, hi)`` that run it and the box of fragment
coordinates it touches (the whole fragment for a by-layout loop, the region for a fragment op or a wgmma). Two
accesses *conflict* when one writes, their threads and boxes intersect, and they are not the two sides of one
data-dependent ``if`` (:func:`egtile.verifier.trace.exclusive`). The property: every two conflicting accesses of
one agent run in the order of their timestamps. Accesses with equal timestamps are parts of one source statement
instance (a gemm issued as several wgmmas), whose order is the lowering's, unless one scheduled statement runs twice
on one instance (a duplicated ``T.Parallel`` applies its update twice): that is L5. A source statement run outside a source
loop around it has no timestamp (the scheduler's contract, :class:`egtile.verifier.trace.SourceOrder`, binds every
source loop's variable where its statements run): its access of a register fragment is reported as such; an access
of no source statement is not compared. Serial loops inside a by-layout loop's body are traced at their first two
iterations.

Why per agent and by program position is enough: a fragment element is only ever touched by its owner, and every
thread of an agent runs the agent's statements in the traced order (threads outside ``[lo, hi)`` of an access
skip it, which the thread intersection accounts for). The wgmma's asynchrony is :func:`egtile.verifier.mma.
check_wgmma_waits`'s: nothing touches an accumulator between the issue and the wait that completes it, so the
issue's position stands for the access.

Reported as L1 (a read moved above the write it must observe) or L2 (a write moved above a read that must not
observe it, or above another write of the same elements), naming both statements.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from egtile.verifier.violation import Violation

@dataclass(frozen=True, slots=True)
class FragmentAccess:
    """One access of a register fragment by an agent (module docstring)."""

    seq: int
    ts: tuple[int, ...] | None
    sid: int | None
    fragment: str
    mode: str  # "r" or "w"
    lo: int
    hi: int
    box: tuple[tuple[int, int], ...] | None  # [begin, end) per fragment dimension; None: the whole fragment
    sides: tuple = ()
    unbound: bool = False  # a source statement run outside a source loop around it (no timestamp)
    node: object = None  # the scheduled statement making the access
    execution: int = 0  # which execution of a scheduled statement (one number per model call)


def _boxes_meet(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None:
        return True
    return all(x0 < y1 and y0 < x1 for (x0, x1), (y0, y1) in zip(a, b))


def _exclusive(x: FragmentAccess, y: FragmentAccess) -> bool:
    if not x.sides or not y.sides:
        return False
    mine = dict(x.sides)
    return any(mine.get(e, side) != side for e, side in y.sides)


def check_fragment_order(accesses: list[list[FragmentAccess]], block: tuple[int, ...] | None) -> list[Violation]:
    """The property of the module docstring over one block's traces (``accesses[agent]`` in program order)."""
    out: list[Violation] = []
    seen: set = set()
    for trace in accesses:
        by_fragment: dict[str, list[FragmentAccess]] = {}
        for acc in trace:
            if acc.ts is not None:
                by_fragment.setdefault(acc.fragment, []).append(acc)
            elif acc.unbound and (acc.sid, acc.fragment) not in seen:
                seen.add((acc.sid, acc.fragment))
                out.append(Violation(
                    "L1", f"register fragment {acc.fragment}: statement {acc.sid} runs outside a source loop around it "
                          "(its loop variable is unbound there), so its accesses cannot keep the sequential program's "
                          "order", (acc.sid,), buffer=acc.fragment, block=block))
        for name, accs in by_fragment.items():
            accs.sort(key=lambda a: a.seq)
            # the accesses run so far, by timestamp: a later one is compared with those of larger timestamps only
            # (most accesses come in timestamp order, so that suffix is usually empty)
            keys: list[tuple[tuple[int, ...], int]] = []
            ran: list[FragmentAccess] = []
            for late in accs:
                k = bisect.bisect_right(keys, (late.ts, late.seq))
                for early in ran[_twin(ran, keys, k, late):]:
                    if early.mode == "r" and late.mode == "r":
                        continue
                    if early.ts == late.ts and not _again(early, late):
                        continue
                    if not (early.lo < late.hi and late.lo < early.hi) or not _boxes_meet(early.box, late.box):
                        continue
                    if _exclusive(early, late):
                        continue
                    key = (early.sid, late.sid, name)
                    if key not in seen:
                        seen.add(key)
                        out.append(_twice(name, late, block) if early.ts == late.ts else
                                   _violation(name, early, late, block))
                keys.insert(k, (late.ts, late.seq))
                ran.insert(k, late)
    return out


def _twin(ran: list[FragmentAccess], keys: list, k: int, late: FragmentAccess) -> int:
    """Where the accesses of ``late``'s own timestamp start in ``ran`` (its instance's earlier parts), or ``k``
    when none of them can be a second execution of ``late``'s statement."""
    j = bisect.bisect_left(keys, (late.ts, -1))
    return j if late.node is not None and any(x.node is not None and x.execution != late.execution
                                              for x in ran[j:k]) else k


def _again(early: FragmentAccess, late: FragmentAccess) -> bool:
    """``late`` is a second execution of ``early``'s scheduled statement on the same source instance (the parts of
    one instance, a gemm issued as several wgmmas, are different statements)."""
    return (early.execution != late.execution and early.node is not None
            and (early.node is late.node or early.node == late.node))


def _twice(name: str, a: FragmentAccess, block) -> Violation:
    return Violation(
        "L5", f"register fragment {name}: statement {a.sid} runs twice for one instance of the sequential program on "
              f"threads [{a.lo}, {a.hi}) (a scheduled statement duplicated): its effect on {name} is applied twice",
        (a.sid,) if a.sid is not None else (), buffer=name, block=block)


def _what(a: FragmentAccess) -> str:
    return f"the {'read' if a.mode == 'r' else 'write'} of statement {a.sid}"


def _violation(name: str, early: FragmentAccess, late: FragmentAccess, block) -> Violation:
    # the schedule runs ``early`` first; the sequential program runs ``late`` first
    if late.mode == "w" and early.mode == "r":
        prop, what = "L1", (f"{_what(early)} must observe {_what(late)} (the last write of these elements before it "
                            "in the sequential program), but the schedule runs the read first and it sees an older "
                            "value")
    elif late.mode == "r":
        prop, what = "L2", (f"{_what(late)} must not observe {_what(early)} (the sequential program runs the write "
                            "after the read), but the schedule runs the write first")
    else:
        prop, what = "L2", (f"{_what(early)} must be the last of the two writes (the sequential program runs "
                            f"{_what(late)} first), but the schedule runs it first and leaves the other's value")
    return Violation(
        prop, f"register fragment {name}: {what}, on the same threads [{max(early.lo, late.lo)}, "
              f"{min(early.hi, late.hi)}) (program order, not a barrier, is what is wrong)",
        tuple(x for x in (late.sid, early.sid) if x is not None), buffer=name, block=block)


__all__ = ["FragmentAccess", "check_fragment_order"]
