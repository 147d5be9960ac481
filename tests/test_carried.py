"""Per-thread variables whose values cross a T.sync_threads() (egtile.language.carried): each thread keeps its own
copy, as a CUDA local variable does, so TileLang's SIMT loops (a shared tile loaded between two barriers, a
per-thread accumulator carried over the tiles) run as written.

Semantic tests: kernels of our own on fresh random inputs, outputs poisoned (NaN), every element against float64."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.codegen import nvrtc
from egtile.errors import UnsupportedError
from _check import poisoned
from test_frontend import run


def tiled_gemv(N: int, K: int, BN: int = 64, BK: int = 32):
    """The classic SIMT gemv: a tile of A staged in shared memory between two barriers, each thread's dot product
    accumulated across the tiles in a `T.alloc_var`."""

    @T.prim_func
    def main(A: T.Tensor((K,), "float32"), B: T.Tensor((N, K), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(N // BN, threads=BN) as bn:
            tn = T.get_thread_binding(0)
            A_s = T.alloc_shared((BK,), "float32")
            acc = T.alloc_var("float32")
            acc = 0.0
            for bk in T.serial(K // BK):
                if tn < BK:
                    A_s[tn] = A[bk * BK + tn]
                T.sync_threads()
                for kk in T.serial(BK):
                    acc += A_s[kk] * B[bn * BN + tn, bk * BK + kk]
                T.sync_threads()
            C[bn * BN + tn] = acc

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_an_accumulator_carried_over_barriers_sums_every_tile(target):
    N, K = 128, 96
    a, b = torch.randn(K), torch.randn(N, K)
    c = poisoned((N,), torch.float32, "cpu")
    run(tiled_gemv(N, K), a, b, c, target=target)
    torch.testing.assert_close(c.double(), b.double() @ a.double(), rtol=1e-5, atol=1e-5)


def test_the_carried_variable_is_a_block_array_explain_names_and_it_compiles():
    k = egtile.compile(tiled_gemv(128, 96), target="sim")
    acc = [b for b in k.kernel.allocs if b.name == "acc"]
    assert acc and acc[0].shape == (64, 1) and acc[0].scope == "fragment"
    assert "front end: per-thread variable 'acc' is kept per thread (written at 30, 36, read at 36" in k.explain()
    assert nvrtc.compile_cuda(k.get_kernel_source(), "carried.cu").cubin


def two_dim_threads(M: int, R: int = 3):
    """threads=(16, 4): a per-thread array (two partial sums) carried over the barriers of R rounds that exchange
    values through shared memory, and a block-level store to another per-thread variable (every thread's copy)."""

    @T.prim_func
    def main(X: T.Tensor((M, 64), "float32"), Y: T.Tensor((M, 64), "float32"), Z: T.Tensor((M, 64), "float32")):
        with T.Kernel(M, threads=(16, 4)) as bx:
            scale = T.alloc_var("float32")
            scale = 0.5  # before the thread region: every thread's copy
            tx, ty = T.get_thread_binding(0), T.get_thread_binding(1)
            S = T.alloc_shared((64,), "float32")
            part = T.alloc_local((2,), "float32")
            t = ty * 16 + tx
            part[0] = X[bx, t]
            part[1] = X[bx, t] * X[bx, t]
            for r in T.serial(R):
                S[t] = part[0]
                T.sync_threads()
                part[0] = part[0] * scale + S[(t + 1) % 64]
                part[1] = part[1] + part[0]
                T.sync_threads()
            Y[bx, t] = part[0]
            Z[bx, t] = part[1] * scale

    return main


def two_dim_reference(x: torch.Tensor, R: int = 3):
    p0, p1 = x.double().clone(), x.double() ** 2
    for _ in range(R):
        p0 = p0 * 0.5 + p0.roll(-1, dims=1)
        p1 = p1 + p0
    return p0, p1 * 0.5


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_per_thread_array_over_two_dimensional_threads_keeps_each_threads_values(target):
    M = 2
    x = torch.randn(M, 64)
    y, z = poisoned((M, 64), torch.float32, "cpu"), poisoned((M, 64), torch.float32, "cpu")
    run(two_dim_threads(M), x, y, z, target=target)
    ry, rz = two_dim_reference(x)
    torch.testing.assert_close(y.double(), ry, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(z.double(), rz, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_carried_array_reduced_by_a_per_thread_tile_op_after_the_barrier(target):
    # a tile op into a per-thread buffer is per-thread element stores (egtile.language.per_thread): they read the
    # thread's own copy of the carried array
    @T.prim_func
    def main(X: T.Tensor((32, 4), "float32"), Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            tx = T.get_thread_binding()
            part = T.alloc_local((4,), "float32")
            s = T.alloc_local((1,), "float32")
            for j in T.serial(4):
                part[j] = X[tx, j]
            T.sync_threads()
            T.reduce_sum(part, s, dim=0)
            Y[tx] = s[0]

    x = torch.randn(32, 4)
    y = poisoned((32,), torch.float32, "cpu")
    run(main, x, y, target=target)
    torch.testing.assert_close(y.double(), x.double().sum(1), rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_carried_variables_on_the_gpu():
    N, K = 256, 160
    a, b = torch.randn(K), torch.randn(N, K)
    c = poisoned((N,), torch.float32, "cpu")
    run(tiled_gemv(N, K), a, b, c, target="cuda")
    torch.testing.assert_close(c.double(), b.double() @ a.double(), rtol=1e-5, atol=1e-5)
    c = poisoned((128,), torch.float32, "cpu")
    run(pipelined_gemv(), a[:128], b[:128, :128].contiguous(), c, target="cuda")
    torch.testing.assert_close(c.double(), b[:128, :128].double() @ a[:128].double(), rtol=1e-5, atol=1e-5)
    c = poisoned((64,), torch.float32, "cpu")
    run(_own_copies("in-loop"), a[:64].contiguous(), c, target="cuda")
    torch.testing.assert_close(c.double(), 1.0 + 6.0 * a[:64].double(), rtol=1e-5, atol=1e-5)
    M = 3
    x = torch.randn(M, 64)
    y, z = poisoned((M, 64), torch.float32, "cpu"), poisoned((M, 64), torch.float32, "cpu")
    run(two_dim_threads(M), x, y, z, target="cuda")
    ry, rz = two_dim_reference(x)
    torch.testing.assert_close(y.double(), ry, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(z.double(), rz, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_let_binding_read_after_barriers_is_the_value_read_at_the_assignment(target):
    # `v = S[..]` binds the value read there; S is overwritten before v is read, two barriers later. It was refused
    # naming egtile's internal buffer 'v@0' (a fresh user's report); each thread now keeps its own v.
    N = 64

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            S[tx] = X[tx]
            T.sync_threads()
            v = S[(tx + 1) % N]
            T.sync_threads()
            S[tx] = 1.5
            T.sync_threads()
            Y[tx] = v + S[tx]

    x = torch.randn(N)
    y = poisoned((N,), torch.float32, "cpu")
    k = egtile.compile(main, target=target)
    k(x, y)
    torch.testing.assert_close(y.double(), x.double().roll(-1) + 1.5, rtol=1e-6, atol=1e-6)
    assert "per-thread variable 'v' is kept per thread" in k.explain()


def _own_copies(form: str, n: int = 64):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=n) as bx:
            acc = T.alloc_var("float32")
            acc = 1.0  # before the thread index: every thread's copy starts at 1.0
            if form == "in-loop":
                for r in T.serial(3):
                    tx = T.get_thread_binding()  # a region opened inside a block-level loop
                    acc += A[tx] * (r + 1)
                C[T.get_thread_binding()] = acc
            else:
                tx = T.get_thread_binding()
                acc += A[tx]
                C[tx] = acc

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("form", ["in-loop", "straight"])
def test_each_thread_updates_its_own_copy_of_a_variable_set_at_block_level(target, form):
    # Both computed a sum over every thread's element, silently (the region's T.Parallel iterations shared one `acc`:
    # interp summed them in order, and the region inside a loop was replicated on sim too; a fresh user's report).
    a = torch.randn(64)
    c = poisoned((64,), torch.float32, "cpu")
    run(_own_copies(form), a, c, target=target)
    ref = 1.0 + a.double() * (6.0 if form == "in-loop" else 1.0)
    torch.testing.assert_close(c.double(), ref, rtol=1e-5, atol=1e-5)


def pipelined_gemv(N: int = 128, K: int = 128, BK: int = 32, stages: int = 2):
    """The thread index taken before the loop and a T.copy of the shared tile inside it (block-level work between
    two stretches of per-thread code, split where it stands)."""

    @T.prim_func
    def main(A: T.Tensor((K,), "float32"), B: T.Tensor((N, K), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(N // 64, threads=64) as bn:
            A_s = T.alloc_shared((BK,), "float32")
            tx = T.get_thread_binding()
            acc = T.alloc_var("float32")
            acc = 0.0
            for bk in T.Pipelined(K // BK, num_stages=stages):
                T.copy(A[bk * BK:(bk + 1) * BK], A_s)
                for kk in T.serial(BK):
                    acc += A_s[kk] * B[bn * 64 + tx, bk * BK + kk]
            C[bn * 64 + tx] = acc

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_tile_op_in_a_loop_of_per_thread_code_splits_the_loop(target):
    # It was refused ("a tile op inside a loop or branch of per-thread code")
    a, b = torch.randn(128), torch.randn(128, 128)
    c = poisoned((128,), torch.float32, "cpu")
    run(pipelined_gemv(), a, b, c, target=target)
    torch.testing.assert_close(c.double(), b.double() @ a.double(), rtol=1e-5, atol=1e-5)


def _carried_in_parallel(form: str):
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            L = T.alloc_local((1,), "float32")
            L[0] = 1.0
            for i in T.Parallel(64):
                if form == "store":
                    L[0] = L[0] + X[i]  # @read
                elif form == "extern":
                    T.call_extern("void", "add_into_carried", T.address_of(L[0]), X[i])  # @read
                else:  # each iteration sets its own value first: no carry
                    L[0] = X[i] * 2.0
                    L[0] = L[0] + 1.0
                Y[i] = L[0]

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("form", ["store", "extern", "fresh"])
def test_a_local_carried_between_parallel_iterations_is_the_kernels_race(form, target):
    """interp ran one copy of L through all 64 iterations (1 + cumsum(X)), the simulator one per thread (iterations i
    and i + 32 shared it): silently apart (a helper's report, 2026-12-07). The read is refused at its line."""
    egtile.register_extern("add_into_carried", lambda p, x: p.store(p.load() + x))
    try:
        x = torch.randn(64)
        y = torch.full((64,), float("nan"))
        if form == "fresh":
            egtile.compile(_carried_in_parallel(form), target=target)(x, y)
            torch.testing.assert_close(y.double(), x.double() * 2 + 1, rtol=1e-6, atol=1e-6)
            return
        with pytest.raises(egtile.errors.KernelRaceError, match=r"per-thread variable 'L' is read before it is "
                                                                r"written in the body of `for i in T.Parallel") as e:
            egtile.compile(_carried_in_parallel(form), target=target)
        assert "# @read" in open(__file__).read().splitlines()[e.value.loc.line - 1]
    finally:
        from egtile.externs import unregister_extern

        unregister_extern("add_into_carried")
