"""Staged saturation with node, time and iteration limits that are reported, never silent.

Each stage of a :class:`~egtile.schedule.rule.RuleSet` runs as a loop of steps. One step saturates the support
analyses (:data:`~egtile.schedule.schema.support`) and then applies the stage's rules once, so every side
condition that reads an analysis sees its fixpoint (egglog notes §3.3: interleaving lets rules fire on
stale defaults). The loop stops when a step changes nothing (``saturated``) or at the first limit hit.
egglog 13.2 has no node or time limit of its own and a running step cannot be interrupted, so limits
are checked between steps: a limit can be overshot by one step, and the report says which one stopped
the stage. Stopping early is sound: every e-node a rule added is legal; only alternatives are missing.

After the last stage: support once more, the diagnostic rules once (for ``explain``: which lhs matched,
which conditions held), then the cost pass once (:mod:`egtile.schedule.costs`; ``set_cost`` must be set
once per e-node, after all unions).

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
from typing import Any, Literal

from egglog import EGraph, ruleset

from egtile.schedule import dataflow, schema
from egtile.errors import RuleError
from egtile.schedule.rule import Rule, RuleSet

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

# egglog-python's EGraph.run re-merges every declaration of the schedule into the e-graph's state and
# re-translates the schedule on each call (about 50 ms for egtile's rulesets, more than the rules
# themselves take on a seed kernel). Once a schedule has run on an e-graph, its rulesets are declared
# there (and survive push/pop), so the translated command can be sent again directly. The cache is per
# e-graph (an attribute of it, so it dies with it) and falls back to EGraph.run if egglog-python's
# internals change.


@dataclass(frozen=True)
class Ran:
    """What one run changed: whether anything was added, and the names of the rules that matched."""

    updated: bool
    matched: frozenset[str]


def run(egraph: EGraph, schedule: Any) -> Ran:
    """``egraph.run(schedule)``, translating ``schedule`` only the first time it runs on ``egraph`` (and
    reading the run report's raw rule names, not egglog-python's per-rule declarations)."""
    cache = getattr(egraph, "_egtile_commands", None)
    if cache is None:
        cache = {}
        try:
            egraph._egtile_commands = cache
        except AttributeError:  # pragma: no cover - an e-graph without instance attributes
            pass
    hit = cache.get(id(schedule))
    if hit is not None and hit[0] is schedule:
        try:
            (out,) = egraph._run_program(hit[1])
            raw = out.report
            return Ran(bool(raw.updated), frozenset(k for k, n in raw.num_matches_per_rule.items() if n))
        except AttributeError:  # pragma: no cover - internals changed: take the public path
            pass
    report = egraph.run(schedule)
    try:
        cache[id(schedule)] = (schedule, egraph._state.run_schedule_to_egg(schedule.schedule))
    except AttributeError:  # pragma: no cover
        pass
    return Ran(bool(report.updated), frozenset(getattr(k, "name", None) or "" for k, n in
                                               report.num_matches_per_rule.items() if n))


@lru_cache(maxsize=256)
def compiled(rules: tuple[Rule, ...], what: str):
    """The egglog ruleset of ``rules``' rewrites (``what="rewrite"``) or diagnostics (``"diagnose"``),
    built once per distinct tuple of rules."""
    cmds = []
    for r in rules:
        cmds.extend(r.egglog_rules if what == "rewrite" else r.diagnostic_rules)
    return ruleset(*cmds, name=f"egtile-{what}-{next(_names)}")


@dataclass(frozen=True)
class Program:
    """A ruleset compiled to egglog schedules, once per distinct ruleset value.

    Attributes:
        support: the support schedule (:func:`egtile.schedule.dataflow.support` with the rules' condition
            and support rules).
        stages: ``(stage, rules, rewrite ruleset)`` in run order.
        diagnose: the diagnostic rules of every rule.
        cost_need, cost_set: the cost pass's rules (:mod:`egtile.schedule.costs`).
    """

    support: Any
    stages: tuple[tuple[str, tuple[Rule, ...], Any], ...]
    diagnose: Any
    cost_need: Any
    cost_set: Any


@lru_cache(maxsize=32)
def program(rules: RuleSet) -> Program:
    """The compiled :class:`Program` of ``rules``."""
    from egtile.schedule import costs

    sup = dataflow.support(rules.fact_rules, rules.check_rules, rules.support_rules)
    stages = tuple((stage, rs, compiled(rs, "rewrite")) for stage, rs in rules.stages())
    need, put = costs.compile_rules(rules.decisions)
    return Program(sup, stages, compiled(rules.rules, "diagnose"), need, put)


def _is_fatal(err: BaseException) -> bool:
    return isinstance(err, (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError))


def _wrap(err: BaseException, what: str, rules: Sequence[Rule]) -> RuleError:
    names = ", ".join(r.name for r in rules) or "(none)"
    kind = "a Rust panic" if type(err).__name__ == "PanicException" else type(err).__name__
    text = str(err).strip().splitlines()
    msg = text[-1] if text else ""
    return RuleError(f"egglog failed in {what} (rules: {names}) with {kind}: {msg}")


def run_stage(egraph: EGraph, stage: str, rules: tuple[Rule, ...], limits: Limits, support: Any,
              rewrites: Any = None) -> StageReport:
    """Run one stage to saturation or its first limit: each step saturates ``support`` then applies the
    stage's rewrites once.

    Raises:
        RuleError: egglog raised (including a Rust panic) while running the stage's rules.
    """
    step = _step(support, rewrites if rewrites is not None else compiled(rules, "rewrite"))
    names = {r.name for r in rules}
    fired: set[str] = set()
    start = time.perf_counter()
    steps = 0
    reason: StopReason = "saturated"
    while True:
        try:
            report = run(egraph, step)
        except BaseException as err:
            if _is_fatal(err):
                raise
            raise _wrap(err, f"stage {stage!r}", rules) from err
        fired |= report.matched & names
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


_STEPS: dict[tuple[int, int], Any] = {}


def _step(support: Any, rewrites: Any) -> Any:
    """``support + rewrites``, one schedule object per pair (so :func:`run` can reuse its translation)."""
    key = (id(support), id(rewrites))
    hit = _STEPS.get(key)
    if hit is None or hit[0] is not support or hit[1] is not rewrites:
        hit = _STEPS[key] = (support, rewrites, support + rewrites)
    return hit[2]


def finish(egraph: EGraph, prog: Program, rules: RuleSet) -> None:
    """Support to fixpoint and the diagnostics once (the cost pass follows, :mod:`egtile.schedule.costs`).

    Raises:
        RuleError: egglog raised while running them.
    """
    try:
        run(egraph, prog.support)
        run(egraph, prog.diagnose)
    except BaseException as err:
        if _is_fatal(err):
            raise
        raise _wrap(err, "the diagnostic rules", rules.rules) from err


def find_culprit(fresh: Callable[[], EGraph], stage: str, rules: tuple[Rule, ...], limits: Limits,
                 support: Any) -> Rule | None:
    """The first rule of ``stage`` that makes egglog fail when run alone, starting from ``fresh()`` (an
    e-graph in the state the stage started from); ``None`` if none fails alone."""
    for r in rules:
        try:
            run_stage(fresh(), stage, (r,), limits, support)
        except RuleError:
            return r
    return None
