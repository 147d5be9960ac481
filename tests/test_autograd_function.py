"""Kernels inside torch.autograd.Function (the pattern TileLang's attention examples use): tensors that require
grad are accepted while grad mode is off (a Function's forward and backward, torch.no_grad()), and refused while
autograd records when the kernel writes them (torch forbids the in-place write); a tensor the kernel only
reads is always accepted (TileLang's behaviour; the outputs do not require grad). Our own kernels, against torch's autograd on
fresh random inputs."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ArgumentError

N, BLOCK = 512, 128


def mul_kernel(target):
    @T.prim_func
    def mul(X: T.Tensor((N,), "float32"), W: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(N // BLOCK, threads=128) as bx:
            for i in T.Parallel(BLOCK):
                Y[bx * BLOCK + i] = X[bx * BLOCK + i] * W[bx * BLOCK + i] + T.exp(X[bx * BLOCK + i])

    return egtile.compile(mul, out_idx=[2], target=target)


def grad_kernel(target):
    @T.prim_func
    def grad(X: T.Tensor((N,), "float32"), W: T.Tensor((N,), "float32"), G: T.Tensor((N,), "float32"),
             DX: T.Tensor((N,), "float32"), DW: T.Tensor((N,), "float32")):
        with T.Kernel(N // BLOCK, threads=128) as bx:
            for i in T.Parallel(BLOCK):
                j = bx * BLOCK + i
                DX[j] = G[j] * (W[j] + T.exp(X[j]))
                DW[j] = G[j] * X[j]

    return egtile.compile(grad, out_idx=[3, 4], target=target)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_kernel_pair_in_an_autograd_function_matches_torch_autograd(target):
    fwd, bwd = mul_kernel(target), grad_kernel(target)

    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return fwd(x, w)  # x and w require grad; grad mode is off in here

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            dx, dw = bwd(x, w, g.contiguous())
            return dx, dw

    x = torch.randn(N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    g = torch.randn(N)
    y = Mul.apply(x, w)
    y.backward(g)
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    y64 = x64 * w64 + torch.exp(x64)
    y64.backward(g.double())
    torch.testing.assert_close(y.detach().double(), y64.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(x.grad.double(), x64.grad, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(w.grad.double(), w64.grad, rtol=1e-6, atol=1e-6)


def test_a_read_tensor_that_requires_grad_is_read_and_the_output_does_not_require_grad():
    fwd = mul_kernel("interp")
    x, w = torch.randn(N, requires_grad=True), torch.randn(N)
    y = fwd(x, w)  # grad mode on: read, as TileLang reads it; autograd does not see the kernel
    torch.testing.assert_close(y, (x * w + torch.exp(x)).detach(), rtol=1e-6, atol=1e-6)
    assert not y.requires_grad


def test_a_written_tensor_that_requires_grad_is_refused_while_autograd_records():
    @T.prim_func
    def step(P: T.Tensor((N,), "float32"), G: T.Tensor((N,), "float32")):
        with T.Kernel(N // BLOCK, threads=128) as bx:
            for i in T.Parallel(BLOCK):
                P[bx * BLOCK + i] = P[bx * BLOCK + i] - 0.5 * G[bx * BLOCK + i]

    for target in ("interp", "sim"):
        with pytest.raises(ArgumentError, match=r"argument 'P'.*writes this tensor in place.*requires grad"):
            egtile.compile(step, target=target)(torch.randn(N, requires_grad=True), torch.randn(N))


def test_a_written_parameter_that_requires_grad_is_updated_under_no_grad():
    """The optimizer-step pattern: a leaf that requires grad updated in place with grad mode off."""

    @T.prim_func
    def step(P: T.Tensor((N,), "float32"), G: T.Tensor((N,), "float32")):
        with T.Kernel(N // BLOCK, threads=128) as bx:
            for i in T.Parallel(BLOCK):
                P[bx * BLOCK + i] = P[bx * BLOCK + i] - 0.5 * G[bx * BLOCK + i]

    for target in ("interp", "sim"):
        k = egtile.compile(step, target=target)
        p = torch.randn(N, requires_grad=True)
        g = torch.randn(N)
        want = p.detach() - 0.5 * g
        with torch.no_grad():
            k(p, g)
        torch.testing.assert_close(p.detach(), want, rtol=0, atol=0)
        assert p.requires_grad and p.is_leaf
