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


def _pipelined_shift(n: int = 160):
    """Copies A's chunk k into shared memory and writes B's chunk k + 1: with B aliasing A, the sequential
    program reads what it wrote one step earlier, a dependence no rule sees (the scheduler picks a TMA
    producer that runs ahead of the consumers' writes)."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            s = T.alloc_shared((32,), "float32")
            for k in T.Pipelined(n // 32 - 1, num_stages=2):
                T.copy(A[k * 32], s)
                for i in T.Parallel(32):
                    B[(k + 1) * 32 + i] = s[i] + 1.0

    return main


@pytest.mark.parametrize("target", ["sim", "interp"])
def test_a_written_parameter_that_aliases_another_is_refused(target):
    """Found by a fresh-user review: ``k(b, b)`` ran on the CPU targets as if A and B were separate copies
    (B[64:68] = 1.0 where the sequential program gives 2.0 ...), and the GPU schedule would race."""
    import egtile

    k = egtile.compile(_pipelined_shift(), target=target)
    b = torch.randn(160)
    with pytest.raises(ArgumentError, match=r"'A' and 'B' share memory \(640 bytes overlap\).*writes 'B'"):
        k(b, b)
    big = torch.randn(320)
    with pytest.raises(ArgumentError, match=r"\(4 bytes overlap\)"):
        k(big[:160], big[159:319])  # one element in common
    x, y = big[:160], big[160:]  # disjoint views of one storage are fine
    y.fill_(float("nan"))
    want = y.clone()
    want[32:] = x[:128] + 1.0
    k(x, y)
    torch.testing.assert_close(y, want, rtol=0, atol=0, equal_nan=True)


def test_parameters_that_are_only_read_may_alias():
    import egtile

    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            for i in T.Parallel(64):
                C[i] = A[i] * B[i]

    k = egtile.compile(main, target="sim")
    a = torch.randn(64)
    c = torch.full((64,), float("nan"))
    k(a, a, c)
    torch.testing.assert_close(c, a * a, rtol=0, atol=0)
    with pytest.raises(ArgumentError, match="'A' and 'C' share memory"):
        k(a, a, a)


def test_the_generated_check_rejects_aliasing_and_the_complete_check_names_it():
    from egtile.validate import REJECT, Checker

    kern = _pipelined_shift().kernel
    seen = []
    checker = Checker(kern.params, device="cpu", written={"B"}, explain=lambda ts: seen.append(ts), name="main")
    b = torch.randn(160)
    assert checker.accept([b, torch.randn(160)]) == -1
    assert checker.accept([b, b]) == REJECT
    checker([b, b])
    assert seen  # a refusal always reaches the complete check, which raises (tested above)
