"""The static cost model: its laws, and that extraction's total equals the per-node breakdown."""

from __future__ import annotations

import egtile.rules as R
import pytest
import schedule_kernels as K
from seed_schedules import bug1_kernel, bug2_kernel

from egtile.schedule import cost as C
from egtile.ir import Buffer, Const, Copy, Region, Var
from egtile.schedule.driver import optimize

G = Buffer("G", (64, 256), "float16", "global")


def _copy(width: int) -> Copy:
    S = Buffer("S", (width,), "float16", "shared")
    return Copy(1, Region(G, (Var("k"), Const(0)), (1, width)), Region.full(S))


@pytest.mark.parametrize("width", [8, 64, 256])
def test_producer_instructions_order_tma_then_cp_async_then_simt(width):
    c = _copy(width)
    tma, cp, simt = (C.copy_cost(c, i, 128) for i in ("tma", "cp_async", "simt_producer"))
    assert 0 <= tma < cp < simt
    assert C.copy_cost(c, "simt", 128) > simt  # a synchronous copy exposes the whole latency


def test_unknown_copy_instruction_is_an_error():
    with pytest.raises(ValueError, match="unknown instruction"):
        C.copy_cost(_copy(8), "ldmatrix", 128)


@pytest.mark.parametrize("extent", [16, 128, 129, 1000])
def test_partitioned_costs_less_than_replicated_beyond_one_iteration(extent):
    p = C.parallel_cost(extent, 128, "partitioned", 7)
    assert p < C.parallel_cost(extent, 128, "replicated", 7)
    assert p >= 7 * (extent // 128)


def test_a_single_iteration_partitioned_pays_only_its_guard():
    assert C.parallel_cost(1, 128, "partitioned", 7) == 7 + C.BRANCH
    assert C.parallel_cost(256, 128, "partitioned", 7) == 14  # no guard when the extent divides


def test_elect_pays_a_branch_over_replication():
    from egtile.ir import Store

    s = Store(1, Buffer("O", (4,), "float32", "global"), (Const(0),), Const(1.0, "float32"))
    assert C.elect_cost(s) == C.replicate_cost(s) + C.BRANCH


def test_costs_are_non_negative_integers_for_every_statement_of_the_test_kernels():
    from egtile.ir import walk

    for f in (K.gemm(), K.pipelined_gemm(), K.elementwise(), K.cp_async_variant()):
        for s in walk(f.kernel.body):
            c = C.leaf_cost(s)
            assert isinstance(c, int) and c >= 0


@pytest.mark.parametrize("make", [bug1_kernel, bug2_kernel, lambda: K.late_read(3).kernel, lambda: K.gemm().kernel,
                                  lambda: K.write_after_read().kernel, lambda: K.local_accumulate().kernel])
def test_breakdown_adds_up_to_the_extraction_cost(make):
    r = optimize(make())
    assert r.cost == sum(c.cost for c in r.breakdown)
    r = optimize(make(), rules=R.mutant("release-before-last-read"))
    assert r.cost == sum(c.cost for c in r.breakdown)


def test_warp_specialization_is_cheaper_than_serial_on_the_seeds():
    for make in (bug1_kernel, bug2_kernel):
        r = optimize(make())
        rej = next(x for x in r.rejected if x.rule == "pipeline-serial")
        assert not rej.failed and rej.cost > rej.chosen_cost


def test_position_costs_prefer_a_late_wait_and_an_early_release():
    waits = [C.WAIT_BASE + C.WAIT_PER_LATER_ITEM * n for n in range(5)]
    assert waits == sorted(waits) and len(set(waits)) == 5
    assert C.RELEASE_PER_EARLIER_ITEM > 0


def test_reported_serial_cost_equals_its_own_cost_plus_the_extracted_body():
    from egglog import get_callable_args

    from egtile.schedule.driver import saturate

    r = optimize(bug2_kernel())
    serial = next(x for x in r.rejected if x.rule == "pipeline-serial")
    s = saturate(bug2_kernel())
    body = get_callable_args(s.encoding.terms[1])[1]
    extracted = int(s.egraph.extract(body, include_cost=True)[1])
    assert serial.cost == C.serial_pipeline_cost() + 1 + extracted
    assert serial.chosen_cost == next(c.cost for c in r.breakdown if c.op == "ws") + sum(
        c.cost for c in r.breakdown if c.op != "ws")
