"""The intra-warpgroup overlap (egtile.rules.overlap): the decision in the e-graph (forced by
``overlap.preferred()``; the default cost keeps the plain split until it is measured faster), the rotated loop in
the scheduled IR, the simulator against a float64 reference, NVRTC, and planted wrong rotations that both the
verifier and the simulator catch."""

from __future__ import annotations

from functools import cache

import pytest
import torch

import egtile
from egtile.errors import SimulationError
from egtile.ir import SeqLoop, Wait, swalk
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.rules import overlap
from egtile.sim import POLICIES, simulate

from _check import check, poisoned
import flash_attention as FA

B, H, S, D = 1, 1, 64, 16  # one query block of 64 rows, four key blocks of 16: the rotated loop runs 3 times


def _prim(causal: bool = False, stages: int = 2, threads: int = 128, block_M: int = 64, block_N: int = 16,
          dim: int = D):
    return FA.flashattn.__wrapped__(B, H, S, dim, causal, block_M=block_M, block_N=block_N, threads=threads,
                                    num_stages=stages)


@cache
def _preferred(causal: bool = False, block_N: int = 16):
    return egtile.optimize(_prim(causal, block_N=block_N).kernel, rules=overlap.preferred())


def _rotated(sched) -> bool:
    return any(isinstance(x, WgmmaWait) and x.pending == 1 for x in swalk(sched.body))


def _after_prologue_waits(body):
    # the Q tile's prologue copy may be a TMA by the producer (pipeline-prologue-tma): the consumer then opens
    # with its mbarrier wait, which is not part of the rotation under test
    i = 0
    while isinstance(body[i], Wait):
        i += 1
    return body[i:]


def _inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, S, H, D, generator=g).to(torch.float16) for _ in range(3)]


def test_default_cost_keeps_the_plain_split_and_explains_the_alternative():
    r = egtile.optimize(_prim().kernel)
    assert not _rotated(r.scheduled)
    assert "pipeline-warp-specialize-overlap legal but costlier" in r.explain(), r.explain()


def test_preferred_rotates_the_consumer_loop():
    r = _preferred()
    text = r.explain()
    assert "intra-warpgroup overlap" in text and "of block j-1 is issued after" in text, text
    cons = _after_prologue_waits(r.scheduled.body[-1].roles[0].body)
    prologue, main, epilogue = cons[:3]
    assert all(isinstance(x, SeqLoop) for x in (prologue, main, epilogue))
    # the rotated body: Q K^T of block k, P V of block k - 1, the softmax of k after wait_group 1, wait_group 0,
    # the release of stage k - 1, then the cast and the rescale of block k; each part binds the source variable
    order = []
    for part in main.body:
        if isinstance(part, SeqLoop):
            it = "k-1" if part.start != main.var else "k"
            order += [(type(x).__name__, x.sid, it) for x in part.body if isinstance(x, (WgmmaMma, WgmmaWait))]
            order += [("Arrive", None, it) for x in part.body if type(x).__name__ == "Arrive"]
        elif isinstance(part, WgmmaWait):
            order.append(("WgmmaWait", part.pending, ""))
    assert order == [("WgmmaMma", 10, "k"), ("WgmmaMma", 29, "k-1"), ("WgmmaWait", 10, "k"), ("WgmmaWait", 0, ""),
                     ("Arrive", None, "k-1")], order
    assert [x.pending for x in swalk(main.body) if isinstance(x, WgmmaWait)] == [1, 0]
    assert egtile.verify(r.scheduled) == []


@pytest.mark.parametrize("kw,cond", [
    (dict(stages=1), "overlap-two-stages"),
    (dict(dim=8), "overlap-gemms-on-tensor-cores"),
])
def test_refusals_name_the_condition(kw, cond):
    r = egtile.optimize(_prim(**kw).kernel, rules=overlap.preferred())
    assert not _rotated(r.scheduled)
    assert f"pipeline-warp-specialize-overlap rejected by side condition {cond}" in r.explain(), r.explain()


def test_rotated_schedule_matches_the_float64_reference_in_the_simulator():
    # causal: the diagonal masks within the key blocks; the loop runs three times
    r = _preferred(causal=True)
    assert _rotated(r.scheduled)
    q, k, v = _inputs(seed=7)
    ref, scale = FA.reference(q, k, v, True)
    o = poisoned((B, S, H, D), torch.float16, "cpu")
    res = simulate(r.scheduled, q, k, v, o, policy=POLICIES[0], seed=5)
    assert not res.errors(), res.errors()[:3]
    assert check("overlap sim causal", res.outputs[3], ref, **FA.tolerance(scale, ref, "float16"))


def test_rotated_kernel_compiles_with_nvrtc():
    from egtile.codegen import build

    r = _preferred()
    built = build(r.scheduled)
    assert "eg_wgmma_wait_group<1>();" in built.source
    assert built.cubin and "C7512" not in built.log, built.log  # ptxas did not serialize the wgmma pipeline


@pytest.mark.parametrize("name", sorted(overlap.MUTANTS))
def test_a_wrong_rotation_is_caught_by_the_verifier_and_the_simulator(name):
    # two key blocks (the rotated loop runs once) are enough for a wrong wait; a stage released early is refilled
    # (and the race seen) only from the third block on
    block_N = 16 if name == "overlap-release-before-wait" else 32
    good = _preferred(block_N=block_N)
    bad = egtile.optimize(_prim(block_N=block_N).kernel, rules=overlap.mutant(name))
    assert _rotated(bad.scheduled) and bad.scheduled.body != good.scheduled.body
    found = egtile.verify(bad.scheduled)
    assert any(v.property in ("L1", "L2") and "wgmma" in v.message for v in found), found
    q, k, v = _inputs(seed=3)
    o = poisoned((B, S, H, D), torch.float16, "cpu")
    try:
        errors = [str(e) for e in simulate(bad.scheduled, q, k, v, o, policy=POLICIES[0], seed=1).errors()]
    except SimulationError as e:
        errors = [str(e)]
    assert any("race" in e for e in errors), errors[:3]
