"""Pipelined tiled scale: ``Y = X * scale``, streamed through shared memory tile by tile.

Each block owns ``block_M`` rows of ``X`` and walks along them in ``block_N``-wide tiles with
``T.Pipelined(..., num_stages=2)``. Per tile, ``T.copy`` moves the tile from global to shared memory
(a whole, contiguous, 16-byte-aligned box: eligible for a TMA load) and a ``T.Parallel`` nest reads it
back, scales it, and stores it to ``Y``.

This is the shape that warp specialization is made for: the copy is a producer (an asynchronous TMA
load) and the ``T.Parallel`` nest its only consumer. With two stages egtile may give the copy its own
producer warpgroup, double-buffer ``X_shared`` and connect the two sides with mbarriers (the consumer
waits on the "full" barrier of the stage before its first read of ``X_shared``; it arrives on the
"empty" barrier after its last read). ``kernel.explain()`` prints which of these rewrites the
extraction chose and why the others were rejected.

Checked against a float64 reference on fresh random inputs, with a NaN-filled ``Y``; one float16
rounding of the product is allowed per element.

    python examples/pipelined_scale.py [--target auto|interp|sim|cuda] [--small]
"""

from __future__ import annotations

import sys

import torch
from _check import check, parse_args, poisoned, report

import egtile
from egtile import language as T

ARGS = parse_args(__doc__)

SCALE = 3.0


@egtile.jit(target=ARGS.target)
def pipelined_scale(M: int, N: int, block_M: int = 16, block_N: int = 64, num_stages: int = 2,
                    threads: int = 128, dtype: str = "float16"):
    assert M % block_M == 0 and N % block_N == 0, "this kernel has no boundary guard: tiles must divide M, N"

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            X_shared = T.alloc_shared((block_M, block_N), dtype)
            for ko in T.Pipelined(T.ceildiv(N, block_N), num_stages=num_stages):
                T.copy(X[bx * block_M, ko * block_N], X_shared)
                for i, j in T.Parallel(block_M, block_N):
                    Y[bx * block_M + i, ko * block_N + j] = X_shared[i, j] * SCALE

    return main


def main() -> int:
    M, N = (32, 192) if ARGS.small else (64, 256)
    kernel = pipelined_scale(M, N)
    print(kernel.explain())
    dev = kernel.device
    X = torch.randn(M, N, dtype=torch.float16, device=dev)
    Y = poisoned((M, N), torch.float16, dev)
    kernel(X, Y)
    ref = X.double() * SCALE
    # One float16 rounding of the product: half an ulp, 2^-11 relative (X is normal or zero after randn
    # with overwhelming probability; atol covers a subnormal product, whose ulp is 2^-24).
    ok = check("Y", Y, ref, rtol=2.0**-11, atol=2.0**-24)
    return report("pipelined_scale", kernel.target, ok)


if __name__ == "__main__":
    sys.exit(main())
