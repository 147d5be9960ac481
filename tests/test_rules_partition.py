"""Thread mapping rules: partition-parallel, replicate-parallel, elect-scalar, replicate-scalar."""

from __future__ import annotations

import egtile.rules as R
import pytest
import schedule_kernels as K
from seed_schedules import bug1_kernel, bug2_kernel

from egtile.errors import ScheduleError
from egtile.ir import Elect, Leaf, ThreadLoop, swalk
from egtile.schedule.driver import optimize, saturate


def _loops(result):
    return {x.sid: x for x in swalk(result.scheduled.body) if isinstance(x, ThreadLoop)}


def test_bug1_extern_loop_can_only_be_partitioned():
    s = saturate(bug1_kernel())
    assert s.alternatives(4) == {"par", "partitioned"}          # no "replicated": effect is nonlocal
    r = optimize(bug1_kernel())
    assert _loops(r)[4].mapping == "partitioned"
    rej = [x for x in r.rejected if x.rule == "replicate-parallel" and x.sid == 4]
    assert rej and rej[0].failed == ("effect-local",) and "address_of" in rej[0].reason


def test_removing_the_effect_condition_lets_replication_in():
    weak = R.builtin().without_condition("replicate-parallel", "effect-local")
    assert "replicated" in saturate(bug1_kernel(), weak).alternatives(4)


def test_a_local_accumulation_can_only_be_replicated():
    f = K.local_accumulate()
    s = saturate(f)
    assert s.alternatives(1) == {"par", "replicated"}
    r = optimize(f)
    assert _loops(r)[1].mapping == "replicated"
    rej = next(x for x in r.rejected if x.rule == "partition-parallel")
    assert rej.failed == ("no-escaping-local-write",) and "acc" in rej.reason
    K.check_schedule(r.scheduled, ("Out",))


def test_partitioned_is_cheaper_when_both_are_legal():
    # A T.Parallel that only reads shared and writes nothing non-local: both mappings legal.
    from egtile import language as T

    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), Out: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            tmp = T.alloc_local((1,), "float32")
            for i in T.Parallel(64):
                tmp[0] = A[i] * 2.0
            for i in T.Parallel(64):
                Out[i] = A[i] + 1.0

    s = saturate(main)
    assert s.alternatives(1) == {"par", "partitioned", "replicated"}
    r = optimize(main)
    assert _loops(r)[1].mapping == "partitioned"
    assert any(x.rule == "replicate-parallel" and not x.failed and x.cost > x.chosen_cost for x in r.rejected)


def test_scalar_statements_with_global_effect_are_elected():
    r = optimize(bug2_kernel())
    elected = [x for x in swalk(r.scheduled.body) if isinstance(x, Elect)
               and any(isinstance(b, Leaf) and b.stmt.sid == 5 for b in x.body)]
    assert len(elected) == 1 and elected[0].threads.count == 128
    assert saturate(bug2_kernel()).alternatives(5) == {"scalar", "elect"}


def test_removing_the_partition_rule_leaves_no_schedule_and_says_why():
    with pytest.raises(ScheduleError) as err:
        optimize(bug1_kernel(), rules=R.builtin().without("partition-parallel"))
    msg = str(err.value)
    assert "sid 4" in msg and "thread mapping" in msg and "replicate-parallel" in msg and "effect-local" in msg


def test_removing_a_rule_removes_its_alternative():
    s = saturate(K.local_accumulate(), R.builtin().without("replicate-parallel"))
    assert s.alternatives(1) == {"par"}
    s = saturate(bug2_kernel(), R.builtin().without("elect-scalar"))
    assert s.alternatives(5) == {"scalar"}
