"""Synchronization under data-dependent control: which trace decides which pair of accesses.

The tracer cannot evaluate a condition that reads memory, so it cannot know which executions of a
data-dependent ``SIf`` run. Such a side may hold CTA barriers only when its condition is uniform and the
side is *sealed*: it begins and ends with a ``SyncThreads`` of the threads running it
(:mod:`egtile.verifier.uniform`, checked structurally by :mod:`egtile.verifier.structure`). An
*instance* is one execution of a sealed side (the ``SIf``, the side, the enclosing loop iterations); its
*depth* is the number of sealed instances around it, itself included.

A real execution runs some instances and skips the others. A skipped instance takes its accesses and its
barriers with it; it makes no mbarrier operation (L3), so skipping it removes only barriers. Let ``I(x)``
be the innermost instance around access ``x`` (none at top level) and ``D`` the deepest nesting. Block
``b`` is traced ``D + 1`` times: trace ``T_d`` keeps the barriers of instances of depth ``<= d`` and drops
those of deeper ones (every side's accesses are in every trace). A pair ``(x, y)`` of conflicting accesses
is decided in exactly one trace:

1. ``I(x) == I(y)`` of depth ``c``: in ``T_c``. Between ``x`` and ``y`` in their threads' programs lie only
   statements of that instance, which run whenever ``x`` and ``y`` do, and deeper instances, whose barriers
   ``T_c`` drops; and no mbarrier operation of an instance can order them.
2. ``I(x) != I(y)``, both made by the threads of one agent: in ``T_D``. The seal of ``I(x)`` or ``I(y)``
   lies between them in program order and runs whenever that access does, so they are ordered exactly
   when program order agrees with the sequential order, which is what ``T_D`` (all seals present) finds.
3. otherwise (different agents, or an asynchronous copy): in ``T_0``, whose barriers all run on every
   path (a seal of one role's threads orders nothing for another agent).

Each trace's happens-before is built only from barriers that run whenever the pair it decides runs, so
an ordering it finds is real; the over-approximation is in case 3 (the barriers of the pair's own
instances are dropped), a conservative report, never a missed one. Violations that are not about a
pair (L3 phases, L4 windows, deadlocks) are reported from every trace; value flow from ``T_D``. A schedule
without sealed sides has ``D = 0``: one trace, every pair decided in it, as before.
"""

from __future__ import annotations

from typing import Any

Instance = tuple  # (depth, id(SIf), side, loop path, enclosing instance)


def enter(outer: Instance | None, sif: Any, side: int, path: tuple) -> Instance:
    """The instance of ``sif``'s ``side`` (0: then, 1: else) at loop iterations ``path`` inside ``outer``."""
    depth = (outer[0] if outer is not None else 0) + 1
    return (depth, id(sif), side, path, outer)


def depth(inst: Instance | None) -> int:
    return inst[0] if inst is not None else 0


def decides(x: Any, y: Any, d: int, deepest: int, agents: int) -> bool:
    """Whether trace ``T_d`` (of ``deepest + 1``) decides the pair of access events ``x``, ``y`` (whose
    ``comp`` is their agent, ``>= agents`` for an asynchronous copy's write)."""
    if deepest == 0:
        return True
    if x.inst == y.inst:
        return depth(x.inst) == d
    if x.comp == y.comp < agents:
        return d == deepest
    return d == 0


__all__ = ["Instance", "decides", "depth", "enter"]
