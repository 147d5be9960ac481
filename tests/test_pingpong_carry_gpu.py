"""GPU tests of the ping-pong whose turn holds no wait (egtile.rules.pingpong_carry: P V of block j completes at the
wait after Q K^T of block j+1), forced with ``pingpong_carry.preferred()``: examples/flash_attention.py with two
consumer warpgroups, float16 and bfloat16, head dim 64 and 128, against a float32 reference on fresh random inputs,
NaN-poisoned output, every element within the example's bound. One key block per query block runs the loop once (the
carried wait is the one after the loop); the causal mask refuses the carry (carry-head-selects-decided), so only
non-causal kernels carry.

    python3 -m pytest -q -m gpu tests/test_pingpong_carry_gpu.py
"""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile.ir import SIf, swalk
from egtile.rules import pingpong_carry

from _check import check, poisoned
import flash_attention as FA

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("shape,dtype", [
    ((2, 4, 1024, 128), "float16"),
    ((1, 2, 512, 64), "bfloat16"),
    ((1, 2, 128, 128), "float16"),  # one key block: the loop runs once, P V completes after it
], ids=["s1024-d128", "s512-d64-bf16", "s128-one-block"])
def test_carried_wait_flash_attention_matches_the_reference(shape, dtype):
    B, H, S, D = shape
    prim = FA.flashattn.__wrapped__(B, H, S, D, False, block_M=128, block_N=128, threads=256, num_stages=2,
                                    dtype=dtype)
    k = egtile.compile(prim, target="cuda", rules=pingpong_carry.preferred(), pass_configs=FA.PASS_CONFIGS)
    assert any(isinstance(x, SIf) and not x.versioned for x in swalk(k.schedule_result.scheduled.body))  # carried
    td = FA.TORCH_DTYPE[dtype]
    torch.manual_seed(S + D)
    Q, K, V = (torch.randn(B, S, H, D, dtype=td, device="cuda") for _ in range(3))
    ref, scale = FA.reference(Q, K, V, False, torch.float32)
    for _ in range(2):
        O = poisoned((B, S, H, D), td, "cuda")  # noqa: E741
        k(Q, K, V, O)
        torch.cuda.synchronize()
        assert check(f"pingpong-carry O {shape} {dtype}", O, ref, **FA.tolerance(scale, ref, dtype))
