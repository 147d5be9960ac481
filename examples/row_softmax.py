"""Row softmax: ``Y[r, :] = exp(X[r, :] - max(X[r, :])) / sum(exp(X[r, :] - max(X[r, :])))``.

A reduction kernel. Each block owns ``block_M`` whole rows. It copies them into a fragment
(``T.alloc_fragment``: per-block scratch the scheduler places), takes the row maxima with
``T.reduce_max``, exponentiates in place in a ``T.Parallel`` nest, sums the rows with ``T.reduce_sum``
and writes the normalized rows out. Subtracting the row maximum first keeps ``exp`` from overflowing;
the test input has rows with large offsets to show it.

The statements inside one block depend on each other (each ``T.Parallel`` reads what the reduction
before it wrote), so egtile orders them with block-wide barriers; the ``T.Parallel`` nests are
partitioned over the block's threads.

Checked against ``torch.softmax`` in float64 on fresh random inputs, with a NaN-filled ``Y``.

    python examples/row_softmax.py [--target auto|interp|sim|cuda] [--small]
"""

from __future__ import annotations

import sys

import torch
from _check import check, parse_args, poisoned, report

import egtile
from egtile import language as T

ARGS = parse_args(__doc__)


@egtile.jit(target=ARGS.target)
def row_softmax(M: int, N: int, block_M: int = 8, threads: int = 128, dtype: str = "float32"):
    assert M % block_M == 0, "this kernel has no boundary guard: block_M must divide M"
    accum_dtype = "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                Y[bx * block_M + i, j] = x[i, j] / row_sum[i]

    return main


def main() -> int:
    M, N = (16, 64) if ARGS.small else (64, 128)
    kernel = row_softmax(M, N)
    print(kernel.explain())
    dev = kernel.device
    X = torch.randn(M, N, dtype=torch.float32, device=dev) * 4
    X[::3] += 200.0  # exp(200) overflows float32: only a max-subtracting softmax gets these rows right
    Y = poisoned((M, N), torch.float32, dev)
    kernel(X, Y)
    ref = torch.softmax(X.double(), dim=1)
    # float32 error bound: exp a few ulp (fast-math __expf: 2 + 1.16*|x| ulp with |x| <~ 40 here), the row
    # sum at most N ulp of accumulated rounding, the division one more; as a relative bound on each output.
    rtol = (N + 64) * 2.0**-24
    ok = check("Y", Y, ref, rtol=rtol, atol=1e-30)
    return report("row_softmax", kernel.target, ok)


if __name__ == "__main__":
    sys.exit(main())
