"""``egtile.optimize`` (this module is ``egtile.schedule.driver``): schedule a kernel by equality saturation and cost-based extraction.

Pipeline: encode the kernel and the facts the rules need (:mod:`egtile.schedule.encode`), run the
ruleset stage by stage with limits (:mod:`egtile.schedule.saturate`), extract the cheapest term under
:mod:`egtile.schedule.cost`, decode it, and lower it mechanically to ``ir.Scheduled``
(:mod:`egtile.lower.driver`). No scheduling choice is taken outside the rules and extraction.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from egglog import EGraph, eq

from egtile.analysis import overlay, parallel_races, shared_reuse
from egtile.errors import ArgumentError, RuleError, ScheduleError
from egtile.ir import Kernel, Scheduled, walk
from egtile.ir.scheduled import Decision as IrDecision
from egtile.lower.driver import lower
from egtile.schedule import costs, schema
from egtile.schedule.decision import decision_table
from egtile.schedule.decode import Node, constructor_name, names_of, to_list
from egtile.schedule.encode import Encoding, encode
from egtile.schedule.explain import (
    ExplainContext,
    NodeCost,
    Rejected,
    breakdown,
    decisions,
    no_schedule_error,
    undecided,
)
from egtile.schedule.rule import Rule, RuleSet
from egtile.schedule.saturate import (
    Limits,
    Program,
    StageReport,
    find_culprit,
    finish,
    program,
    run_stage,
)

SUPPORTED_ARCHS = ("sm_90a", "sm_90")


@dataclass(frozen=True)
class Timings:
    """Wall time of each phase, in seconds."""

    encode: float
    saturate: float
    extract: float
    decode: float

    @property
    def total(self) -> float:
        return self.encode + self.saturate + self.extract + self.decode


@dataclass(frozen=True)
class ScheduleResult:
    """What :func:`optimize` returns.

    Attributes:
        kernel: the input kernel.
        scheduled: the schedule (``scheduled.decisions`` holds the decisions with their reasons).
        cost: total extraction cost, in estimated cycles per block iteration (:mod:`egtile.schedule.cost`).
        breakdown: every extracted e-node with its own cost (they add up to ``cost``).
        fired: ``(rule, sid)`` for every rewrite that fired.
        rejected: alternatives the e-graph did not hold (with the failing side conditions) or that
            extraction did not pick (with both costs).
        stages: one report per stage (stop reason, size, time).
        timings: encode / saturate / extract / decode times.
        rules: the ruleset that ran.
        tree: the extracted term, decoded.
    """

    kernel: Kernel
    scheduled: Scheduled
    cost: int
    breakdown: tuple[NodeCost, ...]
    fired: tuple[tuple[str, int], ...]
    rejected: tuple[Rejected, ...]
    stages: tuple[StageReport, ...]
    timings: Timings
    rules: RuleSet
    tree: tuple[Node, ...]

    @property
    def decisions(self):
        return self.scheduled.decisions

    @property
    def limits_hit(self) -> tuple[StageReport, ...]:
        """Stages stopped by a limit instead of saturating (alternatives may be missing)."""
        return tuple(s for s in self.stages if s.limited)

    @property
    def rules_fired(self) -> tuple[str, ...]:
        return tuple(sorted({r for r, _ in self.fired}))

    def explain(self) -> str:
        """A report a kernel author can read: stages, every decision with its reason and the rejected
        alternatives, barrier positions, and the cost breakdown."""
        from egtile.schedule.report import render

        return render(self)


def _kernel_of(obj: Any) -> Kernel:
    k = getattr(obj, "kernel", obj)
    if not isinstance(k, Kernel):
        raise ArgumentError(f"optimize expects a traced @T.prim_func (with .kernel) or an ir.Kernel, got "
                            f"{type(obj).__name__}")
    return k


def _ruleset(rules: RuleSet | Sequence[Rule] | None) -> RuleSet:
    from egtile import rules as R

    if rules is None:
        return R.default()
    if isinstance(rules, RuleSet):
        # A ruleset built without declarations (RuleSet(name, rules)) uses the catalog's.
        return rules if rules.decisions else rules.with_decisions(*R.declarations())
    if isinstance(rules, Rule):
        return RuleSet("custom", (rules,), R.declarations())
    items = tuple(rules)
    if not all(isinstance(r, Rule) for r in items):
        raise ArgumentError("optimize(rules=...) expects a RuleSet or a sequence of Rule values")
    return RuleSet("custom", items, R.declarations())


@contextmanager
def _recursion_for(kernel: Kernel):
    # egglog-python converts terms recursively (~4 frames per cons cell); give long lists room.
    n = sum(1 for _ in walk(kernel.body))
    need = 1000 + 40 * n
    old = sys.getrecursionlimit()
    if need > old:
        sys.setrecursionlimit(need)
    try:
        yield
    finally:
        if need > old:
            sys.setrecursionlimit(old)


def _saturate(kernel: Kernel, rules: RuleSet, prog: Program, limits: Limits,
              egraph: EGraph | None = None) -> tuple[EGraph, Encoding, tuple[StageReport, ...]]:
    egraph = egraph if egraph is not None else EGraph()
    enc = encode(kernel, rules, egraph)
    reports: list[StageReport] = []
    done: list[tuple[str, tuple[Rule, ...], object]] = []
    for stage, rs, rewrites in prog.stages:
        try:
            reports.append(run_stage(egraph, stage, rs, limits, prog.support, rewrites))
        except RuleError as err:
            def fresh() -> EGraph:
                g = EGraph()
                encode(kernel, rules, g)
                for s2, r2, w2 in done:
                    run_stage(g, s2, r2, limits, prog.support, w2)
                return g

            culprit = find_culprit(fresh, stage, rs, limits, prog.support)
            if culprit is not None:
                raise RuleError(f"rule {culprit.name!r} (stage {stage!r}) failed inside egglog: {err.message}") from err
            raise
        done.append((stage, rs, rewrites))
    finish(egraph, prog, rules)
    return egraph, enc, tuple(reports)


# Declaring a ruleset's rules in a fresh egglog e-graph costs more than saturating a seed kernel, so
# optimize() keeps one e-graph per ruleset with the rules declared and works inside push()/pop(). An
# egglog e-graph must stay on the thread that made it (pyo3 "unsendable"), so the pool is per thread;
# a caller takes a template out for the duration of its call (a re-entrant call makes its own) and
# returns it only if nothing failed.
_POOLS = threading.local()
_MAX_TEMPLATES = 8


class _Templates(OrderedDict):
    """One thread's templates. An e-graph must also be *freed* on its thread: dropped on another, pyo3
    refuses ("EGraph is unsendable, but is being dropped on another thread") and leaks it. Every
    ``EGraph.run`` leaves a reference cycle holding the e-graph's state (egglog-python's schedule
    processing closure), and such garbage is freed by the cycle collector in whichever thread happens to
    run it. So wherever this pool lets go of templates -- eviction, a failed call, and the end of the
    thread (the thread-local pool is released on its own thread) -- it collects cycles right away, on
    the owning thread, while nothing else holds the e-graphs."""

    @staticmethod
    def release() -> None:
        gc.collect()

    def __del__(self) -> None:
        self.clear()
        gc.collect()


def _pool() -> _Templates:
    pool = getattr(_POOLS, "pool", None)
    if pool is None:
        pool = _POOLS.pool = _Templates()
    return pool


def _declare(prog: Program) -> EGraph:
    g = EGraph()
    for _, _, rewrites in prog.stages:
        g.run(rewrites)
    for rs in (prog.diagnose, prog.support, prog.cost_need, prog.cost_set):
        g.run(rs)
    return g


@contextmanager
def _scratch(rules: RuleSet, prog: Program):
    pool = _pool()
    g = pool.pop(rules, None)
    if g is None:
        g = _declare(prog)
    g.push()
    ok = False
    try:
        yield g
        ok = True
    finally:
        try:
            g.pop()
        except BaseException:  # noqa: BLE001 - a broken template is simply dropped
            ok = False
        if ok:
            pool[rules] = g
            if len(pool) > _MAX_TEMPLATES:
                while len(pool) > _MAX_TEMPLATES:
                    pool.popitem(last=False)
                pool.release()
        else:
            del g
            pool.release()


@dataclass
class Saturation:
    """A saturated e-graph of a kernel, for inspection (tests, tools): what alternatives the rules added.

    Attributes:
        egraph: the e-graph (after every stage, the diagnostics and the cost pass).
        encoding: the encoding (``encoding.terms[sid]`` is a statement's encoded term).
        stages: the stage reports.
        rules: the ruleset that ran.
    """

    egraph: EGraph
    encoding: Encoding
    stages: tuple[StageReport, ...]
    rules: RuleSet

    def holds(self, a: Any, b: Any | None = None) -> bool:
        """Whether term ``a`` is in the e-graph (and, with ``b``, in the same e-class as ``b``)."""
        try:
            return bool(self.egraph.check_bool(a if b is None else eq(a).to(b)))
        except BaseException:  # noqa: BLE001 - a term with an unknown e-node is simply absent
            return False

    def alternatives(self, sid: int) -> frozenset[str]:
        """Constructor names of the e-nodes in statement ``sid``'s e-class, and in the e-classes of
        ``issue(stmt, ctx)`` for every issuing context (when the statement is issued for a pipeline)."""
        term = self.encoding.terms[sid]
        names = names_of(self.rules.decisions)
        out: set[str] = set()
        for t in (term, *(schema.Stmt.issue(term, c) for c in schema.ISSUERS)):
            if self.holds(t):
                out |= {constructor_name(alt, names) or "?" for alt in self.egraph.extract_multiple(t, 64)}
        return frozenset(out)


def saturate(prim_func_or_kernel: Any, rules: RuleSet | Sequence[Rule] | None = None, *,
             limits: Limits | None = None) -> Saturation:
    """Encode and saturate a kernel without extracting (see :class:`Saturation`).

    Raises:
        ArgumentError, ScheduleError, RuleError: as :func:`optimize`.
    """
    kernel = _kernel_of(prim_func_or_kernel)
    rs = _ruleset(rules)
    prog = program(rs)
    with _recursion_for(kernel):
        egraph, enc, reports = _saturate(kernel, rs, prog, limits or Limits())
        costs.run(egraph, decision_table(rs.decisions), kernel, enc.ctx.stmts, prog.cost_need, prog.cost_set)
    return Saturation(egraph, enc, reports, rs)


def _shared_spenders(body, table, made, scheduled) -> list[IrDecision]:
    """The decisions whose nodes spend optional shared memory (``Decision.spends_shared``) in a schedule that needs
    more shared memory than a block has, each restated as dropped for that reason; empty when it fits or no such
    node was chosen."""
    from egtile.verifier.resources import MAX_SHARED_BYTES, shared_bytes

    chosen = {(sid, table[op].label) for op, sid in ((n.op, n.subject) for top in body for n in top.walk())
              if op in table and table[op].spends_shared}
    need = shared_bytes(scheduled) if chosen else 0
    if need <= MAX_SHARED_BYTES:
        return []
    return [IrDecision(d.rule, d.sid, f"not {d.choice}",
                       f"with it the extracted schedule needs {need} bytes of shared memory and a block has "
                       f"{MAX_SHARED_BYTES}, so the kernel was scheduled again without {d.rule} (its condition "
                       "judged the added shared memory against a bound made before the other decisions were known)")
            for d in made if (d.sid, d.choice) in chosen]


def _shared_reuse(kernel: Kernel, scheduled) -> tuple[shared_reuse.Reuse, ...]:
    """The renamings of :mod:`egtile.analysis.shared_reuse` for a schedule that needs more shared memory than a block
    has; empty when it fits."""
    from egtile.verifier.resources import MAX_SHARED_BYTES, shared_bytes

    return shared_reuse.candidates(kernel) if shared_bytes(scheduled) > MAX_SHARED_BYTES else ()


def optimize(prim_func_or_kernel: Any, rules: RuleSet | Sequence[Rule] | None = None, arch: str = "sm_90a", *,
             limits: Limits | None = None) -> ScheduleResult:
    """Schedule a kernel.

    Args:
        prim_func_or_kernel: a traced ``@T.prim_func`` (anything with a ``.kernel``) or an ``ir.Kernel``.
        rules: the ruleset (default: :func:`egtile.rules.default`, builtin plus registered rules); a
            mutant from :func:`egtile.rules.mutant` for soundness tests.
        arch: the target; only Hopper (``sm_90a``) is supported.
        limits: node / time / iteration bounds per stage; a stage stopped by one is reported in
            ``ScheduleResult.stages`` and ``explain()`` and warned about (never silent).

    Returns:
        :class:`ScheduleResult`.

    Raises:
        ArgumentError: not a kernel, or an unsupported ``arch``.
        ScheduleError: no legal schedule (the message names each statement and its failed side
            conditions), or a construct with no schedule at all.
        RuleError: egglog failed while running a rule (the message names it).
    """
    kernel = _kernel_of(prim_func_or_kernel)
    if arch not in SUPPORTED_ARCHS:
        raise ArgumentError(f"optimize: arch {arch!r} is not supported; egtile schedules for Hopper: "
                            f"{', '.join(SUPPORTED_ARCHS)}")
    from egtile.ir.protocol import uses_protocol

    overlay.refuse(kernel)  # a T.view of another dtype that could observe the other buffer's bits, at its line
    if uses_protocol(kernel.body):  # the user's own roles and barriers: kept as written (egtile.lower.protocol)
        from egtile.lower.protocol import schedule_protocol

        return schedule_protocol(kernel)  # type: ignore[return-value]
    parallel_races.refuse(kernel)  # the user's race, at its line, before any schedule is blamed
    rs = _ruleset(rules)
    limits = limits or Limits()
    prog = program(rs)
    table = decision_table(rs.decisions)
    with _recursion_for(kernel), _scratch(rs, prog) as scratch:
        t0 = time.perf_counter()
        egraph, enc, reports = _saturate(kernel, rs, prog, limits, scratch)
        try:
            cost_table = costs.run(egraph, table, kernel, enc.ctx.stmts, prog.cost_need, prog.cost_set)
        except BaseException as err:
            if isinstance(err, (KeyboardInterrupt, SystemExit, RuleError)):
                raise
            raise RuleError(f"the cost pass failed for kernel {kernel.name!r}: {err}") from err
        t1 = time.perf_counter()
        try:
            term, total = egraph.extract(enc.root, include_cost=True)
        except BaseException as err:
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
            raise RuleError(f"extraction failed for kernel {kernel.name!r}: {err}") from err
        body = to_list(term, names_of(rs.decisions))
        t2 = time.perf_counter()
        ctx = ExplainContext.read(egraph, enc, rs, cost_table)
        pending = undecided(body, ctx.decisions)
        if pending:
            raise no_schedule_error(pending, ctx)
        scheduled = lower(body, enc.ctx, ctx.decisions)
        made, rejected = decisions(body, ctx, scheduled)
        scheduled = replace(scheduled, decisions=made + scheduled.decisions)  # lowering's facts (versioning) last
        parts = breakdown(body, ctx)
        ctx.egraph = ctx.enode_costs = None
        t3 = time.perf_counter()
    dropped = _shared_spenders(body, table, made, scheduled)
    if dropped:
        # a decision judged against a bound made before the others were known overflowed the block: the same
        # kernel without the rules that chose it, and explain() says why they are missing
        for name in dict.fromkeys(d.rule for d in dropped):
            rs = rs.without(name)
        again = optimize(kernel, rs, arch, limits=limits)
        return replace(again, scheduled=replace(again.scheduled, decisions=(*dropped, *again.scheduled.decisions)))
    reuse = _shared_reuse(kernel, scheduled)
    if reuse:
        # the block's shared buffers laid side by side do not fit: the same kernel with dead buffers' space reused
        # (a renaming that keeps the program's meaning, egtile.analysis.shared_reuse), scheduled again
        again = optimize(shared_reuse.apply(kernel, reuse), rs, arch, limits=limits)
        notes = tuple(IrDecision(shared_reuse.RULE, r.first, f"{r.buffer} in {r.space}", shared_reuse.describe(r))
                      for r in reuse)
        return replace(again, scheduled=replace(again.scheduled, decisions=(*notes, *again.scheduled.decisions)))
    # The saturate phase above includes encoding; split it out for the report.
    timings = Timings(encode=enc.seconds, saturate=t1 - t0 - enc.seconds, extract=t2 - t1, decode=t3 - t2)
    result = ScheduleResult(kernel, scheduled, int(total), parts, tuple(sorted(ctx.fired)), rejected, reports,
                            timings, rs, body)
    for rep in result.limits_hit:
        warnings.warn(f"egtile.optimize({kernel.name}): {rep}; the schedule is legal but alternatives may be "
                      "missing", RuntimeWarning, stacklevel=2)
    return result


__all__ = ["Limits", "Saturation", "ScheduleError", "ScheduleResult", "Timings", "optimize", "saturate"]
