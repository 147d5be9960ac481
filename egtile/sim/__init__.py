"""Race-detecting CPU simulator of scheduled kernels (``ir.Scheduled``).

``simulate(schedule, *tensors, policy=, seed=)`` runs every block with explicit threads, mbarrier phase
and transaction semantics and async copies completed when the policy says, and reports races,
deadlocks, repeated nonlocal iterations and barrier misuse. See ``docs/soundness.md``.

Each scheduled node class has its semantics in a registry: :func:`register_semantics` /
:func:`unregister_semantics` (:mod:`egtile.sim.semantics`); handlers use the machine API of
:class:`egtile.sim.machine.Block`; egtile's own are in :mod:`egtile.sim.ops`.
"""

from egtile.sim.execute import simulate
from egtile.sim.machine import Block, ThreadState
from egtile.sim.policy import POLICIES
from egtile.sim.report import (
    Access, BarrierError, BlockedThread, Deadlock, Race, RepeatedIteration, SimResult,
)
from egtile.sim.semantics import SEMANTICS, Semantics, register_semantics, unregister_semantics
from egtile.sim import ops  # noqa: E402,F401  (registers egtile's own semantics)

__all__ = [
    "POLICIES", "SEMANTICS", "Access", "BarrierError", "Block", "BlockedThread", "Deadlock", "Race",
    "RepeatedIteration", "Semantics", "SimResult", "ThreadState", "register_semantics", "simulate",
    "unregister_semantics",
]
