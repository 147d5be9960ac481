"""The source front end's item 6 (egtile.language.source): a plain Python function of the user's own code that a
kernel calls is rewritten like the kernel, so `acc += x` on a T.alloc_var stores and `v = A[i]` binds the value read
there inside it too. Run as written, a helper's `acc += x` only rebound its local name and the kernel computed Y == X,
silently (a fresh user's report).

Semantic tests: kernels of our own on fresh random inputs, outputs poisoned (NaN), every element against float64."""

from __future__ import annotations

import math

import pytest
import torch

import egtile
from egtile import language as T
from _check import poisoned

M, N = 8, 16


def scan_rows(X, Y):
    """A running sum per row in a T.alloc_var (the helper a kernel author factors out)."""
    for i in T.Parallel(M):
        acc = T.alloc_var("float32", 0.0)
        for j in T.serial(N):
            acc += X[i, j]
            Y[i, j] = acc


def add_then_keep(S, X, Y):
    """A let-binding read after the element it read is overwritten: the value read at the assignment."""
    v = S[0]
    S[0] += 100.0
    Y[0] = v
    Y[1] = S[0] - X[0]


def outer_helper(X, Y):
    scan_rows(X, Y)  # a helper calling a helper is rewritten too


def _kernel(body):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32) as bx:
            body(X, Y)

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("body", [scan_rows, outer_helper], ids=["helper", "nested"])
def test_an_alloc_var_updated_in_a_helper_stores(target, body):
    x = torch.randn(M, N)
    y = poisoned((M, N), torch.float32, "cpu")
    egtile.compile(_kernel(body), target=target)(x, y)
    torch.testing.assert_close(y.double(), x.double().cumsum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_let_binding_in_a_helper_is_the_value_read_there(target):
    @T.prim_func
    def main(X: T.Tensor((4,), "float32"), Y: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            S = T.alloc_shared((1,), "float32")
            S[0] = X[0]
            add_then_keep(S, X, Y)

    x = torch.randn(4)
    y = poisoned((2,), torch.float32, "cpu")
    egtile.compile(main, target=target)(x, y)
    torch.testing.assert_close(y.double(), torch.tensor([x[0].item(), 100.0], dtype=torch.float64),
                               rtol=1e-6, atol=1e-5)


def _evens(n):
    yield from range(0, n, 2)  # a generator runs as written


def test_library_functions_lambdas_and_generators_run_as_written():
    scale = lambda v: v * 2.0  # noqa: E731 - a lambda helper has no source of its own to rewrite

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for j in _evens(N):
                for i in T.Parallel(M):
                    Y[i, j] = scale(X[i, j]) + math.floor(1.5)
            for j in range(1, N, 2):
                for i in T.Parallel(M):
                    Y[i, j] = X[i, j]

    x = torch.randn(M, N)
    y = poisoned((M, N), torch.float32, "cpu")
    egtile.compile(main, target="interp")(x, y)
    ref = x.double().clone()
    ref[:, 0::2] = ref[:, 0::2] * 2.0 + 1.0
    torch.testing.assert_close(y.double(), ref, rtol=1e-6, atol=1e-6)


class _Clamp:
    def __init__(self, floor: float) -> None:
        self.floor = floor

    def apply(self, v):
        r = T.alloc_var("float32")
        r = v
        if r < self.floor:  # a runtime condition in a method: rewritten like a plain helper
            r = self.floor
        return r


def _keeps_name(f):
    import functools

    @functools.wraps(f)
    def wrapper(*a, **kw):
        return f(*a, **kw)

    return wrapper


@_keeps_name
def _absolute(v):
    r = T.alloc_var("float32")
    r = v
    if r < 0.0:
        r = -r
    return r


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_method_and_a_wrapped_helper_are_rewritten_too(target):
    # Both were run as written: their `if` on a runtime value raised (a fresh user's report)
    clamp = _Clamp(-0.5)

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i, j in T.Parallel(M, N):
                Y[i, j] = clamp.apply(X[i, j]) + _absolute(X[i, j])

    x = torch.randn(M, N)
    y = poisoned((M, N), torch.float32, "cpu")
    egtile.compile(main, target=target)(x, y)
    xd = x.double()
    torch.testing.assert_close(y.double(), xd.clamp(min=-0.5) + xd.abs(), rtol=1e-6, atol=1e-6)
