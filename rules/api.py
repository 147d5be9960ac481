"""The rule-authoring API: rules, named side conditions, the facts they read, and rulesets as values.

A :class:`Rule` is one scheduling decision written as an egglog rewrite: a pattern (``lhs``) over the
sorts of :mod:`egtile.schedule.schema`, the alternative it adds (``rhs``, unioned into the pattern's
e-class, so the original stays), and named side conditions. Each :class:`Condition` is a list of egglog
facts over the rule's pattern variables, read from the fact tables the encoder fills. Python-computed
facts are declared with :class:`FactSpec` (a boolean per statement, with a reason when it fails) or
:class:`NumSpec` (a number per statement); the encoder computes exactly the facts that the active rules
declare.

Because a condition is a named value, a rule can be rebuilt without one (:meth:`Rule.without`) or with
one swapped (:meth:`Rule.replace_condition`): that is how soundness tests build mutants.

Rulesets are values too (:class:`RuleSet`): ``optimize(k, rules=rs)`` runs ``rs`` stage by stage, in
:data:`STAGES` order (then any user stage, in order of first appearance).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import SimpleNamespace
from typing import Any, Literal

from egglog import Expr, String, i64, rule, union, var

from egtile.schedule import schema

STAGES: tuple[str, ...] = ("pipeline", "copy", "barrier", "partition")
"""Builtin stage order. The loop schedule runs first because the copy instruction is chosen per role:
TMA and cp.async only exist where a warp-specialized producer completes them on an mbarrier, and that
context is what the ``pipeline`` stage creates."""


@dataclass(frozen=True)
class Verdict:
    """A boolean fact with its reason: ``reason`` says why it fails (or, optionally, why it holds)."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


FactScope = Literal["block", "thread", "pipelined", "member", "any"]


@dataclass(frozen=True)
class FactSpec:
    """A named boolean fact per statement, computed in Python before saturation.

    Attributes:
        name: the fact's name in the ``fact(name, sid)`` relation.
        doc: what it states.
        compute: ``(ctx, stmt) -> Verdict | bool`` with ``ctx`` a :class:`egtile.schedule.facts.FactContext`.
        scope: which statements it is computed for: ``block`` (block-level statements), ``thread``
            (inside a ``T.Parallel``), ``pipelined`` (``T.Pipelined`` loops), ``member`` (top-level
            statements of a pipelined loop) or ``any``.
    """

    name: str
    doc: str
    compute: Callable[[Any, Any], Verdict | bool]
    scope: FactScope = "block"


@dataclass(frozen=True)
class NumSpec:
    """A named number per statement (``num(name, sid)``), computed in Python; ``None`` leaves no row."""

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
        query: ``v -> facts``: egglog facts over the rule's variables ``v`` that must all hold.
        facts: the Python facts the query reads (the encoder computes them).
        explain: ``(ctx, sid) -> str``: why it fails for the statement ``sid`` (``ctx``: an
            :class:`egtile.schedule.explain.ExplainContext`); ``None``: the failing fact's own reason.
    """

    name: str
    doc: str
    query: Callable[[SimpleNamespace], Sequence[Any]]
    facts: tuple[FactSpec | NumSpec, ...] = ()
    explain: Callable[[Any, int], str] | None = None


def holds(spec: FactSpec, *, subject: str = "sid", name: str | None = None, doc: str | None = None) -> Condition:
    """The condition "``spec`` holds for the statement bound to variable ``subject``"."""
    return Condition(
        name=name or spec.name, doc=doc or spec.doc,
        query=lambda v: (schema.fact(spec.name, getattr(v, subject)),),
        facts=(spec,),
    )


Variables = tuple[tuple[str, type], ...]


@dataclass(frozen=True)
class Rule:
    """One scheduling rewrite with named side conditions.

    Attributes:
        name: e.g. ``"partition-parallel"`` (unique in a ruleset).
        stage: one of :data:`STAGES` or a user stage name.
        doc: the legality argument (why the alternative computes the same result), with its hardware
            source (PTX ISA section).
        variables: pattern variables as ``(name, sort)`` pairs (sorts from :mod:`egtile.schedule.schema`
            or egglog primitives ``i64``, ``String``).
        lhs: ``v -> term``: the pattern.
        rhs: ``v -> term``: the alternative unioned with the match.
        conditions: the named side conditions (all must hold).
        bindings: ``v -> facts`` that only bind variables (not removable, not side conditions).
        subject: the ``i64`` variable naming the statement the decision is about (reports, mutants).
        cost: the cost terms of :mod:`egtile.schedule.cost` the alternative pays, in words.
        produces: names of the constructors ``rhs`` introduces (so ``explain`` can say which rule made
            an extracted node).
        facts: Python facts the bindings read (besides those of the conditions).
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
    cost: str = ""
    produces: tuple[str, ...] = ()
    facts: tuple[FactSpec | NumSpec, ...] = ()

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
    def all_facts(self) -> tuple[FactSpec | NumSpec, ...]:
        out: list[FactSpec | NumSpec] = list(self.facts)
        for c in self.conditions:
            out.extend(c.facts)
        return tuple(out)

    def pattern_vars(self) -> SimpleNamespace:
        """Fresh egglog variables for this rule's patterns."""
        return SimpleNamespace(**{n: var(n, t) for n, t in self.variables})

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
        facts = [self.lhs(v), *self.bindings(v)]
        for c in self.conditions:
            facts.extend(c.query(v))
        return (rule(*facts, name=self.name).then(
            union(self.lhs(v)).with_(self.rhs(v)), schema.diag(self.name, schema.FIRED, self._subject(v))),)

    @cached_property
    def diagnostic_rules(self) -> tuple[Any, ...]:
        """Rules that record, for explain: every lhs match (``diag(name, "?", subject)``) and each condition
        that held there (``diag(name, condition, subject)``)."""
        v = self.pattern_vars()
        base = [self.lhs(v), *self.bindings(v)]
        sub = self._subject(v)
        out = [rule(*base, name=f"{self.name}?").then(schema.diag(self.name, schema.MATCHED, sub))]
        for c in self.conditions:
            out.append(rule(*base, *c.query(v), name=f"{self.name}?{c.name}").then(
                schema.diag(self.name, c.name, sub)))
        return tuple(out)


