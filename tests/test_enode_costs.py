"""explain()'s alternative costs, read from the e-graph in one pass (egtile.schedule.enode_costs), are the
ones egglog's own extraction gives per decision; and the one-pass costs on small hand-built e-graphs."""

from __future__ import annotations

import egtile.schedule.explain as X
import pytest
import schedule_kernels as K
from egglog import EGraph, Expr, i64, i64Like, method, rewrite, ruleset, set_cost
from hypothesis import HealthCheck, given, settings
from seed_schedules import bug1_kernel, bug2_kernel
from soundness.programs import programs

from egtile import language as T
from egtile.schedule.driver import optimize
from egtile.schedule.enode_costs import ENodeCosts


def _chain(n: int, buffers: int):
    @T.prim_func
    def main(X_: T.Tensor((128, 256), "float16"), Y: T.Tensor((128, 256), "float16")):
        with T.Kernel(2, threads=128) as bx:
            bufs = [T.alloc_shared((64,), "float16") for _ in range(min(n, buffers))]
            for k in T.Pipelined(4, num_stages=2):
                T.copy(X_[bx * 64 + k, 0:64], bufs[0])
                for s in range(1, n):
                    for i in T.Parallel(64):
                        bufs[s % len(bufs)][i] = bufs[(s - 1) % len(bufs)][i] * 2.0 + 1.0
                for i in T.Parallel(64):
                    Y[bx * 64 + k, i] = bufs[(n - 1) % len(bufs)][i]

    return main


def _compare(monkeypatch, kernel) -> int:
    """Schedules ``kernel`` with every alternative costed both ways; returns how many decisions were costed."""
    seen: list[tuple[dict, dict]] = []
    one_pass = X._alt_costs

    def both(term, ctx):
        a, b = one_pass(term, ctx), X._alt_costs_extracted(term, ctx)
        seen.append((a, b))
        return a

    monkeypatch.setattr(X, "_alt_costs", both)
    optimize(kernel)
    for a, b in seen:
        assert {str(k): v for k, v in a.items()} == {str(k): v for k, v in b.items()}
    return len(seen)


@pytest.mark.parametrize("make", [bug1_kernel, bug2_kernel, lambda: K.pipelined_gemm(), lambda: K.cp_async_variant(),
                                  lambda: K.elementwise(), lambda: _chain(12, 4), lambda: _chain(8, 8)],
                         ids=["bug1", "bug2", "pipelined_gemm", "cp_async", "elementwise", "chain12", "chain8x8"])
def test_one_pass_alternative_costs_are_egglogs(monkeypatch, make):
    assert _compare(monkeypatch, make()) > 0


@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(programs())
def test_one_pass_alternative_costs_on_random_programs(monkeypatch, prog):
    _compare(monkeypatch, prog.kernel)


def test_explain_names_the_losing_costs_of_every_statement():
    # 20 T.Parallel stages: every one reports its vectorized alternative's cost (decided in one pass).
    r = optimize(_chain(20, 4))
    lost = [a for a in r.rejected if not a.failed]
    assert len(lost) >= 20 and all(a.cost is not None and a.cost > a.chosen_cost for a in lost)


# ----------------------------------------------------------------------------------------------------
# Hand-built e-graphs


class E(Expr):
    @method(cost=5)
    def __init__(self, v: i64Like) -> None: ...

    @method(cost=0)
    @classmethod
    def wrap(cls, e: E) -> E: ...

    @method(unextractable=True)
    @classmethod
    def hidden(cls, e: E) -> E: ...

    @classmethod
    def pair(cls, a: E, b: E) -> E: ...


def test_costs_follow_declared_set_and_primitive_costs():
    g = EGraph()
    leaf = g.let("leaf", E(1))            # declared 5 + one i64 argument
    w = g.let("w", E.wrap(leaf))          # declared 0 + the child
    p = g.let("p", E.pair(leaf, leaf))    # default 1 + the child twice (tree cost)
    g.register(set_cost(E.pair(leaf, leaf), 40))
    costs = ENodeCosts.of(g)
    assert costs.alternatives(g, leaf) == {_egg(g, E): 6}
    assert costs.alternatives(g, w) == {_egg(g, E.wrap): 6}
    assert costs.alternatives(g, p) == {_egg(g, E.pair): 52}
    _, best = g.extract(p, include_cost=True)
    assert best == 52


def test_a_class_is_as_cheap_as_its_cheapest_node_and_cycles_and_unextractable_nodes_do_not_count():
    g = EGraph()
    a = g.let("a", E(1))
    b = g.let("b", E.pair(E(2), E(3)))
    h = g.let("h", E.hidden(a))
    g.register(E.wrap(E.wrap(b)))
    r = ruleset(rewrite(E.pair(E(2), E(3))).to(E.wrap(E.wrap(E.pair(E(2), E(3))))),  # a cycle through wrap
                rewrite(E.hidden(E(1))).to(E.pair(E(1), E(1))))
    g.run(r)
    costs = ENodeCosts.of(g)
    alts = costs.alternatives(g, b)
    # b's class: pair(E2, E3) = 1 + 6 + 6, and wrap(wrap(b)) = b's own cost (0 + 0 + 13).
    assert alts == {_egg(g, E.pair): 13, _egg(g, E.wrap): 13}
    assert g.extract(b, include_cost=True)[1] == 13
    # hidden(a) is unextractable: its class costs what pair(a, a) costs.
    assert costs.alternatives(g, h) == {_egg(g, E.pair): 13}
    assert g.extract(h, include_cost=True)[1] == 13


def _egg(g: EGraph, fn) -> str:
    return g._callable_to_egg(fn)[1]
