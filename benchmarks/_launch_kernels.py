"""The kernels the launch benchmarks call: the smallest work that still goes through every part of a launch.

* :func:`add_1d`: ``C = A + B`` over ``n`` float32 elements in one block, plain global loads and stores
  (no TMA descriptor, no shared memory): the host path's floor.
* :func:`add_tma`: the same sum over an ``(m, n)`` float32 tile whose ``A`` and ``B`` are staged in shared
  memory by ``T.copy`` (TMA loads: two ``CUtensorMap`` parameters), so a call also passes tensor maps.

Both are module-level factories, imported by ``benchmarks/launch.py`` (GPU) and
``benchmarks/host_path.py`` (CPU, stubbed driver).
"""

from __future__ import annotations

from egtile import language as T


def add_1d(n: int = 1024, threads: int = 256):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=threads) as _bx:
            for i in T.Parallel(n):
                C[i] = A[i] + B[i]

    return main


def add_tma(m: int = 16, n: int = 64, threads: int = 128):
    @T.prim_func
    def main(A: T.Tensor((m, n), "float32"), B: T.Tensor((m, n), "float32"), C: T.Tensor((m, n), "float32")):
        with T.Kernel(1, threads=threads) as _bx:
            A_s = T.alloc_shared((m, n), "float32")
            B_s = T.alloc_shared((m, n), "float32")
            for _ko in T.Pipelined(1, num_stages=1):
                T.copy(A[0, 0], A_s)
                T.copy(B[0, 0], B_s)
                for i, j in T.Parallel(m, n):
                    C[i, j] = A_s[i, j] + B_s[i, j]

    return main
