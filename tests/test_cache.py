"""egtile.codegen.cache: the on-disk cubin cache (key, hit without NVRTC, disable switch)."""

from __future__ import annotations

import pytest

from egtile.codegen import build, cache, nvrtc

from seed_schedules import bug1_schedule, bug2_schedule


@pytest.fixture
def counted(monkeypatch):
    """Count NVRTC compilations (the real compiler still runs)."""
    calls = []
    real = nvrtc.compile_cuda

    def spy(*a, **k):
        calls.append(a[1])
        return real(*a, **k)

    monkeypatch.setattr(nvrtc, "compile_cuda", spy)
    return calls


def test_warm_hit_makes_no_nvrtc_call(tmp_path, monkeypatch, counted):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EGTILE_DISABLE_CACHE", raising=False)
    cold = build(bug2_schedule())
    assert not cold.cache_hit and counted == ["main_kernel.cu"]
    warm = build(bug2_schedule())
    assert warm.cache_hit and counted == ["main_kernel.cu"]
    assert warm.cubin == cold.cubin and warm.source == cold.source and warm.log == cold.log
    assert len(list(tmp_path.glob("*.cubin"))) == 1


def test_different_kernels_do_not_share_an_entry(tmp_path, monkeypatch, counted):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EGTILE_DISABLE_CACHE", raising=False)
    a, b = build(bug1_schedule()), build(bug1_schedule(replicate_extern=True))
    assert a.cubin != b.cubin and len(counted) == 2
    assert build(bug1_schedule(replicate_extern=True)).cache_hit and len(counted) == 2


def test_disable_switch(tmp_path, monkeypatch, counted):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EGTILE_DISABLE_CACHE", "1")
    assert cache.cache_dir() is None
    build(bug2_schedule())
    assert not build(bug2_schedule()).cache_hit
    assert len(counted) == 2 and not list(tmp_path.iterdir())


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.delenv("EGTILE_CACHE_DIR", raising=False)
    monkeypatch.delenv("EGTILE_DISABLE_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / ".cache" / "egtile"


def test_key_covers_source_headers_options_and_versions():
    base = ("src", "hdr", ("--gpu-architecture=sm_90a",), (13, 5), "0.1.0")
    k0 = cache.cache_key(*base)
    variants = [("src2",) + base[1:], base[:1] + ("hdr2",) + base[2:],
                base[:2] + (("--gpu-architecture=sm_90",),) + base[3:], base[:3] + ((13, 6),) + base[4:],
                base[:4] + ("0.1.1",)]
    keys = {cache.cache_key(*v) for v in variants}
    assert k0 not in keys and len(keys) == len(variants)
    assert cache.cache_key(*base) == k0


def test_unwritable_cache_still_builds(tmp_path, monkeypatch, counted):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(blocker / "sub"))
    monkeypatch.delenv("EGTILE_DISABLE_CACHE", raising=False)
    assert build(bug2_schedule()).cubin[:4] == b"\x7fELF"
    assert not build(bug2_schedule()).cache_hit and len(counted) == 2
