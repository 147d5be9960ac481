"""DSL kernels that scale one dimension of the verifier's work: tile size, trip count, statement count.

Shared by the verifier's tests (small sizes, cross-checked against the enumerating verifier) and by
``benchmarks/compile_time.py`` (real sizes). Each factory returns a traced ``PrimFunc``.

* :func:`gemm`: TileLang's pipelined GEMM (``examples/gemm.py``) at any tile shape and stage count.
* :func:`flash_attention`: a FlashAttention-2 style forward pass over one head (online softmax, two gemms
  per K/V block, the K/V tiles pipelined).
* :func:`pipe_par`: ``n`` ``T.Parallel`` statements over a 16x64 tile in ``T.Pipelined(trips, num_stages)``
  (the reliability review's statement-count family): a copy into shared memory, then a chain of
  element-wise updates of a fragment that each read the shared tile, then one store.
* :func:`if_nest`: ``n`` nested ``T.If`` on loaded values around element-wise stores.
"""

from __future__ import annotations

import math

from egtile import language as T


def gemm(M: int, N: int, K: int, block_M: int = 128, block_N: int = 128, block_K: int = 64, num_stages: int = 3,
         threads: int = 256, dtype: str = "float16"):
    """``C = A @ B`` (float32 accumulation), as ``examples/gemm.py`` writes it."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def flash_attention(seq: int = 256, dim: int = 64, block_M: int = 64, block_N: int = 64, num_stages: int = 2,
                    threads: int = 128):
    """``O = softmax(Q K^T / sqrt(dim)) V`` for one head, ``Q, K, V, O`` of shape ``(seq, dim)``."""
    scale = math.log2(math.e) / math.sqrt(dim)

    @T.prim_func
    def main(Q: T.Tensor((seq, dim), "float16"), K: T.Tensor((seq, dim), "float16"),
             V: T.Tensor((seq, dim), "float16"), O: T.Tensor((seq, dim), "float16")):  # noqa: E741
        with T.Kernel(T.ceildiv(seq, block_M), threads=threads) as bx:
            Q_s = T.alloc_shared((block_M, dim), "float16")
            K_s = T.alloc_shared((block_N, dim), "float16")
            V_s = T.alloc_shared((block_N, dim), "float16")
            P_s = T.alloc_shared((block_M, block_N), "float16")
            S = T.alloc_fragment((block_M, block_N), "float32")
            acc = T.alloc_fragment((block_M, dim), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            rescale = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            l = T.alloc_fragment((block_M,), "float32")  # noqa: E741
            T.copy(Q[bx * block_M, 0], Q_s)
            T.fill(acc, 0.0)
            T.fill(l, 0.0)
            T.fill(m, -1.0e30)
            for k in T.Pipelined(T.ceildiv(seq, block_N), num_stages=num_stages):
                T.copy(K[k * block_N, 0], K_s)
                T.copy(V[k * block_N, 0], V_s)
                T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
                T.copy(m, m_prev)
                T.reduce_max(S, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp2((m_prev[i] - m[i]) * scale)
                for i, j in T.Parallel(block_M, block_N):
                    S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
                T.reduce_sum(S, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * rescale[i] + row_sum[i]
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] = acc[i, j] * rescale[i]
                T.copy(S, P_s)
                T.gemm(P_s, V_s, acc)
            for i, j in T.Parallel(block_M, dim):
                acc[i, j] = acc[i, j] / l[i]
            T.copy(acc, O[bx * block_M, 0])

    return main


def pipe_par(n: int, trips: int = 4, num_stages: int = 2, rows: int = 16, cols: int = 64, threads: int = 128):
    """``n`` (>= 2) ``T.Parallel(rows, cols)`` statements per iteration of ``T.Pipelined(trips, num_stages)``."""
    assert n >= 2

    @T.prim_func
    def main(X: T.Tensor((trips * rows, cols), "float32"), Y: T.Tensor((trips * rows, cols), "float32")):
        with T.Kernel(1, threads=threads) as _bx:
            S = T.alloc_shared((rows, cols), "float32")
            F = T.alloc_fragment((rows, cols), "float32")
            for ko in T.Pipelined(trips, num_stages=num_stages):
                T.copy(X[ko * rows, 0], S)
                for i, j in T.Parallel(rows, cols):
                    F[i, j] = S[i, j]
                for _ in range(n - 2):
                    for i, j in T.Parallel(rows, cols):
                        F[i, j] = F[i, j] * 0.5 + S[i, j]
                for i, j in T.Parallel(rows, cols):
                    Y[ko * rows + i, j] = F[i, j]

    return main


def if_nest(n: int, width: int = 64, threads: int = 128):
    """``n`` nested ``T.If(X[d] > 0)``; level ``d`` stores row ``d`` of ``Y`` in a ``T.Parallel``."""

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n, width), "float32")):
        with T.Kernel(1, threads=threads) as _bx:

            def level(d: int) -> None:
                if d == n:
                    return
                with T.If(X[d] > 0.0):
                    for i in T.Parallel(width):
                        Y[d, i] = X[d] * 2.0
                    level(d + 1)

            level(0)

    return main
