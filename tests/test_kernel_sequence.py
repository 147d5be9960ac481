"""A prim_func with several ``with T.Kernel`` blocks is several kernels launched one after another on the same
tensors (egtile.kernelseq), as TileLang launches them: what the first writes, the second reads."""

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ArgumentError


@egtile.jit(out_idx=[-1], target="interp")  # the simulator runs each kernel as any other (the sequence is the host's)
def split_then_combine(M: int = 64, N: int = 32, splits: int = 4):
    chunk = M // splits

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Partial: T.Tensor((splits, N), "float32"),
             Out: T.Tensor((N,), "float32")):
        with T.Kernel(splits, threads=32) as s:  # 1: one partial column sum per split
            for j in T.Parallel(N):
                acc = T.alloc_var("float32", 0.0)
                for i in T.serial(chunk):
                    acc += X[s * chunk + i, j]
                Partial[s, j] = acc
        with T.Kernel(1, threads=32):  # 2: combine the partial sums, scaled by the first row
            for j in T.Parallel(N):
                total = T.alloc_var("float32", 0.0)
                for s in T.serial(splits):
                    total += Partial[s, j]
                Out[j] = total * X[0, j]

    return main


def test_two_kernel_blocks_run_in_order_and_the_second_reads_what_the_first_wrote():
    kernel = split_then_combine()
    assert [k.kernel.name for k in kernel.kernels] == ["main", "main_1"]
    X = torch.randn(64, 32)
    Partial = torch.full((4, 32), float("nan"))  # poisoned: only the first kernel fills it
    out = kernel(X, Partial)
    ref_partial = X.double().reshape(4, 16, 32).sum(1)
    torch.testing.assert_close(Partial.double(), ref_partial, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.double(), ref_partial.sum(0) * X[0].double(), rtol=1e-5, atol=1e-5)


@egtile.jit(target="sim")
def eager_gate_then_down(X, W1, W2, H):
    """TileLang's fused MoE shape in the eager style: kernel 1 writes ``H = silu(X @ W1)`` into a tensor the caller
    passes, kernel 2 reads it: ``Out = H @ W2`` (a ``T.empty`` it returns)."""
    M, K, N = T.const("M, K, N")
    X: T.Tensor((M, K), T.float32)
    W1: T.Tensor((K, N), T.float32)
    W2: T.Tensor((N, K), T.float32)
    H: T.Tensor((M, N), T.float32)
    Out = T.empty((M, K), T.float32)
    with T.Kernel(M, threads=32) as i:
        for j in T.Parallel(N):
            acc = T.alloc_var("float32", 0.0)
            for k in T.serial(K):
                acc += X[i, k] * W1[k, j]
            H[i, j] = acc / (1.0 + T.exp(-acc))
    with T.Kernel(M, threads=32) as i:
        for k in T.Parallel(K):
            acc = T.alloc_var("float32", 0.0)
            for j in T.serial(N):
                acc += H[i, j] * W2[j, k]
            Out[i, k] = acc
    return Out


def test_an_eager_function_with_two_kernel_blocks_runs_them_in_order():
    X, W1, W2 = torch.randn(4, 32), torch.randn(32, 32) / 4, torch.randn(32, 32) / 4
    H = torch.full((4, 32), float("nan"))  # poisoned: only the first kernel fills it
    out = eager_gate_then_down(X, W1, W2, H)
    h = X.double() @ W1.double()
    torch.testing.assert_close(H.double(), h * torch.sigmoid(h), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.double(), (h * torch.sigmoid(h)) @ W2.double(), rtol=1e-5, atol=1e-5)
    assert len(eager_gate_then_down.compile(X, W1, W2, H).kernels) == 2


def test_a_multi_kernel_prim_func_is_refused_by_jitkernel_itself_naming_compile():
    func = split_then_combine.fn()
    with pytest.raises(ArgumentError, match="has 2 T.Kernel block.s. and 0 T.alloc_global scratch tensor.s.; "
                                            "compile it with egtile.compile"):
        egtile.api.JITKernel(func, target="interp")
    k = egtile.compile(func, out_idx=[-1], target="interp")
    X = torch.randn(64, 32)
    out = k(X, torch.full((4, 32), float("nan")))
    torch.testing.assert_close(out.double(), X.double().sum(0) * X[0].double(), rtol=1e-5, atol=1e-5)


