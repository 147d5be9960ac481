"""A load under a ``T.if_then_else`` guard may name an element outside its buffer where the guard is false: the
verifier's footprints (egtile.verifier.trace) leave such elements out instead of crashing on them, so the legal
kernel runs on the simulator, and an unguarded one is the simulator's ShapeError at the user's line."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ShapeError


def _shifted(guarded: bool, flat: bool):
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            s = T.alloc_shared((64,), "float32")
            for i in T.Parallel(64):
                s[i] = X[i]
            if flat:  # one index mixing two loop variables (the verifier lists its elements)
                for i, j in T.Parallel(8, 8):
                    if guarded:
                        Y[i * 8 + j] = T.if_then_else(i < 7, s[i * 8 + j + 8], 0.0)
                    else:
                        Y[i * 8 + j] = s[i * 8 + j + 8]  # @oob
            else:
                for i in T.Parallel(64):
                    Y[i] = T.if_then_else(i < 56, s[i + 8], 0.0)

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("flat", [True, False])
def test_a_guarded_load_past_the_buffer_runs(target, flat):
    x = torch.randn(64)
    y = torch.full((64,), float("nan"))
    egtile.compile(_shifted(True, flat), target=target)(x, y)
    want = torch.cat([x[8:], torch.zeros(8)])
    torch.testing.assert_close(y, want, rtol=0, atol=0)


def test_an_unguarded_load_past_the_buffer_is_a_shape_error_at_its_line():
    with pytest.raises(ShapeError, match="accessed at index 64") as e:
        egtile.compile(_shifted(False, True), target="sim")(torch.randn(64), torch.zeros(64))
    assert e.value.loc is not None and e.value.loc.text.endswith("# @oob")
