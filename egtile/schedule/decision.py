"""One declaration per constructor of the scheduling e-graph: what it means, what it costs, how it lowers.

A :class:`Decision` is everything egtile knows about one constructor of :class:`~egtile.schedule.schema.Stmt`
(or a list marker): the egglog constructor itself, its arguments, its cost function, its lowering to
``ir.Scheduled`` and how ``explain()`` names it. Nothing else in egtile keys anything on constructor names:
the cost pass, the decoder, the lowering and the explanation all read the declarations of the ruleset that
ran (:attr:`egtile.schedule.rule.RuleSet.decisions`), so a rule author adds an instruction by declaring it
next to the rule that produces it, and a soundness mutant changes a protocol by replacing one declaration's
lowering.

Costs (:class:`Cost`): a Python function of the statement, the constructor's primitive arguments and, where
the hardware says so, a summary of a list argument (``work``: the cycles of one execution of its leaf
statements; ``items``: how many there are). The e-graph computes the summaries (union-invariant: every
equivalent form of a list has the same leaves), the cost pass asks the function once per distinct input
and sets each e-node's cost with ``set_cost``; ``explain()``'s breakdown calls the same function on the
extracted tree, so the numbers cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from egglog import String, i64

from egtile.schedule.schema import Block, Stmt

Group = Literal["undecided", "decided", "decision", "marker"]
"""``undecided``: a choice is pending (extraction returns it only when nothing legal exists); ``decided``:
encoded, nothing to choose; ``decision``: added by a rule; ``marker``: a position in a consumer list."""


@dataclass(frozen=True)
class CostInput:
    """What a cost function sees.

    Attributes:
        kernel: the ``ir.Kernel`` being scheduled.
        stmt: the tile-IR statement the e-node is about (``None`` for a loop marker's loop... it is the loop).
        params: the constructor's primitive arguments other than the subject, by name.
        work: the ``work`` summary of the declared list argument (``None`` when none is declared).
        items: the ``items`` summary (markers: leaf statements after the marker; otherwise of the list).
        loop_items: for markers, the leaf statements of the loop's whole consumer list.
    """

    kernel: Any
    stmt: Any
    params: Mapping[str, int | str]
    work: int | None = None
    items: int | None = None
    loop_items: int | None = None


@dataclass(frozen=True)
class Cost:
    """How an e-node of a constructor is costed (estimated cycles per block iteration, an int >= 0).

    Attributes:
        fn: ``CostInput -> int``; called once per distinct input found in the e-graph and again by
            ``explain()``'s breakdown.
        summary: name of a :class:`Block` argument whose ``work`` and ``items`` the function needs.
        at: ``"node"``: the cost is the e-node's own; ``"cell"``: the constructor is a list marker and the
            cost sits on the cons cell holding it (``items`` is then the leaf count of the rest of the list,
            ``loop_items`` that of the loop's whole consumer list).
        doc: the cost terms in words (for ``docs/rules.md`` and ``explain()``).
    """

    fn: Callable[[CostInput], int]
    summary: str | None = None
    at: Literal["node", "cell"] = "node"
    doc: str = ""


def static(n: int, doc: str = "") -> Cost:
    """A cost that does not depend on the statement."""
    return Cost(lambda _: n, doc=doc or f"{n}")


@dataclass(frozen=True)
class Decision:
    """The declaration of one constructor.

    Attributes:
        name: the constructor's name in decoded trees and reports (unique in a ruleset).
        constructor: the egglog constructor (a ``Stmt`` classmethod or a module-level egglog ``@function``
            returning ``Stmt``).
        args: its arguments as ``(name, sort)`` pairs in order; sorts are ``i64``, ``String``, ``Stmt`` or
            ``Block``. The *subject* (the statement the node is about) is the ``i64`` argument named
            ``sid`` or ``loop``, or the statement inside the first ``Stmt`` argument.
        group: see :data:`Group`.
        cost: see :class:`Cost`.
        lower: block-level lowering ``(node, lowerer, ctx) -> list[SStmt]`` (:mod:`egtile.lower.driver`).
        issue: lowering as an item of an issue list (a producer or prefetch list) ``(node, lowerer, issue)
            -> (stmts, arrivals)``: the statements, and the arrivals they make on the loop's ``full`` barrier.
        label: what ``explain()`` says was chosen (``"TMA"``); for undecided ones, what is pending.
        doc: what the constructor means (its execution semantics).
        details: ``(node, lowered) -> str``: a detail for ``explain()`` from the scheduled statements the
            node lowered to (``lowered``: those carrying its statement id).
        notes: ``(node, ctx) -> iterable of ir.Decision``: further decisions the node stands for (a loop
            schedule's role split, a marker's position), with ``ctx`` an
            :class:`egtile.schedule.explain.ExplainContext`.
        threads: ``(node, kernel) -> int``: threads the node adds to the launch (a producer warpgroup).
        layouts: ``(node, facts) -> iterable of (buffer, layout)``: the buffer layouts the node fixes (a
            ``egtile.layout.Fragment`` puts a fragment in registers, a swizzle ``Layout`` name lays out a
            shared buffer); the lowering collects them from the whole tree before lowering any node, so
            every other statement touching the buffer is lowered for that layout.
        spends_shared: the node adds shared memory the kernel could do without (a staging tile), judged
            legal against a bound made before the other decisions are known; when the extracted schedule
            needs more shared memory than a block has, :func:`egtile.schedule.driver.optimize` extracts again
            without the rules that chose such nodes.
    """

    name: str
    constructor: Any
    args: tuple[tuple[str, Any], ...]
    group: Group
    cost: Cost
    lower: Callable[..., Any] | None = None
    issue: Callable[..., Any] | None = None
    label: str = ""
    doc: str = ""
    details: Callable[..., str] | None = field(default=None, compare=False)
    notes: Callable[..., Any] | None = field(default=None, compare=False)
    threads: Callable[..., int] | None = None
    layouts: Callable[..., Any] | None = field(default=None, compare=False)
    spends_shared: bool = False

    def __post_init__(self) -> None:
        prims = [n for n, s in self.args if s in (i64, String)]
        subj = self.subject_arg
        if subj is not None and prims[0] != subj:
            raise ValueError(f"constructor {self.name!r}: its subject argument {subj!r} must be its first primitive "
                             f"argument (got {prims})")

    @property
    def subject_arg(self) -> str | None:
        """The argument naming the statement the node is about (``sid`` / ``loop``), if an ``i64`` one."""
        for n, sort in self.args:
            if sort is i64 and n in ("sid", "loop"):
                return n
        return None

    @property
    def stmt_args(self) -> tuple[str, ...]:
        return tuple(n for n, s in self.args if s is Stmt)

    @property
    def list_args(self) -> tuple[str, ...]:
        return tuple(n for n, s in self.args if s is Block)

    @property
    def param_args(self) -> tuple[str, ...]:
        """Primitive arguments other than the subject, in order (they form the cost key)."""
        subj = self.subject_arg
        return tuple(n for n, s in self.args if s in (i64, String) and n != subj)


def decision_table(decisions) -> dict[str, Decision]:
    """``name -> Decision``; two declarations of one name are an error (naming both)."""
    out: dict[str, Decision] = {}
    for d in decisions:
        if d.name in out and out[d.name] != d:
            raise ValueError(f"two declarations of constructor {d.name!r}")
        out[d.name] = d
    return out


__all__ = ["Cost", "CostInput", "Decision", "Group", "decision_table", "static"]
