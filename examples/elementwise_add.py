"""Elementwise add: ``C = A + B`` over a grid of 2-D block tiles.

The first kernel to write in TileLang style. Each block owns a ``block_M x block_N`` tile; the body is
one ``T.Parallel`` nest over that tile, and egtile's partitioning rules split its iterations over the
block's 128 threads (running the whole nest on every thread, "replication", is rejected: the body writes
global memory, so every thread would redo every store). Each thread takes groups of 4 consecutive floats
and moves each group with one 16-byte load per input and one 16-byte store (``vectorize-parallel``: every
row of the tile starts 16-byte aligned); ``explain()`` shows the decision and the cheaper cost. ``out_idx=[-1]`` makes ``C`` an output: the
kernel allocates and returns it.

The script also shows how to check such a kernel: besides the ``out_idx`` call it compiles the same
kernel without ``out_idx`` (``egtile.compile(kernel.kernel, ...)``) and runs it on a NaN-filled ``C``,
so an element the kernel forgets to write cannot pass. Both results are compared, element by element,
with a float64 torch reference on fresh random inputs.

    python examples/elementwise_add.py [--target auto|interp|sim|cuda] [--small]
"""

from __future__ import annotations

import sys

import torch
from _check import check, parse_args, poisoned, report

import egtile
from egtile import language as T

ARGS = parse_args(__doc__)


@egtile.jit(out_idx=[-1], target=ARGS.target)
def elementwise_add(M: int, N: int, block_M: int = 32, block_N: int = 32, threads: int = 128,
                    dtype: str = "float32"):
    assert M % block_M == 0 and N % block_N == 0, "this kernel has no boundary guard: tiles must divide M, N"

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            start_x = bx * block_N
            start_y = by * block_M
            for local_y, local_x in T.Parallel(block_M, block_N):
                y = start_y + local_y
                x = start_x + local_x
                C[y, x] = A[y, x] + B[y, x]

    return main


def main() -> int:
    M, N = (64, 64) if ARGS.small else (128, 128)
    kernel = elementwise_add(M, N)
    print(kernel.explain())
    dev = kernel.device
    A = torch.randn(M, N, dtype=torch.float32, device=dev)
    B = torch.randn(M, N, dtype=torch.float32, device=dev)
    ref = A.double() + B.double()
    # A float32 sum is correctly rounded: at most half an ulp (2^-24 relative) from the exact sum.
    tol = {"rtol": 2.0**-24, "atol": 0.0}

    C = kernel(A, B)  # out_idx: C is allocated and returned
    ok = check("C (out_idx)", C, ref, **tol)

    explicit = egtile.compile(kernel.kernel, target=kernel.target)  # same kernel, C passed by the caller
    C2 = poisoned((M, N), torch.float32, dev)
    explicit(A, B, C2)
    ok &= check("C (poisoned output)", C2, ref, **tol)
    return report("elementwise_add", kernel.target, ok)


if __name__ == "__main__":
    sys.exit(main())
