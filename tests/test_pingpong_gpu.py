"""GPU tests of the consumer warpgroups' ping-pong (egtile.rules.pingpong), forced with ``pingpong.preferred()``:
examples/flash_attention.py at 128x128 blocks with two consumer warpgroups, full and causal, against a float32
reference on fresh random inputs, NaN-poisoned output, every element within the example's bound.

    python3 -m pytest -q -m gpu tests/test_pingpong_gpu.py
"""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile.ir import swalk
from egtile.ir.handshake import NamedSync
from egtile.rules import pingpong

from _check import check, poisoned
import flash_attention as FA

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", [(2, 4, 1024, 128), (1, 2, 512, 64)], ids=["s1024-d128", "s512-d64"])
def test_pingpong_flash_attention_matches_the_reference(shape, causal):
    B, H, S, D = shape
    prim = FA.flashattn.__wrapped__(B, H, S, D, causal, block_M=128, block_N=128, threads=256, num_stages=2)
    k = egtile.compile(prim, target="cuda", rules=pingpong.preferred())
    assert any(isinstance(x, NamedSync) for x in swalk(k.schedule_result.scheduled.body))
    assert "bar.arrive" in k._built.source or "eg_named_barrier_arrive" in k._built.source
    torch.manual_seed(S + causal)
    Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
    for _ in range(2):  # a second launch on the same inputs: the handshake's barriers start fresh per block
        O = poisoned((B, S, H, D), torch.float16, "cuda")  # noqa: E741
        k(Q, K, V, O)
        torch.cuda.synchronize()
        ref, scale = FA.reference(Q, K, V, causal, torch.float32)
        assert check(f"pingpong O {shape} causal={causal}", O, ref, **FA.tolerance(scale, ref, "float16"))
