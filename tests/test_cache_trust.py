"""The on-disk caches cannot run the wrong kernel (issue 9 item 2).

Planted entries: two entries swapped, every single-byte corruption of a small entry, a crafted huge or
deeply nested file, a malicious pickle where old entries lived, and truncated / bit-flipped / foreign
cubins. Each is either rebuilt or provably identical to what was stored; never a wrong result, never an
exception out of a compile, never code run from the cache directory.
"""

from __future__ import annotations

import builtins
import inspect
import json
import pickle

import pytest
import torch

import egtile
import egtile.codegen.nvrtc
import egtile.schedule.driver
from egtile import language as T
from egtile import schedule_cache
from egtile.codegen import cache as cubin_cache


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(d))
    monkeypatch.delenv("EGTILE_DISABLE_CACHE", raising=False)
    return d


def scale2():
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            for i in T.Parallel(64):
                Y[i] = X[i] * 2.0

    return main


def scale3():
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            for i in T.Parallel(64):
                Y[i] = X[i] * 3.0

    return main


def run(f, target="sim"):
    x = torch.randn(64)
    y = torch.full((64,), float("nan"))
    egtile.compile(f, target=target)(x, y)
    return x, y


def entry_of(cache_dir, f) -> "pathlib.Path":  # noqa: F821
    return cache_dir / "schedules" / f"{schedule_cache.key(f.kernel, 'sm_90a')}.json"


class Counter:
    def __init__(self, monkeypatch):
        self.optimize = 0
        self.nvrtc = 0
        real_opt, real_nvrtc = egtile.schedule.driver.optimize, egtile.codegen.nvrtc.compile_cuda

        def opt(*a, **k):
            self.optimize += 1
            return real_opt(*a, **k)

        def nv(*a, **k):
            self.nvrtc += 1
            return real_nvrtc(*a, **k)

        monkeypatch.setattr(egtile.schedule.driver, "optimize", opt)
        monkeypatch.setattr(egtile.codegen.nvrtc, "compile_cuda", nv)


def test_no_pickle_in_the_caches():
    for module in (schedule_cache, cubin_cache):
        assert "pickle" not in inspect.getsource(module).replace("a pickle", "").replace("old pickle", ""), module


# ---- swapped entries ------------------------------------------------------------------------------------


def test_swapped_schedule_entries_compute_their_own_function(cache_dir, monkeypatch):
    run(scale2()), run(scale3())
    e2, e3 = entry_of(cache_dir, scale2()), entry_of(cache_dir, scale3())
    b2, b3 = e2.read_bytes(), e3.read_bytes()
    e2.write_bytes(b3)
    e3.write_bytes(b2)
    count = Counter(monkeypatch)
    x, y = run(scale2())
    assert torch.equal(y, x * 2.0)
    x, y = run(scale3())
    assert torch.equal(y, x * 3.0)
    assert count.optimize == 2  # both rebuilt


def test_a_payload_moved_under_another_key_with_its_digest_is_refused(cache_dir, monkeypatch):
    """Even a record rewritten consistently (this entry's key and fields, the other entry's payload and
    its correct SHA-256) is refused: the payload schedules another kernel."""
    run(scale2()), run(scale3())
    e2, e3 = entry_of(cache_dir, scale2()), entry_of(cache_dir, scale3())
    r2, r3 = json.loads(e2.read_text()), json.loads(e3.read_text())
    r2["payload"], r2["payload_sha256"] = r3["payload"], r3["payload_sha256"]
    e2.write_text(json.dumps(r2))
    assert schedule_cache.load(schedule_cache.key(scale2().kernel, "sm_90a")) is None
    count = Counter(monkeypatch)
    x, y = run(scale2())
    assert torch.equal(y, x * 2.0) and count.optimize == 1


