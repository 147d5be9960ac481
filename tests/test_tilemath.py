"""Tests of egtile.tilemath: the gemm/reduce arithmetic shared by the interpreter and the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from egtile.ir import Buffer, Const, Region
from egtile.tilemath import accumulator, fold, matmul, matrix_shape, reduce_accumulator, reduce_along

RNG = np.random.default_rng(7)


def test_accumulators():
    assert accumulator("float16") == np.float32 and accumulator("bfloat16") == np.float32
    assert accumulator("float64") == np.float64 and accumulator("int8") == np.int64
    assert reduce_accumulator("int32", "float32") == np.int64
    assert reduce_accumulator("float16", "float64") == np.float64


@pytest.mark.parametrize("kind", ["sum", "abssum", "max", "absmax", "min"])
@pytest.mark.parametrize("dim", [0, 1])
def test_reduce_and_fold_against_float64(kind, dim):
    x = RNG.standard_normal((5, 7))
    old = RNG.standard_normal(7 if dim == 0 else 5)
    ref = {"sum": np.sum(x, axis=dim), "abssum": np.sum(np.abs(x), axis=dim), "max": np.max(x, axis=dim),
           "absmax": np.max(np.abs(x), axis=dim), "min": np.min(x, axis=dim)}[kind]
    got = reduce_along(kind, x, dim)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    combined = {"sum": old + ref, "abssum": old + ref, "max": np.maximum(old, ref), "absmax": np.maximum(old, ref),
                "min": np.minimum(old, ref)}[kind]
    np.testing.assert_allclose(fold(kind, old, got, np.dtype(np.float64)), combined, rtol=1e-12)
    # one element at a time (the simulator's way) gives the same values
    for e in range(got.size):
        assert fold(kind, old[e], got[e], np.dtype(np.float64)) == combined[e]
    with pytest.raises(TypeError):
        reduce_along("prod", x, dim)


def test_matmul_and_matrix_shape():
    a, b = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 5))
    np.testing.assert_allclose(matmul(a, b), a.astype(np.float64) @ b, rtol=1e-12)
    buf = Buffer("S", (2, 16, 8), "float16", "shared")
    assert matrix_shape(Region(buf, (Const(1), Const(0), Const(0)), (1, 16, 8))) == (16, 8)
    assert matrix_shape(Region(Buffer("T", (16, 8), "float16", "shared"), (Const(0), Const(0)), (16, 8))) == (16, 8)
