"""Why extraction chose what it chose: decisions, rejected alternatives, cost breakdown, no-schedule errors.

Everything here reads what the e-graph recorded: the ``diag`` table (which rewrites fired, where each rule's
pattern matched and which side conditions held there, filled by rules compiled from the same
:class:`~egtile.schedule.rule.Rule` values that ran) and the ``witness`` table (which statements and
buffers made a condition fail, filled by the conditions' own violation rules). So "rejected by side
condition X" means the e-graph really lacked X at the fixpoint, and the statement it names is the one the
e-graph found. Costs come from the declarations' cost functions (:mod:`egtile.schedule.costs`), the same
numbers extraction minimized. Nothing here knows a constructor or rule by name: each
:class:`~egtile.schedule.decision.Decision` words itself (``label``, ``details``, ``notes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from egglog import EGraph, get_callable_fn

from egtile.errors import ScheduleError
from egtile.ir import Decision as Made
from egtile.ir import Scheduled, SStmt, TileOp, swalk
from egtile.schedule import costs as cost_pass
from egtile.schedule import dataflow as D
from egtile.schedule import schema
from egtile.schedule.cost import UNDECIDED
from egtile.schedule.decision import Decision
from egtile.schedule.decode import Node, names_of, to_node
from egtile.schedule.encode import Encoding
from egtile.schedule.enode_costs import ENodeCosts
from egtile.schedule.facts import FactContext
from egtile.schedule.rule import Condition, Rule, RuleSet
from egtile.schedule.tables import rows


@dataclass(frozen=True)
class Rejected:
    """An alternative the e-graph did not hold or extraction did not pick.

    Attributes:
        rule: the rule that would have produced it.
        sid: the statement it is about.
        failed: names of the side conditions that failed (empty: it was legal and lost on cost).
        reason: the explanation in words.
        cost: the alternative's cost (cycles) when it lost on cost.
        chosen_cost: the chosen alternative's cost then.
    """

    rule: str
    sid: int
    failed: tuple[str, ...]
    reason: str
    cost: int | None = None
    chosen_cost: int | None = None

    def __str__(self) -> str:
        if self.failed:
            return f"{self.rule} rejected by side condition {', '.join(self.failed)}: {self.reason}"
        if self.cost is not None and self.cost >= UNDECIDED:
            return (f"{self.rule} legal, but some statement inside it has no legal schedule in that context "
                    "(e.g. a copy whose requested instruction needs a warp-specialized producer)")
        if self.cost is None:
            return f"{self.rule} legal but not chosen (its cost could not be computed on its own: {self.reason})"
        return f"{self.rule} legal but costlier ({self.cost} vs {self.chosen_cost} cycles)"


@dataclass(frozen=True)
class NodeCost:
    """One extracted e-node's own cost (children excluded), in estimated cycles per block iteration."""

    op: str
    sid: int | None
    cost: int
    label: str


