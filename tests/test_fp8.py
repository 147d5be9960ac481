"""The 8-bit float storage types ``float8_e4m3fn`` and ``float8_e5m2``: conversions (round to nearest even,
saturating as CUDA's ``__NV_SATFINITE``), kernels that store, convert and multiply them in the interpreter,
the simulator and (NVRTC on the CPU; ``gpu``-marked on the H200) the CUDA backend, against torch.

    python3 -m pytest -q tests/test_fp8.py            # CPU
    python3 -m pytest -q -m gpu tests/test_fp8.py     # the H200
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import DTypeError
from egtile.evaluate import FP8_FORMATS, cast_array, round_to
from egtile.ir import swalk

from _check import check, poisoned

FORMATS = ("float8_e4m3fn", "float8_e5m2")
TOP = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}


def _reference(name: str, x: np.ndarray) -> np.ndarray:
    """Saturating conversion through torch's CPU float8 conversion (round to nearest even; torch itself
    gives NaN (e4m3) or infinity (e5m2) beyond the range, CUDA's satfinite the largest finite value)."""
    top = TOP[name]
    clipped = np.where(np.isnan(x), x, np.clip(x, -top, top)).astype(np.float32)
    return torch.from_numpy(clipped).to(getattr(torch, name)).float().numpy()


def _grid(name: str) -> np.ndarray:
    """Every finite value of the format (all 256 codes through torch, NaN codes dropped)."""
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(getattr(torch, name)).float().numpy()
    return np.unique(codes[np.isfinite(codes)])


def _hard_values(name: str, rng: np.random.Generator) -> np.ndarray:
    """Random values over the whole range (subnormals to far beyond the largest value), every tie between
    two neighbouring values of the format, their neighbours one float32 ulp away, infinities, NaN, zeros."""
    top = TOP[name]
    spread = [rng.standard_normal(4000) * s for s in (2.0 ** -18, 2.0 ** -10, 2.0 ** -5, 1.0, 30.0, top / 4, top,
                                                        4 * top)]
    g = _grid(name)
    mids = ((g[1:] + g[:-1]) / 2).astype(np.float32)
    near = np.concatenate([np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))])
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, top, -top, top * 1.03, top * 1.07, 1e30, -1e30],
                       dtype=np.float32)
    x = np.concatenate(spread + [mids, near, special]).astype(np.float32)
    return rng.permutation(x)


