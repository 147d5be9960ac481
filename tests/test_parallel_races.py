"""A store that every iteration of a T.Parallel makes to one shared/global element is refused as the user's race,
at its line, before scheduling (egtile.analysis.parallel_races); guarded or fully indexed stores are not."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ScheduleError


def kernel(form: str):
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            s = T.alloc_shared((64,), "float32")
            T.clear(s)
            if form == "lost-update":
                for i in T.Parallel(64):
                    s[0] = s[0] + X[i]  # @race
            elif form == "two-dims":
                for i, j in T.Parallel(8, 8):
                    s[i] = X[i * 8 + j]  # @race
            elif form == "guarded":
                for i in T.Parallel(64):
                    if i == 0:
                        s[0] = X[0]
            else:
                for i in T.Parallel(64):
                    s[i] = X[i] * 2.0
            T.copy(s, Y)

    return main


@pytest.mark.parametrize("form", ["lost-update", "two-dims"])
def test_a_definite_race_is_the_users_error_at_its_line(form):
    with pytest.raises(ScheduleError, match=r"race in the kernel, not a schedule egtile chose") as e:
        egtile.compile(kernel(form), target="sim")
    assert "egtile's rules" not in str(e.value)
    assert e.value.loc is not None and e.value.loc.text.endswith("# @race")


@pytest.mark.parametrize("form", ["guarded", "indexed"])
def test_guarded_or_indexed_stores_compile_and_compute(form):
    x = torch.randn(64)
    y = torch.full((64,), float("nan"))
    egtile.compile(kernel(form), target="sim")(x, y)
    want = torch.zeros(64)
    if form == "guarded":
        want[0] = x[0]
    else:
        want = x * 2.0
    torch.testing.assert_close(y, want, rtol=0, atol=0)
