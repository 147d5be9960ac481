"""egtile.language.trace_memo: a prim_func traced again with everything its body reads unchanged reuses the first
trace; any change to what it reads (the file, a closure value, a global, an annotation, EGTILE_* settings) traces
again, and a body that reads what the memo cannot key is always traced."""

from __future__ import annotations

import importlib
import os
import sys
import textwrap

import pytest

from egtile import language as T
from egtile.language import trace_memo, tracer

SCALE = 2.0
TABLE = {"scale": 2.0}  # mutable: a body reading it cannot be memoized


@pytest.fixture
def traces(monkeypatch):
    """The number of traces that ran the body (the memo's hits do not)."""
    trace_memo.clear()
    count = [0]
    start = tracer.start

    def counting(trace):
        count[0] += 1
        return start(trace)

    monkeypatch.setattr(tracer, "start", counting)
    yield count
    trace_memo.clear()


def factory(n: int, c: float, dtype: str = "float32"):
    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                Y[bx * 32 + i] = X[bx * 32 + i] * c + SCALE

    return main


def reads_a_dict(n: int):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(n):
                Y[i] = X[i] * TABLE["scale"]

    return main


def test_same_factory_arguments_reuse_the_trace(traces):
    first = factory(64, 3.0)
    again = factory(64, 3.0)
    assert traces[0] == 1
    assert again.kernel is first.kernel
    assert str(again.kernel) == str(first.kernel)


@pytest.mark.parametrize("other", [(128, 3.0), (64, 4.0), (64, -0.0), (64, 3), (64, 3.0, "float16")])
def test_any_other_closure_or_annotation_value_traces_again(traces, other):
    from egtile.codec import Codec, ir_classes

    codec = Codec(ir_classes())
    base = factory(64, 0.0 if other == (64, -0.0) else 3.0)
    got = factory(*other)
    assert traces[0] == 2 and got.kernel is not base.kernel
    if other != (64, 3):  # 3 and 3.0 make the same float32 constant: traced apart all the same
        assert codec.dumps(got.kernel) != codec.dumps(base.kernel)  # -0.0 differs from 0.0 in the encoding


def test_a_changed_global_value_traces_again(traces, monkeypatch):
    base = factory(64, 3.0)
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 5.0)
    got = factory(64, 3.0)
    assert traces[0] == 2
    assert "5.0" in str(got.kernel) and "5.0" not in str(base.kernel)


def test_a_body_reading_a_mutable_global_is_always_traced(traces, monkeypatch):
    a = reads_a_dict(32)
    monkeypatch.setitem(TABLE, "scale", 7.0)
    b = reads_a_dict(32)
    assert traces[0] == 2
    assert "7.0" in str(b.kernel) and "7.0" not in str(a.kernel)


def test_an_egtile_setting_traces_again(traces, monkeypatch):
    factory(64, 3.0)
    monkeypatch.setenv("EGTILE_SOURCE_FRONTEND", "0")
    factory(64, 3.0)
    assert traces[0] == 2


KERNEL_SOURCE = '''
from egtile import language as T


def make(n):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(n):
                Y[i] = X[i] * {factor}

    return main
'''


def _write(path, factor: str, mtime_ns: int) -> None:
    path.write_text(textwrap.dedent(KERNEL_SOURCE.format(factor=factor)))
    os.utime(path, ns=(mtime_ns, mtime_ns))


@pytest.mark.parametrize("reimport", [True, False])
def test_editing_the_kernel_file_traces_again(traces, tmp_path, monkeypatch, reimport):
    path = tmp_path / "edited_kernel_mod.py"
    _write(path, "2.0", 1_000_000_000_000_000_000)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("edited_kernel_mod", None)
    mod = importlib.import_module("edited_kernel_mod")
    try:
        before = mod.make(32)
        assert mod.make(32).kernel is before.kernel and traces[0] == 1
        _write(path, "4.0", 1_000_000_010_000_000_000)  # same length, 10 s later (the .pyc check reads seconds)
        if reimport:
            importlib.invalidate_caches()
            mod = importlib.reload(mod)
        after = mod.make(32)
        assert traces[0] == 2
        if reimport:
            assert "4.0" in str(after.kernel) and "2.0" not in str(after.kernel)
        assert after.kernel is not before.kernel
    finally:
        sys.modules.pop("edited_kernel_mod", None)


def test_the_memoized_kernel_compiles_and_runs_like_a_fresh_trace(traces):
    import torch

    import egtile

    k1 = egtile.compile(factory(64, 3.0), target="interp")
    k2 = egtile.compile(factory(64, 3.0), target="interp")
    assert traces[0] == 1
    x = torch.randn(64)
    for k in (k1, k2):
        y = torch.full((64,), float("nan"))
        k(x, y)
        torch.testing.assert_close(y, x * 3.0 + SCALE, rtol=0, atol=0)


def local_import_factory(n: int):
    from egtile import language as TL  # a closure cell holding egtile's module

    @TL.prim_func
    def main(X: TL.Tensor((n,), "float32"), Y: TL.Tensor((n,), "float32")):
        with TL.Kernel(1, threads=32):
            for i in TL.Parallel(n):
                Y[i] = X[i] + 1.0

    return main


def test_a_factory_importing_egtile_locally_is_memoized(traces):
    a = local_import_factory(32)
    assert local_import_factory(32).kernel is a.kernel and traces[0] == 1
    assert local_import_factory(64).kernel is not a.kernel and traces[0] == 2


def reads_through_getattr(n: int):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(n):
                Y[i] = X[i] * getattr(sys.modules[__name__], "SCALE")

    return main


def test_a_body_reading_through_getattr_is_always_traced(traces, monkeypatch):
    a = reads_through_getattr(32)
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 9.0)
    b = reads_through_getattr(32)
    assert traces[0] == 2
    assert "9.0" in str(b.kernel) and "9.0" not in str(a.kernel)


def test_code_calling_a_reflective_builtin_or_assigning_a_global_is_refused():
    def plain():
        return min(1, 2)

    def reflective():
        return getattr(1, "real")

    def nested_eval():
        return (lambda: eval("1"))()

    def assigns():
        global SCALE
        SCALE = 1.0

    assert trace_memo._names(plain.__code__) is not None
    for fn in (reflective, nested_eval, assigns):
        assert trace_memo._names(fn.__code__) is None, fn.__name__
