"""Static legality verifier of scheduled kernels, independent of the rules that built them.

``verify(scheduled) -> list[Violation]`` checks properties L1-L8 (``docs/soundness.md``):

* :mod:`.effects` L5 (nonlocal statements run once per instance);
* :mod:`.structure` L7 (barriers in divergent code, named barrier counts) and data-dependent L3;
* :mod:`.resources` L8 (threads, shared memory, setmaxnreg);
* :mod:`.trace` + :mod:`.order` L1-L4 and L6, by enumerating each agent's events concretely for the
  first and the last block of the grid and building happens-before from the barrier semantics.

The verifier re-derives everything from ``ir.Scheduled`` and the tile-IR kernel it implements; it imports
neither :mod:`egtile.rules` nor :mod:`egtile.analysis`.
"""

from __future__ import annotations

from egtile._entrypoint import make_callable
from egtile.ir.scheduled import Scheduled
from egtile.verify.effects import check_effects
from egtile.verify.mma import check_fragments, check_wgmma_waits
from egtile.verify.order import OrderAnalysis
from egtile.verify.resources import check_resources
from egtile.verify.structure import check_structure
from egtile.verify.trace import SourceOrder, TraceError, Tracer, agents_of
from egtile.verify.violation import PROPERTIES, Violation


def _blocks(grid: tuple[int, ...]) -> list[tuple[int, ...]]:
    first = tuple(0 for _ in grid)
    last = tuple(g - 1 for g in grid)
    if any(g <= 0 for g in grid):
        return []
    return [first] if first == last else [first, last]


def verify(scheduled: Scheduled) -> list[Violation]:
    """Check a scheduled kernel; an empty list means every property holds.

    Args:
        scheduled: the schedule (``egtile.optimize(kernel).scheduled`` or hand-built).

    Returns:
        One :class:`Violation` per (property, statements, buffer, barrier), in property order.

    Raises:
        TypeError: ``scheduled`` is not an ``ir.Scheduled``.
    """
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
    for coords in _blocks(scheduled.kernel.grid):
        try:
            traces = Tracer(scheduled, agents, coords, order).run()
        except TraceError as err:
            found.append(Violation("L3", f"cannot enumerate the schedule: {err}",
                                   (err.sid,) if err.sid is not None else (), block=coords))
            continue
        found += OrderAnalysis(scheduled, agents, traces, coords).run()
    seen: set = set()
    out = []
    for v in sorted(found, key=lambda v: v.property):
        if v.key() not in seen:
            seen.add(v.key())
            out.append(v)
    return out


make_callable(__name__, verify)  # egtile.verify(scheduled) works whichever way it was imported

__all__ = ["PROPERTIES", "Violation", "verify"]
