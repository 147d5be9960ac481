"""GPU tests of the intra-warpgroup overlap (egtile.rules.overlap), forced with ``overlap.preferred()``:
examples/flash_attention.py, full and causal, float16 and bfloat16, against a float32 reference on fresh random
inputs, NaN-poisoned output, every element within the example's bound. The shapes include one key block per
query block (the rotated loop runs zero times: prologue and epilogue only) and the causal diagonal (one block for
the first query block, many for the last).

    python3 -m pytest -q -m gpu tests/test_overlap_gpu.py
"""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile.ir import swalk
from egtile.ir.wgmma import WgmmaWait
from egtile.rules import overlap

from _check import check, poisoned
import flash_attention as FA

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape,blocks,threads,dtype", [
    ((2, 4, 1024, 128), (128, 128), 256, "float16"),
    ((1, 2, 512, 64), (128, 128), 256, "bfloat16"),
    ((1, 2, 128, 128), (128, 128), 256, "float16"),  # one key block: the rotated loop runs zero times
    ((1, 2, 512, 64), (64, 64), 128, "float16"),  # one consumer warpgroup
], ids=["s1024-d128", "s512-d64-bf16", "s128-one-block", "s512-d64-64x64"])
def test_overlap_flash_attention_matches_the_reference(shape, blocks, threads, dtype, causal):
    B, H, S, D = shape
    prim = FA.flashattn.__wrapped__(B, H, S, D, causal, block_M=blocks[0], block_N=blocks[1], threads=threads,
                                    num_stages=2, dtype=dtype)
    k = egtile.compile(prim, target="cuda", rules=overlap.preferred())
    assert any(isinstance(x, WgmmaWait) and x.pending == 1 for x in swalk(k.schedule_result.scheduled.body))
    td = FA.TORCH_DTYPE[dtype]
    torch.manual_seed(S + causal + D)
    Q, K, V = (torch.randn(B, S, H, D, dtype=td, device="cuda") for _ in range(3))
    ref, scale = FA.reference(Q, K, V, causal, torch.float32)
    for _ in range(2):
        O = poisoned((B, S, H, D), td, "cuda")  # noqa: E741
        k(Q, K, V, O)
        torch.cuda.synchronize()
        assert check(f"overlap O {shape} {dtype} causal={causal}", O, ref, **FA.tolerance(scale, ref, dtype))
