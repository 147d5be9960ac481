"""The on-disk schedule cache: a warm compile runs neither the e-graph nor NVRTC, and any change to the
kernel (shape, source line) misses."""

from __future__ import annotations

import pytest
import torch

import egtile
import egtile.codegen.nvrtc
import egtile.schedule.driver
from egtile import language as T
from egtile import schedule_cache


def make(n: int = 64):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(n):
                Y[i] = X[i] * 3.0

    return main


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EGTILE_DISABLE_CACHE", raising=False)
    return tmp_path


def _forbid_compilers(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("warm compile ran the e-graph or NVRTC")

    monkeypatch.setattr(egtile.schedule.driver, "optimize", boom)
    monkeypatch.setattr(egtile.codegen.nvrtc, "compile_cuda", boom)


def test_warm_compile_skips_egraph_and_nvrtc(cache_dir, monkeypatch):
    cold = egtile.compile(make(), target="cuda")
    _forbid_compilers(monkeypatch)
    warm = egtile.compile(make(), target="cuda")
    assert warm.scheduled == cold.scheduled
    assert warm.get_kernel_source() == cold.get_kernel_source()
    assert warm.explain() == cold.explain()


def test_warm_sim_kernel_runs_from_cache_and_is_correct(cache_dir, monkeypatch):
    egtile.compile(make(), target="sim")
    _forbid_compilers(monkeypatch)
    kernel = egtile.compile(make(), target="sim")
    x = torch.randn(64)
    y = torch.full((64,), float("nan"))
    kernel(x, y)
    torch.testing.assert_close(y, x * 3.0, rtol=0, atol=0)


def test_changed_shape_or_line_misses(cache_dir):
    base = make(64)
    assert schedule_cache.key(base.kernel, "sm_90a") == schedule_cache.key(make(64).kernel, "sm_90a")
    assert schedule_cache.key(base.kernel, "sm_90a") != schedule_cache.key(make(128).kernel, "sm_90a")
    again = make(64)  # the same lines traced again
    assert schedule_cache.key(base.kernel, "sm_90a") == schedule_cache.key(again.kernel, "sm_90a")

    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(64):
                Y[i] = X[i] * 3.0

    assert main.kernel == base.kernel  # structurally equal ...
    assert schedule_cache.key(main.kernel, "sm_90a") != schedule_cache.key(base.kernel, "sm_90a")  # ... other lines


def test_disabled_cache_always_schedules(cache_dir, monkeypatch):
    monkeypatch.setenv("EGTILE_DISABLE_CACHE", "1")
    egtile.compile(make(), target="sim")
    calls = []
    real = egtile.schedule.driver.optimize
    monkeypatch.setattr(egtile.schedule.driver, "optimize", lambda k, rules=None: calls.append(k) or real(k, rules=rules))
    egtile.compile(make(), target="sim")
    assert len(calls) == 1
    assert not list(cache_dir.rglob("*.json")) and not list(cache_dir.rglob("*.pkl"))


def test_corrupt_entry_is_rebuilt(cache_dir):
    egtile.compile(make(), target="sim")
    (entry,) = cache_dir.rglob("schedules/*.json")
    entry.write_bytes(b"not an entry")
    kernel = egtile.compile(make(), target="sim")
    assert kernel.scheduled is not None


def test_registered_user_rule_disables_the_cache(cache_dir, monkeypatch):
    """A user rule's code lives outside egtile and cannot be fingerprinted: while one is registered,
    every compile runs the e-graph (a stale schedule from before the rule, or from an edited rule of the
    same name, must never be served)."""
    from egtile import rules

    egtile.compile(make(), target="sim")  # cached with the builtin rules
    import dataclasses

    rule = dataclasses.replace(rules.builtin().rule("replicate-parallel"), name="user-copy-of-replicate")
    monkeypatch.setitem(rules._REGISTERED, rule.name, rule)
    assert not schedule_cache.enabled()
    calls = []
    real = egtile.schedule.driver.optimize
    monkeypatch.setattr(egtile.schedule.driver, "optimize", lambda k, rules=None: calls.append(k) or real(k, rules=rules))
    egtile.compile(make(), target="sim")
    egtile.compile(make(), target="sim")
    assert len(calls) == 2
