"""T.cumsum: TileLang's inclusive prefix sum along one dimension, in place or into another buffer, forward or
reversed, on shared and fragment buffers; every element against torch's float64 cumsum."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ShapeError


def scan(rows: int, cols: int, dim: int, reverse: bool, scope: str, into_other: bool):
    alloc = T.alloc_shared if scope == "shared" else T.alloc_fragment

    @T.prim_func
    def main(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            a = alloc((rows, cols), "float32")
            b = alloc((rows, cols), "float32")
            T.copy(X, a)
            if into_other:
                T.cumsum(a, b, dim=dim, reverse=reverse)
                T.copy(b, Y)
            else:
                T.cumsum(a, dim=dim, reverse=reverse)
                T.copy(a, Y)

    return main


@pytest.mark.parametrize("dim, reverse, scope, into_other", [
    (1, False, "shared", False), (1, True, "shared", True), (0, False, "fragment", True), (-1, True, "fragment", False),
])
def test_cumsum_matches_torch(dim, reverse, scope, into_other):
    rows, cols = 4, 16
    x = torch.randn(rows, cols)
    y = torch.full((rows, cols), float("nan"))
    egtile.compile(scan(rows, cols, dim, reverse, scope, into_other), target="sim")(x, y)
    ref = x.double().flip(dim).cumsum(dim).flip(dim) if reverse else x.double().cumsum(dim)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-5)


def test_cumsum_checks_shapes_and_dim():
    with pytest.raises(ShapeError, match="dim must be an int"):
        scan(4, 16, 2, False, "shared", False)

    with pytest.raises(ShapeError, match="must have src"):
        @T.prim_func
        def main(X: T.Tensor((4, 16), "float32")):
            with T.Kernel(1, threads=128) as _bx:
                a = T.alloc_shared((4, 16), "float32")
                b = T.alloc_shared((4, 8), "float32")
                T.copy(X, a)
                T.cumsum(a, b, dim=1)
