"""egtile.autotune's report when no configuration passes (each distinct failure named, at the first one's line),
and the TileLang host conventions its ports rely on: a configuration's ``pass_configs`` is a compile option, an
eager ``compile(M=...)`` without tensors tunes on fresh inputs, the winner carries ``config`` and ``latency``."""

import math

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ArgumentError


@egtile.jit(out_idx=[-1], target="interp")
def scaled(M, N, threads=32, factor=2.0):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads):  # mark-kernel-line
            for i, j in T.Parallel(M, N):
                C[i, j] = A[i, j] * factor

    return main


def _line(mark):
    import inspect

    src, start = inspect.getsourcelines(scaled.fn)
    return start + next(i for i, t in enumerate(src) if mark in t)


def test_no_configuration_passing_names_each_distinct_failure_at_the_first_ones_line(tmp_path, monkeypatch):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path))
    configs = [{"threads": 48}, {"threads": 32, "factor": 3.0}, {"threads": 40}, {"threads": 64, "factor": 5.0}]
    tuned = egtile.autotune(configs=configs, ref_prog=lambda a: a * 2.0, atol=0, rtol=0)(scaled)
    with pytest.raises(ArgumentError) as info:
        tuned.tune((8, 4), {})
    err = info.value
    first, *rest = err.message.splitlines()
    # the first configuration's failure first (2 of 4: threads 48 and 40), then the checks that failed
    assert "none of the 4 configurations compiled and passed its check (2 distinct failure(s))" in first
    assert len(rest) == 1
    assert "DSLError: T.Kernel threads=48" in first and "(2 of 4 configurations, first {'threads': 48})" in first
    assert any("its check against the reference failed" in r and "(2 of 4 configurations, first {'threads': 32, "
               "'factor': 3.0})" in r for r in rest)
    assert err.loc is not None and err.loc.line == _line("mark-kernel-line")


def test_a_configurations_pass_configs_is_a_compile_option_not_a_factory_argument(tmp_path, monkeypatch):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path))
    key = egtile.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED
    configs = [{"factor": 3.0, "pass_configs": {key: True}}, {"factor": 3.0, "pass_configs": {key: False}}]
    tuned = egtile.autotune(configs=configs, ref_prog=lambda a: a * 3.0, atol=0, rtol=0)(scaled)
    kernel = tuned(8, 4)
    a = torch.randn(8, 4)
    assert torch.equal(kernel(a), a * 3.0)
    assert kernel.config == configs[0] and math.isnan(kernel.latency)  # not measured on a CPU target


@egtile.jit(target="interp")
def eager_scale(A, factor: float = 2.0):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    C = T.empty((M, N), T.float32)
    with T.Kernel(1, threads=32):
        for i, j in T.Parallel(M, N):
            C[i, j] = A[i, j] * factor
    return C


def test_an_eager_compile_without_tensors_tunes_on_fresh_inputs(tmp_path, monkeypatch):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path))
    seen = []

    def ref(a):
        seen.append(a.clone())
        return a * 4.0

    tuned = egtile.autotune(configs=[{"factor": 1.0}, {"factor": 4.0}], ref_prog=ref, atol=0, rtol=0)(eager_scale)
    kernel = tuned.compile(M=8, N=4)
    assert kernel.config == {"factor": 4.0} and math.isnan(kernel.latency)
    assert seen and seen[0].shape == (8, 4) and seen[0].std() > 0.1  # generated inputs, never zeros
    a = torch.randn(8, 4)
    assert torch.equal(kernel(a), a * 4.0)
    # every key given: no tuning, the kernel for those values
    assert torch.equal(tuned.compile(M=8, N=4, factor=1.0)(a), a)


def test_an_eager_compile_inside_set_autotune_inputs_takes_its_sizes_from_those_tensors(tmp_path, monkeypatch):
    """TileLang's mHC backward: ``with set_autotune_inputs(R): kernel = f.compile()`` with the size ``M`` left to
    the tensors: the tuning inputs are the kernel's tensor parameters, so they bind ``M, N``."""
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path))
    a = torch.randn(6, 4)
    tuned = egtile.autotune(configs=[{"factor": 1.0}, {"factor": 3.0}], ref_prog=lambda x: x * 3.0, atol=0,
                            rtol=0)(eager_scale)
    with egtile.autotuner.set_autotune_inputs(a):
        kernel = tuned.compile()
    assert kernel.config == {"factor": 3.0}
    b = torch.randn(6, 4)
    assert torch.equal(kernel(b), b * 3.0)


def test_manual_check_prog_gets_the_kernels_outputs_and_the_references_as_lists(tmp_path, monkeypatch):
    """TileLang's Profiler.manual_assert_close convention: ``manual_check_prog(lib_outs, ref_outs)``, each a list;
    a configuration whose outputs the check refuses is skipped, the next one that passes wins."""
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path))
    seen = []

    def check(outs, refs):
        seen.append((len(outs), len(refs)))
        torch.testing.assert_close(outs[0], refs[0], atol=0, rtol=0)

    configs = [{"factor": 5.0}, {"factor": 3.0}]
    tuned = egtile.autotune(configs=configs, ref_prog=lambda a: a * 3.0, manual_check_prog=check)(scaled)
    kernel = tuned(8, 4)
    assert seen == [(1, 1), (1, 1)] and kernel.config == configs[1]
    a = torch.randn(8, 4)
    assert torch.equal(kernel(a), a * 3.0)


def test_supply_prog_sees_each_parameters_dtype_with_as_torch(tmp_path, monkeypatch):
    """TileLang's supply functions build inputs with `param.dtype.as_torch()` (its AMD flash-attention examples);
    the check then compares the kernel on those inputs against the reference, so inputs of another dtype fail."""
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path))
    seen = []

    def supply(params):
        seen.extend(p.dtype.as_torch() for p in params)
        return [torch.randn([int(s) for s in p.shape], dtype=p.dtype.as_torch()) for p in params]

    tuned = egtile.autotune(configs=[{"factor": 3.0}], supply_prog=supply, ref_prog=lambda a: a * 3.0, atol=0,
                            rtol=0)(scaled)
    kernel = tuned(8, 4)
    assert seen == [torch.float32] and kernel.config == {"factor": 3.0}


def test_a_configuration_naming_no_parameter_of_the_factory_is_refused_before_tuning():
    # It failed to compile like any bad configuration and was skipped silently (a fresh user's report).
    @egtile.autotune(configs=[{"BLK": 64}, {"BLOCK": 32}])
    @egtile.jit(out_idx=[1], target="interp")
    def copy64(BLOCK=None):
        @T.prim_func
        def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(T.ceildiv(64, BLOCK), threads=32) as bx:
                for i in T.Parallel(BLOCK):
                    Y[bx * BLOCK + i] = X[bx * BLOCK + i]

        return main

    with pytest.raises(ArgumentError, match=r"configuration \{'BLK': 64\} names 'BLK', which is not a parameter of "
                                            r"copy64 \(its parameters: BLOCK\)"):
        copy64()
