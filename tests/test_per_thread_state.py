"""Per-thread state (``T.alloc_var`` / ``T.alloc_local``) that tile ops set, and branches on a per-thread flag.

Two egtile bugs found by porting TileLang's examples (``deepseek_mla/amd/benchmark_mla_decode_amd_tilelang.py``'s
combine kernel; ``blocksparse_attention/example_tilelang_sparse_gqa_decode_*.py``), each reduced to its construct:

* ``T.clear`` / ``T.fill`` / ``T.copy`` into a local buffer was a cooperative tile op, its elements split across
  the threads, so only one thread's copy was set (the verifier's L1 refused the schedule). Every thread sets its
  own copy now (``egtile.language.per_thread``).
* an ``if`` on a block-uniform ``T.alloc_var`` flag whose side needs a CTA barrier was not sealed (the lowering
  counted only condition reads that need barriers; a local's do not), so the verifier refused it (L1-L3).
"""

from __future__ import annotations

import math

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import UnsupportedError


@egtile.jit(out_idx=[-1], target="sim")
def combine(H, S, D):
    """The flash-decoding combine: a log-sum-exp over splits in per-thread scalars (``T.clear`` of one)."""

    @T.prim_func
    def main(glse: T.Tensor((H, S), "float32"), Op: T.Tensor((H, S, D), "float32"),
             Out: T.Tensor((H, D), "float32")):
        with T.Kernel(H, threads=32) as by:
            acc = T.alloc_fragment([D], "float32")
            row = T.alloc_local([2], "float32")
            lse_sum = T.alloc_var("float32")
            lse_max = T.alloc_var("float32")
            sc = T.alloc_var("float32")
            T.clear(lse_sum)
            T.clear(acc)
            T.fill(lse_max, -T.infinity("float32"))
            for k in T.serial(S):
                lse_max = T.max(lse_max, glse[by, k])
            for k in T.Pipelined(S, num_stages=1):
                lse_sum += T.exp2(glse[by, k] - lse_max)
            lse_sum = T.log2(lse_sum) + lse_max
            for k in T.serial(S):
                T.copy(glse[by, k], row[0])  # a start point into a local
                sc = T.exp2(row[0] - lse_sum)
                for i in T.Parallel(D):
                    acc[i] += Op[by, k, i] * sc
            T.copy(glse[by, 0:2], row)  # a region into a local: every thread holds both
            for i in T.Parallel(D):
                Out[by, i] = acc[i] + row[0] - row[1]

    return main


def test_tile_ops_into_per_thread_buffers_set_every_threads_copy():
    H, S, D = 2, 3, 32
    k = combine(H, S, D)
    g, op = torch.randn(H, S), torch.randn(H, S, D)
    out = k(g, op)
    w = torch.softmax(g.double() * math.log(2.0), -1)
    ref = (w[..., None] * op.double()).sum(1) + (g[:, 0] - g[:, 1]).double()[:, None]
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


def test_a_tile_op_into_a_large_local_buffer_is_refused_by_name():
    with pytest.raises(UnsupportedError, match="per-thread buffer big of 2048 elements"):
        @T.prim_func
        def main(Out: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32):
                big = T.alloc_local([2048], "float32")
                T.clear(big)
                for i in T.Parallel(64):
                    Out[i] = big[i]


@egtile.jit(out_idx=[-1], target="sim")
def flagged(M, N, nblk):
    """A flag set under a uniform branch of a loop, then an ``if`` on it whose side needs CTA barriers."""

    @T.prim_func
    def main(X: T.Tensor((nblk, M, N), "float32"), idx: T.Tensor((nblk,), "int32"),
             Out: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((M, N), "float32")
            rs = T.alloc_fragment((M,), "float32")
            flag = T.alloc_var("bool")
            T.fill(acc, 1.0)
            flag = False
            for k in T.serial(nblk):
                if idx[k] >= 0:
                    flag = True
                    for i, j in T.Parallel(M, N):
                        acc[i, j] += X[idx[k], i, j]
            if flag:
                T.reduce_sum(acc, rs, dim=1)
                for i, j in T.Parallel(M, N):
                    acc[i, j] = acc[i, j] / rs[i]
            T.copy(acc, Out)

    return main


@pytest.mark.parametrize("picks", [[2, -1, 0], [-1, -1, -1]])
def test_a_branch_on_a_uniform_flag_that_needs_barriers_is_sealed(picks):
    M, N, nb = 16, 32, 3
    k = flagged(M, N, nb)
    idx = torch.tensor(picks, dtype=torch.int32)
    X = torch.rand(nb, M, N) + 0.5
    out = k(X, idx)
    ref = torch.ones(M, N, dtype=torch.float64)
    for v in picks:
        if v >= 0:
            ref += X[v].double()
    if any(v >= 0 for v in picks):
        ref = ref / ref.sum(1, keepdim=True)
    torch.testing.assert_close(out.double(), ref, rtol=1e-6, atol=1e-6)


def _row_per_thread_gemv(N, K):
    """TileLang's per-thread gemv shape: each thread clears its own accumulator (``T.clear`` inside the thread
    region, i.e. inside its ``T.Parallel`` body) and sums one row."""

    @T.prim_func
    def main(A: T.Tensor((K,), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as _bx:
            tn = T.get_thread_binding(0)
            acc = T.alloc_local((1,), "float32")
            T.clear(acc)
            for k in T.serial(K):
                acc[0] += A[k].astype("float32") * B[tn, k].astype("float32")
            C[tn] = acc[0]

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_clear_inside_per_thread_code_sets_each_threads_accumulator(target):
    N, K = 32, 24
    a = torch.randn(K, dtype=torch.float16)
    b = torch.randn(N, K, dtype=torch.float16)
    c = torch.full((N,), float("nan"))
    egtile.compile(_row_per_thread_gemv(N, K), target=target)(a, b, c)
    torch.testing.assert_close(c.double(), b.double() @ a.double(), rtol=1e-5, atol=1e-5)
