"""Copy instruction choice: copy-to-tma, copy-to-cp-async, copy-to-simt-producer, copy-to-simt, produce-simt."""

from __future__ import annotations

import egtile.rules as R
import pytest
import schedule_kernels as K
from seed_schedules import bug2_kernel

from egtile.errors import ScheduleError
from egtile.ir import ArriveExpectTx, CpAsyncArrive, TileOp, TmaLoad, swalk
from egtile.schedule.driver import optimize, saturate


def _kinds(result):
    return [type(x).__name__ for x in swalk(result.scheduled.body)]


def test_bug2_copy_has_every_producer_alternative_its_conditions_allow():
    s = saturate(bug2_kernel())
    # sid 4: T.copy(A_in[ko, :], A_shared): TMA-eligible, prefer auto -> TMA and SIMT producer; no cp.async.
    assert s.alternatives(4) == {"copy", "copy_simt", "issue", "tma_load", "simt_load"}
    # sid 2: the T.Parallel global -> shared loop is a SIMT producer.
    assert "simt_produce" in s.alternatives(2)


def test_tma_is_chosen_and_arrives_with_expect_tx_on_full():
    r = optimize(bug2_kernel())
    tma = [x for x in swalk(r.scheduled.body) if isinstance(x, TmaLoad)]
    tx = [x for x in swalk(r.scheduled.body) if isinstance(x, ArriveExpectTx)]
    assert len(tma) == 1 and tma[0].barrier == "full_0" and tx[0].barrier == "full_0"
    assert tx[0].tx_bytes == 64 * 2
    d = next(d for d in r.decisions if d.sid == 4)
    assert d.rule == "copy-to-tma" and "tma-eligible" in d.reason


def test_no_tma_eligible_copy_gets_no_tma_and_stays_legal():
    f = K.no_tma()
    s = saturate(f)
    assert "tma_load" not in s.alternatives(2) and "simt_load" in s.alternatives(2)
    r = optimize(f)
    assert "TmaLoad" not in _kinds(r)
    rej = next(x for x in r.rejected if x.rule == "copy-to-tma")
    assert rej.failed == ("tma-eligible",) and "16 B" in rej.reason
    assert r.scheduled.barrier("full_0").arrive_count == 128
    K.check_schedule(r.scheduled, ("Out",))


def test_explicit_cp_async_copy_completes_with_noinc_arrivals():
    r = optimize(K.cp_async_variant())
    cp = [x for x in swalk(r.scheduled.body) if isinstance(x, TileOp) and x.inst == "cp_async"]
    assert len(cp) == 1 and cp[0].threads.begin == 128 and cp[0].threads.count == 128
    assert sum(isinstance(x, CpAsyncArrive) for x in swalk(r.scheduled.body)) == 1
    # 128 noinc arrivals (cp.async) + 1 arrive.expect_tx (TMA copy of A).
    assert r.scheduled.barrier("full_0").arrive_count == 129
    rej = {x.rule: x for x in r.rejected if x.sid == 2}
    assert rej["copy-to-tma"].failed == ("prefer-allows-tma",)
    # Serially the explicit cp.async copy has no instruction (cp.async needs a producer's mbarrier).
    serial = next(x for x in r.rejected if x.rule == "pipeline-serial")
    assert "no legal schedule in that context" in str(serial)


def test_removing_copy_to_tma_falls_back_to_simt_producer():
    r = optimize(bug2_kernel(), rules=R.builtin().without("copy-to-tma"))
    assert "TmaLoad" not in _kinds(r)
    assert r.scheduled.barrier("full_0").arrive_count == 256  # two SIMT producers x 128 threads
    K.check_schedule(r.scheduled, ("B_out", "A_out"), full=False)


def test_prefer_tma_outside_a_pipeline_has_no_schedule():
    from egtile import language as T

    @T.prim_func
    def main(A: T.Tensor((64,), "float16"), Out: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            S = T.alloc_shared((64,), "float16")
            T.copy(A, S, prefer_instruction="tma")
            for i in T.Parallel(64):
                Out[i] = S[i]

    with pytest.raises(ScheduleError, match=r"copy instruction.*copy-to-simt.*prefer-allows-simt"):
        optimize(main)


def test_a_tma_store_asked_of_a_shared_source_says_why_the_tma_store_rule_cannot_apply():
    # The refusal named only copy-to-simt's side condition: the TMA-store rule, whose options bind nothing here,
    # was left out, so the reason (its staging takes a fragment) was missing (a fresh soundness tester's report).
    from egtile import language as T

    @T.prim_func
    def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(4, threads=128) as bx:
            S = T.alloc_shared((16, 64), "float32")
            for i, j in T.Parallel(16, 64):
                S[i, j] = X[bx * 16 + i, j] * 3.0
            T.tma_copy(S, Y[bx * 16, 0])

    with pytest.raises(ScheduleError, match=r"copy-to-simt: prefer-allows-simt.*; copy-via-tma-store: "
                                            r"tma-store-eligible: the source S is not a whole 2-D fragment"):
        optimize(main)


def test_a_block_level_copy_is_simt_on_every_thread():
    r = optimize(K.gemm())
    ops = [x for x in swalk(r.scheduled.body) if isinstance(x, TileOp)]
    assert ops and all(x.inst == "simt" and x.threads.count == 128 for x in ops)
