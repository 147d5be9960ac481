"""Which blocks the verifier traces (egtile.verifier.block_cases): the first and the last, and every block (or the
blocks next to the conditions' constants) when the synchronization depends on the block index. A middle block's
protocol bug used to pass the verifier, and so the cuda target (a fresh soundness tester's report)."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.lower.protocol import schedule_protocol
from egtile.verifier import block_cases, verify
from protocol_kernels import tile_ring


def ring(blocks: int, bug: str):
    far = {"arrive": 1, "arrive-far": 500}.get(bug)
    return tile_ring(blocks, 4,
                     data_parity=(lambda k, s, by: ((k // s) % 2) ^ T.if_then_else(by == 1, 1, 0)) if bug == "parity"
                     else None,
                     release_if=(lambda k, by: by != far) if far is not None else None)


@pytest.mark.parametrize("bug", ["arrive", "parity"])
def test_a_protocol_bug_of_a_middle_block_is_found(bug):
    sched = schedule_protocol(ring(3, bug).kernel).scheduled
    assert block_cases.blocks(sched) == [(0,), (1,), (2,)]
    found = verify(sched)
    assert found and all(v.block == (1,) for v in found), found


def test_a_large_grid_traces_the_blocks_next_to_the_conditions_constants():
    sched = schedule_protocol(ring(1000, "arrive-far").kernel).scheduled
    picked = block_cases.blocks(sched)
    assert {(0,), (1,), (998,), (999,), (499,), (500,), (501,)} <= set(picked)
    assert len(picked) <= block_cases.MAX_CASES
    assert any(v.block == (500,) for v in verify(sched))


def test_synchronization_that_ignores_the_block_index_traces_the_first_and_the_last_block():
    sched = schedule_protocol(ring(3, "none").kernel).scheduled
    assert block_cases.blocks(sched) == [(0,), (2,)]
    assert not verify(sched)
    x = torch.randn(48, 64)
    y = torch.full_like(x, float("nan"))
    egtile.compile(ring(3, "none"), target="sim")(x, y)
    assert torch.equal(y, 2.0 * x)


@pytest.mark.parametrize("heads", [3, 5])  # 192 blocks (every bx traced) and 320 (bx near the constants)
def test_only_the_grid_dimensions_the_conditions_read_vary(heads):
    # causal attention: the key loop's bound reads bx alone; by and bz stand at their first and last index
    import flash_attention as FA

    grid_x, batch = 32, 2
    sched = egtile.optimize(FA.flashattn.fn(batch, heads, grid_x * 32, 32, True, 32, 32, 2, 128)).scheduled
    picked = block_cases.blocks(sched)
    assert {b[1] for b in picked} == {0, heads - 1} and {b[2] for b in picked} == {0, batch - 1}
    assert {0, 1, 2, grid_x - 2, grid_x - 1} <= {b[0] for b in picked}
    assert len(picked) == len({b[0] for b in picked}) * 4
    assert len(picked) == (grid_x * 4 if grid_x * heads * batch <= block_cases.ALL_BLOCKS else 20)
    full = egtile.optimize(FA.flashattn.fn(batch, heads, grid_x * 32, 32, False, 32, 32, 2, 128)).scheduled
    assert block_cases.blocks(full) == [(0, 0, 0), (grid_x - 1, heads - 1, batch - 1)]
