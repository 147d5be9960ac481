"""The rule-authoring API: rules, named side conditions derived in the e-graph, hardware oracles, rulesets.

A :class:`Rule` is one scheduling decision written as an egglog rewrite: a pattern (``lhs``) over the sorts
of :mod:`egtile.schedule.schema`, the alternative it adds (``rhs``, unioned into the pattern's e-class, so
the original stays) and named side conditions. The alternative's constructor is declared once, with its
cost, lowering and explanation, as a :class:`~egtile.schedule.decision.Decision`.

A :class:`Condition` is a list of egglog facts over the rule's pattern variables (``query``) and, when it
needs more than the core dataflow relations of :mod:`egtile.schedule.dataflow`, the egglog rules that
derive what it reads: positive definitions (``derive``, the *facts* stratum of the support schedule) and
checks that may negate them (``checks``, the *checks* stratum, saturated after it). Conditions over a
pipelined body form or a statement are usually written with :func:`form_condition` / :func:`stmt_condition`:
a list of *violations* (premises that make the condition fail, each recording a witness: which statements,
which buffer), from which the failure flag, its explicit ``False`` default and the query are generated.
``explain()`` words a failure from its witness rows.

Python computes only genuine hardware oracles, declared as :class:`FactSpec` (a boolean per statement,
with its reasons: TMA tensor-map limits, cp.async chunk widths) or :class:`NumSpec` (a number per
statement: register plans); they enter the e-graph as ``fact`` / ``num`` rows before saturation.

Because conditions, rules and declarations are values, a soundness mutant is a rule without one condition
(:meth:`Rule.without`), with one replaced (:meth:`Rule.replace_condition`), or a ruleset with one
declaration's lowering replaced (:meth:`RuleSet.replace_decision`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import SimpleNamespace
from typing import Any, Literal

from egglog import Bool, Expr, String, eq, i64, rule, set_, union, var

from egtile.errors import RuleError
from egtile.schedule import dataflow as D
from egtile.schedule.decision import Decision, decision_table
from egtile.schedule.schema import FIRED, MATCHED, Block, Stmt, diag, fact
from egtile.verdict import Verdict

STAGES: tuple[str, ...] = ("restructure", "pipeline", "copy", "barrier", "partition")
"""Builtin stage order. Restructuring rules (which build new statements) run first; the loop schedule runs
before the copy instruction because TMA and cp.async only exist where a pipelined loop's issuing context
completes them on an mbarrier, and that context is what the ``pipeline`` stage creates."""

FactScope = Literal["block", "thread", "pipelined", "member", "copy", "any"]


@dataclass(frozen=True)
class FactSpec:
    """A hardware oracle: a named boolean per statement, computed in Python before saturation
    (``fact(name, sid)`` rows; absence is a sound "no").

    Attributes:
        name: the fact's name.
        doc: what it states, with its hardware source.
        compute: ``(ctx, stmt) -> Verdict | bool`` with ``ctx`` a :class:`egtile.schedule.facts.FactContext`.
        scope: which statements it is computed for: ``block`` (block-level), ``thread`` (inside a
            ``T.Parallel``), ``pipelined`` (``T.Pipelined`` loops), ``member`` (top-level statements of a
            pipelined loop), ``copy`` (every ``T.copy``) or ``any``.
    """

    name: str
    doc: str
    compute: Callable[[Any, Any], Verdict | bool]
    scope: FactScope = "block"


@dataclass(frozen=True)
class NumSpec:
    """A hardware oracle number per statement (``num(name, sid)``); ``None`` leaves no row."""

    name: str
    doc: str
    compute: Callable[[Any, Any], int | None]
    scope: FactScope = "block"


@dataclass(frozen=True)
class Condition:
    """A named side condition.

    Attributes:
        name: how reports and ``Rule.without`` refer to it, e.g. ``"effect-local"``.
        doc: the fact in words (the legality argument's premise).
        query: ``v -> facts``: egglog facts over the rule's variables ``v`` that must all hold (``v.lhs`` is
            the rule's pattern term).
        derive: egglog rules (the facts stratum) positively defining what ``query`` or ``checks`` read beyond
            the core dataflow relations.
        checks: egglog rules (the checks stratum, after ``derive``) that may negate facts of earlier strata
            (through explicit ``False`` defaults and ``or`` merges): violation rules.
        oracles: the hardware oracles the query reads (the encoder computes them).
        explain: ``(ctx, sid) -> str``: why it fails for subject ``sid``, in words (``ctx``: an
            :class:`egtile.schedule.explain.ExplainContext`, whose ``witnesses(name, sid)`` are the e-graph's
            witness rows); ``None``: the failing oracle's own reason.
    """

    name: str
    doc: str
    query: Callable[[SimpleNamespace], Sequence[Any]]
    # egglog rules are not hashable: a condition is identified by its name, query and oracles.
    derive: tuple[Any, ...] = field(default=(), compare=False)
    oracles: tuple[FactSpec | NumSpec, ...] = ()
    explain: Callable[[Any, int], str] | None = field(default=None, compare=False)
    checks: tuple[Any, ...] = field(default=(), compare=False)
    oracle: bool = False
    """The condition only reads a hardware oracle (a ``fact`` row, or arithmetic over ``num`` rows): it is not
    derived by egglog rules from the program."""

    @property
    def in_egraph(self) -> bool:
        """Whether the condition's verdict is derived by egglog rules (possibly over oracle facts)."""
        return not self.oracle


def holds(spec: FactSpec, *, subject: str = "sid", name: str | None = None, doc: str | None = None) -> Condition:
    """The condition "hardware oracle ``spec`` holds for the statement bound to variable ``subject``"."""
    return Condition(name=name or spec.name, doc=doc or spec.doc,
                     query=lambda v: (fact(spec.name, getattr(v, subject)),), oracles=(spec,), oracle=True)


@dataclass(frozen=True)
class Violation:
    """One way a condition fails: egglog ``premises`` over the generated variables, and the witness
    ``(a, b, buf)`` recorded for ``explain()`` (statement ids or numbers, a buffer name)."""

    premises: tuple[Any, ...]
    a: Any = -1
    b: Any = -1
    buf: Any = ""


def form_condition(name: str, doc: str, violations: Callable[[SimpleNamespace], Iterable[Violation]],
                   explain: Callable[[Any, int], str] | None = None, *, subject: str = "body",
                   derive: tuple[Any, ...] = (), oracles: tuple = ()) -> Condition:
    """A condition over a pipelined body form ``B`` of loop ``L`` (``pipelined(L, B)``), failing exactly
    when one of ``violations`` matches.

    ``violations(w)`` receives fresh variables: ``w.L`` (the loop's sid, ``i64``), ``w.B`` (the body form),
    ``w.p``/``w.c``/``w.x`` (``Stmt``), ``w.i``/``w.j``/``w.n``/``w.s`` (``i64``), ``w.b``/``w.sc``/``w.v``
    (``String``). The rule
    using it must bind the body form to its variable ``subject``.
    """
    w = SimpleNamespace(L=var("L", i64), B=var("B", Block), p=var("p", Stmt), c=var("c", Stmt), x=var("x", Stmt),
                        i=var("i", i64), j=var("j", i64), n=var("n", i64), b=var("b", String), sc=var("sc", String),
                        v=var("v", String), s=var("s", i64))
    head = Stmt.pipelined(w.L, w.B)
    rules: list[Any] = [rule(head, name=f"{name}:default").then(set_(D.fails(name, w.B)).to(Bool(False)))]
    for k, viol in enumerate(violations(w)):
        rules.append(rule(head, *viol.premises, name=f"{name}:{k}").then(
            set_(D.fails(name, w.B)).to(Bool(True)), D.witness(name, w.L, viol.a, viol.b, viol.buf)))
    return Condition(name, doc, lambda v: (eq(D.fails(name, getattr(v, subject))).to(Bool(False)),),
                     derive=derive, oracles=tuple(oracles), explain=explain, checks=tuple(rules))


def stmt_condition(name: str, doc: str, violations: Callable[[SimpleNamespace], Iterable[Violation]],
                   explain: Callable[[Any, int], str] | None = None, *, derive: tuple[Any, ...] = (),
                   oracles: tuple = ()) -> Condition:
    """A condition over a statement e-class ``w.st`` (the rule's pattern term), failing when one of
    ``violations`` matches. ``violations(w)`` receives ``w.st``, ``w.s`` (its sid), ``w.h``/``w.x``
    (``Stmt``), ``w.i`` (``i64``), ``w.b``/``w.sc`` (``String``), ``w.blk``/``w.r`` (``Block``)."""
    w = SimpleNamespace(st=var("st", Stmt), s=var("s", i64), h=var("h", Stmt), x=var("x", Stmt), i=var("i", i64),
                        b=var("b", String), sc=var("sc", String), blk=var("blk", Block), r=var("r", Block))
    bind = eq(w.s).to(D.sid_of(w.st))
    rules: list[Any] = [rule(bind, name=f"{name}:default").then(set_(D.fails_st(name, w.st)).to(Bool(False)))]
    for k, viol in enumerate(violations(w)):
        rules.append(rule(bind, *viol.premises, name=f"{name}:{k}").then(
            set_(D.fails_st(name, w.st)).to(Bool(True)), D.witness(name, w.s, viol.a, viol.b, viol.buf)))
    return Condition(name, doc, lambda v: (eq(D.fails_st(name, v.lhs)).to(Bool(False)),), derive=derive,
                     oracles=tuple(oracles), explain=explain, checks=tuple(rules))


Variables = tuple[tuple[str, type], ...]


@dataclass(frozen=True)
class Rule:
    """One scheduling rewrite with named side conditions.

    Attributes:
        name: e.g. ``"partition-parallel"`` (unique in a ruleset).
        stage: one of :data:`STAGES` or a user stage name.
        doc: the legality argument (why the alternative computes the same result), with its hardware
            source (PTX ISA section).
        variables: pattern variables as ``(name, sort)`` pairs.
        lhs: ``v -> term``: the pattern.
        rhs: ``v -> term``: the alternative unioned with the match. Its root constructor's declaration
            (:class:`~egtile.schedule.decision.Decision`) says what it costs and how it lowers.
        conditions: the named side conditions (all must hold).
        bindings: ``v -> facts`` that only bind variables (not removable, not side conditions).
        subject: the ``i64`` variable naming the statement the decision is about (reports, mutants).
        support: egglog rules the rule's right-hand side needs at support time (e.g. expanding a list
            helper it introduces), run after the conditions stratum.
        defaults: egglog rules run in the checks stratum that are not side conditions (the explicit
            ``False`` defaults a support expansion negates; a condition mutant keeps them).
        oracles: hardware oracles the bindings read (besides those of the conditions).
    """

    name: str
    stage: str
    doc: str
    variables: Variables
    lhs: Callable[[SimpleNamespace], Expr]
    rhs: Callable[[SimpleNamespace], Expr]
    conditions: tuple[Condition, ...] = ()
    bindings: Callable[[SimpleNamespace], Sequence[Any]] = field(default=lambda v: ())
    subject: str = "sid"
    support: tuple[Any, ...] = field(default=(), compare=False)
    defaults: tuple[Any, ...] = field(default=(), compare=False)
    oracles: tuple[FactSpec | NumSpec, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            # the name keys the ruleset, explain()'s lines, --without and the mutants: an empty one names nothing
            raise RuleError(f"a Rule needs a non-empty name (got {self.name!r})")
        # a user stage is any other name, run after the builtin ones: a misspelt builtin would silently become
        # one (a fresh-user probe's `stage="copyy"` ran after `copy`, unnoticed)
        if self.stage not in STAGES:
            import difflib
            import warnings

            near = difflib.get_close_matches(self.stage, STAGES, n=1, cutoff=0.75)
            if near:
                warnings.warn(f"rule {self.name!r}: stage {self.stage!r} is not a builtin stage, so it is a new user "
                              f"stage run after {', '.join(STAGES)}; did you mean {near[0]!r}?", UserWarning,
                              stacklevel=3)

    # -- building variants

    def condition(self, name: str) -> Condition:
        """The side condition called ``name`` (``KeyError`` naming the rule's conditions if none)."""
        for c in self.conditions:
            if c.name == name:
                return c
        raise KeyError(f"rule {self.name!r} has no side condition {name!r}; it has "
                       f"{[c.name for c in self.conditions]}")

    def without(self, condition: str) -> Rule:
        """This rule with side condition ``condition`` removed (a mutant, for soundness tests)."""
        self.condition(condition)
        return replace(self, conditions=tuple(c for c in self.conditions if c.name != condition))

    def replace_condition(self, name: str, new: Condition) -> Rule:
        """This rule with side condition ``name`` replaced by ``new`` (a weakened mutant)."""
        self.condition(name)
        return replace(self, conditions=tuple(new if c.name == name else c for c in self.conditions))

    def with_condition(self, new: Condition) -> Rule:
        """This rule with one more side condition (a mutant that narrows where the rule applies)."""
        return replace(self, conditions=self.conditions + (new,))

    # -- what the encoder and the runner need

    @property
    def all_oracles(self) -> tuple[FactSpec | NumSpec, ...]:
        out: list[FactSpec | NumSpec] = list(self.oracles)
        for c in self.conditions:
            out.extend(c.oracles)
        return tuple(out)

    def pattern_vars(self) -> SimpleNamespace:
        """Fresh egglog variables for this rule's patterns; ``v.lhs`` is the pattern term itself."""
        v = SimpleNamespace(**{n: var(n, t) for n, t in self.variables})
        v.lhs = self.lhs(v)
        return v

    def _subject(self, v: SimpleNamespace) -> Any:
        try:
            return getattr(v, self.subject)
        except AttributeError:
            raise ValueError(f"rule {self.name!r}: subject {self.subject!r} is not one of its variables "
                             f"{[n for n, _ in self.variables]}") from None

    @cached_property
    def egglog_rules(self) -> tuple[Any, ...]:
        """The rewrite as an egglog rule: union ``rhs`` into the match, record ``diag(name, "!", subject)``."""
        v = self.pattern_vars()
        facts = [v.lhs, *self.bindings(v)]
        for c in self.conditions:
            facts.extend(c.query(v))
        return (rule(*facts, name=self.name).then(
            union(v.lhs).with_(self.rhs(v)), diag(self.name, FIRED, self._subject(v))),)

    @cached_property
    def diagnostic_rules(self) -> tuple[Any, ...]:
        """Rules that record, for explain: every lhs match (``diag(name, "?", subject)``) and each condition
        that held there (``diag(name, condition, subject)``)."""
        v = self.pattern_vars()
        base = [v.lhs, *self.bindings(v)]
        sub = self._subject(v)
        out = [rule(*base, name=f"{self.name}?").then(diag(self.name, MATCHED, sub))]
        for c in self.conditions:
            out.append(rule(*base, *c.query(v), name=f"{self.name}?{c.name}").then(diag(self.name, c.name, sub)))
        return tuple(out)

    @cached_property
    def produces(self) -> Any:
        """The egglog callable at the root of the right-hand side (its decision's constructor)."""
        from egglog import get_callable_fn

        return get_callable_fn(self.rhs(self.pattern_vars()))

    @cached_property
    def head(self) -> Any:
        """The egglog callable at the root of the pattern (the decision point)."""
        from egglog import get_callable_fn

        return get_callable_fn(self.lhs(self.pattern_vars()))


@dataclass(frozen=True)
class RuleSet:
    """Rules and the declarations of the constructors they use, run stage by stage. Values: every method
    returns a new set."""

    name: str
    rules: tuple[Rule, ...]
    decisions: tuple[Decision, ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for r in self.rules:
            if r.name in seen:
                raise ValueError(f"ruleset {self.name!r} has two rules named {r.name!r}")
            seen.add(r.name)
        decision_table(self.decisions)

    def __iter__(self):
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def __contains__(self, name: object) -> bool:
        return any(r.name == name for r in self.rules)

    def __add__(self, other: RuleSet | Rule | Sequence[Rule]) -> RuleSet:
        if isinstance(other, RuleSet):
            return RuleSet(f"{self.name}+{other.name}", self.rules + other.rules,
                           _merge(self.decisions, other.decisions))
        extra = (other,) if isinstance(other, Rule) else tuple(other)
        return RuleSet(f"{self.name}+rules", self.rules + extra, self.decisions)

    def rule(self, name: str) -> Rule:
        for r in self.rules:
            if r.name == name:
                return r
        raise KeyError(f"ruleset {self.name!r} has no rule {name!r}; it has {[r.name for r in self.rules]}")

    def without(self, rule: str) -> RuleSet:
        """This set without rule ``rule``."""
        self.rule(rule)
        return RuleSet(f"{self.name}-{rule}", tuple(r for r in self.rules if r.name != rule), self.decisions)

    def without_condition(self, rule: str, condition: str) -> RuleSet:
        """This set with side condition ``condition`` removed from rule ``rule``."""
        return self.replace(self.rule(rule).without(condition), name=f"{self.name}-{rule}.{condition}")

    def replace(self, new: Rule, *, name: str | None = None) -> RuleSet:
        """This set with the rule of the same name as ``new`` replaced by it."""
        self.rule(new.name)
        return RuleSet(name or self.name, tuple(new if r.name == new.name else r for r in self.rules), self.decisions)

    def with_decisions(self, *decisions: Decision) -> RuleSet:
        """This set with more declarations (a user instruction's)."""
        return RuleSet(self.name, self.rules, _merge(self.decisions, decisions))

    def decision(self, name: str) -> Decision:
        for d in self.decisions:
            if d.name == name:
                return d
        raise KeyError(f"ruleset {self.name!r} declares no constructor {name!r}; it declares "
                       f"{sorted(d.name for d in self.decisions)}")

    def replace_decision(self, new: Decision, *, name: str | None = None) -> RuleSet:
        """This set with the declaration of the same name as ``new`` replaced (a protocol mutant replaces
        a lowering this way)."""
        self.decision(new.name)
        return RuleSet(name or self.name, self.rules, tuple(new if d.name == new.name else d for d in self.decisions))

    def stages(self) -> tuple[tuple[str, tuple[Rule, ...]], ...]:
        """``(stage, rules)`` in run order: :data:`STAGES` first, then user stages as first seen."""
        order = list(STAGES)
        for r in self.rules:
            if r.stage not in order:
                order.append(r.stage)
        return tuple((s, tuple(r for r in self.rules if r.stage == s)) for s in order
                     if any(r.stage == s for r in self.rules))

    @property
    def oracles(self) -> tuple[FactSpec | NumSpec, ...]:
        """Every hardware oracle the rules read, each name once (first declaration wins)."""
        out: dict[str, FactSpec | NumSpec] = {}
        for r in self.rules:
            for f in r.all_oracles:
                out.setdefault(f.name, f)
        return tuple(out.values())

    def _unique(self, items) -> tuple[Any, ...]:
        seen: set[int] = set()
        out: list[Any] = []
        for d in items:
            if id(d) not in seen:
                seen.add(id(d))
                out.append(d)
        return tuple(out)

    @property
    def fact_rules(self) -> tuple[Any, ...]:
        """Every condition's ``derive`` rules, each once (conditions may share derivations)."""
        return self._unique(d for r in self.rules for c in r.conditions for d in c.derive)

    @property
    def check_rules(self) -> tuple[Any, ...]:
        """Every condition's ``checks`` and every rule's ``defaults``, each once."""
        return self._unique([d for r in self.rules for c in r.conditions for d in c.checks]
                            + [d for r in self.rules for d in r.defaults])

    @property
    def support_rules(self) -> tuple[Any, ...]:
        """Every rule's ``support`` rules (list expansions), each once."""
        return self._unique(d for r in self.rules for d in r.support)

    def producer_of(self, constructor_name: str) -> tuple[Rule, ...]:
        """The rules whose right-hand side is built by the constructor called ``constructor_name``."""
        d = decision_table(self.decisions).get(constructor_name)
        if d is None:
            return ()
        return tuple(r for r in self.rules if r.produces == d.constructor)


def _merge(a: tuple[Decision, ...], b: Iterable[Decision]) -> tuple[Decision, ...]:
    table = decision_table(a)
    out = list(a)
    for d in b:
        if d.name in table:
            if table[d.name] != d:
                raise ValueError(f"constructor {d.name!r} is declared twice, differently")
            continue
        table[d.name] = d
        out.append(d)
    return tuple(out)


__all__ = [
    "STAGES", "Condition", "FactSpec", "NumSpec", "Rule", "RuleSet", "Verdict", "Violation", "form_condition",
    "holds", "stmt_condition",
]
