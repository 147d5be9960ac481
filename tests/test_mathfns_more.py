"""The rest of TVM's float math in ``egtile.mathfns`` (``T.trunc``, ``T.nearbyint``, ``T.rint``, ``T.isfinite``,
``T.fmod``, ``T.copysign``, ``T.hypot``, ``T.log10``, ``T.exp10``, ``T.tan``, ``T.atan2``, ``T.sinh``, ``T.cosh``,
``T.asin``, ``T.acos``, ``T.atan``): every element on interp and sim against float64 torch, the same kernels
through NVRTC for target cuda, and (``gpu``) on the GPU within CUDA's ulp bounds.

Inputs are fresh random values mixed with each function's special cases: NaN and both infinities, ``.5`` ties
(the rounding functions), negatives and ``-0.0`` (``trunc`` keeps the sign of a zero, ``copysign`` reads it),
``y = 0`` and ``y = inf`` (``fmod``), both signs of zero on both sides of ``atan2``, values just outside
``[-1, 1]`` (``asin``/``acos``), arguments that overflow float32 (``sinh``, ``cosh``, ``exp10``). Every output is
poisoned with NaN (a predicate's with the wrong answer) before the run. Exact functions must give the float64
reference rounded to the output dtype bit for bit, the sign of a zero included; the others within one ulp of
the output dtype (the CPU targets compute the correctly rounded value; float16/bfloat16 through float32 as the
GPU does).
"""

from __future__ import annotations

import math
import zlib
from pathlib import Path

import pytest
import torch

import egtile
from egtile import language as T
from egtile.mathfns import MATH

HERE = Path(__file__)
N = 256
UNARY = ("trunc", "nearbyint", "rint", "log10", "exp10", "tan", "sinh", "cosh", "asin", "acos", "atan")
BINARY = ("fmod", "copysign", "hypot", "atan2")
NAMES = UNARY + BINARY + ("isfinite",)
EXACT = {"trunc", "nearbyint", "rint", "fmod", "copysign", "isfinite"}
REF = {
    "trunc": torch.trunc, "nearbyint": torch.round, "rint": torch.round, "log10": torch.log10,
    "exp10": lambda x: torch.pow(torch.full_like(x, 10.0), x), "tan": torch.tan, "sinh": torch.sinh,
    "cosh": torch.cosh, "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "fmod": torch.fmod,
    "copysign": torch.copysign, "hypot": torch.hypot, "atan2": torch.atan2, "isfinite": torch.isfinite,
}
SPECIAL_X = [math.nan, math.inf, -math.inf, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, -0.0, -1.0, 1.0, 1.0625, -1.0625,
             100.0, -100.0, 45.0, -7.5, 3.0, 0.0, -0.0, 5.5, -5.5]
SPECIAL_Y = [1.0, 2.0, -1.0, 3.0, -3.0, 0.5, 0.25, 2.0, 2.0, -0.0, 0.0, 0.0, math.inf, -math.inf, math.nan,
             -2.0, 3.0, 7.0, 2.0, -0.0, -1.0, 1.0, 0.0, -math.inf]


def _kernel(dt: str, threads: int = 128):
    """One kernel computing every function of X (and of X, Y for the two-operand ones) into its own output; with
    8 threads the simulator runs each thread's 16 iterations as numpy batches (egtile.sim.batch)."""

    @T.prim_func
    def main(X: T.Tensor((N,), dt), Y: T.Tensor((N,), dt),
             Otrunc: T.Tensor((N,), dt), Onearbyint: T.Tensor((N,), dt), Orint: T.Tensor((N,), dt),
             Olog10: T.Tensor((N,), dt), Oexp10: T.Tensor((N,), dt), Otan: T.Tensor((N,), dt),
             Osinh: T.Tensor((N,), dt), Ocosh: T.Tensor((N,), dt), Oasin: T.Tensor((N,), dt),
             Oacos: T.Tensor((N,), dt), Oatan: T.Tensor((N,), dt), Ofmod: T.Tensor((N,), dt),
             Ocopysign: T.Tensor((N,), dt), Ohypot: T.Tensor((N,), dt), Oatan2: T.Tensor((N,), dt),
             Oisfinite: T.Tensor((N,), "bool")):
        with T.Kernel(2, threads=threads) as bx:
            for i in T.Parallel(128):
                x = X[bx * 128 + i]
                y = Y[bx * 128 + i]
                Otrunc[bx * 128 + i] = T.trunc(x)
                Onearbyint[bx * 128 + i] = T.nearbyint(x)
                Orint[bx * 128 + i] = T.rint(x)
                Olog10[bx * 128 + i] = T.log10(x)
                Oexp10[bx * 128 + i] = T.exp10(x)
                Otan[bx * 128 + i] = T.tan(x)
                Osinh[bx * 128 + i] = T.sinh(x)
                Ocosh[bx * 128 + i] = T.cosh(x)
                Oasin[bx * 128 + i] = T.asin(y)
                Oacos[bx * 128 + i] = T.acos(y)
                Oatan[bx * 128 + i] = T.atan(x)
                Ofmod[bx * 128 + i] = T.fmod(x, y)
                Ocopysign[bx * 128 + i] = T.copysign(x, y)
                Ohypot[bx * 128 + i] = T.hypot(x, y)
                Oatan2[bx * 128 + i] = T.atan2(x, y)
                Oisfinite[bx * 128 + i] = T.isfinite(x)

    return main


