"""The consumer ping-pong (egtile.rules.pingpong) at one pipeline stage: a turn of warpgroup 0 is the last gemm of
block j and the first of block j+1, so it waits on ``full`` for block j+1 while warpgroup 1, waiting for that turn to
end, still holds block j's stage (its release follows its own last gemm). With one stage the producer's refill waits
for that release: a deadlock through the producer (TileLang's fused-MoE example at ``num_stages=1``: "deadlock in
block (0, 0): 257 threads blocked" on the simulator, a schedule the verifier passed).

The rules now refuse the ping-pong there by name (``pingpong-two-stages``) and lower the plain split; the verifier's
model check of the handshake holds the region's mbarrier operations too (egtile.verifier.handshake), so the mutant
without the condition is refused by the verifier as well as by the simulator. The kernel is our own, of the example's
shape: two gemms per block on one register-A operand, two consumer warpgroups."""

from __future__ import annotations

from functools import cache

import pytest
import torch

import egtile
from egtile import language as T
from egtile import rules
from egtile.errors import SimulationError
from egtile.ir import swalk
from egtile.ir.handshake import NamedSync
from egtile.sim import simulate

from _check import check, poisoned

BM, N, BK, STEPS = 128, 16, 16, 2


def _kernel(stages: int = 1):
    @T.prim_func
    def two_gemms(X: T.Tensor((BM, STEPS * BK), "float16"), W: T.Tensor((N, STEPS * BK), "float16"),
                  U: T.Tensor((N, STEPS * BK), "float16"), O: T.Tensor((BM, N), "float32")):
        with T.Kernel(1, threads=256) as _bx:
            a = T.alloc_fragment((BM, BK), "float16")
            w = T.alloc_shared((N, BK), "float16")
            u = T.alloc_shared((N, BK), "float16")
            g = T.alloc_fragment((BM, N), "float32")
            h = T.alloc_fragment((BM, N), "float32")
            T.clear(g)
            T.clear(h)
            for k in T.Pipelined(STEPS, num_stages=stages):
                T.copy(X[0:BM, k * BK:(k + 1) * BK], a)
                T.copy(W[0:N, k * BK:(k + 1) * BK], w)
                T.gemm(a, w, g, transpose_B=True)
                T.copy(U[0:N, k * BK:(k + 1) * BK], u)
                T.gemm(a, u, h, transpose_B=True)
            for i, j in T.Parallel(BM, N):
                O[i, j] = g[i, j] * h[i, j]

    return two_gemms.kernel


KEY = ("pipeline-warp-specialize-pingpong", "pingpong-two-stages")


def _rules():
    """The default rules with the ping-pong's cost 0: taken wherever its conditions hold (at these tiny gemms its
    overlap credit would not pay for its barrier op)."""
    from dataclasses import replace

    rs = rules.default()
    return rs.replace_decision(replace(rs.decision("ws_pingpong"), cost=rules.static(0)))


@cache
def _schedules():
    k = _kernel()
    return egtile.optimize(k, rules=_rules()), egtile.optimize(k, rules=_rules().without_condition(*KEY))


def _inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g).to(torch.float16) for s in ((BM, STEPS * BK), (N, STEPS * BK),
                                                                      (N, STEPS * BK))]


def _handshake(sched) -> bool:
    return any(isinstance(x, NamedSync) for x in swalk(sched.body))


def test_one_stage_refuses_the_pingpong_by_name_and_the_plain_split_matches_float64():
    r, _ = _schedules()
    assert not _handshake(r.scheduled)
    assert "pingpong-two-stages" in r.explain() and "num_stages=1" in r.explain()
    assert egtile.verify(r.scheduled) == []
    x, w, u = _inputs(3)
    ref = (x.double() @ w.double().T) * (x.double() @ u.double().T)
    o = poisoned((BM, N), torch.float32, "cpu")
    res = simulate(r.scheduled, x, w, u, o, seed=3)
    assert not res.errors(), res.errors()[:3]
    assert check("one-stage two gemms", res.outputs[3], ref, rtol=1e-4, atol=1e-3)


def test_two_stages_keep_the_pingpong():
    r = egtile.optimize(_kernel(stages=2), rules=_rules())
    assert _handshake(r.scheduled), r.explain()
    assert egtile.verify(r.scheduled) == []


def test_the_mutant_deadlocks_and_both_checkers_say_so():
    _, m = _schedules()
    assert _handshake(m.scheduled)
    found = [v for v in egtile.verify(m.scheduled) if v.property == "L3"]
    assert found and "deadlock" in found[0].message and "mbarrier_wait full_0" in found[0].message, found
    assert "bar.sync 4" in found[0].message and "role producer" in found[0].message, found[0].message
    x, w, u = _inputs(4)
    try:
        errors = [str(e) for e in simulate(m.scheduled, x, w, u, poisoned((BM, N), torch.float32, "cpu"),
                                           seed=4).errors()]
    except SimulationError as e:
        errors = [str(e)]
    assert any("deadlock" in e for e in errors), errors[:3]


@pytest.mark.parametrize("stages", [1, 2])
def test_the_model_check_is_clean_on_the_rules_schedules(stages):
    from egtile.verifier.handshake import check_handshakes

    assert check_handshakes(egtile.optimize(_kernel(stages), rules=_rules()).scheduled) == []
