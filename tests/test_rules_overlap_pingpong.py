"""FA3's schedule at head dim 128 (egtile.rules.overlap_pingpong): the rotation and the ping-pong composed. The
decision in the e-graph (forced by ``overlap_pingpong.preferred()``; the default cost takes the ping-pong alone), its handshake around the rotated loop in the scheduled IR, the simulator against a float64 reference,
NVRTC, and planted wrong handshakes that both the verifier and the simulator catch."""

from __future__ import annotations

from functools import cache

import pytest
import torch

import egtile
from egtile.errors import SimulationError
from egtile.ir import SeqLoop, Wait, swalk
from egtile.ir.handshake import NamedArrive, NamedSync
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.rules import overlap_pingpong as OP
from egtile.rules import pingpong
from egtile.sim import POLICIES, simulate

from _check import check, poisoned
import flash_attention as FA

B, H, S, D = 1, 1, 128, 16  # one block of 128 query rows (two warpgroups of 64); key blocks of 32: the rotated
# loop runs 3 times (of 64: once)


def _prim(causal: bool = False, threads: int = 256, block_M: int = 128, block_N: int = 32):
    return FA.flashattn.__wrapped__(B, H, S, D, causal, block_M=block_M, block_N=block_N, threads=threads,
                                    num_stages=2)


@cache
def _forced(causal: bool = False, block_N: int = 32):
    return egtile.optimize(_prim(causal, block_N=block_N).kernel, rules=OP.preferred())


def _handshake(body) -> list:
    return [x for x in swalk(body) if isinstance(x, (NamedSync, NamedArrive))]


def _inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, S, H, D, generator=g).to(torch.float16) for _ in range(3)]


def test_default_cost_takes_the_pingpong_alone():
    r = egtile.optimize(_prim().kernel)
    assert _handshake(r.scheduled.body)
    assert not any(isinstance(x, WgmmaWait) and x.pending == 1 for x in swalk(r.scheduled.body))
    # the rule matched (the composition is an alternative of the split); its cost adds the rotation's peel
    assert "pipeline-warp-specialize-overlap-pingpong legal but costlier" in r.explain(), r.explain()


def test_preferred_rotates_and_hands_the_turns_over():
    r = _forced()
    text = r.explain()
    assert "rotation with consumer ping-pong" in text and "take turns issuing" in text, text
    # the Q tile's prologue copy may be a TMA by the producer (pipeline-prologue-tma): its mbarrier wait is not part
    # of the turn order under test
    cons = [x for x in r.scheduled.body[-1].roles[0].body if not isinstance(x, Wait)]
    a, b = pingpong.IDS
    # warpgroup 1 opens (warpgroup 0 takes the first turn); warpgroup 0 closes (the partner's last arrival)
    assert isinstance(cons[0], NamedArrive) and cons[0].ids == (None, a)
    prologue, main, epilogue, close = cons[1:5]
    assert isinstance(close, NamedSync) and close.ids == (a, None)
    assert all(isinstance(x, SeqLoop) for x in (prologue, main, epilogue))

    def order(body):
        out = []
        for x in body:
            inner = x.body if isinstance(x, SeqLoop) else (x,)
            out += [type(y).__name__ + (f"{y.sid}" if isinstance(y, WgmmaMma) else "") for y in inner
                    if isinstance(y, (WgmmaMma, NamedSync, NamedArrive))]
        return out

    g0, g1 = sorted({x.sid for x in swalk(main.body) if isinstance(x, WgmmaMma)})
    # a turn: sync own, Q K^T (block j), [rescale O] P V (block j-1), arrive the partner's; the last P V is free
    assert order(prologue.body) == ["NamedSync", f"WgmmaMma{g0}", "NamedArrive"]
    assert order(main.body) == ["NamedSync", f"WgmmaMma{g0}", f"WgmmaMma{g1}", "NamedArrive"]
    assert order(epilogue.body) == [f"WgmmaMma{g1}"]
    assert [x.pending for x in swalk(main.body) if isinstance(x, WgmmaWait)] == [1, 0]
    assert egtile.verify(r.scheduled) == []


def test_one_consumer_warpgroup_is_refused_by_name():
    r = egtile.optimize(_prim(threads=128, block_M=64).kernel, rules=OP.preferred())
    assert not _handshake(r.scheduled.body)
    assert ("pipeline-warp-specialize-overlap-pingpong rejected by side condition pingpong-two-consumer-warpgroups"
            in r.explain()), r.explain()


def test_composed_schedule_matches_the_float64_reference_in_the_simulator():
    # causal: the diagonal masks inside the key blocks; two key blocks: the prologue's turn, one rotated turn, the
    # epilogue (more trips repeat the same protocol: the verifier's model check unrolls them)
    r = _forced(causal=True, block_N=64)
    assert _handshake(r.scheduled.body)
    q, k, v = _inputs(seed=17)
    ref, scale = FA.reference(q, k, v, True)
    o = poisoned((B, S, H, D), torch.float16, "cpu")
    res = simulate(r.scheduled, q, k, v, o, policy=POLICIES[1], seed=5)
    assert not res.errors(), res.errors()[:3]
    assert check("overlap-pingpong sim causal", res.outputs[3], ref, **FA.tolerance(scale, ref, "float16"))


def test_composed_kernel_compiles_with_nvrtc():
    from egtile.codegen import build

    built = build(_forced().scheduled)
    a, b = pingpong.IDS
    assert "eg_wgmma_wait_group<1>();" in built.source
    assert f"eg_named_barrier_sync({a}u, 256u)" in built.source and f"eg_named_barrier_arrive({b}u, 256u)" in built.source
    assert built.cubin and "C7512" not in built.log, built.log


@pytest.mark.parametrize("name", sorted(OP.MUTANTS))
def test_a_wrong_handshake_is_caught_by_the_verifier_and_the_simulator(name):
    good = _forced(block_N=64)
    bad = egtile.optimize(_prim(block_N=64).kernel, rules=OP.mutant(name))
    assert _handshake(bad.scheduled.body) and bad.scheduled.body != good.scheduled.body
    found = egtile.verify(bad.scheduled)
    assert any(v.property == "L3" and v.barrier and v.barrier.startswith("bar") for v in found), found
    q, k, v = _inputs(seed=3)
    o = poisoned((B, S, H, D), torch.float16, "cpu")
    try:
        errors = [str(e) for e in simulate(bad.scheduled, q, k, v, o, policy=POLICIES[0], seed=1).errors()]
    except SimulationError as e:
        errors = [str(e)]
    assert any("deadlock" in e or "bar" in e for e in errors), errors[:3]
