"""Math intrinsics of ``egtile.mathfns`` (``T.erf``, ``T.log1p``, ``T.floor``, ``T.ceil``, ``T.round``, ``T.pow``,
``x ** y``, ``T.isnan``, ``T.isinf``): every element on interp and sim against float64 torch, and the same kernels
through NVRTC for target cuda.

The inputs are fresh random values mixed with the special values each function has: NaN and infinities,
``.5`` ties (``T.round`` ties to even), negatives and ``-0.0`` (``T.floor``/``T.ceil``), ``-1`` and below
(``T.log1p``), negative bases and ``pow(nan, 0)`` (``T.pow``). Exact functions (floor, ceil, round, the
predicates, ``x ** 2``) must give the float64 reference rounded to the output dtype, bit for bit (the sign of
a zero included); the others must be within one ulp of it (the CPU targets compute the correctly rounded
value, float16 through float32 as the GPU does).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import DTypeError, MissingConstructError
from egtile.mathfns import MATH

HERE = Path(__file__)
N = 256
UNARY = ("erf", "log1p", "floor", "ceil", "round")
PREDICATES = ("isnan", "isinf")
REF = {"erf": torch.erf, "log1p": torch.log1p, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
       "isnan": torch.isnan, "isinf": torch.isinf}
EXACT = {"floor", "ceil", "round", "isnan", "isinf", "square"}
SPECIAL = [math.nan, math.inf, -math.inf, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, -0.0, -1.0, -1.25, -3.0, 1e-4, -7.5]


def _kernel(dt: str, threads: int = 128):
    """One kernel computing every function of X (and of X, E for pow) into its own output. With 8 threads each
    thread runs 16 iterations, which the simulator runs as numpy batches (egtile.sim.batch); with 128, one each,
    element by element (egtile.sim.compiled)."""

    @T.prim_func
    def main(X: T.Tensor((N,), dt), E: T.Tensor((N,), dt),
             Yerf: T.Tensor((N,), dt), Ylog1p: T.Tensor((N,), dt), Yfloor: T.Tensor((N,), dt),
             Yceil: T.Tensor((N,), dt), Yround: T.Tensor((N,), dt), Ynan: T.Tensor((N,), "bool"),
             Yinf: T.Tensor((N,), "bool"), Ypow: T.Tensor((N,), dt), Ystar: T.Tensor((N,), dt),
             Ysquare: T.Tensor((N,), dt), Yrpow: T.Tensor((N,), dt), Ysel: T.Tensor((N,), dt)):
        with T.Kernel(2, threads=threads) as bx:
            for i in T.Parallel(128):
                x = X[bx * 128 + i]
                Yerf[bx * 128 + i] = T.erf(x)
                Ylog1p[bx * 128 + i] = T.log1p(x)
                Yfloor[bx * 128 + i] = T.floor(x)
                Yceil[bx * 128 + i] = T.ceil(x)
                Yround[bx * 128 + i] = T.round(x)
                Ynan[bx * 128 + i] = T.isnan(x)
                Yinf[bx * 128 + i] = T.isinf(x)
                Ypow[bx * 128 + i] = T.pow(x, E[bx * 128 + i])
                Ystar[bx * 128 + i] = x ** E[bx * 128 + i]
                Ysquare[bx * 128 + i] = x ** 2
                Yrpow[bx * 128 + i] = 2.0 ** E[bx * 128 + i]
                Ysel[bx * 128 + i] = T.if_then_else(T.Or(T.isnan(x), T.isinf(x)), 0.0, x)

    return main


def _inputs(dt: str, seed: int):
    g = torch.Generator().manual_seed(seed)
    tdt = getattr(torch, dt)
    x = torch.randn(N, generator=g, dtype=torch.float64) * 4
    x[: len(SPECIAL)] = torch.tensor(SPECIAL, dtype=torch.float64)
    ties = torch.randint(-20, 20, (32,), generator=g).double() + 0.5  # more .5 ties for T.round
    x[len(SPECIAL): len(SPECIAL) + 32] = ties
    x = x[torch.randperm(N, generator=g)].to(tdt)
    # exponents: random reals, small integers (negative bases stay finite), 0 (pow(nan, 0) is 1)
    e = torch.rand(N, generator=g, dtype=torch.float64) * 6 - 3
    e[::3] = torch.randint(-3, 4, e[::3].shape, generator=g).double()
    e = e.to(tdt)
    return x, e


def _reference(x: torch.Tensor, e: torch.Tensor) -> dict[str, torch.Tensor]:
    x64, e64 = x.double(), e.double()
    ref = {name: REF[name](x64) for name in UNARY + PREDICATES}
    ref["pow"] = torch.pow(x64, e64)
    ref["star"] = ref["pow"]
    ref["square"] = x64 * x64
    ref["rpow"] = torch.pow(torch.full_like(e64, 2.0), e64)
    ref["sel"] = torch.where(torch.isnan(x64) | torch.isinf(x64), torch.zeros_like(x64), x64)
    return ref


def _rounded(ref: torch.Tensor, tdt: torch.dtype) -> torch.Tensor:
    """The float64 reference as the CPU targets round it: to float32, then to the output dtype."""
    return ref.float().to(tdt)


def _check(name: str, got: torch.Tensor, ref: torch.Tensor, x: torch.Tensor) -> None:
    if ref.dtype == torch.bool:
        assert torch.equal(got, ref), (name, x[got != ref])
        return
    want = _rounded(ref, got.dtype)
    assert torch.equal(torch.isnan(got), torch.isnan(want)), (name, x[torch.isnan(got) != torch.isnan(want)])
    ok = ~torch.isnan(want)
    g, w = got[ok], want[ok]
    if name in EXACT:  # bit for bit, the sign of a zero included
        bad = (g.double() != w.double()) | (torch.signbit(g) != torch.signbit(w))
        assert not bad.any(), (name, x[ok][bad], g[bad], w[bad])
        return
    # within one ulp of the output dtype (infinities exactly)
    ulp = torch.finfo(got.dtype).eps * torch.maximum(w.double().abs(), torch.tensor(torch.finfo(got.dtype).tiny))
    inf = torch.isinf(w)
    assert torch.equal(g[inf], w[inf]), (name, x[ok][inf])
    err = (g[~inf].double() - w[~inf].double()).abs()
    assert bool((err <= ulp[~inf]).all()), (name, float(err.max()))


def _run(dt: str, target: str, seed: int):
    threads = 8 if target == "sim-batch" else 128
    target = target.removesuffix("-batch")
    tdt = getattr(torch, dt)
    x, e = _inputs(dt, seed)
    outs = [torch.full((N,), math.nan, dtype=tdt) for _ in range(5)] + [torch.zeros(N, dtype=torch.bool),
                                                                         torch.zeros(N, dtype=torch.bool)]
    outs += [torch.full((N,), math.nan, dtype=tdt) for _ in range(5)]
    egtile.compile(_kernel(dt, threads), target=target)(x, e, *outs)
    return x, e, outs


NAMES = ("erf", "log1p", "floor", "ceil", "round", "isnan", "isinf", "pow", "star", "square", "rpow", "sel")


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("target", ["interp", "sim", "sim-batch"])
def test_every_function_matches_float64_torch(dt, target):
    x, e, outs = _run(dt, target, seed=11 if dt == "float32" else 12)
    ref = _reference(x, e)
    for name, got in zip(NAMES, outs):
        _check(name, got, ref[name], x)


def test_round_ties_to_even_and_floor_ceil_keep_signed_zeros():
    """The cases a ties-away round (roundf) or a sign-dropping floor (float(math.floor(x))) would get wrong."""
    vals = [0.5, 1.5, 2.5, -0.5, -2.5, -0.25, 0.25, -0.0]
    x = torch.tensor(vals + [3.0] * (N - len(vals)), dtype=torch.float32)
    e = torch.ones(N, dtype=torch.float32)
    outs = [torch.full((N,), math.nan) for _ in range(5)] + [torch.zeros(N, dtype=torch.bool),
                                                             torch.zeros(N, dtype=torch.bool)]
    outs += [torch.full((N,), math.nan) for _ in range(5)]
    egtile.compile(_kernel("float32"), target="sim")(x, e, *outs)
    rnd, flo, cei = outs[4][:8].tolist(), outs[2][:8].tolist(), outs[3][:8].tolist()
    assert rnd == [0.0, 2.0, 2.0, -0.0, -2.0, -0.0, 0.0, -0.0]
    assert [math.copysign(1, v) for v in rnd] == [1, 1, 1, -1, -1, -1, 1, -1]
    assert flo == [0.0, 1.0, 2.0, -1.0, -3.0, -1.0, 0.0, -0.0] and math.copysign(1, flo[7]) == -1
    assert cei == [1.0, 2.0, 3.0, -0.0, -2.0, -0.0, 1.0, -0.0]
    assert [math.copysign(1, v) for v in cei] == [1, 1, 1, -1, -1, -1, 1, -1]


@pytest.mark.parametrize("dt", ["float32", "float16", "float64"])
def test_the_kernels_compile_with_nvrtc(dt):
    k = egtile.compile(_kernel(dt), target="cuda")
    src = k._built.source
    assert k._built.cubin
    for fn in ("eg_erf(", "eg_log1p(", "eg_floor(", "eg_ceil(", "eg_round(", "eg_isnan(", "eg_isinf(", "eg_pow("):
        assert fn in src, fn
    # x ** 2 is one multiplication, not a call
    assert src.count("eg_pow(") == 3, src.count("eg_pow(")


def test_the_device_helpers_call_cudas_functions_for_each_precision():
    header = (HERE.parents[1] / "codegen" / "include" / "egtile_common.cuh").read_text()
    for name, f32, f64 in (("erf", "erff", "erf"), ("log1p", "log1pf", "log1p"), ("floor", "floorf", "floor"),
                           ("ceil", "ceilf", "ceil"), ("round", "rintf", "rint")):
        assert f"float eg_{name}(float x) {{ return {f32}(x); }}" in header
        assert f"double eg_{name}(double x) {{ return {f64}(x); }}" in header
    # T.round's default is ties to even; roundf (ties away from zero) only serves rounding_mode="ties-away-from-zero"
    assert "float eg_round_away(float x) { return roundf(x); }" in header
    assert "double eg_round_away(double x) { return round(x); }" in header
    assert header.count("roundf(") == 1


def test_every_declared_function_is_a_dsl_name_and_printed_by_its_name():
    from egtile.ir import BinOp, Const, UnOp
    from egtile.ir.printer import format_expr

    x = Const(1.0, "float32")
    for name, fn in MATH.items():
        e = UnOp(name, x) if fn.arity == 1 else BinOp(name, x, x)
        if fn.spelling:  # printed as the call that records it
            assert format_expr(e) == fn.spelling.format("1.0", "1.0"), format_expr(e)
            continue
        assert callable(getattr(T, name)), name
        assert format_expr(e).startswith(f"T.{name}("), format_expr(e)


def line_of(marker: str) -> int:
    for n, text in enumerate(HERE.read_text().splitlines(), 1):
        if marker in text and "line_of(" not in text:
            return n
    raise AssertionError(marker)


def test_pow_of_integers_is_refused_at_the_users_line():
    with pytest.raises(DTypeError) as e:
        @T.prim_func
        def main(X: T.Tensor((32,), "int32"), Y: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(32):
                    Y[i] = X[i] ** 3  # mark-int-pow
    assert "power only applies to float" in str(e.value) and "int32" in str(e.value)
    assert e.value.loc.line == line_of("# mark-int-pow")


def test_functions_on_python_numbers():
    assert T.isnan(math.nan) is True and T.isinf(-math.inf) is True and T.isnan(1.0) is False


def test_missing_math_names_still_list_what_exists():
    with pytest.raises(MissingConstructError) as e:
        T.acosh  # noqa: B018
    msg = str(e.value)
    for name in ("T.erf", "T.pow", "T.isnan", "T.round", "T.tan", "T.trunc", "T.isfinite", "T.atan2"):
        assert name in msg
