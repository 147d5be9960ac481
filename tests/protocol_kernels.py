"""Small hand-written warp-specialized kernels, each with at most one planted protocol bug, for the tests of the
protocol reports (tests/test_protocol_reports.py). Lines a test looks up end with a ``# @marker`` comment."""

from __future__ import annotations

import inspect

from egtile import language as T

STEPS, BLOCK = 4, 128


def scale(bug=None, steps=STEPS, block=BLOCK):
    """Producer (warpgroup 1) TMA-loads one row of ``X`` per step into a 2-stage ring; the consumer (warpgroup 0)
    waits, writes ``2 * x`` and releases the stage. ``bug`` plants one protocol bug."""
    S = 2
    full_count = 256 if bug == "count" else 128

    @T.prim_func
    def main(X: T.Tensor((steps, block), "float32"), Y: T.Tensor((steps, block), "float32")):
        with T.Kernel(1, threads=256):
            buf = T.alloc_shared((S, block), "float32")
            full = T.alloc_barrier([full_count] * S)  # @full_alloc
            empty = T.alloc_barrier([128] * S)  # @empty_alloc
            for k in T.serial(steps):
                with T.ws(1):
                    T.mbarrier_wait_parity(empty[k % S], ((k // S) % 2) ^ 1)  # @empty_wait
                    T.tma_copy(X[k, 0], buf[k % S, :], barrier=full[k % S])  # @tma
                    if bug == "expect_tx":
                        T.mbarrier_expect_tx(full[k % S], 4 * block)  # @expect
                    if bug != "no_full_arrive":
                        T.mbarrier_arrive(full[k % S])  # @full_arrive
                with T.ws(0):
                    if bug == "read_before_wait":
                        for i in T.Parallel(block):
                            Y[k, i] = buf[k % S, i] * 2.0  # @early_read
                    T.mbarrier_wait_parity(full[k % S], ((k // S) % 2) ^ (1 if bug == "parity" else 0))  # @full_wait
                    if bug != "read_before_wait":
                        for i in T.Parallel(block):
                            Y[k, i] = buf[k % S, i] * 2.0  # @read
                    if bug == "wrong_slot":
                        T.mbarrier_arrive(empty[(k + 1) % S])  # @wrong_slot_arrive
                    elif bug != "no_empty_arrive":
                        T.mbarrier_arrive(empty[k % S])  # @empty_arrive

    return main


def divergent(steps=STEPS, block=BLOCK):
    """The consumer waits only when ``X[0, 0] > 0`` (a value known at run time): threads may disagree."""

    @T.prim_func
    def main(X: T.Tensor((steps, block), "float32"), Y: T.Tensor((steps, block), "float32")):
        with T.Kernel(1, threads=256):
            buf = T.alloc_shared((block,), "float32")
            full = T.alloc_barrier(128)
            for k in T.serial(1):
                with T.ws(1):
                    T.tma_copy(X[k, 0], buf, barrier=full)
                    T.mbarrier_arrive(full)
                with T.ws(0):
                    if X[0, 0] > 0.0:
                        T.mbarrier_wait_parity(full, 0)  # @div_wait
                    for i in T.Parallel(block):
                        Y[k, i] = buf[i] * 2.0

    return main


def tile_ring(blocks: int = 1, rounds: int = 4, width: int = 16, *, count: str = "static", data_parity=None,
              free_parity=None, release_if=None, signaller: str | None = None):
    """A 2-stage TMA ring over ``rounds`` tiles of 16 x ``width`` per block: warpgroup 1 loads each tile on ``full``
    after its wait for a free slot on ``empty``, warpgroup 0 waits for it, writes ``2 * x`` and releases the slot.

    Args:
        count: ``"static"`` (a constant trip count) or ``"data"`` (read from ``n[0]``, a parameter between X and Y).
        data_parity: ``(k, S, by) -> parity`` of the consumer's wait (default the right ``(k // S) % 2``).
        free_parity: ``(k, S) -> parity`` of the producer's wait for a free slot (default ``((k // S) % 2) ^ 1``).
        release_if: ``(k, by) -> condition`` around the consumer's release (default: always).
        signaller: a third warpgroup that arrives on ``full`` too (``full`` then counts 256): ``"waits"`` for the
            free slot first, ``"free"`` does not.
    """
    S, BM, M = 2, 16, 16 * blocks
    K = rounds * width
    parity = data_parity or (lambda k, s, by: (k // s) % 2)
    free = free_parity or (lambda k, s: ((k // s) % 2) ^ 1)

    def body(X, Y, trips):
        with T.Kernel(blocks, threads=384 if signaller else 256) as by:
            Xs = T.alloc_shared((S, BM, width), "float32")
            full = T.alloc_barrier([256 if signaller else 128] * S)
            empty = T.alloc_barrier([128] * S)
            for k in T.serial(trips):
                with T.ws(1):
                    T.mbarrier_wait_parity(empty[k % S], free(k, S))
                    T.tma_copy(X[by * BM, k * width], Xs[k % S, :, :], barrier=full[k % S])
                    T.mbarrier_arrive(full[k % S])
                if signaller:
                    with T.ws(2):
                        if signaller == "waits":
                            T.mbarrier_wait_parity(empty[k % S], ((k // S) % 2) ^ 1)
                        T.mbarrier_arrive(full[k % S])
                with T.ws(0):
                    T.mbarrier_wait_parity(full[k % S], parity(k, S, by))
                    for i, j in T.Parallel(BM, width):
                        Y[by * BM + i, k * width + j] = Xs[k % S, i, j] * 2.0
                    if release_if is None:
                        T.mbarrier_arrive(empty[k % S])
                    elif release_if(k, by):
                        T.mbarrier_arrive(empty[k % S])

    if count == "data":
        @T.prim_func
        def ring(X: T.Tensor((M, K), "float32"), n: T.Tensor((1,), "int32"), Y: T.Tensor((M, K), "float32")):
            body(X, Y, n[0])
    else:
        @T.prim_func
        def ring(X: T.Tensor((M, K), "float32"), Y: T.Tensor((M, K), "float32")):
            body(X, Y, rounds)
    return ring


def line(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    for i, text in enumerate(lines):
        if text.rstrip().endswith(f"# @{marker}"):
            return start + i
    raise AssertionError(marker)
