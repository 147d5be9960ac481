"""Scheduled-IR nodes of a named-barrier handshake between the warpgroups of one role (ping-pong).

PTX ISA 9.7.13.4 ("bar / barrier"): ``bar.sync a, b`` makes the executing warp wait until ``b`` threads have
arrived at named barrier ``a`` (0..15) in the current round, counting itself; ``bar.arrive a, b`` counts the
executing warp's threads toward that round without waiting. A round completes when exactly ``b`` threads
arrived; ``b`` is a multiple of the warp size. So ``bar.sync 3, 256`` by the 128 threads of one warpgroup
completes once the other warpgroup's 128 threads ran ``bar.arrive 3, 256``: a one-way handshake. The
memory model gives the syncing threads the arriving threads' earlier accesses (release at the arrive,
acquire at the completed sync); egtile's schedules rely on none of it (the handshake orders the warpgroups'
tensor-core turns, not memory), and the verifier derives no ordering from it.

A node acts per warpgroup of the role that runs it: warpgroup ``w`` (threads ``[base + 128 w, base + 128 (w +
1))``) uses barrier ``ids[w]``, or does nothing when ``ids[w]`` is ``None`` (a one-sided arrive before or after
the loop). The choice is by the thread's warpgroup, which is the same for every thread of a warp, so the
instruction is warp-uniform as ``bar`` requires.

Handlers: :mod:`egtile.codegen.ops.handshake`, :mod:`egtile.sim.ops.handshake`,
:mod:`egtile.verifier.handshake` (deadlock freedom), the CTA-barrier placement's access summary in
:mod:`egtile.rules.pingpong` (it makes them); the listing here.
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.ir.printer import register_listing

WARPGROUP = 128


@dataclass(frozen=True)
class WarpgroupBarrier:
    """One named-barrier instruction per warpgroup of a role (module docstring).

    Attributes:
        ids: ``ids[w]``: the named barrier warpgroup ``w`` uses (``None``: warpgroup ``w`` skips it).
        count: the ``b`` operand: threads per round (syncing and arriving together).
        base: the role's first thread (warpgroup 0 starts there).
        sid: the statement the handshake belongs to (the pipelined loop), for reports.
    """

    ids: tuple[int | None, ...]
    count: int
    base: int = 0
    sid: int | None = None

    def barrier_of(self, tid: int) -> int | None:
        """The barrier thread ``tid`` uses, or ``None`` (not one of the node's warpgroups, or skipped)."""
        w = (tid - self.base) // WARPGROUP
        if tid < self.base or w >= len(self.ids):
            return None
        return self.ids[w]


@dataclass(frozen=True)
class NamedSync(WarpgroupBarrier):
    """``bar.sync ids[w], count`` by warpgroup ``w``: wait for the round to complete. ``pinned_after``: register
    fragments whose values the machine code computes before the sync (:mod:`egtile.codegen.ops.pin`: ptxas
    otherwise moves a ``bar.sync`` above register-only work the program puts before it, so a warpgroup would
    start its turn before its softmax instead of after)."""

    pinned_after: tuple[str, ...] = ()


@dataclass(frozen=True)
class NamedArrive(WarpgroupBarrier):
    """``bar.arrive ids[w], count`` by warpgroup ``w``: count toward the round, do not wait."""


def _ids(ids) -> str:
    return ", ".join(f"wg{w}: {'-' if i is None else i}" for w, i in enumerate(ids))


@register_listing(NamedSync)
def _sync(s: NamedSync) -> list[str]:
    pin = f", pinned after {', '.join(s.pinned_after)}" if s.pinned_after else ""
    return [f"bar.sync per warpgroup ({_ids(s.ids)}), count {s.count}{pin}  (handshake of sid {s.sid})"]


@register_listing(NamedArrive)
def _arrive(s: NamedArrive) -> list[str]:
    return [f"bar.arrive per warpgroup ({_ids(s.ids)}), count {s.count}  (handshake of sid {s.sid})"]


__all__ = ["NamedArrive", "NamedSync", "WARPGROUP", "WarpgroupBarrier"]
