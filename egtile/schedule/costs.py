"""The cost pass: every e-node's cost from its constructor's declared cost function, set once.

After the last stage (every union done), for every declaration of the ruleset:

1. a *need* rule records, for each of its e-nodes, the cost function's input: the subject statement, the
   primitive arguments (the key), and the declared summaries of a list argument (``work``, ``items``)
   or, for a list marker, of the list around it;
2. Python evaluates the declared :class:`~egtile.schedule.decision.Cost` once per distinct input;
3. a *set* rule looks the value up and sets the e-node's (or the marker's cons cell's) cost with
   ``set_cost`` (write-once per e-node: egglog notes §2.3).

:func:`own_cost` gives ``explain()`` the same numbers for the extracted tree, from the same functions.
Costs are non-negative ints (egglog rejects negative costs); a function returning anything else is an
error naming the constructor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from egglog import EGraph, String, eq, function, i64, i64Like, relation, rule, ruleset, set_cost, var
from egglog import StringLike

from egtile.errors import RuleError
from egtile.schedule import dataflow as D
from egtile.schedule.decision import CostInput, Decision
from egtile.schedule.decode import Node
from egtile.schedule.encode import load_rows
from egtile.schedule.schema import Block, Stmt
from egtile.schedule.tables import rows

cost_need = relation("cost_need", String, i64, String, i64, i64, i64)


@function
def cost_val(name: StringLike, sid: i64Like, key: StringLike, work: i64Like, items: i64Like,
             loop_items: i64Like) -> i64:
    """The cost a declaration's function gave for one input (loaded by the cost pass)."""


@dataclass(frozen=True)
class _Pattern:
    node: Any              # the constructor applied to fresh variables
    at: Any                # the term whose cost is set (the node, or the cons cell holding a marker)
    facts: tuple[Any, ...]  # bindings for sid / summaries
    key: tuple[Any, Any, Any, Any, Any]  # sid, key, work, items, loop_items expressions


def _pattern(d: Decision) -> _Pattern:
    v = SimpleNamespace(**{n: var(f"{d.name}_{n}", sort) for n, sort in d.args})
    node = d.constructor(*(getattr(v, n) for n, _ in d.args))
    facts: list[Any] = []
    subj = d.subject_arg
    if subj is not None:
        sid = getattr(v, subj)
    elif d.stmt_args:
        sid = var(f"{d.name}__sid", i64)
        facts.append(eq(sid).to(D.sid_of(getattr(v, d.stmt_args[0]))))
    else:
        sid = i64(-1)
    parts = []
    for n in d.param_args:
        sort = dict(d.args)[n]
        parts.append(getattr(v, n) if sort is String else getattr(v, n).to_string())
    key: Any = String("")
    for k, p in enumerate(parts):
        key = p if k == 0 else key + String(",") + p
    zero = i64(0)
    work = items = loop_items = zero
    at = node
    if d.cost.at == "cell":
        rest = var(f"{d.name}__rest", Block)
        cell = Block.cons(node, rest)
        n_items = var(f"{d.name}__n", i64)
        facts += [cell, eq(n_items).to(D.items(rest))]
        items = n_items
        at = cell
        if d.cost.summary == "consumer-list":
            body, c0, total = var(f"{d.name}__B", Block), var(f"{d.name}__c0", Block), var(f"{d.name}__t", i64)
            facts += [D.clist_of(cell, body), D.clist_root(body, c0), eq(total).to(D.items(c0))]
            loop_items = total
    elif d.cost.summary is not None:
        lst = getattr(v, d.cost.summary)
        w, n_items = var(f"{d.name}__w", i64), var(f"{d.name}__n", i64)
        facts += [eq(w).to(D.work(lst)), eq(n_items).to(D.items(lst))]
        work, items = w, n_items
    return _Pattern(node, at, tuple(facts), (sid, key, work, items, loop_items))


def need_rules(decisions: Iterable[Decision]) -> tuple[Any, ...]:
    out: list[Any] = []
    for d in decisions:
        p = _pattern(d)
        out.append(rule(p.node, *p.facts, name=f"cost-need:{d.name}").then(cost_need(String(d.name), *p.key)))
    return tuple(out)


def set_rules(decisions: Iterable[Decision]) -> tuple[Any, ...]:
    out: list[Any] = []
    for d in decisions:
        p = _pattern(d)
        c = var(f"{d.name}__cost", i64)
        out.append(rule(p.node, *p.facts, eq(c).to(cost_val(String(d.name), *p.key)),
                        name=f"cost-set:{d.name}").then(set_cost(p.at, c)))
    return tuple(out)


