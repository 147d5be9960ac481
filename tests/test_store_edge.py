"""An element store past a global tensor's edge is masked (TileLang's LegalizeSafeMemoryAccess meaning); past the
end of a shared, fragment or local buffer it is still refused (TileLang leaves that undefined)."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ShapeError


@egtile.jit(target="sim")
def tail_rows(M, N, bm):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=64) as bx:
            t = T.alloc_fragment((bm, N), "float32")
            for i, j in T.Parallel(bm, N):
                t[i, j] = T.if_then_else(bx * bm + i < M, A[T.min(bx * bm + i, M - 1), j], 0.0) * 2.0
            for i, j in T.Parallel(bm, N):
                B[bx * bm + i, j] = t[i, j] + 1.0  # the last block's rows past M are dropped

    return main


def test_element_stores_past_a_global_tensors_edge_are_dropped():
    M, N = 100, 32
    A = torch.randn(M, N)
    B = torch.full((M, N), float("nan"))
    tail_rows(M, N, 64)(A, B)
    torch.testing.assert_close(B.double(), A.double() * 2 + 1, rtol=1e-6, atol=1e-6)


def test_element_stores_at_a_start_read_from_data_are_dropped_past_the_edge():
    """TileLang's pool MQA: ``Y[start + i] = ...`` with ``start`` read from a tensor; TileLang's analyzer cannot
    prove it inside, so the store is guarded (the elements past either end are not written)."""

    @T.prim_func
    def main(S: T.Tensor((3,), "int32"), X: T.Tensor((3, 32), "float32"), Y: T.Tensor((3, 40), "float32")):
        with T.Kernel(3, threads=32) as bx:
            start = S[bx]
            for i in T.Parallel(32):
                if i % 2 == 0 or i > 0:
                    Y[bx, start + i] = X[bx, i] + 1.0

    starts = torch.tensor([0, 20, -5], dtype=torch.int32)
    X = torch.randn(3, 32)
    for target in ("interp", "sim"):
        Y = torch.full((3, 40), float("nan"))
        egtile.compile(main, target=target)(starts, X, Y)
        ref = torch.full((3, 40), float("nan"), dtype=torch.float64)
        for b, s in enumerate(starts.tolist()):
            for i in range(32):
                if 0 <= s + i < 40:
                    ref[b, s + i] = X[b, i].double() + 1
        torch.testing.assert_close(Y.double(), ref, rtol=1e-6, atol=1e-6, equal_nan=True)


def test_a_store_past_a_fragments_end_is_still_refused():
    with pytest.raises(ShapeError, match="dimension 0 is accessed at `i`, i.e. indices 0..63; expected 0..1"):
        @T.prim_func
        def main(A: T.Tensor((2,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                f = T.alloc_fragment((2,), "float32")
                for i in T.Parallel(64):
                    f[i] = A[0]
                for i in T.Parallel(64):
                    B[i] = f[0]
