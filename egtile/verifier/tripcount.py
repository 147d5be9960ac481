"""Serial loops whose trip count is read from tensor data (varlen and paged attention), and how the verifier
checks them.

Definition. A *runtime-bounded* loop is a ``SeqLoop`` whose ``stop`` reads memory (``for k in
T.Pipelined(T.ceildiv(cu_seqlens[b + 1] - cu_seqlens[b], block))``); its ``start`` must be static (block
indices and enclosing serial variables only, so the stage ``(k - start) % S`` and the parity
``((k - start) / S) & 1`` of every iteration are numbers when it is traced). A source loop whose start is read
from tensor data reaches here as one of these: the front end (:mod:`egtile.language.loop`) makes it a loop over
``max(stop - start, 0)`` iterations from 0 whose handle is ``start + k``. Its bound is *block-uniform*
when it satisfies :class:`egtile.verifier.uniform.Uniformity` (only block indices, enclosing serial loop
variables, and loads with such indices of parameters the kernel never writes, shared memory or uniform
locals): every thread of the block then computes the same trip count, which is what a ``bar.sync`` or an
mbarrier protocol in the body needs (PTX ISA 9.7.13.4: every thread ``bar.sync`` counts must arrive the same
number of times; 9.7.13.15.16: a wait on phase parity ``p`` returns only after the phase completes, so a
producer that runs fewer iterations than its consumer leaves the consumer waiting forever). A
warp-specialized loop appears once per role (the producer's and the consumers' copies of one source loop,
the same ``sid``): the copies must have the same bounds, so producer and consumer agree on the count.

What the verifier checks (:func:`check_runtime_loops`, L7): block-uniform bounds, a static start, and equal
bounds across the copies of one source loop; and (:func:`check_periodic`, L7) that the loop's synchronization
repeats with a period dividing ``P`` after its first :data:`PROLOGUE` iterations for every count, which the argument
below needs and the traced counts alone cannot show (a condition ``k != 20`` around a barrier operation repeats over
every traced count and breaks at 24). Then it traces the block once per *representative count*
(:func:`representative_counts`): every runtime-bounded loop runs that many iterations, in every role, and
the other properties (L1-L4, L6, value flow) are checked on each of those traces.

Why these counts cover every count. The scheduled body of a pipelined loop depends on ``k`` through its
stage ``(k - start) % S`` and parity ``((k - start) / S) & 1`` (period ``P = 2 S``, ``S`` the largest number
of buffer versions or barriers of one array in the schedule) and through global addresses, whose footprints
the tracer keeps symbolic. The counts are ``0`` (the loop does not run: the code after it sees only the
initial barrier phases and the values before the loop), ``1`` .. ``P + 1`` (every way the pipeline can
stop: before it fills, at each stage, at each parity, one past a full period) and one long count
``4 P + 3`` in another residue class mod ``P``, traced through :mod:`egtile.verifier.window` when its
hypotheses hold. A trace of ``n > P + 1`` iterations is the trace of ``n - P`` iterations with one more
period in its steady middle, which is the window argument (H1 covariance: every barrier stage, parity and
condition of the middle is periodic with period dividing ``P``; H2/H3 on the footprints and the lag):
removing a period changes no order relation between the iterations that remain.

Left out: all runtime-bounded loops of one kernel run the same count in one trace; different counts for
different loops of one kernel (one loop empty, the next long) are not enumerated.
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.ir.scheduled import Elect, Scheduled, SeqLoop, SStmt, ThreadLoop
from egtile.verifier import registry
from egtile.verifier.covariance import NotCovariant, Scanner, Scope
from egtile.verifier.loads import loads_in
from egtile.verifier.uniform import Uniformity, uniformity
from egtile.verifier.violation import Violation


#: the start of the violations of :func:`check_runtime_loops` where the kernel's loop, not the scheduler, is at fault
#: (``egtile.api`` raises ``UnsupportedError`` at the user's loop for them); copies of one loop that disagree on
#: the bound are the scheduler's doing, reported as an illegal schedule
PREFIX = "runtime trip count: "


@dataclass(frozen=True)
class RuntimeLoop:
    """One ``SeqLoop`` with a data-dependent ``stop``: its node, the serial variables around it, and whether
    it sits where threads may diverge (inside a ``ThreadLoop`` or an ``Elect``)."""

    loop: SeqLoop
    serial: frozenset[str]
    divergent: bool


def runtime_loops(sched: Scheduled) -> tuple[RuntimeLoop, ...]:
    """The runtime-bounded loops of ``sched``, pre-order."""
    out: list[RuntimeLoop] = []

    def walk(stmts: tuple[SStmt, ...], serial: frozenset[str], divergent: bool) -> None:
        for s in stmts:
            if isinstance(s, SeqLoop):
                if loads_in(s.stop) or loads_in(s.start):
                    out.append(RuntimeLoop(s, serial, divergent))
                walk(s.body, serial | {s.var.name}, divergent)
                continue
            inner = divergent or isinstance(s, (ThreadLoop, Elect))
            for b in registry.bodies(s):
                walk(b, serial, inner)

    walk(sched.body, frozenset(), False)
    return tuple(out)


def _copies(sched: Scheduled) -> dict[int, list[SeqLoop]]:
    """Every ``SeqLoop`` of ``sched`` by source loop (its ``sid``): a warp-specialized loop's copies, one per role."""
    copies: dict[int, list[SeqLoop]] = {}
    for x in registry.walk(sched.body):
        if isinstance(x, SeqLoop) and x.sid is not None:
            copies.setdefault(x.sid, []).append(x)
    return copies


