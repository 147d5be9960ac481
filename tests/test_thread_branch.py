"""A branch on the thread index around tile code (egtile.language.thread_branch): `if T.get_thread_binding() < 32:
<tile ops>` (and its `else:`) runs its tile code once on the whole block, which computes what TileLang's run on the
branch's threads computes; a branch that uses the thread index, whose two sides race, or whose else no thread takes
stays per-thread code, where a tile op is refused as before.

Semantic tests: kernels of our own on fresh random inputs, outputs poisoned (NaN), every element against float64."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.codegen import nvrtc
from egtile.errors import UnsupportedError
from egtile.ir import For, If, walk
from _check import poisoned
from test_frontend import run

N = 4
COLS = 64


def split_work(threads: int = 128, warps_then: int = 1, with_else: bool = True):
    """Warp(s) 0: a row softmax of a small N x N tile (a reduction along each row and along each column, as mHC's
    Sinkhorn step) and a sigmoid of its diagonal; the other warps (else): a pipelined scaled copy of Y."""

    @T.prim_func
    def main(X: T.Tensor((N, N), "float32"), Y: T.Tensor((N, 4 * COLS), "float32"),
             Out: T.Tensor((N, N), "float32"), Diag: T.Tensor((N,), "float32"),
             Z: T.Tensor((N, 4 * COLS), "float32")):
        with T.Kernel(1, threads=threads):
            xs = T.alloc_shared((N, N), "float32")
            T.copy(X, xs)
            if T.get_thread_binding() < 32 * warps_then:
                cm = T.alloc_fragment((N, N), "float32")
                mx = T.alloc_fragment((N,), "float32")
                cs = T.alloc_fragment((N,), "float32")
                for j in T.Parallel(N):
                    Diag[j] = T.sigmoid(xs[j, j])
                for j, k in T.Parallel(N, N):
                    cm[j, k] = xs[j, k]
                T.reduce_max(cm, mx, dim=1)
                for j, k in T.Parallel(N, N):
                    cm[j, k] = T.exp(cm[j, k] - mx[j])
                T.reduce_sum(cm, cs, dim=0)
                for j, k in T.Parallel(N, N):
                    Out[j, k] = cm[j, k] / cs[k]
            elif with_else:
                for c in T.Pipelined(4, num_stages=2):
                    ys = T.alloc_shared((N, COLS), "float32")
                    T.copy(Y[0, c * COLS], ys)
                    for j, k in T.Parallel(N, COLS):
                        Z[j, c * COLS + k] = ys[j, k] * 3.0

    return main


def reference(x: torch.Tensor, y: torch.Tensor):
    e = torch.exp(x.double() - x.double().max(1, keepdim=True).values)
    return e / e.sum(0, keepdim=True), torch.sigmoid(x.double().diagonal()), y.double() * 3.0


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("threads,warps_then", [(128, 1), (96, 2)])
def test_tile_code_on_part_of_the_block_computes_what_it_computes_on_those_threads(target, threads, warps_then):
    g = torch.Generator().manual_seed(threads + warps_then)
    x, y = torch.randn(N, N, generator=g), torch.randn(N, 4 * COLS, generator=g)
    out, diag = poisoned((N, N), torch.float32, "cpu"), poisoned((N,), torch.float32, "cpu")
    z = poisoned((N, 4 * COLS), torch.float32, "cpu")
    run(split_work(threads, warps_then), x, y, out, diag, z, target=target)
    ref_out, ref_diag, ref_z = reference(x, y)
    torch.testing.assert_close(out.double(), ref_out, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(diag.double(), ref_diag, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(z.double(), ref_z, rtol=0, atol=1e-6)


def test_the_branch_is_block_level_code_and_compiles():
    k = egtile.compile(split_work(), target="sim")
    body = k.kernel.body
    # no `if` on the thread index is left: the tile code stands at the block's level
    assert not [s for s in walk(body) if isinstance(s, If)]
    assert any(isinstance(s, For) and s.kind == "pipelined" for s in walk(body))
    assert nvrtc.compile_cuda(k.get_kernel_source(), "thread_branch.cu").cubin
    assert "front end: the `if` on the thread index at line" in k.explain()


def test_a_branch_without_tile_code_stays_per_thread():
    @T.prim_func
    def main(Out: T.Tensor((4,), "float32")):
        with T.Kernel(4, threads=128) as b:
            if T.get_thread_binding() == 0:
                Out[b] = 1.0

    ifs = [s for s in walk(main.kernel.body) if isinstance(s, If)]
    assert len(ifs) == 1  # inside the thread region, on the thread index


def test_a_branch_that_uses_the_thread_index_stays_per_thread_and_its_tile_op_is_refused():
    with pytest.raises(UnsupportedError, match="a tile op inside the `if` of per-thread code, whose condition may differ between the block's threads"):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                tx = T.get_thread_binding()
                if tx < 32:
                    A[tx] = 1.0
                    s = T.alloc_shared((32,), "float32")
                    T.clear(s)


def test_branches_that_touch_one_buffer_are_refused_as_a_race():
    with pytest.raises(UnsupportedError, match=r"both touch s and one writes it"):
        @T.prim_func
        def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((32,), "float32")
                if T.get_thread_binding() < 32:
                    T.copy(A, s)
                else:
                    T.copy(s, B)


def test_an_else_no_thread_takes_is_not_run():
    with pytest.raises(UnsupportedError, match="a tile op inside the `if` of per-thread code, whose condition may differ between the block's threads"):
        @T.prim_func
        def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=128):
                if T.get_thread_binding() < 1024:
                    T.copy(A, B)
                else:
                    T.clear(B)


@pytest.mark.gpu
def test_tile_code_on_part_of_the_block_on_the_gpu():
    x, y = torch.randn(N, N), torch.randn(N, 4 * COLS)
    out, diag = poisoned((N, N), torch.float32, "cpu"), poisoned((N,), torch.float32, "cpu")
    z = poisoned((N, 4 * COLS), torch.float32, "cpu")
    run(split_work(), x, y, out, diag, z, target="cuda")
    ref_out, ref_diag, ref_z = reference(x, y)
    torch.testing.assert_close(out.double(), ref_out, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(diag.double(), ref_diag, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(z.double(), ref_z, rtol=0, atol=1e-6)


def test_branches_that_touch_one_storage_through_a_view_are_refused_as_a_race():
    # a fresh-user finding: a T.view of another dtype shares its base's bytes in TileLang
    with pytest.raises(UnsupportedError, match=r"both touch S and one writes it"):
        @T.prim_func
        def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32"), Z: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((64,), "float32")
                V = T.view(S, shape=(64,), dtype="int32")
                T.copy(X, S)
                if T.get_thread_binding() < 64:
                    T.copy(S, Y)
                else:
                    for i in T.Parallel(64):
                        V[i] = i
                    for i in T.Parallel(64):
                        Z[i] = T.cast(V[i], "float32")


# ---- what a lifted branch cannot hold (fresh-user findings) -------------------------------------------------------


def test_an_atomic_outside_a_parallel_in_the_branch_is_refused():
    # TileLang runs it once per thread of the branch; run once on the block it would count 1, not 32
    with pytest.raises(UnsupportedError, match=r"T.atomic_add outside a T.Parallel in the `if` on the thread index"):
        @T.prim_func
        def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32"), C: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=128):
                if T.get_thread_binding() < 32:
                    T.copy(A, B)
                    T.atomic_add(C[0], 1.0)


@pytest.mark.parametrize("use", ["read", "write"])
def test_a_per_thread_variable_from_before_the_branch_is_refused(use):
    with pytest.raises(UnsupportedError, match=r"uses the per-thread variable L"):
        @T.prim_func
        def main(A: T.Tensor((32,), "float32"), B: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((32,), "float32")
                L = T.alloc_local((2,), "float32")
                T.fill(L, 7.0)
                tx = T.get_thread_binding()
                if T.get_thread_binding() < 32:
                    if use == "read":
                        T.fill(S, L[0])
                    else:
                        T.copy(A[0:2], L)
                B[tx] = L[1]


def test_a_block_barrier_inside_the_branch_is_refused():
    with pytest.raises(UnsupportedError, match=r"T.sync_threads\(\) inside the `if` on the thread index"):
        @T.prim_func
        def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((32,), "float32")
                if T.get_thread_binding() < 32:
                    T.copy(A, S)
                    T.sync_threads()
                    T.copy(S, B)
