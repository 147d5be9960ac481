"""A codegen detail measured by its absence: egtile's attention kernel as generated, against the same source with
the lines that match ``--drop`` removed, and cuDNN, in turns on the same inputs (issue 13).

For a detail that changes no value (a hint, a fence the schedule does not need at this shape), the source without
it is the kernel egtile emitted before it: both are checked against a float32 reference first, then timed in turns
(benchmarks/_timing.py: an order drawn per round, each turn settling its clock for ``--warm-s`` seconds first).

    python benchmarks/prototypes/source_ab.py --drop 'eg_tma_prefetch_descriptor' [--shape 4,32,4096,128]
                                              [--causal both|yes|no] [--rounds 6] [--warm-s 0.5]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks"), str(ROOT / "benchmarks" / "prototypes")]


def main() -> int:
    from _variants import add_ab_arguments

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drop", required=True, help="a regular expression: generated lines that match it are removed")
    add_ab_arguments(ap)
    args = ap.parse_args()
    sys.argv = [sys.argv[0], "--target", "cuda"]
    import flash_attention as FA
    from _variants import against_cudnn, example_kernel, variant
    from attention import CAUSALITIES, reference_f32

    B, H, S, D = (int(x) for x in args.shape.split(","))
    drop = re.compile(args.drop)
    torch.manual_seed(0)
    for causal in CAUSALITIES[args.causal]:
        kernel = example_kernel(B, H, S, D, causal)
        src = kernel._built.source
        kept = "\n".join(line for line in src.split("\n") if not drop.search(line))
        removed = src.count("\n") - kept.count("\n")
        if not removed:
            print(f"--drop {args.drop!r} matches no line of the generated kernel")
            return 1
        Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
        ref, scale = reference_f32(Q, K, V, causal)
        dropped = variant(kernel, kept, "dropped", fast_math=kernel.fast_math)
        against_cudnn({"egtile": kernel, f"egtile without {removed} line(s)": dropped}, Q, K, V, causal, ref,
                      FA.tolerance(scale, ref, "float16"), args.rounds, args.iters, args.warm_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