def check_runtime_loops(sched: Scheduled, loops: tuple[RuntimeLoop, ...] | None = None) -> list[Violation]:
    """L7 of the runtime-bounded loops: a static start, a block-uniform stop, one bound per source loop."""
    loops = runtime_loops(sched) if loops is None else loops
    if not loops:
        return []
    u: Uniformity = uniformity(sched)
    out: list[Violation] = []
    copies = _copies(sched)
    for r in loops:
        s = r.loop
        sids = (s.sid,) if s.sid is not None else ()
        if loads_in(s.start):
            out.append(Violation("L7", f"{PREFIX}the start of the loop over {s.var.name} is read from tensor data: egtile "
                                       "supports a runtime trip count with a start known when the block runs "
                                       "(its front end loops from 0 and adds such a start to the handle; this loop "
                                       "was built another way)", sids))
        reasons = u.reasons(s.stop, r.serial)
        if reasons and not r.divergent:  # (barriers in divergent code are L7 of egtile.verifier.structure)
            out.append(Violation("L7", f"{PREFIX}the trip count of the loop over {s.var.name} is read from tensor data and "
                                       f"may differ between the threads of a block ({'; '.join(reasons)}): its "
                                       "barriers would not be reached the same number of times", sids))
        if any((c.start, c.stop) != (s.start, s.stop) for c in copies.get(s.sid, ())):
            out.append(Violation("L7", f"the copies of the loop over {s.var.name} in the roles of a warp-specialized "
                                       "schedule have different runtime bounds: the producer and the consumer would "
                                       "not agree on the trip count", sids))
    return out


def _synchronizes(s: SStmt) -> bool:
    from egtile.ir.scheduled import Arrive, ArriveExpectTx, CpAsyncArrive, SyncThreads, TmaLoad, Wait

    sync = (Arrive, ArriveExpectTx, CpAsyncArrive, SyncThreads, TmaLoad, Wait)
    return any(isinstance(x, sync) for x in registry.walk((s,)))


class _SyncScanner(Scanner):
    """H1 of the loop's synchronization alone: the stages and parities of its barrier operations, and the conditions
    and trip counts around them. A condition around plain data accesses (a store masked at a tensor's edge,
    ``k * 8 + j < 192``) changes nothing in the protocol; the footprints are the window's H2/H3, checked on each
    traced count."""

    def body(self, stmts, scope) -> None:
        super().body(tuple(x for x in stmts if _synchronizes(x)), scope)


#: the trip counts :func:`check_periodic` proves the body's repetition for: far beyond any tensor a loop of tiles walks
SCANNED_TRIPS = 1 << 20
#: iterations at the start that need not repeat (``if k == 0:``): a count ``n >= P + 2`` is then the traced count
#: ``n - P`` with one more period after them, since every exactly traced count (up to ``P + 1``) holds them
PROLOGUE = 2


def check_periodic(sched: Scheduled, loops: tuple[RuntimeLoop, ...]) -> list[Violation]:
    """L7 of a runtime-bounded loop whose body the representative counts do not cover: from some iteration on
    (:data:`PROLOGUE`), every barrier stage, parity and condition of its body
    must repeat with a period dividing ``P`` *for every count*, not only over the traced ones (a condition
    ``k != 20`` is periodic over the 19 iterations of the longest representative count and breaks at a count of 24).
    The body of every copy of the loop (one per role) is scanned over ``k`` up to :data:`SCANNED_TRIPS` iterations
    (:mod:`egtile.verifier.covariance`: not unbounded, where ``k * 64`` would leave int32 though no tensor is that
    long); the variables around it are left unknown, as the tracer treats a value it cannot decide."""
    from egtile.ir.kernel import Const

    p = period(sched)
    copies = _copies(sched)
    out: list[Violation] = []
    for r in loops:
        s = r.loop
        start = int(s.start.value) if isinstance(s.start, Const) else 0
        why = ""
        try:
            for node in copies.get(s.sid, [s]) if s.sid is not None else [s]:
                sc = _SyncScanner(set())
                sc.body(node.body, Scope(node.var.name, start + PROLOGUE, start + SCANNED_TRIPS, {}))
                if p % sc.period:
                    raise NotCovariant(f"its body repeats every {sc.period} iterations, which does not divide the "
                                       f"pipeline's period {p}")
        except NotCovariant as err:
            why = str(err)
        if why:
            out.append(Violation("L7", f"{PREFIX}the loop over {s.var.name} has a trip count read from tensor data, and "
                                       f"its body does not repeat with the pipeline's period from some iteration on "
                                       f"({why}): egtile's verifier covers every count of such a loop only from a few "
                                       "representative counts, which needs that repetition. Write the condition on "
                                       "the loop index in a form that repeats (or on the trip count itself)",
                                 (s.sid,) if s.sid is not None else ()))
    return out


def period(sched: Scheduled) -> int:
    """``P = 2 S``: the period of the stage and parity arithmetic (``S`` the most versions of one staged
    buffer or mbarrier array, at least 1)."""
    stages = [v for _, v in sched.staged] + [b.stages for b in sched.barriers]
    return 2 * max([1, *stages])


def representative_counts(sched: Scheduled) -> tuple[int, ...]:
    """The trip counts at which the runtime-bounded loops are traced (module docstring)."""
    p = period(sched)
    return tuple(range(0, p + 2)) + (4 * p + 3,)
