"""Hand-written warp-specialized GEMM: ``C = A @ B`` (float16 inputs, float32 accumulation), TileLang's WS style.

The kernel writes its own producer/consumer protocol instead of letting egtile derive it from
``T.Pipelined``: 256 threads, warpgroup 1 the producer, warpgroup 0 the consumer, ``num_stages`` shared
buffers for ``A`` and ``B`` and two barrier arrays:

* ``full[s]`` (128 arrivals): stage ``s`` holds data. The producer waits until the consumer released the
  stage, TMA-loads the ``A`` and ``B`` tiles into it (``T.tma_copy(..., barrier=full[s])``: the expected
  bytes are counted on ``full[s]`` and the loads complete them) and arrives.
* ``empty[s]`` (128 arrivals): stage ``s`` may be overwritten. The consumer waits on ``full[s]``,
  accumulates the product with ``T.gemm`` and arrives on ``empty[s]``.

Step ``ko`` uses stage ``ko % num_stages`` in round ``ko // num_stages``; a round's wait on ``full`` is for
the phase of parity ``round % 2``, and the producer's wait on ``empty`` for the parity before it (``^ 1``:
the wait of round 0 returns at once, the stage starts free).

egtile keeps this protocol as written (``kernel.explain()`` says so) and checks it before the kernel runs:
the verifier would report a wrong parity, a missing arrive, a read before the wait, an arrive count or an
expect_tx byte count that does not add up, or a producer that overwrites a stage without waiting on
``empty``, each at its line; the simulator also runs it with explicit threads and mbarriers. Checked
against a float64 reference on fresh random inputs with a NaN-filled ``C``, with the error bound of
``examples/gemm.py`` (float32 accumulation, no final float16 rounding here)::

    |C - A @ B| <= K * 2^-23 * (|A| @ |B|)

    python examples/warp_specialized_gemm.py [--target auto|interp|sim|cuda] [--small]
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
def ws_matmul(M: int, N: int, K: int, block_M: int = 128, block_N: int = 128, block_K: int = 64,
              num_stages: int = 2, dtype: str = "float16", accum_dtype: str = "float32"):
    assert M % block_M == 0 and N % block_N == 0 and K % block_K == 0, \
        "this kernel has no boundary guard: tiles must divide M, N, K"
    S = num_stages

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_shared = T.alloc_shared((S, block_M, block_K), dtype)
            B_shared = T.alloc_shared((S, block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            full = T.alloc_barrier([128] * S)  # producer -> consumer: the stage holds data
            empty = T.alloc_barrier([128] * S)  # consumer -> producer: the stage may be overwritten

            with T.ws(0):
                T.clear(C_local)
            for ko in T.serial(T.ceildiv(K, block_K)):
                with T.ws(1):  # producer warpgroup
                    T.mbarrier_wait_parity(empty[ko % S], ((ko // S) % 2) ^ 1)
                    T.tma_copy(A[by * block_M, ko * block_K], A_shared[ko % S, :, :], barrier=full[ko % S])
                    T.tma_copy(B[ko * block_K, bx * block_N], B_shared[ko % S, :, :], barrier=full[ko % S])
                    T.mbarrier_arrive(full[ko % S])
                with T.ws(0):  # consumer warpgroup
                    T.mbarrier_wait_parity(full[ko % S], (ko // S) % 2)
                    T.gemm(A_shared[ko % S, :, :], B_shared[ko % S, :, :], C_local)
                    T.mbarrier_arrive(empty[ko % S])
            with T.ws(0):
                T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def main() -> int:
    target = resolve_target(ARGS.target)
    if ARGS.small:
        M, N, K, bm, bn, bk = 64, 64, 64, 32, 32, 16
    elif target == "sim":
        # every shared access of every thread is race-checked: keep the simulated work small
        M, N, K, bm, bn, bk = 128, 128, 128, 64, 64, 32
    else:
        M, N, K, bm, bn, bk = 512, 512, 512, 128, 128, 64
    kernel = ws_matmul(M, N, K, bm, bn, bk)
    print(kernel.explain())
    dev = kernel.device
    A = torch.randn(M, K, dtype=torch.float16, device=dev)
    B = torch.randn(K, N, dtype=torch.float16, device=dev)
    A64, B64 = A.double().cpu(), B.double().cpu()
    ref = A64 @ B64
    atol = K * 2.0**-23 * (A64.abs() @ B64.abs())

    C = kernel(A, B)  # out_idx: C is allocated and returned
    ok = check("C (out_idx)", C, ref, rtol=0.0, atol=atol)

    explicit = egtile.compile(kernel.kernel, target=kernel.target)  # same kernel, C passed by the caller
    C2 = poisoned((M, N), torch.float32, dev)
    explicit(A, B, C2)
    ok &= check("C (poisoned output)", C2, ref, rtol=0.0, atol=atol)
    return report("warp_specialized_gemm", kernel.target, ok)


if __name__ == "__main__":
    sys.exit(main())
