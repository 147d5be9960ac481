"""Static legality verifier of scheduled kernels, independent of the rules that built them.

``verify(scheduled) -> list[Violation]`` checks properties L1-L11 (``docs/soundness.md``):

* :mod:`.coverage` L11 (every statement of the kernel is in the schedule);
* :mod:`.effects` L5 (nonlocal statements run once per instance);
* :mod:`.structure` L7 (barriers in divergent code, named barrier counts) and data-dependent L3, with
  block-uniform conditions derived by :mod:`.uniform`;
* :mod:`.resources` L8 (threads, shared memory, setmaxnreg);
* :mod:`.versions` L9 (a versioned statement's fast version is its general one under the guard);
* :mod:`.dispatch` L10 (a changed block order runs every block once and is unobservable: no block reads another's
  writes);
* :mod:`.handshake` L3/L7 of the warpgroup handshakes (named-barrier rounds, deadlock freedom by a model check
  of the warpgroups' interleavings);
* :mod:`.mma` register-fragment ownership, layout agreement (wgmma descriptors, TMA tensor maps) and
  wgmma asynchrony (L1/L2), and the trace models of the fragment and wgmma nodes;
* :mod:`.trace` + :mod:`.order` L1-L4 and L6: each agent's events for the first and the last block of
  the grid, with symbolic footprints (:mod:`.regions`, :mod:`.affine`) instead of element sets and, for
  long periodic loops, a window of iterations instead of all of them (:mod:`.window`), then
  happens-before from the barrier semantics;
* :mod:`.paths`: a block with barriers under data-dependent conditions (sealed sides) is traced once per
  nesting depth of such sides, each pair of accesses decided in one of those traces;
* :mod:`.tripcount`: serial loops whose trip count is read from tensor data (varlen attention) must have a
  block-uniform bound that every role agrees on (L7); the block is then traced at representative trip counts
  (0, 1, ..., 2S+1 and one long count) whose traces cover every count by the window argument;
* :mod:`.valueflow` value flow (reported as L1): every read of a staged or local buffer observes the
  write the sequential program's read observes.

Its cost does not grow with tile size or trip count; a schedule too large for the budget raises
:class:`egtile.errors.VerifyLimitError` (:mod:`.limits`). The enumerating verifier it replaced is kept
as a cross-check for tests (:mod:`.reference`).

The verifier re-derives everything from ``ir.Scheduled`` and the tile-IR kernel it implements; it imports
neither :mod:`egtile.rules` nor :mod:`egtile.analysis`, and it dispatches over scheduled statements
through its own registry (:mod:`.registry`, :func:`register_model`).
"""

from __future__ import annotations

import dataclasses

from egtile.ir.scheduled import Scheduled
from egtile.verifier import covariance as _covariance  # noqa: F401  (registers the window models of the builtin nodes)
from egtile.verifier import models as _models  # noqa: F401  (registers the trace models of the builtin nodes)
from egtile.verifier import usersync as _usersync  # noqa: F401  (the user-protocol nodes' models)
from egtile.verifier.effects import check_effects
from egtile.verifier.handshake import check_handshakes  # (also registers the handshake nodes' models)
from egtile.verifier.ints import Ints
from egtile.verifier.limits import Meter, VerifyLimits, default_limits
from egtile.verifier.mma import check_fragments, check_wgmma_waits  # (also registers the fragment and wgmma models)
from egtile.verifier.order import OrderAnalysis
from egtile.verifier.paths import decides
from egtile.verifier import block_cases
from egtile.verifier.reference import dedupe
from egtile.verifier.registry import register_model, unregister_model
from egtile.verifier.regions import Space
from egtile.verifier.resources import check_resources
from egtile.verifier.structure import check_structure
from egtile.verifier.uniform import branches
from egtile.verifier.tripcount import check_periodic, check_runtime_loops, representative_counts, runtime_loops
from egtile.verifier.trace import Ctx, SourceOrder, TraceError, Tracer, agents_of, tracked_buffers
from egtile.verifier.valueflow import check_value_flow
from egtile.verifier.fragorder import check_fragment_order
from egtile.verifier.coverage import check_coverage
from egtile.verifier.dispatch import check_dispatch
from egtile.verifier.versions import check_folds, check_versions
from egtile.verifier.violation import PROPERTIES, Violation
from egtile.verifier.window import Windows


class _Charge:
    def __init__(self, meter: Meter) -> None:
        self.meter = meter

    def charge(self, n: int) -> None:
        self.meter.charge_elements(n)


