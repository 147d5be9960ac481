"""Scheduling policies: which runnable thread runs next, and when async copies complete.

A policy sees the block's runnable threads (with their current role) and its pending async copies, and
returns ``("thread", tid)`` or ``("async", index into the pending list)``. Races are found by
happens-before whatever the order; the policy decides which values reads observe and which waits find
their phase already complete, so the three policies expose different bugs:

* ``round_robin``: every runnable thread in thread-id order runs to its next yield; after each round,
  every copy pending at the round's end completes (oldest first).
* ``random``: uniform choice among runnable threads and pending copies (``random.Random(seed)``), with
  bounded lag: a thread runnable for more than ``threads`` scheduling steps without running goes first.
  Hardware warp schedulers are fair in this sense; without it a thread that only waits (a producer
  thread that is not elected) could be starved while its barrier completes two phases, and its
  ``try_wait.parity`` would then wait for the wrong phase forever, a hang no real scheduler produces.
* ``adversarial``: consumers run ahead as far as they can (the current consumer keeps running until it
  blocks), then threads outside a role, then producers; async copies complete only when no thread can
  run (oldest first). Roles are told apart by name: ``consumer*`` and ``producer*``
  (``ir.scheduled.Role``); a thread not yet inside a role ranks by the role it will take.
"""

from __future__ import annotations

import random as _random
from typing import Literal, Protocol, TypeAlias

from egtile.errors import ArgumentError

PolicyName: TypeAlias = Literal["round_robin", "random", "adversarial"]
POLICIES: tuple[str, ...] = ("round_robin", "random", "adversarial")
Choice: TypeAlias = tuple[str, int]


class BlockView(Protocol):
    runnable: object  # IndexedSet of tids
    asyncs: list
    threads: list
    last: int | None


class RoundRobin:
    """Rounds over a sorted snapshot of the runnable threads; pending copies complete between rounds."""

    def __init__(self) -> None:
        self.round: list[int] = []
        self.pos = 0
        self.drain = 0

    def pick(self, b: BlockView) -> Choice | None:
        if self.drain > 0 and b.asyncs:
            self.drain -= 1
            return ("async", 0)
        while self.pos < len(self.round):
            t = self.round[self.pos]
            self.pos += 1
            if t in b.runnable:
                return ("thread", t)
        # end of a round: complete what is pending, then start over
        self.round, self.pos = sorted(b.runnable), 0
        if b.asyncs:
            self.drain = len(b.asyncs) - 1
            return ("async", 0)
        if not self.round:
            return None
        self.pos = 1
        return ("thread", self.round[0])


class Random:
    def __init__(self, seed: int) -> None:
        self.rng = _random.Random(seed)
        self.step = 0
        self.last_run: dict[int, int] = {}
        self.overdue: list[int] = []

    def pick(self, b: BlockView) -> Choice | None:
        n, m = len(b.runnable), len(b.asyncs)
        if n + m == 0:
            return None
        self.step += 1
        lag = len(b.threads)
        if self.step % max(1, lag // 4) == 0:
            self.overdue = sorted((t for t in b.runnable if self.step - self.last_run.get(t, 0) > lag),
                                  key=lambda t: self.last_run.get(t, 0))
        while self.overdue:
            t = self.overdue.pop(0)
            if t in b.runnable:
                self.last_run[t] = self.step
                return ("thread", t)
        i = self.rng.randrange(n + m)
        if i < n:
            t = b.runnable.items[i]
            self.last_run[t] = self.step
            return ("thread", t)
        return ("async", i - n)


def role_class(role: str) -> int:
    """0 for consumers, 1 outside roles (or unknown names), 2 for producers."""
    if role.startswith("consumer"):
        return 0
    if role.startswith("producer"):
        return 2
    return 1


class Adversarial:
    def pick(self, b: BlockView) -> Choice | None:
        if len(b.runnable) == 0:
            return ("async", 0) if b.asyncs else None
        best, best_key = None, None
        for t in b.runnable:
            th = b.threads[t]
            key = (role_class(th.role or th.home), t)
            if best_key is None or key < best_key:
                best, best_key = t, key
        last = b.last
        if last is not None and last in b.runnable and \
                role_class(b.threads[last].role or b.threads[last].home) == best_key[0]:
            return ("thread", last)
        return ("thread", best)


def make_policy(name: str, seed: int):
    """The policy object for ``name``.

    Raises:
        ArgumentError: an unknown policy name (the message lists the known ones).
    """
    match name:
        case "round_robin":
            return RoundRobin()
        case "random":
            return Random(seed)
        case "adversarial":
            return Adversarial()
    raise ArgumentError(f"unknown simulation policy {name!r}; expected one of {', '.join(POLICIES)}")
