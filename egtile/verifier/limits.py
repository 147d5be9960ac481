"""The verifier's budget: a schedule too large to check is a clear error, never a hang.

Work is counted, per block examined, in three units, each with a limit (:class:`VerifyLimits`):

* ``events``: trace events (accesses, waits, arrivals, copies, barriers) of all agents;
* ``elements``: elements the verifier lists explicitly (accesses whose index is not monomial-affine,
  ``ThreadLoop`` iterations it enumerates, residue grids of footprint decisions);
* ``iterations``: serial-loop iterations it traces (a long loop that the window argument of
  :mod:`egtile.verifier.window` does not cover is traced in full);
* ``states``: states of the warpgroup-handshake model check (:mod:`egtile.verifier.handshake`), per
  warp-specialized region and trip count: every interleaving of the warpgroups is explored, and a region
  whose interleavings exceed the limit is not checked, which is reported rather than passed.

Exceeding a limit raises :class:`egtile.errors.VerifyLimitError` naming the kernel, the unit and the
statement that was too large. The knob: ``egtile.verifier.verify(sched, limits=VerifyLimits(...))``, or the
environment variable ``EGTILE_VERIFY_BUDGET`` (a factor applied to every default limit, e.g. ``4``), read
when a verification starts. The counts are deterministic: the same schedule hits the same limit on
every machine. A schedule served from the schedule cache (``docs/caching.md``) is not verified again: it was
verified, under the budget then in force, when it was stored.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace

from egtile.errors import VerifyLimitError

ENV = "EGTILE_VERIFY_BUDGET"


@dataclass(frozen=True)
class VerifyLimits:
    """Per-block limits of the verifier's work (see the module docstring)."""

    events: int = 400_000
    elements: int = 20_000_000
    iterations: int = 200_000
    states: int = 200_000

    def scaled(self, factor: float) -> VerifyLimits:
        # at least 1 of each: a tiny factor still lets the verifier count the first unit, then names the limit
        return replace(self, events=max(1, int(self.events * factor)), elements=max(1, int(self.elements * factor)),
                       iterations=max(1, int(self.iterations * factor)), states=max(1, int(self.states * factor)))


def default_limits() -> VerifyLimits:
    """:class:`VerifyLimits` scaled by ``EGTILE_VERIFY_BUDGET`` (default 1)."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return VerifyLimits()
    try:
        factor = float(raw)
    except ValueError:
        raise VerifyLimitError(f"{ENV}={raw!r} is not a number (a factor for the verifier's default limits)") from None
    if not math.isfinite(factor) or factor <= 0:
        raise VerifyLimitError(f"{ENV}={raw!r} must be a positive finite number (a factor for the verifier's default "
                               "limits)")
    return VerifyLimits().scaled(factor)


def over_limit(kernel: str, where: str, unit: str, used: int, limit: int, what: str) -> VerifyLimitError:
    """The error of a verification that needs more than ``limit`` ``unit`` (``where``: the block or region)."""
    return VerifyLimitError(
        f"verifying kernel {kernel!r} ({where}) needs more than {limit} {unit}{what}; the verifier stops instead "
        f"of running unbounded (or passing what it did not check). Raise the limit with "
        f"egtile.verifier.verify(scheduled, limits=egtile.verifier.VerifyLimits({unit}={max(2 * limit, used)})) or "
        f"the environment variable {ENV}=<factor> (e.g. {ENV}=4; now {os.environ.get(ENV, '').strip() or 'unset, 1'})")


class Meter:
    """Counts one block's work against :class:`VerifyLimits`."""

    def __init__(self, limits: VerifyLimits, kernel: str, block: tuple[int, ...]) -> None:
        self.limits = limits
        self.kernel = kernel
        self.block = block
        self.elements = 0
        self.iterations = 0

    def _fail(self, unit: str, used: int, limit: int, what: str) -> None:
        raise over_limit(self.kernel, f"block {self.block}", unit, used, limit, what)

    def count_event(self, n: int) -> None:
        if n > self.limits.events:
            self._fail("events", n, self.limits.events, " (accesses and synchronization events of all agents)")

    def charge_elements(self, n: int) -> None:
        self.elements += n
        if self.elements > self.limits.elements:
            self._fail("elements", self.elements, self.limits.elements,
                       " listed explicitly (non-affine indices, enumerated ThreadLoop iterations)")

    def count_iterations(self, n: int, loop=None) -> None:
        self.iterations += n
        if self.iterations > self.limits.iterations:
            where = ""
            if loop is not None:
                where = f"; loop over {loop.var.name} (sid {loop.sid}) is traced in full"
            self._fail("iterations", self.iterations, self.limits.iterations,
                       f" of serial loops{where} (it is not windowed: see egtile.verifier.window)")