def verify(scheduled: Scheduled, *, limits: VerifyLimits | None = None, window: bool = True,
           value_flow: bool = True) -> list[Violation]:
    """Check a scheduled kernel; an empty list means every property holds.

    Args:
        scheduled: the schedule (``egtile.optimize(kernel).scheduled`` or hand-built).
        limits: the verifier's budget per block (default :func:`egtile.verifier.limits.default_limits`).
        window: trace long periodic loops on a window of iterations (:mod:`egtile.verifier.window`);
            ``False`` traces every iteration (for tests of the window argument).
        value_flow: check that every read of a staged or local buffer observes the write the
            sequential program's read observes (:mod:`egtile.verifier.valueflow`); ``False`` for the
            comparison with the enumerating verifier, which does not.

    Returns:
        One :class:`Violation` per (property, statements, buffer, barrier), in property order.

    Raises:
        TypeError: ``scheduled`` is not an ``ir.Scheduled``.
        egtile.errors.VerifyLimitError: the schedule needs more work than ``limits`` allow.
    """
    if not isinstance(scheduled, Scheduled):
        raise TypeError(f"verify expects an ir.Scheduled, got {type(scheduled).__name__}")
    limits = limits if limits is not None else default_limits()
    found: list[Violation] = []
    found += check_coverage(scheduled)
    found += check_effects(scheduled)
    found += check_structure(scheduled)
    found += check_resources(scheduled)
    found += check_fragments(scheduled)
    found += check_wgmma_waits(scheduled)
    found += check_handshakes(scheduled, limits)
    found += check_versions(scheduled)
    found += check_dispatch(scheduled)
    found += check_folds(scheduled)
    dynamic = runtime_loops(scheduled)
    found += check_runtime_loops(scheduled, dynamic)
    agents = agents_of(scheduled)
    order = SourceOrder(scheduled.kernel)
    space = Space()
    tracked = tracked_buffers(scheduled)
    # register fragments: every access is its owner's (check_fragments), so none can race (egtile.verifier.mma)
    tracked = (tracked[0] - {n for n, _ in scheduled.fragments}, tracked[1])
    # after the traces: a count's own violations are the more concrete report, and one stops the counts
    unperiodic = check_periodic(scheduled, dynamic) if dynamic else []
    ints = Ints()
    sealed = branches(scheduled)
    # one set of traces per representative trip count of the runtime-bounded loops (egtile.verifier.tripcount)
    counts = representative_counts(scheduled) if dynamic else (None,)
    for count in counts:
        trips = None if count is None else {r.loop.sid: count for r in dynamic}
        windows = Windows(scheduled, agents, tracked[0]) if window else None
        for coords in block_cases.blocks(scheduled):
            for d in range(sealed.depth + 1):  # one trace per depth of sealed sides (egtile.verifier.paths)
                got = _block(scheduled, agents, coords, order, space, limits, windows, ints, tracked, value_flow,
                             sealed, d, trips)
                if count is not None:
                    got = [dataclasses.replace(v, message=f"{v.message} (with the runtime-bounded loops running "
                                                          f"{count} iteration(s))") for v in got]
                found += got
        if count is not None and any(v.property != "L8" for v in found):
            break  # one failing count is enough to report
    return dedupe(found + unperiodic)


def _block(scheduled, agents, coords, order, space, limits, windows, ints, tracked, value_flow, sealed,
           d, trips=None) -> list[Violation]:
    """L1-L4, L6 of one block in trace ``T_d``; retraced without the windows whose hypotheses the trace
    refutes."""
    deepest, n = sealed.depth, len(agents)
    while True:
        meter = Meter(limits, scheduled.kernel.name, coords)
        space.budget = _Charge(meter)
        if windows is not None:
            windows.start_block()
        try:
            tracer = Tracer(scheduled, agents, coords, order, space, meter, windows, ints, tracked, sealed, d,
                            trips=trips)
            traces = tracer.run()
        except TraceError as err:
            return [Violation("L3", f"cannot enumerate the schedule: {err}",
                              (err.sid,) if err.sid is not None else (), block=coords)]
        pick = None if deepest == 0 else (lambda x, y: decides(x, y, d, deepest, n))
        analysis = OrderAnalysis(scheduled, agents, traces, coords, space, pick)
        out = analysis.run()
        if windows is None or windows.confirm(traces, analysis, space):
            if value_flow and d == deepest and all(p is None for p in analysis.stuck_at):
                out += check_value_flow(scheduled, analysis, space, windows)
            if d == deepest:
                out += check_fragment_order(tracer.fragment_accesses, coords)
            return out


__all__ = ["PROPERTIES", "Ctx", "VerifyLimits", "Violation", "register_model", "unregister_model", "verify"]