@pytest.mark.parametrize("name", FORMATS)
def test_conversion_is_bit_exact_against_torch_with_saturation(name):
    x = _hard_values(name, np.random.default_rng(hash(name) % 2 ** 32))
    got = cast_array(name, x)
    ref = _reference(name, x)
    assert got.dtype == np.float32
    assert np.array_equal(np.isnan(got), np.isnan(x))
    fin = ~np.isnan(x)
    assert np.array_equal(got[fin].view(np.uint32), ref[fin].view(np.uint32))  # signed zeros included
    # saturation: beyond the largest finite value, infinities too, gives it with the sign kept
    big = fin & (np.abs(x) > TOP[name])
    assert big.any() and np.array_equal(got[big], np.copysign(TOP[name], x[big]).astype(np.float32))
    # the scalar path (one element at a time, interpreter and simulator stores) agrees with the array path
    for v in x[:: max(1, len(x) // 3000)]:
        r = round_to(name, float(v))
        a = float(cast_array(name, np.array([v], dtype=np.float32))[0])
        assert (math.isnan(r) and math.isnan(a)) or (r == a and math.copysign(1, r) == math.copysign(1, a))


@pytest.mark.parametrize("name", FORMATS)
def test_every_value_of_the_format_converts_to_itself(name):
    g = _grid(name).astype(np.float32)
    assert len(g) == (253 if name == "float8_e4m3fn" else 247)  # 256 codes less NaN (2 / 6), inf (0 / 2), -0
    assert np.array_equal(cast_array(name, g), g)
    assert float(g.max()) == FP8_FORMATS[name][2]


def test_from_float64_and_integers_goes_through_float32():
    # a float64 just above a tie of e4m3 (between 1.0 and 1.125) rounds to float32 at the tie first: nearest even
    x = 1.0625 + 2.0 ** -40
    assert float(np.float32(x)) == 1.0625
    assert round_to("float8_e4m3fn", x) == 1.0
    assert float(cast_array("float8_e4m3fn", np.array([x]))[0]) == 1.0
    assert round_to("float8_e5m2", 70000) == 57344.0 and round_to("float8_e4m3fn", -3) == -3.0


def test_names_and_aliases():
    assert T.float8_e4m3fn == "float8_e4m3fn" and T.float8_e4m3 == "float8_e4m3fn" and T.float8_e5m2 == "float8_e5m2"
    assert T.dtype("float8_e4m3") == "float8_e4m3fn" and T.dtype("e5m2") == "float8_e5m2"
    assert T.float8_e4m3fn.as_torch() is torch.float8_e4m3fn and T.float8_e5m2.bits == 8
    from egtile.language.fp8 import determine_fp8_type, determine_torch_fp8_type

    assert determine_fp8_type() == "float8_e4m3fn" and determine_fp8_type("e5m2") == "float8_e5m2"
    assert determine_torch_fp8_type("e5m2") is torch.float8_e5m2
    with pytest.raises(DTypeError, match="e4m3"):
        determine_fp8_type("e3m4")
    # formats egtile does not have still name themselves
    with pytest.raises(egtile.errors.EgtileError, match="float8_e4m3fnuz"):
        T.float8_e4m3fnuz  # noqa: B018


# ----------------------------------------------------------------------------------------------------
# kernels


def quant_kernel(M: int, N: int, fmt: str, bm: int = 8):
    """Per-row scaled quantization (TileLang's per-token cast): Y = fp8(clamp(X / s)), s = amax / top, with a
    T.copy conversion to fp8, a T.cast in a T.Parallel, and the fp8 value read back and widened."""
    top = TOP[fmt]

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), fmt), S: T.Tensor((M,), "float32"),
             Raw: T.Tensor((M, N), fmt), Back: T.Tensor((M, N), "float16")):
        with T.Kernel(M // bm, threads=128) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            amax = T.alloc_fragment((bm,), "float32")
            s = T.alloc_fragment((bm,), "float32")
            q = T.alloc_fragment((bm, N), "float32")
            q8 = T.alloc_fragment((bm, N), fmt)
            T.copy(X[bx * bm, 0], x)
            T.reduce_absmax(x, amax, dim=1)
            for i in T.Parallel(bm):
                s[i] = T.max(amax[i], 1e-4) / top
            for i, j in T.Parallel(bm, N):
                q[i, j] = T.clamp(x[i, j] / s[i], -top, top)
            T.copy(q, q8)
            T.copy(q8, Y[bx * bm, 0])
            for i in T.Parallel(bm):
                S[bx * bm + i] = s[i]
            for i, j in T.Parallel(bm, N):
                Raw[bx * bm + i, j] = T.cast(x[i, j] * 64.0, fmt)  # saturates beyond the range
                Back[bx * bm + i, j] = T.cast(Y[bx * bm + i, j], "float16") * 2.0

    return main


def gemm_kernel(M: int, N: int, K: int, fmt: str, bm: int = 64, bn: int = 64, bk: int = 32):
    """C = A @ B^T on fp8 operands (B given N x K, as TileLang's fp8 GEMM example), float32 accumulator."""

    @T.prim_func
    def main(A: T.Tensor((M, K), fmt), B: T.Tensor((N, K), fmt), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), fmt)
            B_s = T.alloc_shared((bn, bk), fmt)
            C_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=True)
            T.copy(C_f, C[by * bm, bx * bn])

    return main


