"""Why extraction chose what it chose: decisions, rejected alternatives, cost breakdown, no-schedule errors.

Everything here reads what the e-graph recorded in its ``diag`` table: which rewrites fired, where each
rule's pattern matched and which side conditions held there, all filled by rules compiled from the
same :class:`~egtile.rules.Rule` values that ran. So "rejected by side
condition X" means the e-graph really lacked X's facts at the fixpoint, not a re-derivation in Python.
The words of a reason come from the condition's ``explain`` or from the failing fact's own reason
(computed by :mod:`egtile.analysis`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from egglog import EGraph, get_callable_fn

from egtile.schedule import cost as C
from egtile.schedule import schema
from egtile.schedule.decode import UNDECIDED, Node, constructor_name
from egtile.schedule.encode import Encoding
from egtile.schedule.facts import FactContext
from egtile.schedule.tables import rows
from egtile.errors import ScheduleError
from egtile.ir import Decision, Scheduled, SStmt, ThreadLoop, TileOp, TmaLoad, swalk
from egtile.rules.api import Condition, Rule, RuleSet


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
        if self.cost is not None and self.cost >= C.UNDECIDED:
            return (f"{self.rule} legal, but some statement inside it has no legal schedule in that context "
                    "(e.g. a copy whose requested instruction needs a warp-specialized producer)")
        if self.cost is None:
            return f"{self.rule} legal but not chosen (its cost could not be computed)"
        return f"{self.rule} legal but costlier ({self.cost} vs {self.chosen_cost} cycles)"


@dataclass(frozen=True)
class NodeCost:
    """One extracted e-node's own cost (children excluded), in estimated cycles per block iteration."""

    op: str
    sid: int | None
    cost: int
    label: str


@lru_cache(maxsize=512)
def rule_head(r: Rule) -> str:
    """Name of the constructor at the root of ``r``'s pattern (its decision point)."""
    pattern = r.lhs(r.pattern_vars())
    return constructor_name(pattern) or str(get_callable_fn(pattern))


@dataclass
class ExplainContext:
    """What condition explanations and reports read.

    Attributes:
        facts: the kernel's placement and analysis facts.
        encoding: the encoding (verdicts, numbers).
        rules: the ruleset that ran.
        cand, held, fired: the e-graph's bookkeeping tables.
        loops: ``loop sid -> barrier index`` of the warp-specialized loops in the schedule.
    """

    facts: FactContext
    encoding: Encoding
    rules: RuleSet
    cand: set[tuple] = field(default_factory=set)
    held: set[tuple] = field(default_factory=set)
    fired: set[tuple] = field(default_factory=set)
    loops: dict[int, int] = field(default_factory=dict)

    @staticmethod
    def read(egraph: EGraph, encoding: Encoding, rules: RuleSet) -> ExplainContext:
        cand, held, fired = set(), set(), set()
        for rule_name, what, sid in rows(egraph, schema.diag, 3):
            if what == schema.MATCHED:
                cand.add((rule_name, sid))
            elif what == schema.FIRED:
                fired.add((rule_name, sid))
            else:
                held.add((rule_name, what, sid))
        return ExplainContext(encoding.ctx, encoding, rules, cand, held, fired)

    def barrier_index(self, loop: int | None) -> int | str:
        return self.loops.get(loop, "?") if loop is not None else "?"

    def failed(self, r: Rule, sid: int) -> list[Condition]:
        return [c for c in r.conditions if (r.name, c.name, sid) not in self.held]

    def why(self, c: Condition, sid: int) -> str:
        if c.explain is not None:
            try:
                return c.explain(self, sid)
            except Exception as err:  # noqa: BLE001 - an explanation must never hide the schedule
                return f"(explanation failed: {err})"
        for spec in c.facts:
            v = self.encoding.verdicts.get((spec.name, sid))
            if v is not None and not v.ok:
                return v.reason or f"fact {spec.name} does not hold"
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

    def alternatives(self, head: str, sid: int, chosen: Rule | None) -> list[Rejected]:
        out = []
        for r in self.rules:
            if r is chosen or rule_head(r) != head:
                continue
            rej = self.rejection(r, sid)
            if rej is not None:
                out.append(rej)
        return out


# ----------------------------------------------------------------------------------------------------
# Cost breakdown


def _own_cost(n: Node, enc: Encoding) -> int:
    if n.op in schema.PER_SID_COST or n.op in schema.PER_SID_BODY_COST or n.op in ("ws", "swp"):
        c = enc.nums.get((f"cost.{n.op}", n.sid))
        if c is not None:
            return c
    return schema.STATIC_COST.get(n.op, 1)


def _label(n: Node, facts: FactContext) -> str:
    sid = n.subject
    if sid is None or sid not in facts.stmts:
        return n.op
    return f"{n.op} {facts.describe(sid)}"


