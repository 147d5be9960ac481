"""Iterations of one ``T.Parallel`` that write the same shared or global element: a race in the user's program.

``T.Parallel`` promises independent iterations (TileLang's meaning: any order, on any threads). A store in its
body whose indices do not mention one of its variables ``v`` (of extent > 1), reached by every iteration (no
``if`` between the loop and the store), is executed by iterations that differ only in ``v`` on the same element:
a write-write race whatever the schedule, and for ``s[0] = s[0] + x[i]`` a lost update. egtile reports it at the
store's line before scheduling, as the user's bug (the verifier would otherwise find a race in every schedule and
blame egtile's rules). Only a *definite* conflict is reported: indices that mention every variable may still
collide (``s[i // 2]``); the verifier and the simulator check those. Register fragments and local buffers are
left out: a fragment row written by the iterations of one thread is ordered by program order there.
"""

from __future__ import annotations

from egtile.analysis.access import mentions
from egtile.ir.kernel import Const, For, If, Kernel, Stmt, Store


def _extent(loop: For) -> int | None:
    if isinstance(loop.start, Const) and isinstance(loop.stop, Const):
        return int(loop.stop.value) - int(loop.start.value)
    return None


def definite_races(kernel: Kernel) -> list[tuple[Store, For]]:
    """``(store, loop)`` pairs: the store, reached by every iteration of the parallel ``loop``, ignores its
    variable (module docstring)."""
    found: list[tuple[Store, For]] = []

    def visit(stmts: tuple[Stmt, ...], par: list[For]) -> None:
        for s in stmts:
            if isinstance(s, For):
                inner = par + [s] if s.kind == "parallel" and (_extent(s) or 0) > 1 else par
                visit(s.body, inner)
            elif isinstance(s, If):
                visit(s.then_body, [])  # a guard may pick one iteration: not a definite conflict
                visit(s.else_body, [])
            elif isinstance(s, Store) and par and s.buffer.scope in ("shared", "global"):
                for loop in par:
                    if not mentions(s.indices, loop.var):
                        found.append((s, loop))
                        break

    visit(kernel.body, [])
    return found


__all__ = ["definite_races"]
