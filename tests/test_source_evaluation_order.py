"""The source front end evaluates what Python evaluates, when Python evaluates it (egtile.language.source,
pyops.freeze_all): an unpacking reads every element before writing any target, a walrus binds the value read there,
a tuple or list display and a `for` over one read their elements where they stand, a helper's arguments are read at
the call, and `a or b` / `a and b` on numbers return an operand. Each form computed another value silently before
(a fresh user's report).

Semantic tests: kernels of our own on fresh random inputs, outputs poisoned (NaN), every element against float64."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from _check import poisoned

N = 32


def _run(main, target, *inputs):
    y = poisoned((N,), torch.float32, "cpu")
    egtile.compile(main, target=target)(*inputs, y)
    return y.double()


def _overwrite(p, i):
    p[0] = 100.0
    return i


def _kernel(form: str):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            tx = T.get_thread_binding()
            p = T.alloc_local((2,), "float32")
            p[0] = X[tx]
            p[1] = X[tx] * 10.0
            if form == "swap-vars":
                a = T.alloc_var("float32")
                b = T.alloc_var("float32")
                a = p[0]
                b = p[1]
                a, b = b, a
                Y[tx] = b
            elif form == "swap-elements":
                p[0], p[1] = p[1], p[0]
                Y[tx] = p[1]
            elif form == "fibonacci":
                a = T.alloc_var("float32")
                b = T.alloc_var("float32")
                a = 0.0
                b = p[0]
                for _ in range(4):
                    a, b = b, a + b
                Y[tx] = b  # 5 * x after 4 steps from (0, x)
            elif form == "walrus":
                w = (v := p[0]) + 0.0
                p[0] = 5.0
                Y[tx] = v + w
            elif form == "display":
                vals = [p[0], p[1]]
                p[0] = 50.0
                p[1] = 70.0
                Y[tx] = vals[0] + vals[1]
            elif form == "for-display":
                s = T.alloc_var("float32")
                s = 0.0
                for v in (p[0], p[1]):
                    p[0] = 50.0
                    s += v
                Y[tx] = s
            elif form == "helper-argument":
                Y[tx] = _overwrite(p, p[0])
            elif form == "or":
                Y[tx] = T.if_then_else(tx % 2 == 0, 0.0, p[0]) or 5.0
            elif form == "and":
                Y[tx] = p[0] and 3.0

    return main


def _reference(form: str, x: torch.Tensor) -> torch.Tensor:
    x = x.double()
    even = torch.arange(N) % 2 == 0
    return {"swap-vars": x, "swap-elements": x, "fibonacci": 5.0 * x, "walrus": 2.0 * x, "display": 11.0 * x,
            "for-display": 11.0 * x, "helper-argument": x, "or": torch.where(even, torch.full_like(x, 5.0), x),
            "and": torch.where(x != 0, torch.full_like(x, 3.0), x)}[form]


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("form", ["swap-vars", "swap-elements", "fibonacci", "walrus", "display", "for-display",
                                  "helper-argument", "or", "and"])
def test_python_evaluates_it_where_it_stands(form, target):
    x = torch.randn(N)
    torch.testing.assert_close(_run(_kernel(form), target, x), _reference(form, x), rtol=1e-6, atol=1e-6)
