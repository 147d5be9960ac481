"""egtile.tools.cuda.iket: IKET's instrumentation calls are accepted with IKET's checks, record the event table,
emit no events (with a warning), and leave what the kernel computes unchanged."""

from __future__ import annotations

import warnings

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import DSLError
from egtile.tools.cuda import iket


def _instrumented(n: int, threads: int = 64):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx, iket.range("block_total"):
            iket.mark("enter", payload=iket.payload(bx, dtype="int32"))
            for i in T.Parallel(threads):
                idx = bx * threads + i
                if idx < n:
                    iket.mark("store", payload=iket.payload(idx, dtype="int32"))
                    C[idx] = A[idx] * 2.0 + B[idx]
            iket.range_push("tail")
            iket.range_pop("tail")

    return main


def test_an_instrumented_kernel_computes_what_it_would_without_the_markers(tmp_path):
    with warnings.catch_warnings(record=True), iket.session(output_dir=tmp_path, runtime_payloads=True):
        warnings.simplefilter("always")
        prim = _instrumented(200)
        table = iket.event_table()
        assert iket.runtime_payloads_enabled() and iket.output_dir() == tmp_path
    assert table == {"block_total": {"kind": "range", "payload_dtype": None},
                     "enter": {"kind": "marker", "payload_dtype": "int32"},
                     "store": {"kind": "marker", "payload_dtype": "int32"},
                     "tail": {"kind": "range", "payload_dtype": None}}
    a, b = torch.randn(200), torch.randn(200)
    c = torch.full((200,), float("nan"))
    egtile.compile(prim, target="sim")(a, b, c)
    torch.testing.assert_close(c, a * 2.0 + b, rtol=0, atol=0)
    assert iket.trace_files(tmp_path) == []  # egtile writes no trace: only an external profiler would


def test_the_first_marker_says_that_no_events_are_recorded(monkeypatch):
    monkeypatch.setattr(iket, "_warned", False)
    with pytest.warns(iket.IketWarning, match="emits no event records"):
        _instrumented(64)


@pytest.mark.parametrize("bad, match", [
    (lambda: iket.mark("x" * 33), "at most 32 UTF-8 bytes"),
    (lambda: iket.payload(1, dtype="float16"), "int32, uint32, float32"),
    (lambda: iket.range_pop("never_opened"), "innermost open range is None"),
])
def test_iket_checks_its_arguments_at_the_users_line(bad, match):
    with pytest.raises(DSLError, match=match) as err:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as _bx:
                bad()
                for i in T.Parallel(64):
                    A[i] = A[i] + 1.0
    assert "test_tools_iket.py" in str(err.value)


def test_one_name_has_one_payload_dtype_and_markers_live_in_kernels():
    with iket.session():
        with pytest.raises(DSLError, match="one name has one payload dtype"):
            @T.prim_func
            def main(A: T.Tensor((64,), "float32")):
                with T.Kernel(1, threads=64) as bx:
                    iket.mark("m", payload=iket.payload(bx, dtype="int32"))
                    iket.mark("m", payload=iket.payload(bx, dtype="float32"))
                    for i in T.Parallel(64):
                        A[i] = A[i] + 1.0
        with pytest.raises(DSLError, match="outside a kernel"):
            iket.mark("host_side")