def _params(d: Decision, key: str) -> dict[str, int | str]:
    names = d.param_args
    if not names:
        return {}
    values = key.split(",")
    sorts = dict(d.args)
    out: dict[str, int | str] = {}
    for n, val in zip(names, values):
        out[n] = int(val) if sorts[n] is i64 else val
    return out


def evaluate(d: Decision, inp: CostInput) -> int:
    """``d``'s cost for ``inp``, checked (a non-negative int)."""
    try:
        c = d.cost.fn(inp)
    except Exception as err:  # noqa: BLE001 - a user cost function's failure names its constructor
        raise RuleError(f"the cost function of constructor {d.name!r} failed: {type(err).__name__}: {err}") from err
    if isinstance(c, bool) or not isinstance(c, int) or c < 0:
        raise RuleError(f"the cost function of constructor {d.name!r} returned {c!r}; costs are ints >= 0")
    return c


def run(egraph: EGraph, decisions: Mapping[str, Decision], kernel: Any, stmts: Mapping[int, Any],
        compiled_need: Any, compiled_set: Any) -> dict[tuple, int]:
    """Run the cost pass on a saturated e-graph; returns ``(name, sid, key, work, items, loop_items) ->
    cost`` for every input it met."""
    from egtile.schedule.saturate import run as run_schedule

    run_schedule(egraph, compiled_need)
    table: dict[tuple, int] = {}
    loaded: list[tuple] = []
    for name, sid, key, work, items, loop_items in rows(egraph, cost_need, 6):
        d = decisions.get(name)
        if d is None:
            continue
        inp = CostInput(kernel, stmts.get(sid), _params(d, str(key)), work if d.cost.summary else None,
                        items if (d.cost.summary or d.cost.at == "cell") else None,
                        loop_items if d.cost.summary == "consumer-list" else None)
        c = evaluate(d, inp)
        table[name, sid, str(key), work, items, loop_items] = c
        loaded.append((name, sid, key, work, items, loop_items, c))
    load_rows(egraph, cost_val, loaded, None, "cost_val")
    run_schedule(egraph, compiled_set)
    return table


# ----------------------------------------------------------------------------------------------------
# The same numbers for an extracted tree


def leaves(n: Node, work_of: Mapping[int, int]) -> tuple[int, int]:
    """``(items, work)`` of a decoded statement: its leaf statements and their cycles."""
    if not n.lists and not n.kids:
        w = work_of.get(n.sid) if n.sid is not None else None
        return (1, w) if w is not None else (0, 0)
    items = work = 0
    for k in n.kids:
        a, b = leaves(k, work_of)
        items, work = items + a, work + b
    for lst in n.lists:
        a, b = list_leaves(lst, work_of)
        items, work = items + a, work + b
    return items, work


def list_leaves(lst: tuple[Node, ...], work_of: Mapping[int, int]) -> tuple[int, int]:
    items = work = 0
    for n in lst:
        a, b = leaves(n, work_of)
        items, work = items + a, work + b
    return items, work


def own_cost(d: Decision, n: Node, kernel: Any, stmts: Mapping[int, Any], work_of: Mapping[int, int],
             table: Mapping[tuple, int], *, after: tuple[Node, ...] = (), whole: tuple[Node, ...] = ()) -> int:
    """The cost the cost pass gave extracted node ``n`` (the cell cost for a marker, with ``after`` the
    items following it and ``whole`` its whole list), from the same declaration."""
    names = d.param_args
    key = ",".join(str(p) for p in n.params[:len(names)])
    sid = n.subject if n.subject is not None else -1
    work = items = loop_items = 0
    if d.cost.at == "cell":
        items = list_leaves(after, work_of)[0]
        if d.cost.summary == "consumer-list":
            loop_items = list_leaves(whole, work_of)[0]
    elif d.cost.summary is not None:
        idx = d.list_args.index(d.cost.summary)
        items, work = list_leaves(n.lists[idx], work_of)
    hit = table.get((d.name, sid, key, work, items, loop_items))
    if hit is not None:
        return hit
    inp = CostInput(kernel, stmts.get(sid), _params(d, key), work if d.cost.summary else None,
                    items if (d.cost.summary or d.cost.at == "cell") else None,
                    loop_items if d.cost.summary == "consumer-list" else None)
    return evaluate(d, inp)


def compile_rules(decisions: tuple[Decision, ...]) -> tuple[Any, Any]:
    return (ruleset(*need_rules(decisions), name="egtile-cost-need"),
            ruleset(*set_rules(decisions), name="egtile-cost-set"))


__all__ = ["compile_rules", "cost_need", "cost_val", "evaluate", "leaves", "list_leaves", "own_cost",
           "run"]
