"""No raw exceptions out of public entry points (issue 9 item 8): each becomes an egtile error naming the
construct and the user's line."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import DSLError, ExternModelError, MissingConstructError, UnsupportedError


@pytest.fixture
def failing_model():
    def model(ptr, d):
        ptr.store(ptr.load() / d)  # ZeroDivisionError for d == 0

    egtile.register_extern("div_by", model)
    yield
    from egtile.externs import unregister_extern

    unregister_extern("div_by")


def _extern_kernel():
    @T.prim_func
    def main(X: T.Tensor((32,), "float32"), D: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32) as _bx:
            T.import_source('extern "C" __device__ void div_by(float* p, int d) { *p /= d; }')
            for i in T.Parallel(32):
                T.call_extern("void", "div_by", T.address_of(X[i]), D[i])

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_an_exception_inside_an_extern_model_names_the_extern_statement_and_line(target, failing_model):
    k = egtile.compile(_extern_kernel(), target=target)
    d = torch.ones(32, dtype=torch.int32)
    k(torch.randn(32), d)  # fine
    d[5] = 0
    with pytest.raises(ExternModelError) as info:
        k(torch.randn(32), d)
    msg = str(info.value)
    assert "extern 'div_by'" in msg and "ZeroDivisionError" in msg and "statement" in msg
    assert info.value.loc is not None and "T.call_extern" in info.value.loc.text


def test_egtile_errors_from_inside_a_model_pass_through():
    def model(ptr):
        ptr.store(1.0)

    egtile.register_extern("set_one", model)
    try:
        @T.prim_func
        def main(X: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _bx:
                for i in T.Parallel(32):
                    T.call_extern("void", "set_one", T.address_of(X[i]))

        x = torch.zeros(32)
        egtile.compile(main, target="interp")(x)
        assert torch.equal(x, torch.ones(32))
    finally:
        from egtile.externs import unregister_extern

        unregister_extern("set_one")


def test_a_buffer_of_another_prim_func_is_a_trace_time_error_naming_both():
    leaked = {}

    @T.prim_func
    def producer(Z: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            leaked["Z"] = Z
            for i in T.Parallel(32):
                Z[i] = 0.0

    with pytest.raises(DSLError, match=r"buffer 'Z' belongs to prim_func 'producer'.*'consumer'") as info:
        @T.prim_func
        def consumer(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _bx:
                for i in T.Parallel(32):
                    Y[i] = X[i] + leaked["Z"][i]  # KeyError 'Z' in the interpreter on 4e83d8c
    assert info.value.loc is not None and "leaked" in info.value.loc.text

    with pytest.raises(DSLError, match="belongs to prim_func 'producer'"):
        @T.prim_func
        def copier(X: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _bx:
                T.copy(leaked["Z"], X)


def test_a_value_carrying_another_prim_funcs_load_is_caught_after_tracing():
    leaked = {}

    @T.prim_func
    def producer(Z: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            for i in T.Parallel(32):
                leaked["v"] = Z[i] * 2.0
                Z[i] = 0.0

    with pytest.raises(DSLError, match=r"uses buffer 'Z' of another prim_func"):
        @T.prim_func
        def consumer(Y: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _bx:
                for i in T.Parallel(32):
                    Y[i] = leaked["v"]


def test_storing_an_extern_result_says_extern_used_as_a_value():
    with pytest.raises(UnsupportedError, match=r"T.call_extern\('f'\) used as a value") as info:
        @T.prim_func
        def main(Y: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32) as _bx:
                for i in T.Parallel(32):
                    Y[i] = T.call_extern("int32", "f", i)
    assert "ExternResult" not in str(info.value) and info.value.loc is not None


@pytest.mark.parametrize("name, hint", [("alloc_reducer", "T.alloc_fragment"), ("warpgroup_arrive", "barrier")])
def test_unimplemented_tilelang_constructs_name_themselves_and_an_alternative(name, hint):
    with pytest.raises(MissingConstructError, match=rf"T.{name} is not supported.*{hint}") as info:
        getattr(T, name)
    assert isinstance(info.value, UnsupportedError) and isinstance(info.value, AttributeError)
    assert info.value.loc is not None  # this test's line
    assert not hasattr(T, name) and getattr(T, name, None) is None


def test_an_unknown_construct_is_named():
    with pytest.raises(MissingConstructError, match="no construct T.frobnicate"):
        T.frobnicate  # noqa: B018
    with pytest.raises(AttributeError) as info:
        T.__wrapped__  # noqa: B018 - dunder probes stay plain AttributeErrors
    assert not isinstance(info.value, MissingConstructError)


def test_a_missing_construct_inside_a_kernel_points_at_the_users_line():
    with pytest.raises(MissingConstructError) as info:
        @T.prim_func
        def main(Y: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32) as _bx:
                v = T.alloc_reducer((32,), "int32")  # noqa: F841
    assert "T.alloc_reducer" in info.value.loc.text
