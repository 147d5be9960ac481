"""The attention kernel's O tile written by a staged TMA store instead of each thread's own stores, measured
before the decision can be taken for it (issue 13).

``copy-via-tma-store`` (egtile.rules.epilogue) is legal for ``T.copy(acc_o, Output[bz, rows, by, :])`` but its
shared-memory condition counts every fragment that is not a wgmma accumulator, and every buffer a pipelined loop
writes, as staged shared memory (366848 bytes for this kernel, whose schedule uses 165 KB), so it never fires here.
This script compiles the kernel as egtile does and once more with that bound replaced by 0 (the real schedule
then needs 197672 bytes: it fits), checks both against a float32 reference, and times them in turns with cuDNN
(benchmarks/_timing.py). The schedule cache is off: the second kernel is not what egtile would cache.

    python benchmarks/prototypes/epilogue_ab.py [--shape 4,32,4096,128] [--causal both|yes|no] [--rounds 6]
"""

from __future__ import annotations

import argparse
import os
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
    os.environ["EGTILE_DISABLE_CACHE"] = "1"
    sys.argv = [sys.argv[0], "--target", "cuda"]
    import flash_attention as FA
    from _variants import against_cudnn
    from attention import reference_f32

    import egtile
    import egtile.rules.epilogue as epilogue

    B, H, S, D = (int(x) for x in args.shape.split(","))
    torch.manual_seed(0)
    bound = epilogue.shared_upper_bound
    for causal in {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]:
        bm, bn, nt, ns = FA.config_for(S, D, causal)
        make = lambda: FA.flashattn.__wrapped__(B, H, S, D, causal, block_M=bm, block_N=bn, threads=nt,  # noqa: E731
                                                num_stages=ns)
        epilogue.shared_upper_bound = bound
        plain = egtile.compile(make(), target="cuda", pass_configs=FA.PASS_CONFIGS)
        epilogue.shared_upper_bound = lambda ctx: 0
        staged = egtile.compile(make(), target="cuda", pass_configs=FA.PASS_CONFIGS)
        epilogue.shared_upper_bound = bound
        if "eg_tma_store" not in staged.get_kernel_source():
            print("the forced kernel has no TMA store: nothing to compare")
            return 1
        Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
        ref, scale = reference_f32(Q, K, V, causal)
        against_cudnn({"egtile (thread stores)": plain, "egtile (staged TMA store)": staged}, Q, K, V, causal, ref,
                      FA.tolerance(scale, ref, "float16"), args.rounds, args.iters, args.warm_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
