"""egtile.engine.callback: TileLang's register_cuda_postproc_callback, applied to the CUDA source before NVRTC."""

from __future__ import annotations

import pytest

from egtile.codegen import build
from egtile.errors import CompileError
from egtile.engine import callback
from egtile.errors import UnsupportedError

from seed_schedules import bug2_schedule


@pytest.fixture(autouse=True)
def _clean(tmp_path, monkeypatch):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EGTILE_DISABLE_CACHE", raising=False)
    callback.clear_cuda_postproc_callback()
    yield
    callback.clear_cuda_postproc_callback()


def test_the_callback_sees_the_source_and_what_it_returns_is_compiled():
    plain = build(bug2_schedule())
    seen = []

    @callback.register_cuda_postproc_callback
    def mark(code, target):
        seen.append((code, target))
        return "// post-processed by the test\n#define EGTILE_TEST_MARK 1\n" + code

    built = build(bug2_schedule())
    assert seen == [(plain.source, "sm_90a")]
    assert built.source.startswith("// post-processed by the test\n") and built.source.endswith(plain.source)
    assert not built.cache_hit  # the cache key is over the returned text, not the plain source
    assert built.cubin[:4] == b"\x7fELF"

    @callback.register_cuda_postproc_callback
    def broken(code, target):  # replaces `mark`; NVRTC compiles exactly what the callback returns
        return code + "\nthis is not C++;\n"

    with pytest.raises(CompileError):
        build(bug2_schedule())
    callback.clear_cuda_postproc_callback()
    assert build(bug2_schedule()).source == plain.source


def test_override_false_and_a_non_string_result_are_refused():
    callback.register_cuda_postproc_callback(lambda code, target: None)
    with pytest.raises(UnsupportedError, match="returned NoneType"):
        build(bug2_schedule())
    with pytest.raises(UnsupportedError, match="override=False"):
        callback.register_cuda_postproc_callback(override=False)(lambda code, target: code)
    with pytest.raises(UnsupportedError, match="not callable"):
        callback.register_cuda_postproc_callback(42)