def _inputs(dt: str, seed: int):
    g = torch.Generator().manual_seed(seed)
    tdt = getattr(torch, dt)
    x = torch.randn(N, generator=g, dtype=torch.float64) * 4
    y = torch.randn(N, generator=g, dtype=torch.float64) * 3
    k = len(SPECIAL_X)
    x[:k] = torch.tensor(SPECIAL_X, dtype=torch.float64)
    y[:k] = torch.tensor(SPECIAL_Y, dtype=torch.float64)
    x[k: k + 32] = torch.randint(-20, 20, (32,), generator=g).double() + 0.5  # ties for the rounding functions
    y[k + 32: k + 96] = torch.rand(64, generator=g, dtype=torch.float64) * 2.4 - 1.2  # asin/acos, mostly in domain
    y[k + 96: k + 112] = 0.0  # fmod(x, 0), atan2(x, +-0)
    y[k + 104: k + 112] = -0.0
    perm = torch.randperm(N, generator=g)
    return x[perm].to(tdt), y[perm].to(tdt)


def _reference(x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    x64, y64 = x.double(), y.double()
    ref = {name: REF[name](x64) for name in UNARY + ("isfinite",)}
    for name in ("asin", "acos"):
        ref[name] = REF[name](y64)
    for name in BINARY:
        ref[name] = REF[name](x64, y64)
    return ref


def _poisoned(dt: str, ref: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    tdt = getattr(torch, dt)
    return [torch.full((N,), math.nan, dtype=tdt) for _ in NAMES[:-1]] + [~ref["isfinite"]]


def _check(name: str, got: torch.Tensor, ref: torch.Tensor, x: torch.Tensor, ulps: float = 1.0,
           exact: bool | None = None) -> None:
    if ref.dtype == torch.bool:
        assert torch.equal(got, ref), (name, x[got != ref])
        return
    want = ref.float().to(got.dtype) if got.dtype != torch.float64 else ref
    nan_got, nan_want = torch.isnan(got), torch.isnan(want)
    assert torch.equal(nan_got, nan_want), (name, x[nan_got != nan_want], got[nan_got != nan_want])
    ok = ~nan_want
    g, w = got[ok], want[ok]
    if name in EXACT if exact is None else exact:  # bit for bit, the sign of a zero included
        bad = (g.double() != w.double()) | (torch.signbit(g) != torch.signbit(w))
        assert not bad.any(), (name, x[ok][bad], g[bad], w[bad])
        return
    inf = torch.isinf(w)
    assert torch.equal(g[inf], w[inf]), (name, x[ok][inf], g[inf])
    fi = torch.finfo(got.dtype)
    ulp = ulps * fi.eps * torch.maximum(w[~inf].double().abs(), torch.tensor(fi.tiny, dtype=torch.float64))
    err = (g[~inf].double() - w[~inf].double()).abs()
    assert bool((err <= ulp).all()), (name, float(err.max()), x[ok][~inf][err > ulp])


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("target", ["interp", "sim", "sim-batch"])
def test_every_function_matches_float64_torch(dt, target):
    threads = 8 if target == "sim-batch" else 128
    x, y = _inputs(dt, seed=zlib.crc32(f"{dt}/{target}".encode()))
    ref = _reference(x, y)
    outs = _poisoned(dt, ref)
    egtile.compile(_kernel(dt, threads), target=target.removesuffix("-batch"))(x, y, *outs)
    for name, got in zip(NAMES, outs):
        _check(name, got, ref[name], x if name not in ("asin", "acos") else y)


def test_the_cases_a_wrong_rule_would_miss():
    """Ties to even (not away from zero), the sign of a truncated zero, fmod's sign and its NaN case, copysign of a
    signed zero, atan2 on signed zeros: each pinned to its value."""
    xs = [2.5, -2.5, 0.5, -0.5, -0.25, 3.5, -5.5, 5.5, 1.0, -0.0, 0.0, -0.0, -0.0]
    ys = [9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 2.0, -2.0, 0.0, -1.0, -0.0, -0.0, 2.0]
    m = len(xs)
    x = torch.tensor(xs + [1.0] * (N - m))
    y = torch.tensor(ys + [1.0] * (N - m))
    ref = _reference(x, y)
    outs = _poisoned("float32", ref)
    egtile.compile(_kernel("float32"), target="sim")(x, y, *outs)
    got = dict(zip(NAMES, (o[:m].tolist() for o in outs)))
    sign = lambda vs: [int(math.copysign(1, v)) for v in vs]  # noqa: E731
    assert got["nearbyint"][:6] == [2.0, -2.0, 0.0, -0.0, -0.0, 4.0] and sign(got["nearbyint"][3:5]) == [-1, -1]
    assert got["rint"] == got["nearbyint"]
    assert got["trunc"][:5] == [2.0, -2.0, 0.0, -0.0, -0.0] and sign(got["trunc"][3:5]) == [-1, -1]
    assert got["fmod"][6:8] == [-1.5, 1.5] and math.isnan(got["fmod"][8])
    assert sign(got["copysign"][9:13]) == [-1, -1, -1, 1]
    pi32 = float(torch.tensor(math.pi, dtype=torch.float32))
    assert got["atan2"][9:13] == [-pi32, pi32, -pi32, -0.0] and sign(got["atan2"][12:13]) == [-1]


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "float64"])
def test_the_kernels_compile_with_nvrtc(dt):
    k = egtile.compile(_kernel(dt), target="cuda")
    src = k._built.source
    assert k._built.cubin
    for name in NAMES:
        assert f"{MATH[name].cuda}(" in src, name