def _quant_inputs(M, N, device, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(M, N, generator=g) * torch.rand(M, 1, generator=g) * 100
    X[0, 0], X[1, 3] = 1e6, -1e6  # Raw = X * 64 saturates
    return X.to(device)


def _quant_reference(X, fmt):
    top = TOP[fmt]
    Xc = X.cpu()
    s = Xc.abs().amax(dim=1).clamp(min=1e-4) / top
    q = (Xc / s[:, None]).clamp(-top, top)
    Y = torch.from_numpy(_reference(fmt, q.numpy()))
    Raw = torch.from_numpy(_reference(fmt, (Xc * 64.0).numpy()))
    Back = (Y.half() * 2.0).float()
    return Y, s, Raw, Back


def _run_quant(target, fmt, M=16, N=64, device="cpu", seed=0):
    k = egtile.compile(quant_kernel(M, N, fmt), target=target)
    dt = getattr(torch, fmt)
    for rep in range(2):
        X = _quant_inputs(M, N, device, seed + rep)
        Y = poisoned((M, N), torch.float32, device).to(dt)
        Raw = poisoned((M, N), torch.float32, device).to(dt)
        S = poisoned((M,), torch.float32, device)
        Back = poisoned((M, N), torch.float16, device)
        k(X, Y, S, Raw, Back)
        rY, rS, rRaw, rBack = _quant_reference(X, fmt)
        # the division by the float32 scale is the same float32 operation; every output bit for bit
        assert torch.equal(Y.cpu().float(), rY), (target, fmt)
        assert torch.equal(Raw.cpu().float(), rRaw), (target, fmt)
        assert torch.equal(S.cpu(), rS) and torch.equal(Back.cpu().float(), rBack), (target, fmt)


def _fp8_operands(M, N, K, fmt, device, seed):
    g = torch.Generator().manual_seed(seed)
    scale = 8.0 if fmt == "float8_e4m3fn" else 64.0
    A = (torch.randn(M, K, generator=g) * scale).to(getattr(torch, fmt))
    B = (torch.randn(N, K, generator=g) * scale).to(getattr(torch, fmt))
    return A.to(device), B.to(device)


def _run_gemm(target, fmt, M=64, N=64, K=64, device="cpu", seed=0):
    k = egtile.compile(gemm_kernel(M, N, K, fmt), target=target)
    if target != "interp":  # scheduled: wgmma's FP8 form, not the SIMT gemm (which would pass the same checks)
        assert "WgmmaMma" in {type(x).__name__ for x in swalk(k.scheduled.body)}
    for rep in range(2):
        A, B = _fp8_operands(M, N, K, fmt, device, seed + rep)
        C = poisoned((M, N), torch.float32, device)
        k(A, B, C)
        ref = A.cpu().double() @ B.cpu().double().T
        # float32 accumulation of exact products: |error| <= K * 2^-24 * sum |a b| (interp, sim); the GPU's FP8
        # tensor core (wgmma's .e4m3/.e5m2 form) keeps about 13 bits after the point in its running sum
        # (egtile.rules.mma): 2^-12 per addition
        ulp = 2.0 ** -12 if device == "cuda" else 2.0 ** -24
        bound = (A.cpu().double().abs() @ B.cpu().double().abs().T) * K * ulp
        assert check(f"fp8 gemm {fmt} {target}", C, ref, rtol=0.0, atol=bound + 1e-30)
    return k


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("target", ["interp", "sim"])
def test_quantization_kernel_matches_torch(target, fmt):
    _run_quant(target, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("target", ["interp", "sim"])
def test_gemm_on_fp8_operands_matches_torch(target, fmt):
    _run_gemm(target, fmt)


def test_a_quantization_check_can_fail(monkeypatch):
    import egtile.evaluate as E

    real = E.round_fp8
    monkeypatch.setattr(E, "round_fp8", lambda name, x: np.minimum(real(name, x), 100.0))  # a wrong saturation
    with pytest.raises(AssertionError):
        _run_quant("interp", "float8_e4m3fn")


@pytest.mark.parametrize("fmt", FORMATS)
def test_fp8_kernels_compile_with_nvrtc(fmt):
    from egtile.codegen import generate

    pytest.importorskip("cuda.bindings")
    from egtile.codegen import nvrtc

    for pf in (quant_kernel(16, 64, fmt), gemm_kernel(64, 64, 64, fmt)):
        low = generate(egtile.optimize(pf).scheduled)
        ctype = "__nv_fp8_e4m3" if fmt == "float8_e4m3fn" else "__nv_fp8_e5m2"
        assert ctype in low.source and '#include "egtile_fp8.cuh"' in low.source
        try:
            nvrtc.compile_cuda(low.source, f"{low.symbol}.cu")
        except ImportError:
            pytest.skip("NVRTC is not installed")


def test_only_fp8_kernels_include_cuda_fp8():
    from egtile.codegen import generate

    @T.prim_func
    def plain(X: T.Tensor((128,), "float16"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                Y[i] = T.cast(X[i], "float32")

    src = generate(egtile.optimize(plain).scheduled).source
    assert "egtile_fp8.cuh" not in src and "__nv_fp8" not in src


def test_fp8_gemm_issues_the_fp8_wgmma_form_never_an_f16_one():
    """T.gemm on fp8 operands (B given N x K, transpose_B=True) is wgmma's .m64nNk32 .e4m3/.e5m2 form
    (egtile.rules.mma; tests/test_rules_mma_fp8.py), never an f16 instruction on fp8 bytes."""
    from egtile.codegen import generate

    src = generate(egtile.optimize(gemm_kernel(64, 64, 64, "float8_e4m3fn")).scheduled).source
    body = src[src.index("T.gemm"):]
    assert "eg_wgmma_ss_f8<64, EG_WGMMA_E4M3, EG_WGMMA_E4M3>" in body
    assert "eg_wgmma_ss<" not in body and "mma.sync" not in body


# ----------------------------------------------------------------------------------------------------
# the H200


def conversion_kernel(rows: int, fmt: str):
    @T.prim_func
    def conv(X: T.Tensor((rows, 128), "float32"), Y: T.Tensor((rows, 128), fmt)):
        with T.Kernel(rows, threads=128) as bx:
            for j in T.Parallel(128):
                Y[bx, j] = T.cast(X[bx, j], fmt)

    return conv


def _run_conversion(target, fmt, device, n=None):
    x = _hard_values(fmt, np.random.default_rng(7))
    if n is not None:  # the special values and a random sample of the rest (the simulator runs every thread)
        special = ~np.isfinite(x) | (np.abs(x) >= TOP[fmt]) | (x == 0)
        x = np.concatenate([x[special], x[~special][: n - int(special.sum())]])
    x = x[: (len(x) // 128) * 128].reshape(-1, 128)
    k = egtile.compile(conversion_kernel(x.shape[0], fmt), target=target)
    Y = poisoned(x.shape, torch.float32, device).to(getattr(torch, fmt))
    k(torch.from_numpy(x).to(device), Y)
    got = Y.cpu().float().numpy()
    want = cast_array(fmt, x)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    fin = ~np.isnan(want)
    assert np.array_equal(got[fin].view(np.uint32), want[fin].view(np.uint32))


def test_conversion_kernel_in_the_simulator():
    _run_conversion("sim", "float8_e5m2", "cpu", n=1024)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
def test_fp8_conversion_on_the_gpu_is_bit_exact(fmt):
    """The GPU's conversion of the hard values (ties, saturation, infinities, NaN) equals the oracle's."""
    _run_conversion("cuda", fmt, "cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
def test_fp8_quantization_on_the_gpu(fmt):
    _run_quant("cuda", fmt, M=64, N=256, device="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
def test_fp8_gemm_on_the_gpu(fmt):
    _run_gemm("cuda", fmt, M=128, N=128, K=256, device="cuda")


def test_limits_of_the_fp8_formats():
    assert T.max_value(T.float8_e4m3fn).expr.value == 448.0 and T.min_value(T.float8_e5m2).expr.value == -57344.0
    assert T.infinity(T.float8_e5m2).expr.value == math.inf
    with pytest.raises(DTypeError, match="no infinity"):
        T.infinity(T.float8_e4m3fn)