def breakdown(body: tuple[Node, ...], enc: Encoding) -> tuple[NodeCost, ...]:
    """Every extracted e-node with its own cost; the costs add up to egglog's extraction cost."""
    out: list[NodeCost] = []

    def lst(items: tuple[Node, ...]) -> None:
        for i, n in enumerate(items):
            after = len(items) - 1 - i
            if n.op == "wait_full":
                out.append(NodeCost("wait_full", n.sid, C.WAIT_BASE + C.WAIT_PER_LATER_ITEM * after + 1,
                                    f"consumer wait on full (loop sid {n.sid}), {after} statements after it"))
            elif n.op == "release_empty":
                total = enc.nums.get(("consumer-items", n.sid), len(items))
                out.append(NodeCost("release_empty", n.sid,
                                    C.RELEASE_BASE + C.RELEASE_PER_EARLIER_ITEM * (total - 1 - after) + 1,
                                    f"consumer release of empty (loop sid {n.sid}), {i} statements before it"))
            else:
                node(n)

    def node(n: Node) -> None:
        prims = (n.sid is not None) + len(n.params)
        out.append(NodeCost(n.op, n.subject, _own_cost(n, enc) + prims, _label(n, enc.ctx)))
        for k in n.kids:
            node(k)
        for items in n.lists:
            lst(items)

    lst(body)
    return tuple(out)


def subtree_cost(n: Node, enc: Encoding) -> int:
    return sum(c.cost for c in breakdown((n,), enc))


# ----------------------------------------------------------------------------------------------------
# No schedule


def undecided(body: tuple[Node, ...]) -> list[Node]:
    """Extracted nodes whose decision is still pending (outermost first)."""
    out: list[Node] = []

    def visit(n: Node) -> None:
        if n.op in UNDECIDED:
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


def no_schedule_error(nodes: list[Node], ctx: ExplainContext) -> ScheduleError:
    """A :class:`ScheduleError` naming each undecided statement and the side conditions that failed."""
    parts = []
    loc = None
    for n in nodes:
        sid = n.subject
        what = ctx.facts.describe(sid) if sid in ctx.facts.stmts else f"sid {sid}"
        loc = loc or (ctx.facts.stmts[sid].loc if sid in ctx.facts.stmts else None)
        alts = ctx.alternatives(n.op, sid, None)
        if not alts:
            rules = [r.name for r in ctx.rules if rule_head(r) == n.op]
            why = (f"no rule of ruleset {ctx.rules.name!r} rewrites {n.op!r}" if not rules
                   else f"rules {rules} never matched it")
        else:
            why = "; ".join(f"{a.rule}: {a.reason}" for a in alts if a.failed) or "no alternative survived"
        parts.append(f"{what} ({_POINT.get(n.op, n.op)}): {why}")
    return ScheduleError("no legal schedule: " + " | ".join(parts), loc)


_POINT = {"scalar": "which threads run it", "copy": "copy instruction", "par": "thread mapping",
          "pipelined": "loop schedule", "produce": "producer instruction",
          "prefetch": "asynchronous instruction of a software-pipelined copy"}

# ----------------------------------------------------------------------------------------------------
# Decisions


_CHOICE = {
    "elect": "one elected thread", "replicate": "every thread", "copy_simt": "SIMT copy",
    "partitioned": "partitioned", "replicated": "replicated", "serial": "serial loop",
    "ws": "warp-specialized", "tma_load": "TMA", "cp_async_load": "cp.async", "simt_load": "SIMT (producer)",
    "simt_produce": "SIMT producer statement", "swp": "software-pipelined", "tma_prefetch": "TMA (issued ahead)",
    "cp_async_prefetch": "cp.async (issued ahead)",
}


def _sched_index(s: Scheduled) -> dict[int, list[SStmt]]:
    out: dict[int, list[SStmt]] = {}
    for x in swalk(s.body):
        sid = getattr(x, "sid", None)
        if sid is None and isinstance(x, TileOp):
            sid = x.op.sid
        if sid is not None:
            out.setdefault(sid, []).append(x)
    return out


def _detail(n: Node, sched: dict[int, list[SStmt]], s: Scheduled) -> str:
    sid = n.subject
    found = sched.get(sid, [])
    for x in found:
        match x:
            case ThreadLoop(threads=t, extents=ext, mapping=m):
                return f"{m} over threads [{t.begin}, {t.end}), {'x'.join(map(str, ext))} iterations"
            case TmaLoad(dst=d, barrier=b):
                return f"one elected thread; arrive.expect_tx({b}, {d.numel} elements) then the tile load"
            case TileOp(inst=inst, threads=t):
                return f"{inst} on threads [{t.begin}, {t.end})"
    return ""