def test_the_device_helpers_call_cudas_functions_for_each_precision():
    header = (HERE.parents[1] / "codegen" / "include" / "egtile_common.cuh").read_text()
    for name in UNARY:
        assert f"float eg_{name}(float x) {{ return {name}f(x); }}" in header, name
        assert f"double eg_{name}(double x) {{ return {name}(x); }}" in header, name
    for name in BINARY:
        a, b = ("y", "x") if name == "atan2" else ("x", "y")
        assert f"float eg_{name}(float {a}, float {b}) {{ return {name}f({a}, {b}); }}" in header, name
        assert f"double eg_{name}(double {a}, double {b}) {{ return {name}({a}, {b}); }}" in header, name


def test_isfinite_on_python_numbers_and_integers():
    assert T.isfinite(1.0) is True and T.isfinite(math.inf) is False and T.isfinite(math.nan) is False
    assert T.isfinite(3) is True


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "float64"])
def test_every_function_on_the_gpu_is_within_cudas_bounds(dt):
    """On the GPU the exact functions agree bit for bit; the others within CUDA's documented ulp bound of the
    float32 function (one ulp of a float16/bfloat16 result, which the float32 error cannot move further)."""
    x, y = _inputs(dt, seed=77)
    ref = _reference(x, y)
    outs = [o.cuda() for o in _poisoned(dt, ref)]
    egtile.compile(_kernel(dt), target="cuda")(x.cuda(), y.cuda(), *outs)
    torch.cuda.synchronize()
    for name, got in zip(NAMES, outs):
        ulps = 1.0 if dt in ("float16", "bfloat16") else max(1, MATH[name].ulp)
        _check(name, got.cpu(), ref[name], (x if name not in ("asin", "acos") else y), ulps)



# ---- T.round's two rounding modes (TileLang's rounding_mode argument) -------------------------------------------


def _round_kernel(dt: str, threads: int = 128):
    @T.prim_func
    def main(X: T.Tensor((N,), dt), Even: T.Tensor((N,), dt), Away: T.Tensor((N,), dt), Default: T.Tensor((N,), dt)):
        with T.Kernel(2, threads=threads) as bx:
            for i in T.Parallel(128):
                Even[bx * 128 + i] = T.round(X[bx * 128 + i], "ties-to-even")
                Away[bx * 128 + i] = T.round(X[bx * 128 + i], rounding_mode="ties-away-from-zero")
                Default[bx * 128 + i] = T.round(X[bx * 128 + i])

    return main