@dataclass
class ExplainContext:
    """What decision and condition explanations read.

    Attributes:
        facts: the kernel's placement facts.
        encoding: the encoding (oracle verdicts and numbers).
        rules: the ruleset that ran.
        decisions: ``name -> Decision`` of the ruleset.
        cand, held, fired: the e-graph's ``diag`` bookkeeping.
        witness_rows: ``(condition, subject sid) -> [(a, b, buf)]`` from the e-graph's ``witness`` table.
        barriers: ``loop sid -> (full barrier name, empty barrier name or None)`` of the schedule.
        barrier_guards: ``loop sid -> buffers`` its barriers guard.
        cost_table: the cost pass's values.
        egraph: the saturated e-graph (only while ``optimize`` runs).
        enode_costs: every e-node's extraction cost, read from ``egraph`` once, when the first alternative's
            cost is asked for (:mod:`egtile.schedule.enode_costs`; ``False``: unavailable, so each
            alternative is costed by its own extraction).
    """

    facts: FactContext
    encoding: Encoding
    rules: RuleSet
    decisions: dict[str, Decision]
    cand: set[tuple] = field(default_factory=set)
    held: set[tuple] = field(default_factory=set)
    fired: set[tuple] = field(default_factory=set)
    witness_rows: dict[tuple[str, int], list[tuple[int, int, str]]] = field(default_factory=dict)
    barriers: dict[int, tuple[str, str | None]] = field(default_factory=dict)
    barrier_guards: dict[int, tuple[str, ...]] = field(default_factory=dict)
    cost_table: dict[tuple, int] = field(default_factory=dict)
    egraph: EGraph | None = None
    enode_costs: ENodeCosts | bool | None = None

    @staticmethod
    def read(egraph: EGraph, encoding: Encoding, rules: RuleSet, cost_table: dict[tuple, int]) -> ExplainContext:
        from egtile.schedule.decision import decision_table

        cand, held, fired = set(), set(), set()
        for rule_name, what, sid in rows(egraph, schema.diag, 3):
            if what == schema.MATCHED:
                cand.add((rule_name, sid))
            elif what == schema.FIRED:
                fired.add((rule_name, sid))
            else:
                held.add((rule_name, what, sid))
        wit: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
        for name, sid, a, b, buf in rows(egraph, D.witness, 5):
            wit.setdefault((name, sid), []).append((a, b, buf))
        for v in wit.values():
            v.sort()
        return ExplainContext(encoding.ctx, encoding, rules, decision_table(rules.decisions), cand, held, fired, wit,
                              cost_table=cost_table, egraph=egraph)

    # -- conditions

    def witnesses(self, condition: str, sid: int) -> list[tuple[int, int, str]]:
        """The e-graph's witness rows of ``condition`` failing for subject ``sid``: ``(a, b, buf)``."""
        return self.witness_rows.get((condition, sid), [])

    def describe(self, sid: int) -> str:
        return self.facts.describe(sid) if sid in self.facts.stmts else f"sid {sid}"

    def guards(self, loop: int | None) -> tuple[str, ...]:
        """The buffers loop ``loop``'s barriers guard in the schedule."""
        return self.barrier_guards.get(loop, ()) if loop is not None else ()

    def barrier(self, loop: int | None, kind: str = "full") -> str:
        names = self.barriers.get(loop) if loop is not None else None
        if names is None:
            return f"the loop's {kind} barrier"
        return (names[0] if kind == "full" else names[1]) or f"the loop's {kind} barrier"

    def failed(self, r: Rule, sid: int) -> list[Condition]:
        return [c for c in r.conditions if (r.name, c.name, sid) not in self.held]

    def why(self, c: Condition, sid: int) -> str:
        if c.explain is not None:
            try:
                return c.explain(self, sid)
            except Exception as err:  # noqa: BLE001 - an explanation must never hide the schedule
                return f"(explanation failed: {err})"
        for spec in c.oracles:
            v = self.encoding.verdicts.get((spec.name, sid))
            if v is not None and not v.ok:
                return v.reason or f"{spec.name} does not hold"
        return f"{c.doc} does not hold"

    def rejection(self, r: Rule, sid: int) -> Rejected | None:
        """Why ``r`` did not produce the chosen alternative for ``sid`` (``None``: its pattern never matched)."""
        if (r.name, sid) not in self.cand:
            return None
        bad = self.failed(r, sid)
        if bad:
            text = "; ".join(f"{c.name}: {self.why(c, sid)}" for c in bad)
            return Rejected(r.name, sid, tuple(c.name for c in bad), text)
        return Rejected(r.name, sid, (), "legal")

    def alternatives(self, head: Any, sid: int, chosen: Rule | None) -> list[Rejected]:
        """The other rules deciding the same point (same pattern head) for ``sid``. A rule that builds another
        form of the statement itself (a restructuring rule) is not an alternative decision."""
        decided = {d.constructor for d in self.decisions.values() if d.group == "decision"}
        out = []
        for r in self.rules:
            if r is chosen or r.head != head or (r.produces not in decided and chosen is not None):
                continue
            rej = self.rejection(r, sid)
            if rej is not None:
                out.append(rej)
        return out

    def rule_named(self, name: str) -> Rule | None:
        return self.rules.rule(name) if name in self.rules else None

    # -- costs

    def own(self, n: Node, *, after: tuple[Node, ...] = (), whole: tuple[Node, ...] = ()) -> int:
        d = self.decisions.get(n.op)
        if d is None:
            return 1
        return cost_pass.own_cost(d, n, self.facts.kernel, self.facts.stmts, self.encoding.leaf_work,
                                  self.cost_table, after=after, whole=whole)


