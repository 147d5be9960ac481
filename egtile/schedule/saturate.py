"""Staged saturation with node, time and iteration limits that are reported, never silent.

Each stage of a :class:`~egtile.rules.RuleSet` runs as a loop of steps. One step saturates the support
analyses (:data:`~egtile.schedule.schema.support`) and then applies the stage's rules once, so every side
condition that reads an analysis sees its fixpoint (egglog notes §3.3: interleaving lets rules fire on
stale defaults). The loop stops when a step changes nothing (``saturated``) or at the first limit hit.
egglog 13.2 has no node or time limit of its own and a running step cannot be interrupted, so limits
are checked between steps: a limit can be overshot by one step, and the report says which one stopped
the stage. Stopping early is sound: every e-node a rule added is legal; only alternatives are missing.

After the last stage: support once more, the diagnostic rules once (for ``explain``: which lhs matched,
which conditions held), then the cost rules once (``set_cost`` must be set once per e-node, after all
unions).

egglog failures (``EggSmolError``; Rust panics arrive as ``PanicException``, a ``BaseException``) are
wrapped in :class:`~egtile.errors.RuleError` naming the stage and its rules; :func:`find_culprit` narrows
that to one rule by replaying the stage rule by rule.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import count
from typing import Literal

from egglog import EGraph, ruleset

from egtile.schedule import schema
from egtile.errors import RuleError
from egtile.rules.api import Rule, RuleSet

StopReason = Literal["saturated", "node-limit", "time-limit", "iteration-limit"]


@dataclass(frozen=True)
class Limits:
    """Bounds of one stage's saturation.

    Attributes:
        nodes: stop once the e-graph holds more rows than this (e-nodes plus fact rows).
        seconds: stop once the stage has run this long (wall clock, checked between steps).
        iterations: stop after this many steps.
    """

    nodes: int = 200_000
    seconds: float = 10.0
    iterations: int = 1_000


@dataclass(frozen=True)
class StageReport:
    """What one stage did.

    Attributes:
        stage: the stage name.
        stop_reason: ``saturated`` or the limit that stopped it.
        iterations: rewrite steps run.
        nodes: e-graph rows after the stage.
        seconds: wall time of the stage.
        rules: names of the stage's rules.
        fired: names of the rules that fired at least once in this stage.
    """

    stage: str
    stop_reason: StopReason
    iterations: int
    nodes: int
    seconds: float
    rules: tuple[str, ...]
    fired: tuple[str, ...] = ()

    @property
    def limited(self) -> bool:
        return self.stop_reason != "saturated"

    def __str__(self) -> str:
        return (f"stage {self.stage}: {self.stop_reason} after {self.iterations} steps, {self.nodes} rows, "
                f"{self.seconds * 1000:.1f} ms")


_names = count()


@lru_cache(maxsize=256)
def compiled(rules: tuple[Rule, ...], what: str):
    """The egglog ruleset of ``rules``' rewrites (``what="rewrite"``) or diagnostics (``"diagnose"``),
    built once per distinct tuple of rules."""
    cmds = []
    for r in rules:
        cmds.extend(r.egglog_rules if what == "rewrite" else r.diagnostic_rules)
    return ruleset(*cmds, name=f"egtile-{what}-{next(_names)}")


def _is_fatal(err: BaseException) -> bool:
    return isinstance(err, (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError))


def _wrap(err: BaseException, what: str, rules: Sequence[Rule]) -> RuleError:
    names = ", ".join(r.name for r in rules) or "(none)"
    kind = "a Rust panic" if type(err).__name__ == "PanicException" else type(err).__name__
    text = str(err).strip().splitlines()
    msg = text[-1] if text else ""
    return RuleError(f"egglog failed in {what} (rules: {names}) with {kind}: {msg}")


def run_stage(egraph: EGraph, stage: str, rules: tuple[Rule, ...], limits: Limits) -> StageReport:
    """Run one stage to saturation or its first limit.

    Raises:
        RuleError: egglog raised (including a Rust panic) while running the stage's rules.
    """
    step = schema.support.saturate() + compiled(rules, "rewrite")
    names = {r.name for r in rules}
    fired: set[str] = set()
    start = time.perf_counter()
    steps = 0
    reason: StopReason = "saturated"
    while True:
        try:
            report = egraph.run(step)
        except BaseException as err:
            if _is_fatal(err):
                raise
            raise _wrap(err, f"stage {stage!r}", rules) from err
        fired |= {getattr(k, "name", None) for k, n in report.num_matches_per_rule.items() if n} & names
        steps += 1
        if not report.updated:
            break
        if schema.size(egraph) > limits.nodes:
            reason = "node-limit"
            break
        if time.perf_counter() - start > limits.seconds:
            reason = "time-limit"
            break
        if steps >= limits.iterations:
            reason = "iteration-limit"
            break
    return StageReport(stage, reason, steps, schema.size(egraph), time.perf_counter() - start,
                       tuple(r.name for r in rules), tuple(sorted(fired)))


def finish(egraph: EGraph, rules: RuleSet) -> None:
    """Support to fixpoint, diagnostics once, costs once (see the module docstring).

    Raises:
        RuleError: egglog raised while running them.
    """
    try:
        egraph.run(schema.support.saturate())
        egraph.run(compiled(rules.rules, "diagnose"))
        egraph.run(schema.costs)
    except BaseException as err:
        if _is_fatal(err):
            raise
        raise _wrap(err, "the diagnostic and cost rules", rules.rules) from err


def run_all(egraph: EGraph, rules: RuleSet, limits: Limits) -> tuple[StageReport, ...]:
    """Every stage of ``rules`` in order, then :func:`finish`."""
    reports = tuple(run_stage(egraph, stage, rs, limits) for stage, rs in rules.stages())
    finish(egraph, rules)
    return reports


def find_culprit(fresh: Callable[[], EGraph], stage: str, rules: tuple[Rule, ...], limits: Limits) -> Rule | None:
    """The first rule of ``stage`` that makes egglog fail when run alone, starting from ``fresh()`` (an
    e-graph in the state the stage started from); ``None`` if none fails alone."""
    for r in rules:
        try:
            run_stage(fresh(), stage, (r,), limits)
        except RuleError:
            return r
    return None
