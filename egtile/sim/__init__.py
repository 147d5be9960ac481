"""Race-detecting CPU simulator of scheduled kernels (``ir.Scheduled``).

``simulate(schedule, *tensors, policy=, seed=)`` runs every block with explicit threads, mbarrier phase
and transaction semantics and async copies completed when the policy says, and reports races,
deadlocks, repeated nonlocal iterations and barrier misuse. See ``docs/soundness.md``.
"""

from egtile.sim.execute import simulate
from egtile.sim.policy import POLICIES
from egtile.sim.report import (
    Access, BarrierError, BlockedThread, Deadlock, Race, RepeatedIteration, SimResult,
)

__all__ = [
    "POLICIES", "Access", "BarrierError", "BlockedThread", "Deadlock", "Race", "RepeatedIteration", "SimResult",
    "simulate",
]