def test_swapped_cubins_are_rebuilt_never_loaded(cache_dir, monkeypatch):
    cold2 = egtile.compile(scale2(), target="cuda")._built.cubin
    cold3 = egtile.compile(scale3(), target="cuda")._built.cubin
    c2, c3 = (cache_dir / f"{_cubin_key(f)}.cubin" for f in (scale2(), scale3()))
    c2.write_bytes(cold3)
    c3.write_bytes(cold2)
    count = Counter(monkeypatch)
    assert egtile.compile(scale2(), target="cuda")._built.cubin == cold2
    assert egtile.compile(scale3(), target="cuda")._built.cubin == cold3
    assert count.nvrtc == 2  # rebuilt (the compile reschedules too: a schedule entry is only served with a valid cubin)


def _cubin_key(f):
    from egtile import __version__
    from egtile.codegen import nvrtc

    k = egtile.compile(f, target="cuda")
    return cubin_cache.cache_key(k.get_kernel_source(), nvrtc.header_texts(), nvrtc.options(), nvrtc.nvrtc_version(),
                                 __version__)


# ---- single-byte corruption ------------------------------------------------------------------------------


def _corruptions(data: bytes):
    for i in range(len(data)):
        for flip in (0x01, 0x20):
            yield i, data[:i] + bytes([data[i] ^ flip]) + data[i + 1:]


