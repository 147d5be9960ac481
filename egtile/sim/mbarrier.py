"""mbarrier and named-barrier state machines with happens-before clocks.

mbarrier (PTX ISA 9.7.13.15, "mbarrier"): each barrier of an array has a current phase, a pending
arrival count (reset to ``arrive_count`` when a phase completes) and a transaction count (``expect_tx``
adds bytes, a TMA completion subtracts them; it may go negative transiently). A phase completes when
both reach 0. ``try_wait.parity P`` (9.7.13.15.16) returns once the phase of parity ``P`` has
completed, i.e. as soon as the *current* phase's parity differs from ``P``; it is a polling loop, so a
waiter that is not scheduled while two phases complete sees the parity unchanged and keeps waiting, as
on hardware.

Happens-before: every arrival (``arrive``, ``arrive.expect_tx``, ``cp.async.mbarrier.arrive.noinc``) is a
release; a phase's clock is the join of its arrivals' clocks, of the previous phase's clock (arrivals
are read-modify-writes of one object, a release sequence) and of ``slot(barrier, s) = phase + 1``. A
wait that returns acquires the clock of the latest completed phase. Arrivals of the still incomplete
phase are not acquired (PTX promises ordering only with phase completion). Async writes credited with
``complete_tx`` are ordered through the slot component only: the issuing thread's earlier accesses are
not released to the waiters by the copy.

Named barriers (``bar.sync id, count``, PTX ISA 9.7.13.4): the ``count``-th arriving thread releases
all of them; the clocks of all participants are joined.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from egtile.ir.scheduled import MBarrier
from egtile.sim.clocks import SlotLayout, join


class MBarrierState:
    """One mbarrier array of a block."""

    def __init__(self, spec: MBarrier, slots: SlotLayout) -> None:
        self.spec = spec
        self.name = spec.name
        self.count = spec.arrive_count
        n = spec.stages
        self.slot = [slots.barrier_slot(spec.name, s) for s in range(n)]
        self.phase = [0] * n
        self.pending = [spec.arrive_count] * n
        self.tx = [0] * n
        self.arrived_in_phase = [0] * n
        self.done: list[np.ndarray | None] = [None] * n
        self.acc = [slots.zeros() for _ in range(n)]
        # threads blocked on a wait of this stage, woken when its phase changes
        self.waiters: list[list[int]] = [[] for _ in range(n)]
        self.errors: list[tuple[int, int, str]] = []  # (stage, phase, message)
        # per barrier: how many of its phases some wait has seen complete (a wait that sees phase p also
        # orders everything that completed phases before p: they complete in order)
        self.observed = [0] * n

    def check_stage(self, s: int, what: str) -> None:
        if not 0 <= s < len(self.phase):
            from egtile.errors import SimulationError
            raise SimulationError(f"{what}: stage {s} is out of range for mbarrier array {self.name} of "
                                  f"{len(self.phase)} barriers")

    def arrive(self, s: int, vc: np.ndarray, n: int = 1) -> list[int]:
        """``n`` arrivals with clock ``vc``; returns the threads to wake if the phase completed."""
        join(self.acc[s], vc)
        self.pending[s] -= n
        self.arrived_in_phase[s] += n
        if self.pending[s] < 0:
            msg = (f"{self.arrived_in_phase[s]} arrivals in one phase, but arrive_count is {self.count} "
                   "(arrival count underflow)")
            self.errors.append((s, self.phase[s], msg))
            self.pending[s] = 0
        return self._maybe_complete(s)

    def expect_tx(self, s: int, nbytes: int) -> None:
        self.tx[s] += nbytes

    def complete_tx(self, s: int, nbytes: int) -> list[int]:
        self.tx[s] -= nbytes
        return self._maybe_complete(s)

    def _maybe_complete(self, s: int) -> list[int]:
        if self.pending[s] != 0 or self.tx[s] != 0:
            return []
        self.phase[s] += 1
        clock = self.acc[s]
        clock[self.slot[s]] = self.phase[s]
        self.done[s] = clock
        self.acc[s] = clock.copy()
        self.pending[s] = self.count
        self.arrived_in_phase[s] = 0
        woken, self.waiters[s] = self.waiters[s], []
        return woken

    def ready(self, s: int, parity: int) -> bool:
        """Would ``try_wait.parity`` return now?"""
        return (self.phase[s] & 1) != (parity & 1)

    def acquired(self, s: int) -> np.ndarray | None:
        """The clock a returning wait acquires (``None`` before the first completion); the phases completed so
        far count as observed."""
        self.observed[s] = max(self.observed[s], self.phase[s])
        return self.done[s]

    def completion_epoch(self, s: int) -> tuple[int, int]:
        """Epoch of an async write credited to the current phase of stage ``s``."""
        return self.slot[s], self.phase[s] + 1

    def describe(self, s: int) -> str:
        return (f"{self.name}[{s}] is in phase {self.phase[s]} (parity {self.phase[s] & 1}), "
                f"{self.arrived_in_phase[s]}/{self.count} arrivals, {self.tx[s]} tx bytes pending")

    def leftovers(self) -> list[tuple[int, int, str]]:
        """Phases left incomplete at block exit: arrivals or transaction bytes that do not add up."""
        out = []
        for s in range(len(self.phase)):
            if self.arrived_in_phase[s] or self.tx[s]:
                msg = (f"incomplete at block exit: {self.arrived_in_phase[s]}/{self.count} arrivals, "
                       f"{self.tx[s]} tx bytes pending (counts do not match arrive_count / expect_tx)")
                out.append((s, self.phase[s], msg))
        return out


@dataclass
class NamedBarrier:
    """``bar.sync id, count`` state: who has arrived in the current round: the threads waiting in ``bar.sync``
    (``arrived``) and the threads that ran ``bar.arrive`` (``arrivals``, PTX ISA 9.7.13.4: counted, not
    waiting). The round completes when together they reach ``count``."""

    barrier_id: int
    count: int
    acc: np.ndarray
    arrived: list[int] = field(default_factory=list)
    generation: int = 0
    arrivals: int = 0
    arrive_sids: list[int | None] = field(default_factory=list)
