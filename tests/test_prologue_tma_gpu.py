"""The prologue's Q tile loaded by the producer's TMA (egtile.rules.prologue_tma) on the H200: the benchmark's
configuration (128x128 blocks, 256 threads, 2 stages, head dim 128) with the decision and without it, full and
causal, against a float32 reference on fresh random inputs with a NaN-poisoned output (the example's bound).

    python3 -m pytest -q -m gpu tests/test_prologue_tma_gpu.py
"""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile.ir import TmaLoad, swalk

from _check import check, poisoned

pytestmark = pytest.mark.gpu

OFF = ("pipeline-prologue-tma",)


@pytest.mark.parametrize("on", [True, False], ids=["q-by-tma", "q-by-simt"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_q_tile_by_tma_matches_the_reference(on, causal):
    import flash_attention as FA

    b, h, seq, d = 1, 2, 512, 128
    rules = egtile.rules.default()
    if not on:
        for r in OFF:
            rules = rules.without(r)
    prim = FA.flashattn.__wrapped__(b, h, seq, d, causal, block_M=128, block_N=128, num_stages=2, threads=256)
    k = egtile.compile(prim, target="cuda", rules=rules)
    tma_dst = {x.dst.buffer.name for x in swalk(k.schedule_result.scheduled.body) if isinstance(x, TmaLoad)}
    assert ("Q_shared" in tma_dst) == on, tma_dst
    q, kk, v = (torch.randn(b, seq, h, d, dtype=torch.float16, device="cuda") for _ in range(3))
    o = poisoned((b, seq, h, d), torch.float16, "cuda")
    k(q, kk, v, o)
    ref, scale = FA.reference(q, kk, v, causal, torch.float32)
    assert check("O", o, ref, **FA.tolerance(scale, ref, "float16"))
