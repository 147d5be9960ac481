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


@pytest.mark.parametrize("causal, masked", [(False, False), (True, True)], ids=["full", "causal"])
def test_the_rotated_loops_one_trip_loops_keep_the_ranges_that_decide_the_mask(causal, masked):
    # FA3's rotation runs each block's statements in `for k in [k_sw, k_sw + 1)` (egtile.rules.overlap.at): k's range
    # is k_sw's, so the non-causal mask is decided there as in the plain loop (it was a compare and select per
    # element, 98 more SASS instructions per iteration at 128x128), and kept where it depends on the block (causal)
    from egtile.rules import overlap_pingpong

    prim = FA.flashattn.__wrapped__(1, 1, 256, 64, causal, block_M=128, block_N=64, threads=256, num_stages=2)
    r = egtile.optimize(prim.kernel, rules=overlap_pingpong.preferred())
    src = generate(r.scheduled).source
    assert "; k < (k_sw + 1); ++k)" in src  # the rotation's one-trip loops are there
    mask_lines = [ln for ln in src.splitlines() if "0x7f800000" in ln and "?" in ln]
    assert bool(mask_lines) == masked, mask_lines[:2]
