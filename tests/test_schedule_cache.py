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


def test_a_decoded_entry_is_reused_only_for_the_same_bytes(cache_dir, monkeypatch):
    """The in-process memo of decoded entries is keyed by the file's SHA-256: a warm compile decodes an
    unchanged entry once, but an entry swapped with another kernel's or changed on disk after it was
    decoded is checked afresh (a miss, then a correct rebuild)."""
    import egtile.codec

    egtile.compile(make(64), target="sim")
    (a,) = cache_dir.rglob("schedules/*.json")
    egtile.compile(make(128), target="sim")
    (b,) = set(cache_dir.rglob("schedules/*.json")) - {a}
    egtile.compile(make(64), target="sim")  # decoded once more: now memoized
    decodes = []
    real = egtile.codec.Codec.decode
    monkeypatch.setattr(egtile.codec.Codec, "decode", lambda self, *a_, **k_: decodes.append(1) or real(self, *a_, **k_))
    egtile.compile(make(64), target="sim")
    assert not decodes  # same bytes: the memo
    a_bytes, b_bytes = a.read_bytes(), b.read_bytes()
    assert a_bytes != b_bytes
    a.write_bytes(b_bytes)  # the other kernel's entry under this key: a miss, so the e-graph runs again
    scheduled = []
    real_opt = egtile.schedule.driver.optimize
    monkeypatch.setattr(egtile.schedule.driver, "optimize",
                        lambda k, rules=None: scheduled.append(k) or real_opt(k, rules=rules))
    kernel = egtile.compile(make(64), target="sim")
    assert len(scheduled) == 1
    x = torch.randn(64)
    y = torch.full((64,), float("nan"))
    kernel(x, y)
    torch.testing.assert_close(y, x * 3.0, rtol=0, atol=0)
    a.write_bytes(a_bytes[:-40] + b"x" * 40)  # changed after it was decoded: checked afresh, a miss again
    egtile.compile(make(64), target="sim")
    assert len(scheduled) == 2


def _forbid_protocol_lowering(monkeypatch):
    import egtile.lower.protocol
    import egtile.verifier.protocol

    def boom(*args, **kwargs):
        raise AssertionError("warm compile lowered or checked the protocol again")

    monkeypatch.setattr(egtile.lower.protocol, "schedule_protocol", boom)
    monkeypatch.setattr(egtile.verifier.protocol, "check_protocol", boom)


def test_a_hand_written_protocol_kernel_is_cached(cache_dir, monkeypatch):
    """A kernel with its own barrier protocol (role blocks, barriers, TMA copies on a barrier; its schedule
    holds the user's arrivals and expect_tx) is stored and taken from the cache like an e-graph schedule."""
    from protocol_kernels import scale

    from egtile.ir import swalk
    from egtile.ir.scheduled import ExpectTx
    from egtile.ir.usersync import UserArrive

    cold = egtile.compile(scale(), target="cuda")
    kinds = {type(s) for s in swalk(cold.scheduled.body)}
    assert {ExpectTx, UserArrive} <= kinds  # the classes the codec could not encode before
    _forbid_compilers(monkeypatch)
    _forbid_protocol_lowering(monkeypatch)
    warm = egtile.compile(scale(), target="cuda")
    assert warm.scheduled == cold.scheduled
    assert warm.get_kernel_source() == cold.get_kernel_source()
    assert warm.explain() == cold.explain()


def test_a_cached_protocol_kernel_runs_correctly_on_the_simulator(cache_dir, monkeypatch):
    from protocol_kernels import BLOCK, STEPS, scale

    egtile.compile(scale(), target="sim")
    _forbid_protocol_lowering(monkeypatch)
    kernel = egtile.compile(scale(), target="sim")
    x = torch.randn(STEPS, BLOCK)
    y = torch.full((STEPS, BLOCK), float("nan"))
    kernel(x, y)
    torch.testing.assert_close(y, x * 2.0, rtol=0, atol=0)


def test_a_protocol_the_checker_refuses_is_not_cached(cache_dir):
    from protocol_kernels import scale

    from egtile.errors import EgtileError

    for _ in range(2):  # refused again, not taken from the cache
        with pytest.raises(EgtileError):
            egtile.compile(scale(bug="parity"), target="sim")
    assert not any(cache_dir.glob("schedules/*.json"))


def test_a_lowering_switch_is_part_of_the_key(cache_dir, monkeypatch):
    """``EGTILE_WITH_LOWERING`` / ``EGTILE_WITHOUT_LOWERING`` change the generated kernel, so a schedule cached
    under one setting must never be served under another (it was, before the switches were in the key)."""
    kernel = make().kernel
    default = schedule_cache.key(kernel, "sm_90a")
    monkeypatch.setenv("EGTILE_WITHOUT_LOWERING", "version-uniform-guard")
    without = schedule_cache.key(kernel, "sm_90a")
    monkeypatch.setenv("EGTILE_WITH_LOWERING", "clear-into-scale-d")
    both = schedule_cache.key(kernel, "sm_90a")
    assert len({default, without, both}) == 3
    monkeypatch.delenv("EGTILE_WITHOUT_LOWERING")
    monkeypatch.setenv("EGTILE_WITH_LOWERING", "version-uniform-guard")  # already on by default: same key
    assert schedule_cache.key(kernel, "sm_90a") == default
    monkeypatch.delenv("EGTILE_WITH_LOWERING")

    egtile.compile(make(), target="sim")  # cached with the default switches
    monkeypatch.setenv("EGTILE_WITHOUT_LOWERING", "version-uniform-guard")
    calls = []
    real = egtile.schedule.driver.optimize
    monkeypatch.setattr(egtile.schedule.driver, "optimize", lambda k, rules=None: calls.append(k) or real(k, rules=rules))
    egtile.compile(make(), target="sim")
    assert len(calls) == 1  # a miss: scheduled again under the other setting


def test_an_unknown_lowering_switch_is_an_error(monkeypatch):
    from egtile.lower import switches

    monkeypatch.setenv("EGTILE_WITH_LOWERING", "clear-into-scaled")
    with pytest.raises(ValueError, match="clear-into-scaled.*clear-into-scale-d"):
        switches.current()
    monkeypatch.setenv("EGTILE_WITH_LOWERING", "clear-into-scale-d")
    monkeypatch.setenv("EGTILE_WITHOUT_LOWERING", "clear-into-scale-d")
    with pytest.raises(ValueError, match="both name"):
        switches.current()
