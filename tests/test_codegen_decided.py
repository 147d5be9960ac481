"""The backend emits only the branch of a ``T.if_then_else`` that the enclosing loops' bounds leave
(egtile.analysis.decide): TileLang's non-causal flash-attention mask vanishes when the blocks divide the
sequence, and stays where they do not or where it depends on the block (causal)."""

from __future__ import annotations

import pytest

import egtile
from egtile.codegen.emit import generate

import flash_attention as FA



def _source(seq_len: int, causal: bool) -> str:
    prim = FA.flashattn.__wrapped__(1, 1, seq_len, 64, causal, block_M=64, block_N=64, threads=128, num_stages=2)
    return generate(egtile.optimize(prim.kernel).scheduled).source


@pytest.mark.parametrize("seq_len, causal, masked", [(256, False, False), (200, False, True), (256, True, True)],
                         ids=["dividing", "ragged", "causal"])
def test_mask_is_emitted_only_where_it_can_change_a_score(seq_len, causal, masked):
    src = _source(seq_len, causal)
    mask_lines = [ln for ln in src.splitlines() if "0x7f800000" in ln and "?" in ln]
    assert bool(mask_lines) == masked, seq_len
    if causal:  # the ragged-end test inside the causal mask is decided (the loop stops at the sequence's end)
        assert all("< 256)" not in ln for ln in mask_lines), mask_lines[0]