@dataclass(frozen=True)
class RuleSet:
    """An ordered collection of rules, run stage by stage. Values: every method returns a new set."""

    name: str
    rules: tuple[Rule, ...]

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for r in self.rules:
            if r.name in seen:
                raise ValueError(f"ruleset {self.name!r} has two rules named {r.name!r}")
            seen.add(r.name)

    def __iter__(self):
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def __contains__(self, name: object) -> bool:
        return any(r.name == name for r in self.rules)

    def __add__(self, other: RuleSet | Rule | Sequence[Rule]) -> RuleSet:
        extra = (other,) if isinstance(other, Rule) else tuple(other)
        return RuleSet(f"{self.name}+{getattr(other, 'name', 'rules')}", self.rules + extra)

    def rule(self, name: str) -> Rule:
        for r in self.rules:
            if r.name == name:
                return r
        raise KeyError(f"ruleset {self.name!r} has no rule {name!r}; it has {[r.name for r in self.rules]}")

    def without(self, rule: str) -> RuleSet:
        """This set without rule ``rule``."""
        self.rule(rule)
        return RuleSet(f"{self.name}-{rule}", tuple(r for r in self.rules if r.name != rule))

    def without_condition(self, rule: str, condition: str) -> RuleSet:
        """This set with side condition ``condition`` removed from rule ``rule``."""
        return self.replace(self.rule(rule).without(condition), name=f"{self.name}-{rule}.{condition}")

    def replace(self, new: Rule, *, name: str | None = None) -> RuleSet:
        """This set with the rule of the same name as ``new`` replaced by it."""
        self.rule(new.name)
        return RuleSet(name or self.name, tuple(new if r.name == new.name else r for r in self.rules))

    def stages(self) -> tuple[tuple[str, tuple[Rule, ...]], ...]:
        """``(stage, rules)`` in run order: :data:`STAGES` first, then user stages as first seen."""
        order = list(STAGES)
        for r in self.rules:
            if r.stage not in order:
                order.append(r.stage)
        return tuple((s, tuple(r for r in self.rules if r.stage == s)) for s in order
                     if any(r.stage == s for r in self.rules))

    @property
    def facts(self) -> tuple[FactSpec | NumSpec, ...]:
        """Every Python fact the rules read, each name once (first declaration wins)."""
        out: dict[str, FactSpec | NumSpec] = {}
        for r in self.rules:
            for f in r.all_facts:
                out.setdefault(f.name, f)
        return tuple(out.values())

    def producer_of(self, constructor: str) -> Rule | None:
        """The rule whose ``produces`` lists ``constructor``."""
        for r in self.rules:
            if constructor in r.produces:
                return r
        return None


__all__ = [
    "STAGES",
    "Condition",
    "FactSpec",
    "NumSpec",
    "Rule",
    "RuleSet",
    "String",
    "Verdict",
    "holds",
    "i64",
]
