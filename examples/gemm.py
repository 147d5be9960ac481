"""Tiled GEMM: ``C = A @ B`` with float16 inputs and float32 accumulation.

TileLang's canonical matmul. Each block computes one ``block_M x block_N`` tile of ``C``: it clears a
float32 fragment accumulator, then walks over K with ``T.Pipelined(..., num_stages=2)``; per step it
copies an ``A`` tile and a ``B`` tile from global into shared memory (``T.copy``, both TMA-eligible) and
accumulates their product with ``T.gemm`` (which instructions compute it is the backend's choice). The
accumulator is rounded to float16 once, in the final ``T.copy`` to ``C``.

The K loop is the textbook warp-specialization target: both copies become TMA loads issued by a
producer warpgroup, the ``T.gemm`` runs in the consumer warpgroup, and the two stages of ``A_shared`` /
``B_shared`` are handed over with mbarriers. ``kernel.explain()`` shows the decisions.

Checked against a float64 reference on fresh random inputs, with a NaN-filled ``C``. The allowed error
per element is the standard bound for this arithmetic: products of float16 values are exact in float32,
each of the K additions rounds (at most one float32 ulp, 2^-23 relative, also covering tensor cores that
truncate), and the final float16 rounding adds half an ulp (2^-11 relative)::

    |C - A @ B| <= 2^-11 * |A @ B| + K * 2^-23 * (|A| @ |B|)

    python examples/gemm.py [--target auto|interp|sim|cuda] [--small]
"""

from __future__ import annotations

import sys

import torch
from _check import check, parse_args, poisoned, report

import egtile
from egtile import language as T
from egtile.api import resolve_target

ARGS = parse_args(__doc__)


@egtile.jit(out_idx=[-1], target=ARGS.target)
def matmul(M: int, N: int, K: int, block_M: int = 64, block_N: int = 64, block_K: int = 32,
           num_stages: int = 2, threads: int = 128, dtype: str = "float16", accum_dtype: str = "float32"):
    assert M % block_M == 0 and N % block_N == 0 and K % block_K == 0, \
        "this kernel has no boundary guard: tiles must divide M, N, K"

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def main() -> int:
    if ARGS.small:
        M, N, K = 64, 64, 96
    elif resolve_target(ARGS.target) == "sim":
        # The simulator checks every shared-memory access of every thread for races: about a second per
        # 64x64x32 tile step on a CPU core, so 256x256x256 (128 tile steps) would take minutes.
        M, N, K = 128, 128, 64
    else:
        M, N, K = 256, 256, 256
    kernel = matmul(M, N, K)
    print(kernel.explain())
    dev = kernel.device
    A = torch.randn(M, K, dtype=torch.float16, device=dev)
    B = torch.randn(K, N, dtype=torch.float16, device=dev)
    A64, B64 = A.double().cpu(), B.double().cpu()
    ref = A64 @ B64
    rtol = 2.0**-11
    atol = K * 2.0**-23 * (A64.abs() @ B64.abs())

    C = kernel(A, B)  # out_idx: C is allocated and returned
    ok = check("C (out_idx)", C, ref, rtol=rtol, atol=atol)

    explicit = egtile.compile(kernel.kernel, target=kernel.target)  # same kernel, C passed by the caller
    C2 = poisoned((M, N), torch.float16, dev)
    explicit(A, B, C2)
    ok &= check("C (poisoned output)", C2, ref, rtol=rtol, atol=atol)
    return report("gemm", kernel.target, ok)


if __name__ == "__main__":
    sys.exit(main())
