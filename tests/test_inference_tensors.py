"""Tensors made under ``torch.inference_mode()`` (issue 9, item 8).

torch refuses to update an inference tensor in place outside inference mode. A kernel that writes such a
tensor is rejected before it runs, on every target, naming the kernel and the parameter; one that only
reads it runs; inside ``torch.inference_mode()`` both run. On 4e83d8c the CPU targets ran the whole kernel
and then failed in torch's ``copy_`` with a RuntimeError.
"""

from __future__ import annotations

import pytest
import torch
from launch_stubs import FakeDriver, install, uninstall

import egtile
from egtile import language as T
from egtile.errors import ArgumentError
from egtile.interp import interpret

MESSAGE = r"argument 'Z' \(parameter 2 of kernel 'main'\): the tensor was created under torch.inference_mode\(\)"


def axpy(n: int = 8):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32"), Z: T.Tensor((n,), "float32")):
        with T.Kernel(1):
            for i in T.Parallel(n):
                Z[i] = 2.0 * X[i] + Y[i]

    return main


def _inputs(device: str = "cpu"):
    g = torch.Generator().manual_seed(9)
    x, y = torch.randn(8, generator=g).to(device), torch.randn(8, generator=g).to(device)
    return x, y, 2.0 * x + y


def _run_all_cases(kernel, device: str = "cpu", check_values: bool = True) -> None:
    x, y, want = _inputs(device)
    with torch.inference_mode():
        z_inf = torch.full((8,), float("nan"), device=device)
        x_inf = x.clone()
    with pytest.raises(ArgumentError, match=MESSAGE):
        kernel(x, y, z_inf)
    assert bool(z_inf.isnan().all()), "the kernel ran before the error"
    z = torch.full((8,), float("nan"), device=device)
    kernel(x_inf, y, z)  # an inference tensor that is only read is fine
    with torch.inference_mode():
        kernel(x, y, z_inf)  # inside inference mode, writing it is fine
    if check_values:
        torch.testing.assert_close(z, want, rtol=0, atol=0)
        torch.testing.assert_close(z_inf, want, rtol=0, atol=0)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_written_inference_tensor_is_rejected_up_front_on_the_cpu_targets(target):
    _run_all_cases(egtile.compile(axpy(), target=target))


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_out_idx_output_made_inside_inference_mode_works(target):
    k = egtile.compile(axpy(), out_idx=[-1], target=target)
    x, y, want = _inputs()
    with torch.inference_mode():
        z = k(x, y)
    assert z.is_inference()
    torch.testing.assert_close(z, want, rtol=0, atol=0)


def test_interpret_called_directly_rejects_it_too():
    x, y, want = _inputs()
    with torch.inference_mode():
        z_inf = torch.full((8,), float("nan"))
    with pytest.raises(ArgumentError, match=MESSAGE):
        interpret(axpy().kernel, x, y, z_inf)
    with pytest.raises(ArgumentError, match=MESSAGE):  # mixed numpy / torch arguments
        interpret(axpy().kernel, x.numpy(), y.numpy(), z_inf)
    assert bool(z_inf.isnan().all())
    z = torch.full((8,), float("nan"))
    x_inf = torch.inference_mode()(lambda: x.clone())()
    interpret(axpy().kernel, x_inf, y, z)
    torch.testing.assert_close(z, want, rtol=0, atol=0)


def test_cuda_target_rejects_it_before_launching(monkeypatch):
    drv = FakeDriver(n_pointers=3)
    install(monkeypatch, drv)
    try:
        _run_all_cases(egtile.compile(axpy(), target="cuda"), check_values=False)  # nothing runs on a stub
        assert drv.calls["cuLaunchKernelEx"] == 2  # the two accepted calls
    finally:
        uninstall()


@pytest.mark.gpu
def test_cuda_target_on_gpu():
    _run_all_cases(egtile.compile(axpy(), target="cuda"), device="cuda")
