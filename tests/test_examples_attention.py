"""The flash-attention forward (examples/flash_attention.py) in the simulator: small instances of every variant
(causal and not, float16 and bfloat16, block_M equal to and larger than block_N, a sequence the blocks divide
and ones they do not) against float64 torch on fresh random inputs with a NaN-poisoned output; and the
check's sensitivity (a wrong reference must fail).
"""

from __future__ import annotations

import pytest
import torch

import flash_attention as FA

# (B, H, S, D, block_M, block_N, dtype)
VARIANTS = {
    "even-f16": (1, 2, 64, 16, 32, 32, "float16"),
    "ragged-f16": (1, 1, 40, 16, 32, 16, "float16"),
    "ragged-bf16-bm>bn": (1, 1, 50, 16, 32, 16, "bfloat16"),
}


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_flash_attention_in_the_simulator(variant, causal):
    B, H, S, D, bm, bn, dt = VARIANTS[variant]
    torch.manual_seed(hash((variant, causal)) & 0xFFFF)
    assert FA.run_case(B, H, S, D, causal, block_M=bm, block_N=bn, dtype=dt, target="sim")


def test_the_attention_check_can_fail(monkeypatch):
    """Comparing a causal kernel with the non-causal reference fails: the check sees the mask."""
    real = FA.reference
    monkeypatch.setattr(FA, "reference", lambda Q, K, V, causal, dtype=torch.float64: real(Q, K, V, not causal, dtype))
    assert not FA.run_case(1, 1, 40, 16, True, block_M=32, block_N=16, target="sim")
