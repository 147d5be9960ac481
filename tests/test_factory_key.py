"""``@egtile.jit`` factory cache keys (issue 9, item 1): arguments that Python calls equal but that trace
different kernels (``2`` / ``2.0`` / ``True``, ``0.0`` / ``-0.0``) never share a compiled kernel."""

from __future__ import annotations

import torch

import egtile
from egtile import language as T


def _div_factory():
    @egtile.jit(out_idx=[1], target="interp")
    def div(d):
        @T.prim_func
        def main(X: T.Tensor((4,), "int32"), Y: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32) as _bx:
                for i in T.Parallel(4):
                    Y[i] = X[i] / d

        return main

    return div


def _fresh(d):
    return _div_factory()(d)


def test_int_then_float_argument_compiles_twice_and_matches_a_fresh_compile():
    div = _div_factory()
    x = torch.tensor([7, 5, 3, 1], dtype=torch.int32)
    as_int = div(2)(x)
    as_float = div(2.0)(x)
    assert torch.equal(as_int, _fresh(2)(x))
    assert torch.equal(as_float, _fresh(2.0)(x))
    assert torch.equal(as_float, torch.tensor([3.5, 2.5, 1.5, 0.5]))  # true division, not integer division
    assert torch.equal(as_int, torch.tensor([3.0, 2.0, 1.0, 0.0]))


def test_bool_int_float_and_signed_zeros_are_distinct_keys():
    calls = []

    @egtile.jit(target="interp")
    def k(v, opts=()):
        calls.append((v, opts))

        @T.prim_func
        def main(Y: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=32) as _bx:
                Y[0] = T.float32(1.0)

        return main

    kernels = [k(1), k(True), k(1.0), k(0.0), k(-0.0), k(1, (2,)), k(1, (2.0,)), k(1, [2]), k(1, {"a": 0.0}),
               k(1, {"a": -0.0})]
    assert len({id(x) for x in kernels}) == len(kernels)
    assert len(calls) == len(kernels)
    # equal and same-typed arguments still hit the cache, containers included
    assert k(1) is kernels[0] and k(-0.0) is kernels[4] and k(1, {"a": -0.0}) is kernels[-1]
    assert len(calls) == len(kernels)


def test_signed_zero_constant_is_not_shared():
    @egtile.jit(out_idx=[1], target="interp")
    def scale(c):
        @T.prim_func
        def main(X: T.Tensor((4,), "float32"), Y: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32) as _bx:
                for i in T.Parallel(4):
                    Y[i] = X[i] * c

        return main

    x = torch.rand(4) + 0.5
    pos, neg = scale(0.0)(x), scale(-0.0)(x)
    assert torch.equal(torch.signbit(pos), torch.zeros(4, dtype=torch.bool))
    assert torch.equal(torch.signbit(neg), torch.ones(4, dtype=torch.bool))
