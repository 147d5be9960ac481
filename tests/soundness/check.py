"""Run one program through a ruleset and every checker; say what (if anything) caught a problem."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

import egtile
from egtile import rules
from egtile.errors import ScheduleError
from egtile.ir import Scheduled
from egtile.schedule.driver import optimize
from egtile.sim import POLICIES, simulate
from egtile.verifier import verify

# Rule subsets that force other legal schedules than the cheapest one: each removes alternatives, so
# extraction has to pick a different legal term (serial pipeline, other copy instructions, early waits,
# late releases, no replication).
VARIANTS: dict[str, tuple[str, ...]] = {
    "cheapest": (),
    "serial": ("pipeline-warp-specialize",),
    "no-tma": ("copy-to-tma",),
    "simt-copies": ("copy-to-tma", "copy-to-cp-async"),
    "wait-first": ("sink-wait",),
    "release-last": ("hoist-release",),
    "no-replication": ("replicate-parallel", "replicate-scalar"),
}


def ruleset(variant: str, base: rules.RuleSet | None = None) -> rules.RuleSet:
    rs = base if base is not None else rules.default()
    for name in VARIANTS[variant]:
        if name in rs:
            rs = rs.without(name)
    return rs


@dataclass
class Outcome:
    """What the checkers said about one schedule of one program."""

    scheduled: Scheduled | None
    problems: list[str] = field(default_factory=list)

    @property
    def caught(self) -> bool:
        return bool(self.problems)


def scheduled_result(kernel, rs):
    """``optimize``'s result (the schedule and the rules that fired), or ``None`` when ``rs`` finds no legal
    schedule."""
    try:
        return optimize(kernel, rules=rs)
    except ScheduleError:
        return None


def schedule(kernel, rs) -> Scheduled | None:
    """The extracted schedule, or ``None`` when the ruleset finds no legal one."""
    result = scheduled_result(kernel, rs)
    return None if result is None else result.scheduled


def check(kernel, sched: Scheduled, args: list[torch.Tensor], *, stop_early: bool = False,
          only: str | None = None) -> list[str]:
    """Problems found in ``sched``: verifier violations, simulator reports under every policy, and
    outputs that differ from the reference interpreter. ``only="verify"`` / ``"sim"`` runs one checker."""
    problems = [f"verify: {v}" for v in verify(sched)] if only != "sim" else []
    if only == "verify" or (problems and stop_early):
        return problems
    ref = [a.clone() for a in args]
    egtile.interpret(kernel, *ref)
    for policy in POLICIES:
        result = simulate(sched, *args, policy=policy, seed=3)
        problems += [f"sim {policy}: {e}" for e in result.errors()[:3]]
        for p, got, want in zip(kernel.params, result.outputs, ref):
            if not torch.equal(got, want):
                bad = (got != want).nonzero()[:3].tolist()
                problems.append(f"sim {policy}: {p.name} differs from the interpreter at {bad}")
        if problems and stop_early:
            return problems
    return problems
