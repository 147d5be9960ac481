"""Gaps found by porting TileLang's examples (docs/porting-tilelang.md), one test per construct family, each with
this file's own kernel compared against torch on fresh random inputs:

* ``tilelang.layout.make_swizzled_layout`` reached through ``import egtile as tilelang`` (the layout hint of
  ``egtile.language``);
* a loop outside ``T.Parallel`` whose bound is read from tensor data: it runs (``egtile.verifier.tripcount``;
  it was once refused) and computes what a static trip count with a guard computes;
* two gemm accumulators combined element-wise into the next gemm's register operand (flash-attention backward's
  ``dsT = P^T * dP^T``): the ``T.Parallel`` runs by the layout of one and reads the others as its peers.
"""

from __future__ import annotations

import pytest
import torch

import egtile
import egtile as tilelang
from egtile import language as T


def _swizzle_hinted(n: int):
    @T.prim_func
    def main(A: T.Tensor((n, n), "float16"), B: T.Tensor((n, n), "float16")):
        with T.Kernel(n // 32, threads=128) as bx:
            S = T.alloc_shared((32, n), "float16")
            T.annotate_layout({S: tilelang.layout.make_swizzled_layout(S)})
            T.copy(A[bx * 32, 0], S)
            for i, j in T.Parallel(32, n):
                B[bx * 32 + i, j] = S[i, j] * 2

    return main


def test_make_swizzled_layout_through_the_tilelang_alias():
    assert tilelang.layout.make_swizzled_layout is T.make_swizzled_layout
    a = torch.randn(64, 64).half()
    b = torch.full((64, 64), float("nan")).half()
    egtile.compile(_swizzle_hinted(64), target="sim")(a, b)
    assert torch.equal(b, a * 2)
    with pytest.raises(AttributeError, match="no attribute 'make_tiled_layout'"):
        tilelang.layout.make_tiled_layout  # noqa: B018


def _runtime_bound(guarded: bool, stages: int):
    @T.prim_func
    def main(N: T.Tensor((2,), "int32"), A: T.Tensor((256, 64), "float16"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            if guarded:
                for t in T.Pipelined(4, num_stages=stages):
                    if t < N[bx]:
                        T.copy(A[t * 64, 0], S)
                        for i, j in T.Parallel(64, 64):
                            acc[i, j] += S[i, j]
            else:
                for t in T.Pipelined(N[bx], num_stages=stages):  # the bound is tensor data
                    T.copy(A[t * 64, 0], S)
                    for i, j in T.Parallel(64, 64):
                        acc[i, j] += S[i, j]
            T.copy(acc, B)

    return main


@pytest.mark.parametrize("stages", [0, 2])
def test_a_loop_bound_read_from_a_tensor_runs(stages):
    kern = egtile.compile(_runtime_bound(False, stages), target="sim")
    for count in (3, 0):
        n = torch.tensor([count, 1], dtype=torch.int32)
        a = torch.randn(256, 64).half()
        b = torch.full((64, 64), float("nan"))
        kern(n, a, b)
        want = sum((a[t * 64:(t + 1) * 64].float() for t in range(count)), torch.zeros(64, 64))
        torch.testing.assert_close(b, want)


def test_the_guarded_static_loop_computes_the_same_sum():
    kern = egtile.compile(_runtime_bound(True, 2), target="sim")
    for count in (3, 1):
        n = torch.tensor([count, 0], dtype=torch.int32)
        a = torch.randn(256, 64).half()
        b = torch.full((64, 64), float("nan"))
        kern(n, a, b)
        ref = a[: 64 * count].double().reshape(count, 64, 64).sum(0)
        torch.testing.assert_close(b.double(), ref, rtol=1e-5, atol=1e-4)


def _split_k_atomic(M: int, N: int, K: int, split: int, block: int = 64, block_K: int = 32):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((2, M, N), "float32")):
        with T.Kernel(N // block, M // block, split, threads=128) as (bx, by, bz):
            As = T.alloc_shared((block, block_K), "float16")
            Bs = T.alloc_shared((block_K, block), "float16")
            acc = T.alloc_fragment((block, block), "float32")
            T.clear(acc)
            for ko in T.Pipelined(K // split // block_K, num_stages=2):
                T.copy(A[by * block, bz * (K // split) + ko * block_K], As)
                T.copy(B[bz * (K // split) + ko * block_K, bx * block], Bs)
                T.gemm(As, Bs, acc)
            T.atomic_add(C[1, by * block, bx * block], acc)  # a 2-D tile into the last two dimensions
            for j in T.Parallel(block):
                T.atomic_add(C[0, 0, bx * block + j], acc[0, j], memory_order="relaxed")  # atomicAdd's own order

    return main


def test_tile_atomic_add_accumulates_every_element_of_the_tile():
    kern = egtile.compile(_split_k_atomic(64, 64, 128, 2), target="sim")
    a, b = torch.randn(64, 128).half(), torch.randn(128, 64).half()
    c0 = torch.randn(2, 64, 64)
    c = c0.clone()
    kern(a, b, c)
    prod = a.double() @ b.double()
    assert torch.equal(c[0, 1:], c0[0, 1:])
    torch.testing.assert_close(c[0, 0].double(), c0[0, 0].double() + prod[0], rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(c[1].double(), c0[1].double() + prod, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_tile_atomic_add_at_a_start_point_past_the_tensor_edge_skips_the_outside(target):
    """``T.atomic_add(C[o0, o1], tile)`` where the tile runs past a global tensor's edge: the elements outside are
    skipped, as the region form ``C[o0:o0 + m, o1:o1 + n]`` and ``T.copy`` past the edge do (it used to be refused)."""
    M, N, B = 100, 70, 32

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, B), T.ceildiv(M, B), threads=128) as (bx, by):
            t = T.alloc_fragment((B, B), "float32")
            T.copy(X[by * B, bx * B], t)
            T.atomic_add(C[by * B, bx * B], t)

    x, c0 = torch.randn(M, N), torch.randn(M, N)
    c = c0.clone()
    egtile.compile(main, target=target)(x, c)
    torch.testing.assert_close(c.double(), c0.double() + x.double(), rtol=1e-6, atol=1e-6)


def _two_products_combined(n: int = 64):
    """The shape of TileLang's flash-attention backward (examples/flash_attention/example_mha_bwd_bhsd.py): two gemm
    accumulators combined element-wise into a 16-bit fragment that is the next gemm's A operand."""
    @T.prim_func
    def main(Kt: T.Tensor((n, n), "float16"), Q: T.Tensor((n, n), "float16"), V: T.Tensor((n, n), "float16"),
             dO: T.Tensor((n, n), "float16"), dK: T.Tensor((n, n), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Ks = T.alloc_shared((n, n), "float16")
            q = T.alloc_shared((n, n), "float16")
            Vs = T.alloc_shared((n, n), "float16")
            do = T.alloc_shared((n, n), "float16")
            qkT = T.alloc_fragment((n, n), "float32")
            dsT = T.alloc_fragment((n, n), "float32")
            dsT_cast = T.alloc_fragment((n, n), "float16")
            dk = T.alloc_fragment((n, n), "float32")
            T.copy(Kt, Ks)
            T.copy(Q, q)
            T.copy(V, Vs)
            T.copy(dO, do)
            T.clear(dk)
            T.clear(qkT)
            T.gemm(Ks, q, qkT, transpose_B=True)
            T.clear(dsT)
            T.gemm(Vs, do, dsT, transpose_B=True)
            for i, j in T.Parallel(n, n):
                dsT_cast[i, j] = qkT[i, j] * dsT[i, j]
            T.gemm(dsT_cast, q, dk)
            T.copy(dk, dK)

    return main


def test_two_accumulators_combined_into_the_next_gemms_operand():
    kern = egtile.compile(_two_products_combined(), target="sim")
    kt, q, v, do = (torch.randn(64, 64).half() / 4 for _ in range(4))
    out = torch.full((64, 64), float("nan"))
    kern(kt, q, v, do, out)
    ds = ((kt.double() @ q.double().T) * (v.double() @ do.double().T)).half().double()
    torch.testing.assert_close(out.double(), ds @ q.double(), rtol=2e-3, atol=2e-3)


def _region_atomic(n: int = 16, d: int = 32):
    @T.prim_func
    def main(S: T.Tensor((n, d), "float32"), C: T.Tensor((2, n, 3, d), "float32")):
        with T.Kernel(2, threads=128) as bx:
            t = T.alloc_shared((n, d), "float32")
            T.copy(S, t)
            T.atomic_add(C[bx, 0:n, 1, :], t, use_tma=True)  # a region: its unit dimensions dropped, as T.copy pairs

    return main


def test_tile_atomic_add_into_a_region():
    c0 = torch.randn(2, 16, 3, 32)
    c, s = c0.clone(), torch.randn(16, 32)
    egtile.compile(_region_atomic(), target="sim")(s, c)
    want = c0.clone()
    want[:, :, 1, :] += s
    assert torch.equal(c, want)


def test_earlier_tilelang_pass_config_keys_are_accepted_and_disable_fast_math_wins():
    from egtile.options import fast_math

    K = egtile.PassConfigKey
    assert K.TL_ENABLE_PTXAS_VERBOSE_OUTPUT.value == "tl.enable_ptxas_verbose_output"
    assert fast_math({K.TL_ENABLE_FAST_MATH: True, K.TL_DISABLE_FAST_MATH: False}) is True
    assert fast_math({K.TL_ENABLE_FAST_MATH: True, K.TL_DISABLE_FAST_MATH: True}) is False
    assert fast_math({"tl.disable_fast_math": True}) is False
