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


def ring(blocks: int, bug: str):
    M, BM, BK, S, NK = 16 * blocks, 16, 16, 2, 4

    @T.prim_func
    def main(X: T.Tensor((M, NK * BK), "float32"), Y: T.Tensor((M, NK * BK), "float32")):
        with T.Kernel(M // BM, threads=256) as by:
            Xs = T.alloc_shared((S, BM, BK), "float32")
            full = T.alloc_barrier([128] * S)
            empty = T.alloc_barrier([128] * S)
            for k in T.serial(NK):
                with T.ws(1):
                    T.mbarrier_wait_parity(empty[k % S], ((k // S) % 2) ^ 1)
                    T.tma_copy(X[by * BM, k * BK], Xs[k % S, :, :], barrier=full[k % S])
                    T.mbarrier_arrive(full[k % S])
                with T.ws(0):
                    if bug == "parity":
                        T.mbarrier_wait_parity(full[k % S], ((k // S) % 2) ^ T.if_then_else(by == 1, 1, 0))
                    else:
                        T.mbarrier_wait_parity(full[k % S], (k // S) % 2)
                    for i, j in T.Parallel(BM, BK):
                        Y[by * BM + i, k * BK + j] = Xs[k % S, i, j] * 2.0
                    if bug == "arrive":
                        if by != 1:
                            T.mbarrier_arrive(empty[k % S])
                    elif bug == "arrive-far":
                        if by != 500:
                            T.mbarrier_arrive(empty[k % S])
                    else:
                        T.mbarrier_arrive(empty[k % S])

    return main


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