# ----------------------------------------------------------------------------------------------------
# Cost breakdown


def _label(n: Node, facts: FactContext) -> str:
    sid = n.subject
    if sid is None or sid not in facts.stmts:
        return n.op
    return f"{n.op} {facts.describe(sid)}"


def breakdown(body: tuple[Node, ...], ctx: ExplainContext) -> tuple[NodeCost, ...]:
    """Every extracted e-node with its own cost (a marker's includes its list cell's); they add up to
    egglog's extraction cost."""
    out: list[NodeCost] = []

    def lst(items: tuple[Node, ...]) -> None:
        for i, n in enumerate(items):
            d = ctx.decisions.get(n.op)
            if d is not None and d.cost.at == "cell":
                c = ctx.own(n, after=items[i + 1:], whole=items) + 1  # + the loop-id primitive
                out.append(NodeCost(n.op, n.sid, c, f"{n.op} (loop sid {n.sid}), {len(items) - 1 - i} list items "
                                                    "after it"))
            else:
                node(n)

    def node(n: Node) -> None:
        prims = (n.sid is not None) + len(n.params)
        out.append(NodeCost(n.op, n.subject, ctx.own(n) + prims, _label(n, ctx.facts)))
        for k in n.kids:
            node(k)
        for items in n.lists:
            lst(items)

    lst(body)
    return tuple(out)


def subtree_cost(n: Node, ctx: ExplainContext) -> int:
    return sum(c.cost for c in breakdown((n,), ctx))


# ----------------------------------------------------------------------------------------------------
# No schedule


def undecided(body: tuple[Node, ...], decisions: dict[str, Decision]) -> list[Node]:
    """Extracted nodes whose decision is still pending (outermost first)."""
    out: list[Node] = []

    def visit(n: Node) -> None:
        d = decisions.get(n.op)
        if d is None or d.group == "undecided":
            out.append(n)
            return
        for k in n.kids:
            visit(k)
        for items in n.lists:
            for m in items:
                visit(m)

    for n in body:
        visit(n)
    return out


def _oracle_refusals(ctx: ExplainContext, head: Any, sid: int | None, listed: set[str]) -> str:
    """The rules of ``head`` that never became candidates for ``sid`` (their bindings found no option) but whose
    hardware oracle says why: a user who asked for that instruction (``prefer_instruction="tma"``) learns the reason,
    not only the other rules' refusals."""
    if sid is None:
        return ""
    out = []
    for r in ctx.rules:
        if r.head != head or r.name in listed:
            continue
        reasons = []
        for c in r.conditions:
            for spec in c.oracles:
                v = ctx.encoding.verdicts.get((spec.name, sid))
                if v is not None and not v.ok:
                    reasons.append(f"{spec.name}: {v.reason or 'does not hold'}")
        if reasons:
            out.append(f"{r.name}: {'; '.join(reasons)}")
    return "; ".join(out)


def no_schedule_error(nodes: list[Node], ctx: ExplainContext) -> ScheduleError:
    """A :class:`ScheduleError` naming each undecided statement and the side conditions that failed."""
    parts = []
    loc = None
    for n in nodes:
        sid = n.subject
        what = ctx.describe(sid) if sid is not None else n.op
        loc = loc or (ctx.facts.stmts[sid].loc if sid in ctx.facts.stmts else None)
        d = ctx.decisions.get(n.op)
        if d is None:
            parts.append(f"{what}: extraction returned {n.op!r}, which the ruleset does not declare")
            continue
        alts = ctx.alternatives(d.constructor, sid, None)
        if not alts:
            rules = [r.name for r in ctx.rules if r.head == d.constructor]
            why = (f"no rule of ruleset {ctx.rules.name!r} rewrites {n.op!r}" if not rules
                   else f"rules {rules} never matched it")
        else:
            why = "; ".join(f"{a.rule}: {a.reason}" for a in alts if a.failed) or "no alternative survived"
        unmatched = _oracle_refusals(ctx, d.constructor, sid, {a.rule for a in alts})
        if unmatched:
            why += "; " + unmatched
        parts.append(f"{what} ({d.label or n.op}): {why}")
    return ScheduleError("no legal schedule: " + " | ".join(parts), loc)


