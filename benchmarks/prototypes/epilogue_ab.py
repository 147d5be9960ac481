"""The attention kernel's O tile written by a staged TMA store (egtile's default since f8dbd2f) against each
thread's own stores, in turns with cuDNN (issue 13).

``copy-via-tma-store`` (egtile.rules.epilogue) stages ``T.copy(acc_o, Output[bz, rows, by, :])`` through a
swizzled shared tile and one TMA store. This script compiles the kernel as egtile does and once more with that
rule removed from the ruleset, checks both against a float32 reference, and times them in turns with cuDNN
(benchmarks/_timing.py).

    python benchmarks/prototypes/epilogue_ab.py [--shape 4,32,4096,128] [--causal both|yes|no] [--rounds 6]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks"), str(ROOT / "benchmarks" / "prototypes")]


def main() -> int:
    from _variants import add_ab_arguments

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_ab_arguments(ap)
    args = ap.parse_args()
    sys.argv = [sys.argv[0], "--target", "cuda"]
    import flash_attention as FA
    from _variants import against_cudnn, example_kernel
    from attention import CAUSALITIES, reference_f32

    import egtile

    B, H, S, D = (int(x) for x in args.shape.split(","))
    torch.manual_seed(0)
    for causal in CAUSALITIES[args.causal]:
        staged = example_kernel(B, H, S, D, causal)
        plain = example_kernel(B, H, S, D, causal, rules=egtile.rules.default().without("copy-via-tma-store"))
        if "eg_tma_store" not in staged.get_kernel_source() or "eg_tma_store" in plain.get_kernel_source():
            print("egtile's kernel has no staged TMA store here: nothing to compare")
            return 1
        Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
        ref, scale = reference_f32(Q, K, V, causal)
        against_cudnn({"egtile (thread stores)": plain, "egtile (staged TMA store)": staged}, Q, K, V, causal, ref,
                      FA.tolerance(scale, ref, "float16"), args.rounds, args.iters, args.warm_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