@egtile.jit(out_idx=[-1], target="interp")
def scratch_then_combine(M: int = 32, N: int = 16, splits: int = 2):
    chunk = M // splits

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Out: T.Tensor((N,), "float32")):
        Partial = T.alloc_global((splits, N), "float32")  # scratch the caller never sees
        with T.Kernel(splits, threads=32) as s:
            for j in T.Parallel(N):
                m = T.alloc_var("float32", -1e30)
                for i in T.serial(chunk):
                    m = T.max(m, X[s * chunk + i, j])
                Partial[s, j] = m
        with T.Kernel(1, threads=32):
            for j in T.Parallel(N):
                m = T.alloc_var("float32", -1e30)
                for s in T.serial(splits):
                    m = T.max(m, Partial[s, j])
                Out[j] = m

    return main


def test_alloc_global_scratch_is_allocated_by_each_call_and_shared_by_the_kernels():
    kernel = scratch_then_combine()
    for _ in range(2):
        X = torch.randn(32, 16)
        out = kernel(X)  # out_idx=[-1] is Out: the scratch is not counted among the caller's parameters
        assert torch.equal(out, X.max(0).values)
    with pytest.raises(ArgumentError, match="expects 1 tensor argument"):
        kernel(X, torch.empty(2, 16))


@egtile.jit(out_idx=[-1], target="interp")
def scratch_half_written(N: int = 32):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), I: T.Tensor((N,), "int32"), Out: T.Tensor((N,), "float32")):
        S = T.alloc_global((N,), "float32")
        J = T.alloc_global((N,), "int32")
        with T.Kernel(1, threads=32):
            for i in T.Parallel(N // 2):  # the upper half of the scratch is never written
                S[i] = X[i]
                J[i] = I[i]
        with T.Kernel(1, threads=32):
            for i in T.Parallel(N):
                Out[i] = S[i] + J[i]

    return main


def test_a_read_of_scratch_no_kernel_wrote_is_poisoned_on_the_cpu_targets():
    kernel = scratch_half_written()  # interp and sim allocate the scratch alike (KernelSequence._allocate)
    X, I = torch.randn(32), torch.randint(-50, 50, (32,), dtype=torch.int32)
    out = kernel(X, I)
    assert torch.equal(out[:16], X[:16] + I[:16])
    assert out[16:].isnan().all()  # a stale plausible value here would hide the missing write


@pytest.mark.gpu
def test_two_kernels_with_scratch_on_the_gpu():
    kernel = egtile.jit(out_idx=[-1], target="cuda")(scratch_then_combine.fn)()
    for _ in range(2):
        X = torch.randn(32, 16, device="cuda")
        assert torch.equal(kernel(X), X.max(0).values)


def test_tvm_alloc_buffer_allocates_by_scope():
    """``T.alloc_buffer`` (TVM's name): global scratch before the kernels, shared / fragment inside one."""
    from egtile.errors import UnsupportedError

    @T.prim_func
    def main(X: T.Tensor((4, 64), "float32"), Y: T.Tensor((64,), "float32")):
        part = T.alloc_buffer((4, 64), "float32")  # scope "global": a scratch tensor the kernels share
        with T.Kernel(4, threads=64) as bx:
            s = T.alloc_buffer((64,), "float32", scope="shared")
            f = T.alloc_buffer((64,), "float32", scope="local.fragment")
            T.copy(X[bx, :], s)
            T.copy(s, f)
            for i in T.Parallel(64):
                f[i] = f[i] * 2.0
            T.copy(f, part[bx, :])
        with T.Kernel(1, threads=64) as _bx:
            acc = T.alloc_fragment((64,), "float32")
            T.clear(acc)
            for r in T.serial(4):
                for i in T.Parallel(64):
                    acc[i] += part[r, i]
            T.copy(acc, Y)

    x = torch.randn(4, 64)
    y = torch.full((64,), float("nan"))
    egtile.compile(main, target="sim")(x, y)
    torch.testing.assert_close(y.double(), (2 * x.double()).sum(0), rtol=1e-5, atol=1e-5)

    with pytest.raises(UnsupportedError, match="scope='local.var'"):
        @T.prim_func
        def bad(X: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as _bx:
                T.alloc_buffer((1,), "float32", scope="local.var")
                for i in T.Parallel(64):
                    X[i] = X[i] + 1.0