# ----------------------------------------------------------------------------------------------------
# Decisions


def lowered_index(s: Scheduled) -> dict[int, list[SStmt]]:
    """``sid -> scheduled statements`` carrying that statement id (what ``Decision.details`` reads)."""
    out: dict[int, list[SStmt]] = {}
    for x in swalk(s.body):
        sid = getattr(x, "sid", None)
        if sid is None and isinstance(x, TileOp):
            sid = x.op.sid
        if sid is None and hasattr(x, "stmt"):
            sid = getattr(x.stmt, "sid", None)
        if sid is not None:
            out.setdefault(sid, []).append(x)
    return out


def _class_term(n: Node, r: Rule, ctx: ExplainContext):
    """The e-class term of the statement ``n`` decides (``None`` when it is not an encoded statement's): the
    statement's own, or for an instruction chosen for an issued statement (a rule on ``issue(st, ctx)``)
    that of ``issue(st, ctx)``, whose context is the instruction's first string parameter."""
    term = ctx.encoding.terms.get(n.subject) if n.subject is not None else None
    if term is None:
        return None
    if r.head == schema.Stmt.issue:
        issuer = next((p for p in n.params if isinstance(p, str)), None)
        return schema.Stmt.issue(term, issuer) if issuer is not None else None
    return term


def _alt_costs(term, ctx: ExplainContext) -> dict[Any, int]:
    """``constructor -> best cost`` of each e-node in ``term``'s e-class, from the declared cost functions
    (the cost pass's ``set_cost`` values, which :func:`subtree_cost` recomputes from the same functions),
    read from the e-graph's costs computed once for every decision (:class:`ENodeCosts`)."""
    if ctx.egraph is None or term is None:
        return {}
    if ctx.enode_costs is None:
        ctx.enode_costs = ENodeCosts.of(ctx.egraph) or False
    if ctx.enode_costs is False:
        return _alt_costs_extracted(term, ctx)
    try:
        by_name = ctx.enode_costs.alternatives(ctx.egraph, term)
    except (AttributeError, KeyError, TypeError):  # pragma: no cover - egglog-python's internals changed
        return _alt_costs_extracted(term, ctx)
    if by_name is None:
        return {}
    out: dict[Any, int] = {}
    for name, c in by_name.items():
        for fn in ctx.egraph._egg_fn_to_callables(name):
            out[fn] = c
    return out


def _alt_costs_extracted(term, ctx: ExplainContext) -> dict[Any, int]:
    """What :func:`_alt_costs` computes, by asking egglog for ``term``'s variants (an extraction over the
    whole e-graph per call): the fallback, and the tests' reference."""
    if ctx.egraph is None or term is None:
        return {}
    names = names_of(ctx.rules.decisions)
    out: dict[Any, int] = {}
    try:
        variants = ctx.egraph.extract_multiple(term, 32)
    except BaseException:  # noqa: BLE001 - an e-class that cannot be extracted has no alternative to cost
        return {}
    for t in variants:
        try:
            node = to_node(t, names)
        except ScheduleError:
            continue
        fn = get_callable_fn(t)
        c = subtree_cost(node, ctx)
        out[fn] = min(c, out.get(fn, c))
    return out


