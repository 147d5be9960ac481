"""The deferred ``wgmma.wait_group`` (egtile.rules.mma_async): chosen by the e-graph, placed by the lowering
where the decision says, and a wait placed one statement too late caught by the verifier and the simulator."""

from __future__ import annotations

import math

import pytest
import torch

import egtile
from egtile.errors import SimulationError
from egtile.ir import swalk
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.rules import mma_async
from egtile.sim import POLICIES, simulate

from _check import check, poisoned
from verify.kernels import flash_attention


def _order(r) -> list[str]:
    """The consumer loop's wgmma issues, waits and statement sids in order."""
    out = []
    for x in swalk(r.scheduled.body):
        if isinstance(x, WgmmaMma):
            out.append(f"mma{x.sid}")
        elif isinstance(x, WgmmaWait):
            out.append(f"wait{x.sid}")
    return out


def _reference(q, k, v):
    s = (q.double() @ k.double().T) / math.sqrt(q.shape[1])
    return torch.softmax(s, dim=-1) @ v.double()


def _inputs(seq: int, dim: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(seq, dim, generator=g).to(torch.float16) for _ in range(3)]


def test_the_e_graph_defers_the_score_gemms_wait_past_the_statements_that_do_not_touch_it():
    pf = flash_attention(seq=128, dim=64)
    r = egtile.optimize(pf)
    text = r.explain()
    # T.copy(m, m_prev) follows the score gemm and does not touch S; T.reduce_max(S, ...) after it reads S
    assert "gemm-to-wgmma-async" in text and "wait_group 0 deferred past 1 statement(s)" in text, text
    assert "rejected: gemm-to-wgmma legal but costlier" in text
    order = _order(r)
    g = next(x for x in swalk(r.scheduled.body) if isinstance(x, WgmmaMma) and x.gemm.c.buffer.name == "S")
    i = order.index(f"mma{g.sid}")
    assert order[i + 1] == f"wait{g.sid}"
    loop = next(x for x in swalk(r.scheduled.body) if type(x).__name__ == "SeqLoop" and any(
        isinstance(y, WgmmaMma) for y in x.body))
    kinds = [type(y).__name__ for y in loop.body]
    j = next(n for n, y in enumerate(loop.body) if isinstance(y, WgmmaMma) and y.sid == g.sid)
    # one statement (the by-layout copy m -> m_prev) runs between the issue and the wait
    assert isinstance(loop.body[j + 2], WgmmaWait) and kinds[j + 1] != "WgmmaWait", kinds
    assert egtile.verify(r.scheduled) == []


def test_without_the_async_rules_the_waits_follow_the_issues():
    rs = egtile.rules.default().without("gemm-to-wgmma-async").without("gemm-to-wgmma-rs-async")
    r = egtile.optimize(flash_attention(seq=128, dim=64), rules=rs)
    assert "] gemm-to-wgmma-async" not in r.explain()
    order = _order(r)
    assert all(order[order.index(m) + 1] == "wait" + m[3:] for m in order if m.startswith("mma"))


@pytest.mark.parametrize("threads", [128, 256])
def test_deferred_wait_schedule_matches_the_reference_in_the_simulator(threads):
    # small: one block of rows, two or four key blocks (the simulator tracks every access of every thread)
    seq, dim = 64 * threads // 128, 16
    pf = flash_attention(seq=seq, dim=dim, block_M=seq, block_N=32, threads=threads)
    r = egtile.optimize(pf)
    assert "gemm-to-wgmma-async" in r.explain()
    q, k, v = _inputs(seq, dim, seed=threads)
    ref = _reference(q, k, v)
    for policy in POLICIES[:1]:
        o = poisoned((seq, dim), torch.float16, "cpu")
        res = simulate(r.scheduled, q, k, v, o, policy=policy, seed=1)
        assert not res.errors(), res.errors()[:3]
        assert check(f"sim {policy}", res.outputs[3], ref, rtol=2.0**-9, atol=4 * 2.0**-11 * (ref.abs().max().item() + 1))


def test_a_wait_one_statement_late_is_caught_by_the_verifier_and_the_simulator():
    seq, dim = 64, 16
    pf = flash_attention(seq=seq, dim=dim, block_N=32)
    good = egtile.optimize(pf)
    bad = egtile.optimize(pf, rules=mma_async.mutant("wgmma-async-wait-one-late"))
    assert bad.scheduled.body != good.scheduled.body
    found = egtile.verify(bad.scheduled)
    assert any(v.property == "L1" and "before the wgmma.wait_group" in v.message for v in found), found
    q, k, v = _inputs(seq, dim, seed=5)
    for policy in POLICIES[:2]:
        o = poisoned((seq, dim), torch.float16, "cpu")
        try:
            errors = [str(e) for e in simulate(bad.scheduled, q, k, v, o, policy=policy, seed=3).errors()]
        except SimulationError as e:
            errors = [str(e)]
        assert any("race on" in e for e in errors), (policy, errors[:3])


def test_the_position_oracle_says_why_a_later_wait_is_refused():
    from egtile.schedule.facts import FactContext

    pf = flash_attention(seq=128, dim=64)
    facts = FactContext.of(pf.kernel)
    g = next(s for s in facts.stmts.values() if type(s).__name__ == "Gemm" and facts.scope(s.a.buffer.name) == "shared")
    mask, why = mma_async.wait_positions(facts, g, "acc")
    assert mask == 0b10 and "T.reduce_max" in why[0] and "accesses the accumulator" in why[0], (bin(mask), why)
    assert mma_async.wait_positions(facts, g, "straight")[0] & 0b10
