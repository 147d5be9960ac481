"""Quickstart: the kernel of the README's "A kernel" section, run and checked.

``scale`` doubles a float32 vector, one 128-element tile per block. The kernel code is the README's,
with two changes so that it runs on every target:

* the decorator takes ``target=`` from ``--target`` (the README relies on the default, ``"auto"``);
* the input is created on ``kernel.device``. The README passes a CPU tensor (``torch.randn(1024)``),
  which only works when the target runs on the CPU: on an sm_90 GPU ``"auto"`` resolves to ``"cuda"``
  and egtile refuses a CPU argument with ``DeviceError`` instead of copying it.

After the README's lines the script checks ``y`` against ``2 * x`` in float64 (exact: doubling a float32
is exact), then compiles the same kernel without ``out_idx`` and checks it on a NaN-filled output, so
an element the kernel never writes cannot pass.

    python examples/quickstart.py [--target auto|interp|sim|cuda] [--small]   (--small is accepted; the
                                                                              README's size is small)
"""

from __future__ import annotations

import sys

import torch
from _check import check, parse_args, poisoned, report

import egtile
from egtile import language as T

ARGS = parse_args(__doc__)


# ---- the README's kernel ----------------------------------------------------------------------------

@egtile.jit(out_idx=[1], target=ARGS.target)
def scale(N: int = 1024, block: int = 128):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] * 2.0
    return main


def main() -> int:
    kernel = scale()
    x = torch.randn(1024, device=kernel.device)  # README: torch.randn(1024)
    y = kernel(x)                                # CPU tensors: runs in the simulator; CUDA tensors: on the GPU
    print(kernel.explain())                      # the schedule and why each decision was taken

    # ---- the check ----------------------------------------------------------------------------------
    ref = 2.0 * x.double()
    ok = check("y (out_idx)", y, ref, rtol=0.0, atol=0.0)
    explicit = egtile.compile(kernel.kernel, target=kernel.target)
    y2 = poisoned((1024,), torch.float32, kernel.device)
    explicit(x, y2)
    ok &= check("y (poisoned output)", y2, ref, rtol=0.0, atol=0.0)
    return report("quickstart", kernel.target, ok)


if __name__ == "__main__":
    sys.exit(main())
