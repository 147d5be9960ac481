"""TileLang's ``TL_ENABLE_FAST_MATH`` (egtile.options.fast_math): honoured on the CUDA kernel, off by default.

The CPU part compiles with NVRTC and reads the SASS (no GPU); the ``gpu`` part runs the fast-math kernel on
fresh random inputs against a float64 reference, within the approximate functions' bounds."""

from __future__ import annotations

import math

import pytest
import torch

import egtile
from egtile import language as T
from egtile.codegen import nvrtc, sass
from egtile.errors import ArgumentError
from egtile.options import PassConfigKey, fast_math

FAST = {PassConfigKey.TL_ENABLE_FAST_MATH: True}
SCALE = 0.18033688  # (1 / sqrt(64)) * log2(e), a softmax's scale


def _softmax_like():
    """``B = exp2(A * s - m) / (1 + exp2(A * s - m))``: an FMA-shaped argument, exp2 and a division."""

    @T.prim_func
    def main(A: T.Tensor((128, 64), "float32"), B: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(128, 64):
                e = T.exp2(A[i, j] * SCALE - 2.0)
                B[i, j] = e / (e + 1.0)

    return main


def _exp2_factory(n: int = 128):
    @T.prim_func
    def main(A: T.Tensor((n, 64), "float32"), B: T.Tensor((n, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(n, 64):
                B[i, j] = T.exp2(A[i, j])

    return main


def test_pass_config_is_read_by_key_or_by_its_string():
    assert fast_math(FAST)
    assert fast_math({"tl.enable_fast_math": True})
    assert not fast_math({PassConfigKey.TL_ENABLE_FAST_MATH: False})
    assert not fast_math({PassConfigKey.TL_DISABLE_WGMMA: True})
    assert not fast_math(None)


@pytest.mark.parametrize("bad", [{PassConfigKey.TL_ENABLE_FAST_MATH: "true"}, {"tl.enable_fast_math": 1}, [1]])
def test_pass_config_of_the_wrong_type_is_an_error(bad):
    with pytest.raises(ArgumentError, match="pass_configs"):
        fast_math(bad)


def test_nvrtc_options_follow_the_flag():
    assert "--fmad=false" in nvrtc.options() and "--use_fast_math" not in nvrtc.options()
    fast = nvrtc.options(fast_math=True)
    assert "--use_fast_math" in fast and "--fmad=false" not in fast and "--ftz=false" not in fast


@pytest.mark.skipif(not sass.available(), reason="cuobjdump/nvdisasm not installed")
def test_fast_math_reaches_the_cubin(tmp_path, monkeypatch):
    """The fast-math cubin computes the same kernel in fewer instructions: exp2 is one MUFU.EX2 without the
    subnormal handling around it, the argument one FFMA; the default contract's cubin is unchanged (its own
    cache entry: a fast-math compile must never be served the strict cubin, nor the reverse)."""
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path))
    strict = egtile.compile(_softmax_like(), target="cuda")
    fast = egtile.compile(_softmax_like(), target="cuda", pass_configs=FAST)
    assert not strict.fast_math and fast.fast_math
    assert not strict._built.fast_math and fast._built.fast_math
    s_sass, f_sass = sass.disassemble(strict._built.cubin), sass.disassemble(fast._built.cubin)
    assert s_sass != f_sass
    count = lambda text, op: sum(1 for ln in text.splitlines() if f" {op}" in ln)  # noqa: E731
    assert count(f_sass, "MUFU.EX2") >= 1 and count(s_sass, "MUFU.EX2") >= 1
    n = lambda text: sum(1 for ln in text.splitlines() if ln.strip().startswith("/*") and "*/" in ln)  # noqa: E731
    assert n(f_sass) < n(s_sass)
    again = egtile.compile(_softmax_like(), target="cuda")  # from the cache: still the strict cubin
    assert again._built.cubin == strict._built.cubin and not again._built.fast_math
    again_fast = egtile.compile(_softmax_like(), target="cuda", pass_configs=FAST)
    assert again_fast._built.cubin == fast._built.cubin and again_fast._built.fast_math


def test_explain_says_fast_math_only_when_asked():
    assert "fast math" not in egtile.compile(_softmax_like(), target="sim").explain()
    text = egtile.compile(_softmax_like(), target="sim", pass_configs=FAST).explain()
    assert "Arithmetic: fast math" in text and "default arithmetic" in text


def test_jit_factory_carries_the_flag():
    factory = egtile.jit(out_idx=[-1], target="sim", pass_configs=FAST)(_exp2_factory)

    k = factory(128)
    assert k.fast_math
    A = torch.randn(128, 64)
    torch.testing.assert_close(k(A).double(), torch.exp2(A.double()), rtol=2.0**-22, atol=0.0)


@pytest.mark.gpu
def test_fast_math_kernel_on_the_gpu_is_within_the_approximations_bounds():
    kernel = egtile.compile(_softmax_like(), target="cuda", pass_configs=FAST)
    for seed in range(3):
        g = torch.Generator(device="cuda").manual_seed(1000 + seed)
        A = torch.randn(128, 64, generator=g, device="cuda") * 30
        B = torch.full_like(A, math.nan)
        kernel(A, B)
        torch.cuda.synchronize()
        e = torch.exp2(A.double() * SCALE - 2.0)
        ref = e / (e + 1.0)
        # ex2.approx.ftz: 2 ulp on the result, plus the rounding of its argument (|arg| < 2^5: 2^-19 relative
        # on the result); the approximate division 2 ulp; FTZ of results below 2^-126 (ref < 2^-126: atol)
        assert torch.isfinite(B).all()
        torch.testing.assert_close(B.double(), ref, rtol=2.0**-17, atol=2.0**-126)


def test_a_tuning_configuration_cannot_change_the_arithmetic():
    # the conflicting configuration is not the only one: it must not be skipped as a failed configuration
    tuned = egtile.autotune(configs=[{"n": 128, "pass_configs": FAST}, {"n": 128}], warmup=1, rep=1)
    factory = tuned(egtile.jit(out_idx=[-1], target="sim")(_exp2_factory))

    with pytest.raises(egtile.errors.EgtileError, match="TL_ENABLE_FAST_MATH"):
        factory()
