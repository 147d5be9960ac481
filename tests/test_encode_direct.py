"""The encoder's direct term builder (``encode._Terms``) builds exactly the terms egglog-python's constructor
calls build, and inserts them into the e-graph as the same e-nodes: on the soundness suite's random programs
and on kernels with long lists, loop and branch nesting and ``T.Parallel`` bodies."""

from __future__ import annotations

import pytest
from egglog import EGraph, eq
from hypothesis import HealthCheck, given, settings
from soundness.programs import programs
from verify import kernels as VK

from egtile.schedule import dataflow as D
from egtile.schedule import encode as E
from egtile.schedule import schema


def _same_terms(kernel) -> None:
    fast_root, fast = E.build_terms(kernel)
    slow_root, slow = E.build_terms(kernel, direct=False)
    assert fast_root.__egg_typed_expr__ == slow_root.__egg_typed_expr__
    assert fast.keys() == slow.keys()
    for sid in slow:
        assert fast[sid].__egg_typed_expr__ == slow[sid].__egg_typed_expr__, sid


def _same_egraph(kernel) -> None:
    """The root inserted directly and through ``EGraph.let`` has the same extracted term and the same tables."""
    root, terms = E.build_terms(kernel, direct=False)
    a, b = EGraph(), EGraph()
    ra = E.insert_root(a, E.build_terms(kernel)[0])
    rb = b.let("root", root)
    for g, r in ((a, ra), (b, rb)):
        g.register(D.root(r))
    assert str(a.extract(ra)) == str(b.extract(rb))
    for fn in (schema.Block.cons, schema.Block.nil, schema.Stmt.par, schema.Stmt.leaf, schema.Stmt.pipelined,
               schema.Stmt.branch, schema.Stmt.copy):
        assert a.function_size(fn) == b.function_size(fn), fn
    for sid, t in terms.items():
        assert a.check_bool(eq(t).to(t)), sid  # every statement term is in the e-graph


@settings(max_examples=15, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_direct_terms_equal_egglog_calls_on_random_programs(program):
    _same_terms(program.kernel)
    _same_egraph(program.kernel)


@pytest.mark.parametrize("make", [lambda: VK.pipe_par(40), lambda: VK.if_nest(12), lambda: VK.flash_attention(),
                                  lambda: VK.gemm(256, 256, 256)])
def test_direct_terms_equal_egglog_calls_on_long_and_nested_kernels(make):
    k = make().kernel
    _same_terms(k)
    _same_egraph(k)
