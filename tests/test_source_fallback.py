"""Without the source front end (EGTILE_SOURCE_FRONTEND=0, or a kernel whose source egtile cannot read): the
warning says so, `v += e` on a T.alloc_var still stores, and a loop's variable read after the loop is refused at the
reading line (each was a fresh user's report: no warning, a kernel computing Y == X, and a bare KeyError)."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import DSLError
from egtile.language.source import SourceUnavailableWarning
from _check import poisoned


def _scan(n: int = 20):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            acc = T.alloc_var("float32", 0.0)
            for i in T.serial(n):
                acc += X[i]
                Y[i] = acc

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("front_end", ["1", "0"])
def test_an_in_place_update_of_a_variable_stores_with_or_without_the_front_end(monkeypatch, target, front_end):
    monkeypatch.setenv("EGTILE_SOURCE_FRONTEND", front_end)
    x = torch.randn(20)
    y = poisoned((20,), torch.float32, "cpu")
    egtile.compile(_scan(), target=target)(x, y)
    torch.testing.assert_close(y.double(), x.double().cumsum(0), rtol=1e-5, atol=1e-5)


def test_the_front_end_switched_off_is_said_once_per_function(monkeypatch):
    monkeypatch.setenv("EGTILE_SOURCE_FRONTEND", "0")

    def make():
        @T.prim_func
        def off_kernel(X: T.Tensor((4,), "float32"), Y: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(4):
                    Y[i] = X[i]

        return off_kernel

    with pytest.warns(SourceUnavailableWarning, match=r"source front end is off .*`v = e` on a T.alloc_var only "
                                                      r"rebinds the name"):
        make()


def test_a_loop_variable_read_after_its_loop_is_refused_at_the_read(monkeypatch):
    monkeypatch.setenv("EGTILE_SOURCE_FRONTEND", "0")
    with pytest.warns(SourceUnavailableWarning):
        with pytest.raises(DSLError, match="the loop variable 'i' is used outside its loop") as err:
            @T.prim_func
            def main(X: T.Tensor((20,), "float32"), Y: T.Tensor((1,), "float32")):
                with T.Kernel(1, threads=32) as bx:
                    a = X[0] * 0.0
                    for i in T.serial(20):
                        a = a + X[i]
                    Y[0] = a
    assert "Y[0] = a" in err.value.loc.text


def test_an_assert_on_a_runtime_value_says_so():
    with pytest.raises(DSLError, match=r"An `assert` on it cannot be checked while tracing") as err:
        @T.prim_func
        def main(X: T.Tensor((4,), "float32"), Y: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                assert X[0] > 0
                for i in T.Parallel(4):
                    Y[i] = X[i]
    assert "assert X[0] > 0" in err.value.loc.text
