"""Block-sparse GEMM: ``C = (A * mask) @ B`` where a block mask says which ``block_M x block_K`` tiles of ``A``
are non-zero.

TileLang's block-sparse matmul. ``Mask[by, k]`` (an int32 input, one flag per row block and k-step) tells
block row ``by`` whether to skip step ``k``: ``T.If(Mask[by, k])`` guards the step's two copies and its
``T.gemm``, so a skipped step loads nothing and computes nothing.

The branch needs CTA barriers inside it (the copies write shared tiles the gemm's threads read, and the
next step's copies overwrite what this gemm read). That is legal because the condition is *block-uniform*:
every thread of the block reads the same element of a tensor the kernel never writes, so all of them take
the same side and reach every ``__syncthreads`` (``egtile.analysis.uniform``; the verifier derives the
same fact from the schedule). A branch on data threads may disagree on (a tensor the kernel writes, a
per-thread value) is refused at its line instead. The lowering *seals* the side (a barrier first and
last), which lets the verifier check it as a unit whichever steps run (``docs/soundness.md``).

Checked against a float64 reference on fresh random inputs and a fresh random mask (about half the steps
taken, with at least two consecutive ones), on a NaN-filled ``C``, with the error bound of
``examples/gemm.py``::

    |C - ref| <= 2^-11 * |ref| + K * 2^-23 * (|A| @ |B|)

    python examples/block_sparse_gemm.py [--target auto|interp|sim|cuda] [--small]
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
def block_sparse_matmul(M: int, N: int, K: int, block_M: int = 64, block_N: int = 64, block_K: int = 32,
                        num_stages: int = 2, threads: int = 128, dtype: str = "float16",
                        accum_dtype: str = "float32"):
    assert M % block_M == 0 and N % block_N == 0 and K % block_K == 0, \
        "this kernel has no boundary guard: tiles must divide M, N, K"

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             Mask: T.Tensor((M // block_M, K // block_K), "int32"), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                with T.If(Mask[by, k] != 0):
                    T.copy(A[by * block_M, k * block_K], A_shared)
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def random_mask(rows: int, steps: int) -> torch.Tensor:
    """About half the steps of each block row, and two consecutive ones in row 0 (back-to-back steps)."""
    mask = (torch.rand(rows, steps) < 0.5).to(torch.int32)
    mask[0, :2] = 1
    return mask


def main() -> int:
    if ARGS.small:
        M, N, K = 64, 64, 128
    elif resolve_target(ARGS.target) == "sim":
        M, N, K = 128, 64, 128  # the simulator checks every shared access of every thread (see gemm.py)
    else:
        M, N, K = 512, 512, 1024
    kernel = block_sparse_matmul(M, N, K)
    print(kernel.explain())
    bM, bK = 64, 32
    dev = kernel.device
    A = torch.randn(M, K, dtype=torch.float16, device=dev)
    B = torch.randn(K, N, dtype=torch.float16, device=dev)
    mask = random_mask(M // bM, K // bK)
    keep = mask.repeat_interleave(bM, 0).repeat_interleave(bK, 1).double()
    A64, B64 = A.double().cpu() * keep, B.double().cpu()
    ref = A64 @ B64
    rtol = 2.0**-11
    atol = K * 2.0**-23 * (A64.abs() @ B64.abs())

    C = kernel(A, B, mask.to(dev))  # out_idx: C is allocated and returned
    ok = check("C (out_idx)", C, ref, rtol=rtol, atol=atol)

    explicit = egtile.compile(kernel.kernel, target=kernel.target)  # same kernel, C passed by the caller
    C2 = poisoned((M, N), torch.float16, dev)
    explicit(A, B, mask.to(dev), C2)
    ok &= check("C (poisoned output)", C2, ref, rtol=rtol, atol=atol)
    return report("block_sparse_gemm", kernel.target, ok)


if __name__ == "__main__":
    sys.exit(main())
