"""The simulator's semantics of scheduled statements, one handler per node class.

A handler is ``run(m, node, th)``: it executes ``node`` as thread ``th`` (:class:`egtile.sim.machine.ThreadState`)
on the block ``m`` (:class:`egtile.sim.machine.Block`, whose handler API is listed in its docstring) and
returns either ``None`` (the statement ran atomically, no scheduling point) or an iterable of the requests
the thread yields to the scheduler, in order: ``None`` for a plain preemption point (``m.PREEMPT`` is
``(None,)``: after an arrive or an async issue), ``m.wait(...)`` to block on an mbarrier phase,
``m.sync(...)`` to arrive at a CTA barrier. A compound node is naturally a generator function that
``yield from m.run(body, th)``.

An error raised while a statement runs (:class:`~egtile.errors.SimulationError`,
:class:`~egtile.errors.ShapeError`, ...) reaches the caller with the statement's sid, the thread, the
block and the user's line added (the innermost statement with a ``sid`` names it).

``writes(node)`` (optional) names the kernel parameters the node may write; the simulator keeps race
shadow state for those globals only (nested bodies are walked with :func:`egtile.ir.scheduled.swalk`,
so compound nodes need none).

egtile's own semantics live in :mod:`egtile.sim.ops` and register here the way a rule author's do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from egtile.errors import SimulationError
from egtile.ir.registry import Registry

Run = Callable[[Any, Any, Any], Iterable[Any] | None]
Writes = Callable[[Any], Iterable[str]]


@dataclass(frozen=True)
class Semantics:
    """How the simulator executes one scheduled-IR node class (see the module docstring)."""

    run: Run
    writes: Writes | None = None


SEMANTICS: Registry[Semantics] = Registry("egtile.sim semantics", "simulator semantics",
                                          "egtile.sim.register_semantics", SimulationError)


def register_semantics(cls: type, run: Run | None = None, *, writes: Writes | None = None, replace: bool = False):
    """Register the simulator semantics of scheduled-IR node class ``cls``.

    Used directly (``register_semantics(MyNode, fn)``, returns ``fn``) or as a decorator
    (``@register_semantics(MyNode)`` above ``def fn(m, node, th)``).

    Raises:
        SimulationError: ``cls`` already has semantics and ``replace`` is false.
    """
    def add(fn: Run):
        SEMANTICS.register(cls, Semantics(fn, writes), replace=replace)
        return fn

    return add if run is None else add(run)


def unregister_semantics(cls: type) -> Semantics:
    """Remove the semantics of ``cls`` registered last (the one it shadowed, if any, is in force again).

    Raises:
        SimulationError: ``cls`` has none.
    """
    return SEMANTICS.unregister(cls)