def test_every_single_byte_corruption_of_a_schedule_entry_rebuilds_or_is_identical(cache_dir):
    f = scale2()
    run(f)
    path = entry_of(cache_dir, f)
    good = path.read_bytes()
    k = schedule_cache.key(f.kernel, "sm_90a")
    want = schedule_cache.load(k)
    assert want is not None
    codec = schedule_cache._codec()
    want_text = codec.dumps(want[0])
    identical = rebuilt = 0
    for i, bad in _corruptions(good):
        got = schedule_cache.parse_entry(k, bad)  # what load() does with these file contents; never raises
        if got is None:
            rebuilt += 1
        else:
            assert codec.dumps(got[0]) == want_text, f"byte {i} loaded a different schedule"
            identical += 1
    assert rebuilt > 0.9 * 2 * len(good)  # the digest catches nearly all (JSON whitespace is outside it)
    # and compiles over corrupted files run the right kernel
    for i in range(0, len(good), max(1, len(good) // 8)):
        path.write_bytes(good[:i] + bytes([good[i] ^ 1]) + good[i + 1:])
        assert schedule_cache.load(k) is None or schedule_cache.load(k)[0] == want[0]
        x, y = run(f)
        assert torch.equal(y, x * 2.0)


def test_every_single_byte_corruption_of_a_cubin_is_refused(cache_dir):
    f = scale2()
    cold = egtile.compile(f, target="cuda")._built
    ck = _cubin_key(f)
    path = cache_dir / f"{ck}.cubin"
    assert cubin_cache.load(ck, cold.symbol) == (cold.cubin, cold.log)
    record = (cache_dir / f"{ck}.json").read_bytes()
    for i, bad in _corruptions(cold.cubin):  # what load() does with these file contents
        assert cubin_cache.check_entry(ck, cold.symbol, record, bad) is None, i
    for i, bad in _corruptions(record):  # a corrupted record: refused, or still this very entry
        got = cubin_cache.check_entry(ck, cold.symbol, bad, cold.cubin)
        assert got is None or got == (cold.cubin, cold.log), i
    for i in range(0, len(cold.cubin), len(cold.cubin) // 5):  # and through the files
        path.write_bytes(cold.cubin[:i] + bytes([cold.cubin[i] ^ 1]) + cold.cubin[i + 1:])
        assert cubin_cache.load(ck, cold.symbol) is None, i
    for bad in (b"", cold.cubin[: len(cold.cubin) // 2]):  # empty, truncated
        path.write_bytes(bad)
        assert cubin_cache.load(ck, cold.symbol) is None
    path.write_bytes(cold.cubin)
    assert cubin_cache.load(ck, cold.symbol) == (cold.cubin, cold.log)


def test_a_bit_flipped_cubin_is_rebuilt_by_the_next_compile(cache_dir, monkeypatch):
    f = scale2()
    cold = egtile.compile(f, target="cuda")._built.cubin
    path = cache_dir / f"{_cubin_key(f)}.cubin"
    path.write_bytes(cold[:50] + bytes([cold[50] ^ 0x10]) + cold[51:])
    count = Counter(monkeypatch)
    assert egtile.compile(f, target="cuda")._built.cubin == cold
    assert count.nvrtc == 1 and path.read_bytes() == cold  # rebuilt and rewritten


def test_a_foreign_cubin_with_a_forged_record_fails_the_symbol_check(cache_dir):
    """A cubin of another kernel name, with a record forged to match its size and digest, is refused
    because its symbol table does not define this kernel's symbol."""
    @T.prim_func
    def other(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            for i in T.Parallel(64):
                Y[i] = X[i] * 2.0

    foreign = egtile.compile(other, target="cuda")._built.cubin
    f = scale2()
    built = egtile.compile(f, target="cuda")._built
    ck = _cubin_key(f)
    (cache_dir / f"{ck}.cubin").write_bytes(foreign)
    record = json.loads((cache_dir / f"{ck}.json").read_text())
    record["cubin_size"], record["cubin_sha256"] = len(foreign), cubin_cache._sha(foreign)
    (cache_dir / f"{ck}.json").write_text(json.dumps(record))
    assert cubin_cache.check_cubin(foreign, built.symbol) is not None
    assert cubin_cache.check_cubin(built.cubin, built.symbol) is None
    assert cubin_cache.load(ck, built.symbol) is None


# ---- crafted files ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", [
    b"\x80\x05\x8e" + (2 ** 62).to_bytes(8, "little"),  # the review's crafted pickle length prefix
    b"[" * 200_000 + b"]" * 200_000,  # nesting beyond any recursion limit
    b'{"format": "egtile-schedule/1", "payload": ' + b"9" * 100_000 + b"}",
    b"\xff\xfe\x00garbage",
])
def test_crafted_entries_are_misses(cache_dir, content):
    f = scale2()
    run(f)
    path = entry_of(cache_dir, f)
    path.write_bytes(content)
    assert schedule_cache.load(schedule_cache.key(f.kernel, "sm_90a")) is None
    x, y = run(f)
    assert torch.equal(y, x * 2.0)


def test_an_oversized_entry_is_not_read(cache_dir, monkeypatch):
    f = scale2()
    run(f)
    path = entry_of(cache_dir, f)
    with path.open("r+b") as fh:
        fh.truncate(schedule_cache.MAX_ENTRY_BYTES + 1)  # sparse: no disk used
    monkeypatch.setattr(builtins, "open", lambda *a, **k: pytest.fail("read an oversized entry"))
    assert schedule_cache.load(schedule_cache.key(f.kernel, "sm_90a")) is None


class _Payload:
    marker = ""

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


def test_a_malicious_pickle_in_the_cache_never_runs(cache_dir, tmp_path, monkeypatch):
    f = scale2()
    k = schedule_cache.key(f.kernel, "sm_90a")
    marker = tmp_path / "marker"
    _Payload.marker = str(marker)
    evil = pickle.dumps(_Payload(), protocol=5)
    pickle.loads(evil)  # the payload works ...
    assert marker.exists()
    marker.unlink()
    sched = cache_dir / "schedules"
    sched.mkdir(parents=True)
    for name in (f"{k}.pkl", f"{k}.json", f"{k}"):  # where main's entries lived, and the new name
        (sched / name).write_bytes(evil)
    (cache_dir / f"{k}.cubin").write_bytes(evil)
    for target in ("sim", "cuda"):
        kern = egtile.compile(f, target=target)
        if target == "sim":
            x = torch.randn(64)
            y = torch.full((64,), float("nan"))
            kern(x, y)
            assert torch.equal(y, x * 2.0)
    assert not marker.exists()  # ... but never from the cache directory


def test_nvrtc_never_writes_into_a_shared_bytes_object(cache_dir):
    """NVRTC's log of a clean compile is one NUL byte; it used to be written into ``b" " * 1``, CPython's
    shared one-byte ``b" "``, turning every ``bytes([32])`` of the process into ``b"\\x00"`` (found by the
    corruption test above, whose flipped bytes silently stopped being flipped)."""
    from egtile.codegen import nvrtc

    nvrtc.compile_cuda('extern "C" __global__ void k() {}', "k.cu")
    assert bytes([32]) == b" " and b" "[0] == 32
