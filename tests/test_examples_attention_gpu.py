"""GPU tests of the flash-attention forward (examples/flash_attention.py) against a float32 torch reference on
fresh random inputs with a NaN-poisoned output: head dim 64 and 128, float16 and bfloat16, causal and not,
sequence lengths the blocks divide and ones they do not (the example's clamped loads, masks and guarded
stores), several block shapes.

    python3 -m pytest -q -m gpu tests/test_examples_attention_gpu.py
"""

from __future__ import annotations

import pytest
import torch

import flash_attention as FA

pytestmark = pytest.mark.gpu

# (B, H, S, D, block_M, block_N, dtype)
VARIANTS = {
    "d64-f16": (2, 4, 512, 64, 64, 64, "float16"),
    "d128-bf16": (1, 4, 512, 128, 64, 64, "bfloat16"),
    "d128-f16-128x64": (1, 2, 768, 128, 128, 64, "float16"),
    "ragged-1000-d128": (1, 2, 1000, 128, 64, 64, "float16"),
    "ragged-333-d64-bf16": (2, 2, 333, 64, 64, 32, "bfloat16"),
    "ragged-200-d64-128x64": (1, 3, 200, 64, 128, 64, "float16"),
}


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_flash_attention_matches_torch(variant, causal):
    B, H, S, D, bm, bn, dt = VARIANTS[variant]
    assert FA.run_case(B, H, S, D, causal, block_M=bm, block_N=bn, dtype=dt, target="cuda",
                       ref_dtype=torch.float32)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_the_per_shape_table_config_at_head_dim_64_matches_torch(dt, causal):
    # CONFIGS' 192-row blocks on three consumer warpgroups (384 threads): 1024 % 192 != 0, so the Q load and the O
    # store are guarded while K and V stay on TMA
    bm, bn, nt, ns = FA.config_for(4096, 64, causal)
    assert FA.run_case(2, 2, 1024, 64, causal, block_M=bm, block_N=bn, threads=nt, num_stages=ns, dtype=dt,
                       target="cuda", ref_dtype=torch.float32)
