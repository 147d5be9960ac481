"""GPU tests of FA3's schedule at head dim 128 (egtile.rules.overlap_pingpong: the rotation and the ping-pong
together), forced with ``overlap_pingpong.preferred()``: examples/flash_attention.py with two consumer
warpgroups, full and causal, float16 and bfloat16, against a float32 reference on fresh random inputs,
NaN-poisoned output, every element within the example's bound. The shapes include one key block per query block
(the rotated loop runs zero times: the prologue's turn and the epilogue) and 176-wide key blocks (wgmma N = 176).

    python3 -m pytest -q -m gpu tests/test_overlap_pingpong_gpu.py
"""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile.ir import swalk
from egtile.ir.handshake import NamedSync
from egtile.ir.wgmma import WgmmaWait
from egtile.rules import overlap_pingpong

from _check import check, poisoned
import flash_attention as FA

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape,block_N,dtype", [
    ((2, 4, 1024, 128), 128, "float16"),
    ((1, 2, 512, 64), 128, "bfloat16"),
    ((1, 2, 128, 128), 128, "float16"),  # one key block: the rotated loop runs zero times
    ((1, 2, 704, 128), 176, "float16"),  # 704 = 4 x 176 (and 5.5 x 128: the last query block guarded)
], ids=["s1024-d128", "s512-d64-bf16", "s128-one-block", "s704-d128-n176"])
def test_overlap_pingpong_flash_attention_matches_the_reference(shape, block_N, dtype, causal):
    B, H, S, D = shape
    prim = FA.flashattn.__wrapped__(B, H, S, D, causal, block_M=128, block_N=block_N, threads=256, num_stages=2,
                                    dtype=dtype)
    k = egtile.compile(prim, target="cuda", rules=overlap_pingpong.preferred(), pass_configs=FA.PASS_CONFIGS)
    body = k.schedule_result.scheduled.body
    assert any(isinstance(x, NamedSync) for x in swalk(body))
    assert any(isinstance(x, WgmmaWait) and x.pending == 1 for x in swalk(body))
    td = FA.TORCH_DTYPE[dtype]
    torch.manual_seed(S + causal + D)
    Q, K, V = (torch.randn(B, S, H, D, dtype=td, device="cuda") for _ in range(3))
    ref, scale = FA.reference(Q, K, V, causal, torch.float32)
    for _ in range(2):  # a second launch on the same inputs: the handshake's barriers start fresh per block
        O = poisoned((B, S, H, D), td, "cuda")  # noqa: E741
        k(Q, K, V, O)
        torch.cuda.synchronize()
        assert check(f"overlap-pingpong O {shape} n{block_N} {dtype} causal={causal}", O, ref,
                     **FA.tolerance(scale, ref, dtype))