def decisions(body: tuple[Node, ...], ctx: ExplainContext,
              scheduled: Scheduled) -> tuple[tuple[Made, ...], tuple[Rejected, ...]]:
    """The decisions the extracted tree encodes, each with its reason, and every rejected alternative."""
    index = lowered_index(scheduled)
    for b in scheduled.barriers:
        if b.loop is not None:
            full, empty = ctx.barriers.get(b.loop, (None, None))
            ctx.barriers[b.loop] = (b.name, empty) if b.kind == "full" else (full or "", b.name)
            ctx.barrier_guards[b.loop] = b.guards
    out: list[Made] = []
    rejected: list[Rejected] = []
    listed: set[int] = set()
    noted: list[set[str]] = []

    def taken() -> set[str]:
        """The rules the extracted tree's notes name (a list rewrite is taken when its constructor's notes say so)."""
        if not noted:
            names: set[str] = set()
            for top in body:
                for m in top.walk():
                    dm = ctx.decisions.get(m.op)
                    if dm is not None and dm.notes is not None:
                        names |= {x.rule for x in dm.notes(m, ctx)}
            noted.append(names)
        return noted[0]

    def decide(n: Node) -> None:
        sid = n.subject
        d = ctx.decisions.get(n.op)
        if d is not None and d.group == "decided" and sid is not None:
            # an encoded statement a rule could have replaced (a T.gemm that stayed SIMT): say why it did not
            alts = ctx.alternatives(d.constructor, sid, None)
            if alts:
                rejected.extend(alts)
                out.append(Made(alts[0].rule, sid, d.label or n.op,
                                "kept as encoded; rejected: " + "; ".join(str(a) for a in alts)))
            return
        if d is None or d.group != "decision" or sid is None:
            return
        made = [r for r in ctx.rules if r.produces == d.constructor]
        r = next((r for r in made if (r.name, sid) in ctx.fired), made[0] if made else None)
        if r is None:
            return
        held = ", ".join(c.name for c in r.conditions) or "none needed"
        chosen_cost = subtree_cost(n, ctx)
        alts = []
        costs: dict[Any, int] | None = None
        # rules that refine the chosen constructor itself (their pattern head is it: the ping-pong of a ws) are
        # alternatives of this decision too
        refine = [a for a in ctx.alternatives(d.constructor, sid, None) if a.rule != r.name]
        # rules that rewrite a statement list deciding about this statement (their pattern head is a list cell,
        # their subject this sid: the prologue copy issued by a loop's producer): alternatives of the first
        # decision taken for it
        lists = []
        if sid not in listed:
            listed.add(sid)
            lists = [a for a in ctx.alternatives(schema.Block.cons, sid, None)
                     if a.rule != r.name and a.rule not in taken()]
        for a in ctx.alternatives(r.head, sid, r) + refine + lists:
            if not a.failed and ctx.rules.rule(a.rule).head == schema.Block.cons:
                # a legal list alternative: its cost is the whole list's, not this statement's
                alts.append(Rejected(a.rule, sid, (), "a form of the whole statement list, which extraction did not "
                                                      "take"))
                continue
            if not a.failed:
                if costs is None:
                    costs = _alt_costs(_class_term(n, r, ctx), ctx)
                alt = ctx.rules.rule(a.rule)
                a = Rejected(a.rule, sid, (), "legal, but costlier", costs.get(alt.produces), chosen_cost)
            alts.append(a)
        rejected.extend(alts)
        detail = d.details(n, index.get(sid, [])) if d.details is not None else ""
        reason = f"side conditions held: {held}" + (f"; {detail}" if detail else "")
        if alts:
            reason += "; rejected: " + "; ".join(str(a) for a in alts)
        out.append(Made(r.name, sid, d.label or n.op, reason))

    def visit(n: Node) -> None:
        decide(n)
        d = ctx.decisions.get(n.op)
        if d is not None and d.notes is not None:
            for note in d.notes(n, ctx):
                if isinstance(note, Rejected):
                    rejected.append(note)
                else:
                    out.append(note)
        for k in n.kids:
            visit(k)
        for items in n.lists:
            for m in items:
                visit(m)

    for n in body:
        visit(n)
    return tuple(out), tuple(rejected)


__all__ = ["ExplainContext", "NodeCost", "Rejected", "breakdown", "decisions", "lowered_index", "no_schedule_error",
           "subtree_cost", "undecided"]
