"""Loop fission (rules/fission.py): a rule that creates statements. It is chosen where the split lowers the
cost (a load-and-compute T.Parallel becomes a SIMT producer plus a consumer, so the loop can be warp
specialized), never splits a local value from its reader, and its mutant is caught."""

from __future__ import annotations

import egtile.rules as R
import pytest
import torch

import egtile
from egtile import language as T
from egtile.ir import RoleSplit, ThreadLoop, swalk
from egtile.schedule.driver import optimize
from egtile.sim import POLICIES, simulate
from egtile.verifier import verify


def mixed(n: int = 4, w: int = 4, local_flow: bool = False):
    """One T.Parallel per iteration that loads a tile into shared memory and computes with it."""

    @T.prim_func
    def main(In: T.Tensor((n, w), "float32"), Out: T.Tensor((n, w), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((w,), "float32")
            t = T.alloc_local((1,), "float32")
            for k in T.Pipelined(n, num_stages=2):
                for i in T.Parallel(w):
                    X_s[i] = In[k, i]
                    if local_flow:
                        t[0] = X_s[i] * 2.0
                        Out[k, i] = t[0] + 1.0
                    else:
                        Out[k, i] = X_s[i] * 2.0 + 1.0

    return main


def _loops(sched) -> list[ThreadLoop]:
    return [x for x in swalk(sched.body) if isinstance(x, ThreadLoop)]


def _check(sched, prim, n=4, w=4, seeds=(0, 1)):
    for seed in seeds:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, w, generator=g)
        for policy in POLICIES:
            y = torch.full((n, w), -5.0)
            res = simulate(sched, x, y, policy=policy, seed=seed)
            assert not res.errors(), res.errors()[:2]
            ref = torch.full((n, w), -5.0)
            egtile.interpret(prim.kernel, x, ref)
            assert torch.equal(res.outputs[1], ref), policy


@pytest.mark.parametrize("local_flow", [False, True])
def test_fission_is_chosen_where_it_enables_warp_specialization(local_flow):
    prim = mixed(local_flow=local_flow)
    r = optimize(prim)
    serial = optimize(prim, rules=R.default().without("parallel-fission"))
    assert not any(isinstance(x, RoleSplit) for x in swalk(serial.scheduled.body))
    assert r.cost < serial.cost
    (split,) = [x for x in swalk(r.scheduled.body) if isinstance(x, RoleSplit)]
    consumer, producer = split.roles
    # The load part runs on the producer warpgroup, the compute part on the consumers: two thread loops
    # of the same source loop, each over its own statements.
    pl = [x for x in swalk(producer.body) if isinstance(x, ThreadLoop)]
    cl = [x for x in swalk(consumer.body) if isinstance(x, ThreadLoop)]
    assert len(pl) == 1 and len(cl) == 1 and pl[0].sid == cl[0].sid == 2
    assert "X_s" in str(pl[0].body[0].stmt) and "Out" in str(cl[-1].body[-1].stmt)
    assert r.scheduled.barrier("full_0").arrive_count == 128
    assert verify(r.scheduled) == []
    _check(r.scheduled, prim)
    assert any(d.rule == "pipeline-warp-specialize" for d in r.decisions)


def test_a_local_value_stays_with_its_reader():
    # With the flow through `t`, the split after the load is legal but the one after `t[0] = ...` is not:
    # the consumer part keeps both statements in one loop, partitioned.
    r = optimize(mixed(local_flow=True))
    (split,) = [x for x in swalk(r.scheduled.body) if isinstance(x, RoleSplit)]
    (cl,) = [x for x in swalk(split.roles[0].body) if isinstance(x, ThreadLoop)]
    assert len(cl.body) == 2 and cl.mapping == "partitioned"


def test_without_a_multi_statement_parallel_nothing_changes():
    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[k, 0:64], X_s)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]

    a = optimize(main)
    b = optimize(main, rules=R.default().without("parallel-fission"))
    assert a.scheduled == b.scheduled and a.cost == b.cost


def test_the_mutant_splits_a_local_value_from_its_reader_and_the_simulator_catches_it():
    prim = mixed(local_flow=True)
    r = optimize(prim, rules=R.mutant("fission-across-local-flow"))
    loops = _loops(r.scheduled)
    assert len(loops) == 3  # load | t[0] = ... | Out = t[0] + 1: the last split is the illegal one
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    ref = torch.full((4, 4), -5.0)
    egtile.interpret(prim.kernel, x, ref)
    res = simulate(r.scheduled, x, torch.full((4, 4), -5.0))
    assert not torch.equal(res.outputs[1], ref)


def test_explain_names_the_split_loops():
    text = optimize(mixed()).explain()
    assert "SIMT producer loop" in text and "produce-simt-loop" in text