def _round_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x64 = x.double()
    away = torch.copysign(torch.floor(x64.abs() + 0.5), x64)  # exact: |x| + 0.5 is exact for x of 24 bits or fewer
    return torch.round(x64), away


def _run_round(dt: str, target: str, x: torch.Tensor) -> list[torch.Tensor]:
    outs = [torch.full((N,), math.nan, dtype=x.dtype) for _ in range(3)]
    threads = 8 if target == "sim-batch" else 128
    egtile.compile(_round_kernel(dt, threads), target=target.removesuffix("-batch"))(x, *outs)
    return outs


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("target", ["interp", "sim", "sim-batch"])
def test_round_rounds_ties_to_even_by_default_and_away_from_zero_when_asked(dt, target):
    x, _ = _inputs(dt, seed=zlib.crc32(f"round/{dt}/{target}".encode()))
    even, away = _round_reference(x)
    got_even, got_away, got_default = _run_round(dt, target, x)
    _check("round", got_even, even, x, exact=True)
    _check("round", got_default, even, x, exact=True)
    _check("round_ties_away_from_zero", got_away, away, x, exact=True)
    ties = (x.double() - x.double().trunc()).abs() == 0.5
    assert int(ties.sum()) > 20 and not torch.equal(got_even[ties], got_away[ties])


def test_round_away_from_zero_pinned():
    vals = [0.5, 1.5, 2.5, -0.5, -2.5, -0.25, 0.49999997, -0.0, 8388607.5]
    x = torch.tensor(vals + [1.0] * (N - len(vals)))
    even, away, _ = (o[: len(vals)].tolist() for o in _run_round("float32", "sim", x))
    assert away == [1.0, 2.0, 3.0, -1.0, -3.0, -0.0, 0.0, -0.0, 8388608.0]
    assert [math.copysign(1, v) for v in away[5:8]] == [-1, 1, -1]
    assert even == [0.0, 2.0, 2.0, -0.0, -2.0, -0.0, 0.0, -0.0, 8388608.0]
    # in float64 the largest double below 0.5 plus 0.5 rounds up to 1.0: floor(|x| + 0.5) would give 1.0
    x = torch.tensor([0.49999999999999994, -0.49999999999999994, 4503599627370495.5] + [1.0] * (N - 3),
                     dtype=torch.float64)
    even, away, _ = (o[:3].tolist() for o in _run_round("float64", "interp", x))
    assert away == [0.0, -0.0, 4503599627370496.0] and math.copysign(1, away[1]) == -1
    assert even == [0.0, -0.0, 4503599627370496.0]


def line_of(marker: str) -> int:
    for n, text in enumerate(HERE.read_text().splitlines(), 1):
        if marker in text and "line_of(" not in text:
            return n
    raise AssertionError(marker)


def test_an_unknown_rounding_mode_is_refused_at_the_users_line():
    from egtile.errors import DSLError

    with pytest.raises(DSLError) as e:
        @T.prim_func
        def main(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(32):
                    Y[i] = T.round(X[i], "half-up")  # mark-bad-mode
    assert "'half-up'" in str(e.value) and "ties-away-from-zero" in str(e.value)
    assert e.value.loc.line == line_of("# mark-bad-mode")


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "float64"])
def test_the_round_kernels_compile_with_nvrtc(dt):
    k = egtile.compile(_round_kernel(dt), target="cuda")
    assert k._built.cubin
    src = k._built.source
    assert src.count("eg_round(") == 2 and src.count("eg_round_away(") == 1


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "float64"])
def test_round_modes_on_the_gpu_are_exact(dt):
    x, _ = _inputs(dt, seed=78)
    even, away = _round_reference(x)
    outs = [torch.full((N,), math.nan, dtype=x.dtype, device="cuda") for _ in range(3)]
    egtile.compile(_round_kernel(dt), target="cuda")(x.cuda(), *outs)
    torch.cuda.synchronize()
    _check("round", outs[0].cpu(), even, x, exact=True)
    _check("round_ties_away_from_zero", outs[1].cpu(), away, x, exact=True)
    _check("round", outs[2].cpu(), even, x, exact=True)
