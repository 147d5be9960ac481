"""The ping-pong whose turn holds no wait (egtile.rules.pingpong_carry): P V of block j completes at the wait_group 0
after Q K^T of block j+1. The decision in the e-graph (kept out by its cost, forced by ``preferred()``; refused by name
where the causal mask would branch under a pending group), the carried wait and release in the scheduled IR, the
simulator against a float64 reference, NVRTC's machine code (no wait between P V and the next Q K^T, no serialized
wgmma), and planted wrong carries that both the verifier and the simulator catch."""

from __future__ import annotations

import re
from functools import cache

import pytest
import torch

import egtile
from egtile.codegen import build, sass
from egtile.errors import SimulationError
from egtile.ir import Arrive, SeqLoop, SIf, swalk
from egtile.ir.handshake import NamedArrive, NamedSync
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.rules import pingpong_carry as PC
from egtile.sim import POLICIES, simulate

from _check import check, poisoned
import flash_attention as FA

B, H, S, D = 1, 1, 128, 16  # one block of 128 query rows (two warpgroups of 64); key blocks of 32: four trips


def _prim(causal: bool = False, block_N: int = 32, stages: int = 2, dim: int = D, seq: int = S):
    return FA.flashattn.__wrapped__(B, H, seq, dim, causal, block_M=128, block_N=block_N, threads=256,
                                    num_stages=stages)


@cache
def _forced(causal: bool = False):
    return egtile.optimize(_prim(causal).kernel, rules=PC.preferred())


def _inputs(seed: int, seq: int = S, dim: int = D):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, seq, H, dim, generator=g).to(torch.float16) for _ in range(3)]


def _consumer(r):
    return r.scheduled.body[-1].roles[0].body


def test_default_cost_keeps_the_pingpong_and_preferred_carries_the_wait():
    r = egtile.optimize(_prim().kernel)
    assert "pipeline-warp-specialize-pingpong-carry legal but costlier" in r.explain(), r.explain()
    text = _forced().explain()
    assert "P V completed in the next iteration" in text and "back to back" in text, text
    cons = _consumer(_forced())
    main = next(x for x in cons if isinstance(x, SeqLoop) and any(isinstance(y, WgmmaMma) for y in swalk(x.body)))
    g0, g1 = sorted({x.sid for x in swalk(main.body) if isinstance(x, WgmmaMma)})
    top = [type(x).__name__ for x in main.body]
    # the body ends with P V's issue: no wait and no release after it, and the turn's sync before it
    last = main.body[-1]
    assert isinstance(last, SeqLoop) and isinstance(last.body[-1], WgmmaMma) and last.body[-1].sid == g1, top
    assert isinstance(main.body[-2], NamedSync), top
    # the release of the previous block's stage: a block-uniform branch after the wait that completes both groups
    (rel,) = [x for x in main.body if isinstance(x, SIf)]
    assert all(isinstance(y, Arrive) for y in swalk(rel.then_body) if not isinstance(y, SeqLoop))
    waits = [x for x in swalk(main.body) if isinstance(x, WgmmaWait)]
    assert [(w.pending, w.sid) for w in waits] == [(0, g0)] and "acc_o" in waits[0].fragments
    # after the loop: the last P V's wait, then the last release
    i = cons.index(main)
    assert isinstance(cons[i + 1], WgmmaWait) and cons[i + 1].sid == g1
    assert isinstance(cons[i + 2], SeqLoop) and all(isinstance(y, Arrive) for y in cons[i + 2].body)
    assert egtile.verify(_forced().scheduled) == []


def test_the_causal_mask_refuses_the_carry_by_name():
    text = egtile.optimize(_prim(causal=True).kernel).explain()
    assert ("pipeline-warp-specialize-pingpong-carry rejected by side condition carry-head-selects-decided" in text
            and "C7518" in text), text
    r = egtile.optimize(_prim(causal=True).kernel, rules=PC.preferred())
    assert not any(isinstance(x, SIf) and not x.versioned for x in swalk(r.scheduled.body))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal-condition-dropped"])
def test_carried_schedule_matches_the_float64_reference_in_the_simulator(causal):
    # causal: the condition (a profitability one) dropped, so the carried wait also runs past the versioned mask
    rules = PC.preferred()
    if causal:
        rules = rules.without_condition("pipeline-warp-specialize-pingpong-carry", "carry-head-selects-decided")
    r = egtile.optimize(_prim(causal).kernel, rules=rules)
    assert any(isinstance(x, SIf) and not x.versioned for x in swalk(r.scheduled.body))  # the release branch
    assert egtile.verify(r.scheduled) == []
    q, k, v = _inputs(seed=17)
    ref, scale = FA.reference(q, k, v, causal)
    for policy in POLICIES[:2]:
        o = poisoned((B, S, H, D), torch.float16, "cpu")
        res = simulate(r.scheduled, q, k, v, o, policy=policy, seed=5)
        assert not res.errors(), res.errors()[:3]
        assert check(f"carry sim {policy}", res.outputs[3], ref, **FA.tolerance(scale, ref, "float16"))


@pytest.mark.skipif(not sass.available(), reason="cuobjdump/nvdisasm not installed")
def test_machine_code_issues_p_v_and_the_next_q_k_back_to_back():
    # at the benchmark's configuration (128x128, head dim 128): after P V's last HGMMA the loop branches back to
    # Q K^T with no WARPGROUP.DEPBAR in between, and ptxas keeps every wgmma asynchronous (no C7518 / C7510)
    r = egtile.optimize(_prim(block_N=128, dim=128, seq=512).kernel, rules=PC.preferred())
    assert any(isinstance(x, SIf) and not x.versioned for x in swalk(r.scheduled.body))  # carried
    built = build(r.scheduled, fast_math=True)
    assert not re.search(r"C75\d\d", built.log), built.log
    lines = [ln for ln in sass.disassemble(built.cubin).splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", ln)]
    pv = [i for i, ln in enumerate(lines) if re.search(r"HGMMA\.64x128x16\.F32 R\d+, R\d+, gdesc", ln)]
    assert pv, "no register-A HGMMA"
    back = next(i for i in range(pv[-1], len(lines)) if re.search(r"\bBRA\b", lines[i]))
    assert not any("DEPBAR" in ln for ln in lines[pv[-1]:back + 1]), lines[pv[-1]:back + 1]


@pytest.mark.parametrize("name", sorted(PC.MUTANTS))
def test_a_wrong_carry_is_caught_by_the_verifier_and_the_simulator(name):
    bad = egtile.optimize(_prim().kernel, rules=PC.mutant(name))
    assert bad.scheduled.body != _forced().scheduled.body
    found = egtile.verify(bad.scheduled)
    assert any(v.property in ("L1", "L2") and "wgmma" in v.message for v in found), found
    q, k, v = _inputs(seed=3)
    o = poisoned((B, S, H, D), torch.float16, "cpu")
    try:
        errors = [str(e) for e in simulate(bad.scheduled, q, k, v, o, policy=POLICIES[0], seed=1).errors()]
    except SimulationError as e:
        errors = [str(e)]
    assert any("race" in e and "wgmma" in e for e in errors), errors[:3]


def test_one_stage_is_refused_by_the_rotations_condition():
    # holding stage j into iteration j + 1 with one stage would wait for the load it holds up (deadlock)
    r = egtile.optimize(_prim(stages=1).kernel, rules=PC.preferred())
    assert not any(isinstance(x, SIf) and not x.versioned for x in swalk(r.scheduled.body))
