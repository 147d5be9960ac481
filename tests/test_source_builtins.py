"""Python's ``max`` / ``min`` / ``abs`` in a kernel body (egtile.language.source item 6, egtile.language.pyops.builtin):
on traced operands they are ``T.max`` / ``T.min`` / ``T.abs`` (what TVMScript makes of them), on Python values
Python's own. Before, ``max(X[i], 0.0)`` raised "Python needs the truth value" at the user's line.

Every element is compared with float64 torch (``fmax``/``fmin``: a NaN operand is ignored, as ``T.max``) and,
bit for bit, with the same kernel written with ``T.max`` / ``T.min`` / ``T.abs``; outputs are poisoned with NaN.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import DSLError

HERE = Path(__file__)
N = 256


def _kernel(dt: str, spelled: bool):
    """Y1 = max(x, 0), Y2 = min(x, y, -x), Y3 = abs(x) + max([x, y]), Y4 = X[min(i + 1, 127)] (an integer min in an
    index); written with Python's builtins, or (spelled) with T.max / T.min / T.abs."""
    if spelled:
        return _spelled(dt)

    @T.prim_func
    def builtins_kernel(X: T.Tensor((N,), dt), Yv: T.Tensor((N,), dt), Y1: T.Tensor((N,), dt),
                        Y2: T.Tensor((N,), dt), Y3: T.Tensor((N,), dt), Y4: T.Tensor((N,), dt)):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                x = X[bx * 128 + i]
                y = Yv[bx * 128 + i]
                Y1[bx * 128 + i] = max(x, 0.0)
                Y2[bx * 128 + i] = min(x, y, -x)
                Y3[bx * 128 + i] = abs(x) + max([x, y])
                Y4[bx * 128 + i] = X[bx * 128 + min(i + 1, 127)]

    return builtins_kernel


def _spelled(dt: str):
    @T.prim_func
    def spelled_kernel(X: T.Tensor((N,), dt), Yv: T.Tensor((N,), dt), Y1: T.Tensor((N,), dt),
                       Y2: T.Tensor((N,), dt), Y3: T.Tensor((N,), dt), Y4: T.Tensor((N,), dt)):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                x = X[bx * 128 + i]
                y = Yv[bx * 128 + i]
                Y1[bx * 128 + i] = T.max(x, 0.0)
                Y2[bx * 128 + i] = T.min(T.min(x, y), -x)
                Y3[bx * 128 + i] = T.abs(x) + T.max(x, y)
                Y4[bx * 128 + i] = X[bx * 128 + T.min(i + 1, 127)]

    return spelled_kernel


def _inputs(dt: str, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, generator=g, dtype=torch.float64) * 3
    y = torch.randn(N, generator=g, dtype=torch.float64) * 3
    special = [math.nan, 0.0, -0.0, math.inf, -math.inf, 2.5, -2.5, 1.0]
    x[:8] = torch.tensor(special)
    y[:8] = torch.tensor([1.0, math.nan, 0.0, -math.inf, math.nan, 2.5, -2.5, math.nan])
    perm = torch.randperm(N, generator=g)
    return x[perm].to(getattr(torch, dt)), y[perm].to(getattr(torch, dt))


def _run(kernel, target: str, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    outs = [torch.full((N,), math.nan, dtype=x.dtype) for _ in range(4)]
    egtile.compile(kernel, target=target)(x, y, *outs)
    return outs


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal, NaN where NaN (zeros compared by value: fmax may pick either sign of a zero)."""
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("target", ["interp", "sim"])
def test_builtin_max_min_abs_are_t_max_min_abs(dt, target):
    x, y = _inputs(dt, seed=31 if dt == "float32" else 32)
    got = _run(_kernel(dt, spelled=False), target, x, y)
    spelled = _run(_kernel(dt, spelled=True), target, x, y)
    for g, s in zip(got, spelled):  # bit for bit what the T.* spelling computes
        assert torch.equal(g.view(torch.int16 if dt == "float16" else torch.int32),
                           s.view(torch.int16 if dt == "float16" else torch.int32))
    x64, y64 = x.double(), y.double()
    rnd = lambda t: t.float().to(x.dtype)  # noqa: E731
    assert _same(got[0], rnd(torch.fmax(x64, torch.zeros_like(x64))))
    assert _same(got[1], rnd(torch.fmin(torch.fmin(x64, y64), -x64)))
    assert _same(got[2], rnd(x64.abs() + torch.fmax(x64, y64)))
    idx = torch.arange(N)
    assert _same(got[3], x[(idx // 128) * 128 + torch.clamp(idx % 128 + 1, max=127)])
    assert not torch.isnan(got[0][~torch.isnan(x)]).any()  # NaN is ignored, as T.max does


def test_the_kernel_compiles_with_nvrtc_to_the_same_calls():
    src = egtile.compile(_kernel("float32", spelled=False), target="cuda")._built.source
    assert "eg_max<float>(" in src and "eg_min<float>(" in src and "eg_abs(" in src


def test_on_python_values_they_are_pythons():
    @T.prim_func
    def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8) as bx:
            s = T.alloc_shared((max(4, 8, 2),), "float32")
            for i in T.Parallel(min([8, 16])):
                s[i] = X[i] * abs(-2) + max((), default=1)
            for i in T.Parallel(8):
                Y[i] = s[i]

    x, y = torch.randn(8), torch.full((8,), math.nan)
    egtile.compile(main, target="interp")(x, y)
    assert torch.equal(y, x * 2 + 1)


def test_a_rebound_name_is_called_as_it_is():
    def max(a, b):  # noqa: A001 - the kernel's own max
        return a + b

    @T.prim_func
    def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8) as bx:
            for i in T.Parallel(8):
                Y[i] = max(X[i], 1.0)

    x, y = torch.randn(8), torch.full((8,), math.nan)
    egtile.compile(main, target="interp")(x, y)
    assert torch.equal(y, x + 1)


def line_of(marker: str) -> int:
    for n, text in enumerate(HERE.read_text().splitlines(), 1):
        if marker in text and "line_of(" not in text:
            return n
    raise AssertionError(marker)


def test_a_key_on_traced_values_is_refused_at_the_users_line():
    with pytest.raises(DSLError) as e:
        @T.prim_func
        def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=8) as bx:
                for i in T.Parallel(8):
                    Y[i] = max(X[i], 0.0, key=abs)  # mark-key
    assert "key=" in str(e.value) and "T.max" in str(e.value)
    assert e.value.loc.line == line_of("# mark-key")
