"""Tests of egtile.validate: each bad argument gives its own error type naming the parameter, expected, got."""

from __future__ import annotations

import pytest
import torch

from egtile import language as T
from egtile.errors import ArgumentError, DeviceError, DTypeError, ShapeError
from egtile.validate import check_args


@pytest.fixture(scope="module")
def kernel():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float16"), Out: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            Out[bx] = T.cast(A[bx, 0], "int32")

    return main.kernel


def good():
    return [torch.zeros(4, 8, dtype=torch.float16), torch.zeros(4, dtype=torch.int32)]


def test_good_arguments_pass(kernel):
    check_args(kernel, good(), device="cpu")
    check_args(kernel, good(), device=None)
    check_args(kernel, good()[:1], device="cpu", out_idx=(1,))


def test_wrong_number_of_arguments(kernel):
    with pytest.raises(ArgumentError) as e:
        check_args(kernel, good()[:1], device="cpu")
    assert str(e.value) == "kernel 'main' expects 2 tensor argument(s) (A, Out), got 1"
    with pytest.raises(ArgumentError, match=r"expects 2 tensor argument\(s\) \(A, Out\), got 3"):
        check_args(kernel, good() + [torch.zeros(1)], device="cpu")


def test_not_a_tensor(kernel):
    with pytest.raises(ArgumentError) as e:
        check_args(kernel, [[0.0] * 32, good()[1]], device="cpu")
    assert str(e.value) == ("argument 'A' (parameter 0 of kernel 'main'): expected a torch.Tensor of dtype float16 "
                            "and shape (4, 8), got list")


def test_wrong_dtype_is_not_coerced(kernel):
    args = good()
    args[1] = torch.zeros(4, dtype=torch.int64)
    with pytest.raises(DTypeError) as e:
        check_args(kernel, args, device="cpu")
    assert "argument 'Out' (parameter 1 of kernel 'main'): expected dtype torch.int32 (int32), got torch.int64" \
        in str(e.value)


def test_wrong_shape(kernel):
    args = good()
    args[0] = torch.zeros(8, 4, dtype=torch.float16)
    with pytest.raises(ShapeError) as e:
        check_args(kernel, args, device="cpu")
    assert str(e.value) == "argument 'A' (parameter 0 of kernel 'main'): expected shape (4, 8), got (8, 4)"


def test_wrong_device(kernel):
    with pytest.raises(DeviceError) as e:
        check_args(kernel, good(), device="cuda")
    assert str(e.value) == ("argument 'A' (parameter 0 of kernel 'main'): expected a tensor on device 'cuda', got one "
                            "on 'cpu'")
    meta = [t.to("meta") for t in good()]
    with pytest.raises(DeviceError, match="expected a tensor on device 'cpu', got one on 'meta'"):
        check_args(kernel, meta, device="cpu")


def test_non_contiguous(kernel):
    args = good()
    args[0] = torch.zeros(8, 4, dtype=torch.float16).t()
    with pytest.raises(DeviceError) as e:
        check_args(kernel, args, device="cpu")
    assert "argument 'A' (parameter 0 of kernel 'main'): expected a contiguous (row-major) tensor with strides " \
           "(8, 1), got strides (1, 4)" in str(e.value)
    # A sliced view with the right strides on every dimension that matters is accepted.
    check_args(kernel, [torch.zeros(4, 8, dtype=torch.float16), torch.zeros(4, 2, dtype=torch.int32)[:, 0]
                        .contiguous()], device="cpu")
    with pytest.raises(DeviceError, match="strides \\(1,\\), got strides \\(2,\\)"):
        check_args(kernel, [good()[0], torch.zeros(4, 2, dtype=torch.int32)[:, 0]], device="cpu")