def decisions(body: tuple[Node, ...], ctx: ExplainContext, scheduled: Scheduled,
              alt_cost) -> tuple[tuple[Decision, ...], tuple[Rejected, ...]]:
    """The decisions the extracted tree encodes, each with its reason, and every rejected alternative."""
    sched = _sched_index(scheduled)
    out: list[Decision] = []
    rejected: list[Rejected] = []

    def decide(n: Node) -> None:
        sid = n.subject
        made = [r for r in ctx.rules if n.op in r.produces]
        r = next((r for r in made if (r.name, sid) in ctx.fired), made[0] if made else None)
        if r is None:
            return
        held = ", ".join(c.name for c in r.conditions) or "none needed"
        chosen_cost = subtree_cost(n, ctx.encoding)
        alts = []
        for a in ctx.alternatives(rule_head(r), sid, r):
            if not a.failed:
                op = next(iter(ctx.rules.rule(a.rule).produces), a.rule)
                a = Rejected(a.rule, sid, (), "legal, but costlier", alt_cost(op, sid), chosen_cost)
            alts.append(a)
        rejected.extend(alts)
        detail = _detail(n, sched, scheduled)
        reason = f"side conditions held: {held}" + (f"; {detail}" if detail else "")
        if alts:
            reason += "; rejected: " + "; ".join(str(a) for a in alts)
        out.append(Decision(r.name, sid, _CHOICE.get(n.op, n.op), reason))

    def visit(n: Node) -> None:
        decide(n)
        if n.op in ("ws", "swp"):
            out.extend(_barrier_decisions(n, ctx, rejected))
        for k in n.kids:
            visit(k)
        for items in n.lists:
            for m in items:
                visit(m)

    for n in body:
        visit(n)
    return tuple(out), tuple(rejected)


def _barrier_decisions(n: Node, ctx: ExplainContext, rejected: list[Rejected]) -> list[Decision]:
    fc = ctx.facts
    loop = n.sid
    idx = ctx.barrier_index(loop)
    producers, consumers = n.lists
    out: list[Decision] = []
    kinds = ", ".join(f"{_CHOICE.get(p.op, p.op)} {fc.describe(p.subject)}" for p in producers)
    rest = ", ".join(fc.describe(c.subject) for c in consumers if c.sid is not None
                     and c.op not in ("wait_full", "release_empty")) or "nothing"
    guards = ', '.join(sorted(fc.guarded(loop))) or 'nothing'
    swp = n.op == "swp"
    if swp:
        out.append(Decision("pipeline-software-pipeline", loop, "issue ahead / consume",
                            f"the block's threads issue S-1 iterations ahead: {kinds or 'nothing'}; then they run: "
                            f"{rest}; full_{idx} guards {guards}; a CTA barrier before each stage is reused"))
    else:
        out.append(Decision("pipeline-warp-specialize", loop, "producer/consumer split",
                            f"producer warpgroup runs: {kinds or 'nothing'}; consumer warpgroup(s) run: {rest}"
                            f"; full_{idx} and empty_{idx} guard {guards}"))
    release = "CTA barrier before stage reuse" if swp else f"release empty_{idx}"
    ops = [c.op for c in consumers]
    w = ops.index("wait_full") if "wait_full" in ops else None
    r = ops.index("release_empty") if "release_empty" in ops else None
    sink = _rule(ctx.rules, "sink-wait")
    hoist = _rule(ctx.rules, "hoist-release")
    if w is not None:
        nxt = consumers[w + 1] if w + 1 < len(consumers) else None
        if nxt is not None and nxt.op != "release_empty":
            sid = nxt.subject
            rej = ctx.rejection(sink, sid) if sink else None
            why = (f"it cannot sink past {fc.describe(sid)}: {rej.reason}" if rej and rej.failed
                   else f"sinking past {fc.describe(sid)} " + ("is not in the ruleset" if sink is None else "costs more"))
            if rej and rej.failed:
                rejected.append(rej)
            out.append(Decision("sink-wait", loop, f"wait on full_{idx} before {fc.describe(sid)}", why))
        else:
            out.append(Decision("sink-wait", loop, f"wait on full_{idx} at the end of the consumer body",
                                "no consumer statement reads a guarded buffer after it"))
    if r is not None:
        prev = consumers[r - 1] if r > 0 else None
        if prev is not None and prev.op != "wait_full":
            sid = prev.subject
            rej = ctx.rejection(hoist, sid) if hoist else None
            why = (f"it cannot move above {fc.describe(sid)}: {rej.reason}" if rej and rej.failed
                   else f"hoisting above {fc.describe(sid)} " + ("is not in the ruleset" if hoist is None
                                                                else "costs more"))
            if rej and rej.failed:
                rejected.append(rej)
            out.append(Decision("hoist-release", loop, f"{release} after {fc.describe(sid)}", why))
        else:
            out.append(Decision("hoist-release", loop, f"{release} right after the wait",
                                "no consumer statement touches a guarded buffer"))
    return out


def _rule(rules: RuleSet, name: str) -> Rule | None:
    return rules.rule(name) if name in rules else None


__all__ = ["ExplainContext", "NodeCost", "Rejected", "breakdown", "decisions", "no_schedule_error", "rule_head",
           "subtree_cost", "undecided"]
