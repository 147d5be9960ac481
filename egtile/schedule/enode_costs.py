"""The extraction cost of every e-node of the saturated e-graph, computed in one pass (for ``explain()``).

``explain()`` reports, for an alternative that was legal but lost on cost, what it would have cost: the
cheapest term rooted at an e-node of that constructor in the decided statement's e-class, i.e. the
e-node's own cost plus the cheapest term of each child e-class. Asking egglog for that per decision
(``extract_multiple``) rebuilds egglog's extractor, a pass over the whole e-graph, every time: explaining
``d`` decisions cost ``O(d × e-graph)``. :class:`ENodeCosts` reads the e-graph once and computes the
cheapest cost of every e-class and every e-node with the same cost model egglog's extraction uses:

* an e-node's own cost is the value ``set_cost`` gave it (the cost pass, :mod:`egtile.schedule.costs`),
  else its constructor's declared cost (``@method(cost=...)``), else 1;
* each primitive argument (an ``i64``, a ``String``) adds 1, each e-class argument its cheapest term's cost;
* unextractable constructors and subsumed rows are not terms;
* a class's cost is the least over its e-nodes (the least fixpoint: a class reachable only through
  cycles has none).

The least fixpoint is computed with Knuth's generalization of Dijkstra's algorithm (an e-node is
considered once all its child classes are final, cheapest first; costs are non-negative and additive),
in ``O(n log n)`` for ``n`` e-nodes, where egglog's own extractor iterates passes until nothing changes.
Only the costs are computed: ties between equally cheap terms do not matter here, and the schedule itself
is still extracted by egglog. The e-graph is read through egglog-python's ``freeze`` and a few private
helpers of ``EGraph``; :meth:`ENodeCosts.of` returns ``None`` if they change, and explain falls back to
``extract_multiple``.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from egglog import EGraph

_COST_TABLE = "cost_table_"


@dataclass(frozen=True)
class ENodeCosts:
    """``(sort, e-class) -> [(constructor egg name, cost)]`` for every extractable e-node of finite cost.

    Attributes:
        by_class: the e-nodes of each e-class with their costs (cheapest term rooted at that e-node).
        best: the cheapest term's cost of each e-class.
    """

    by_class: Mapping[tuple[str, Any], tuple[tuple[str, int], ...]]
    best: Mapping[tuple[str, Any], int]

    @staticmethod
    def of(egraph: EGraph) -> ENodeCosts | None:
        """The costs of ``egraph`` as it is now (``None``: egglog-python's internals changed)."""
        try:
            return _compute(egraph)
        except (AttributeError, KeyError, TypeError, ValueError):  # pragma: no cover - internals changed
            return None

    def alternatives(self, egraph: EGraph, term: Any) -> dict[str, int] | None:
        """``constructor egg name -> cost`` of the cheapest term rooted at each constructor's e-nodes in
        ``term``'s e-class (``None``: ``term`` is not an e-class of the e-graph these costs were read from)."""
        key = _class_of(egraph, term)
        if key is None or key not in self.by_class:
            return None
        out: dict[str, int] = {}
        for name, cost in self.by_class[key]:
            if cost < out.get(name, cost + 1):
                out[name] = cost
        return out


def _class_of(egraph: EGraph, term: Any) -> tuple[str, Any] | None:
    from egglog.egraph import to_runtime_expr

    expr = to_runtime_expr(term)
    egraph._add_decls(expr)
    typed = expr.__egg_typed_expr__
    state = egraph._state
    sort = state.type_ref_to_egg(typed.tp)
    try:
        return sort, state.typed_expr_to_value(typed)
    except BaseException as err:  # noqa: BLE001 - egglog raises for a term it cannot evaluate
        if isinstance(err, (KeyboardInterrupt, SystemExit, MemoryError)):
            raise
        return None


def _constructors(egraph: EGraph, functions: Mapping[str, Any]) -> dict[str, int]:
    """``egg name -> declared cost`` of every extractable constructor."""
    from egglog.declarations import ConstructorDecl

    state = egraph._state
    decls = egraph.__egg_decls__
    out: dict[str, int] = {}
    for name, fn in functions.items():
        if fn.is_let_binding or name.startswith(_COST_TABLE):
            continue
        refs = state.egg_fn_to_callable_refs.get(name)
        if not refs:
            continue
        decl = decls.get_callable_decl(next(iter(refs)))
        if isinstance(decl, ConstructorDecl) and not decl.unextractable:
            out[name] = 1 if decl.cost is None else decl.cost
    return out


def _compute(egraph: EGraph) -> ENodeCosts:
    # Every attribute of a frozen e-graph is converted from Rust on each access: read each once.
    functions = egraph._egraph.freeze().functions
    to_i64 = egraph._egraph.value_to_i64
    ctors = _constructors(egraph, functions)
    eclass_sorts = {functions[name].output_sort for name in ctors}

    # Nodes: egg name, output class, child classes (with multiplicity), own cost (primitives included).
    names: list[str] = []
    outs: list[tuple[str, Any]] = []
    own: list[int] = []
    kids: list[list[tuple[str, Any]]] = []
    for name, declared in ctors.items():
        fn = functions[name]
        custom = functions.get(_COST_TABLE + name)
        set_costs = {tuple(r.inputs): to_i64(r.output) for r in custom.rows} if custom is not None else {}
        sorts = fn.input_sorts
        out_sort = fn.output_sort
        for row in fn.rows:
            if row.subsumed:
                continue
            inputs = row.inputs
            c = set_costs.get(tuple(inputs), declared)
            ks: list[tuple[str, Any]] = []
            for sort, v in zip(sorts, inputs):
                if sort in eclass_sorts:
                    ks.append((sort, v))
                else:
                    c += 1
            names.append(name)
            outs.append((out_sort, row.output))
            own.append(c)
            kids.append(ks)

    best: dict[tuple[str, Any], int] = {}
    pending = [len(set(ks)) for ks in kids]
    parents: dict[tuple[str, Any], list[int]] = {}
    heap: list[tuple[int, int]] = []
    for i, ks in enumerate(kids):
        if not ks:
            heap.append((own[i], i))
        for k in set(ks):
            parents.setdefault(k, []).append(i)
    heapq.heapify(heap)
    while heap:
        cost, i = heapq.heappop(heap)
        cls = outs[i]
        if cls in best:
            continue
        best[cls] = cost
        for p in parents.get(cls, ()):
            pending[p] -= 1
            if pending[p] == 0:
                heapq.heappush(heap, (own[p] + sum(best[k] for k in kids[p]), p))

    by_class: dict[tuple[str, Any], list[tuple[str, int]]] = {}
    for i, ks in enumerate(kids):
        if all(k in best for k in ks):
            by_class.setdefault(outs[i], []).append((names[i], own[i] + sum(best[k] for k in ks)))
    return ENodeCosts({k: tuple(v) for k, v in by_class.items()}, best)


__all__ = ["ENodeCosts"]
