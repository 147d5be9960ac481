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
