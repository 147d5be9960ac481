"""The enumerating reference verifier: a cross-check of :func:`egtile.verifier.verify` for tests.

``reference.verify(scheduled)`` checks the same properties with the same messages as
:func:`egtile.verifier.verify`, but L1-L4 and L6 come from the concrete enumeration of :mod:`.trace` and
:mod:`.order` (every element of every access, every iteration of every loop, first and last block). Its
cost grows with tile size and trip count, so it is only for small kernels; the symbolic verifier must
agree with it (same violations by property, statements, buffer and barrier) on every kernel of the
soundness suite, the hand-built schedules and the mutants (``tests/test_verify_crosscheck.py``).
"""

from __future__ import annotations

from egtile.ir.scheduled import Scheduled
from egtile.verifier.effects import check_effects
from egtile.verifier.mma import check_fragments, check_wgmma_waits
from egtile.verifier.reference.order import OrderAnalysis
from egtile.verifier.reference.trace import SourceOrder, TraceError, Tracer, agents_of
from egtile.verifier.paths import decides
from egtile.verifier.resources import check_resources
from egtile.verifier.structure import check_structure
from egtile.verifier.uniform import branches
from egtile.verifier.violation import Violation


def blocks(grid: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The blocks this verifier examines: the first and the last of the grid. The symbolic verifier examines those
    and, where the synchronization depends on the block index, the blocks of ``egtile.verifier.block_cases``: a
    protocol that differs only in a middle block is checked by the symbolic verifier alone (the crosscheck's
    schedules do not depend on the block index)."""
    first = tuple(0 for _ in grid)
    last = tuple(g - 1 for g in grid)
    if any(g <= 0 for g in grid):
        return []
    return [first] if first == last else [first, last]


def dedupe(found: list[Violation]) -> list[Violation]:
    """One violation per key, in property order (stable within a property)."""
    seen: set = set()
    out = []
    for v in sorted(found, key=lambda v: v.property):
        if v.key() not in seen:
            seen.add(v.key())
            out.append(v)
    return out


def verify(scheduled: Scheduled) -> list[Violation]:
    """The enumerating verifier's violations of ``scheduled`` (see the module docstring)."""
    if not isinstance(scheduled, Scheduled):
        raise TypeError(f"verify expects an ir.Scheduled, got {type(scheduled).__name__}")
    found: list[Violation] = []
    found += check_effects(scheduled)
    found += check_structure(scheduled)
    found += check_resources(scheduled)
    found += check_fragments(scheduled)
    found += check_wgmma_waits(scheduled)
    agents = agents_of(scheduled)
    order = SourceOrder(scheduled.kernel)
    sealed = branches(scheduled)
    deepest = sealed.depth
    for coords in blocks(scheduled.kernel.grid):
        for d in range(deepest + 1):  # one trace per depth of sealed sides (egtile.verifier.paths)
            try:
                traces = Tracer(scheduled, agents, coords, order, sealed, d).run()
            except TraceError as err:
                found.append(Violation("L3", f"cannot enumerate the schedule: {err}",
                                       (err.sid,) if err.sid is not None else (), block=coords))
                break
            pick = None if deepest == 0 else (lambda x, y, d=d: decides(x, y, d, deepest, len(agents)))
            found += OrderAnalysis(scheduled, agents, traces, coords, pick).run()
    return dedupe(found)


__all__ = ["verify"]
