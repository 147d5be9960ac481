"""egtile's attention kernel and cuDNN's, one launch each, for ``ncu`` at locked clocks (issue 13).

Under ``benchmarks/attention.py`` both kernels run at the card's power cap, so their ratio mixes two things: the
cycles each schedule needs and the clock its power draw buys. ``ncu`` locks the SM clock (``--clock-control base``,
its default), so the durations it reports compare cycles only. Run as

    ncu --section SpeedOfLight --section LaunchStats --section InstructionStats --csv --page details \\
        python benchmarks/prototypes/ncu_attention.py [--shape 4,32,4096,128] [--causal both]

Each kernel is launched once; ncu profiles every launch of the process, so the report also lists the few small
kernels of torch's input generation.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="4,32,4096,128")
    ap.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    args = ap.parse_args()
    sys.argv = [sys.argv[0], "--target", "cuda"]
    import flash_attention as FA
    from attention import CAUSALITIES
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import egtile

    B, H, S, D = (int(x) for x in args.shape.split(","))
    torch.manual_seed(0)
    Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
    q, k, v = (x.transpose(1, 2) for x in (Q, K, V))
    for causal in CAUSALITIES[args.causal]:
        bm, bn, nt, ns = FA.config_for(S, D, causal)
        prim = FA.flashattn.__wrapped__(B, H, S, D, causal, block_M=bm, block_N=bn, threads=nt, num_stages=ns)
        kernel = egtile.compile(prim, target="cuda", pass_configs=FA.PASS_CONFIGS)
        O = torch.empty_like(Q)  # noqa: E741
        torch.cuda.nvtx.range_push(f"egtile {'causal' if causal else 'full'}")
        kernel(Q, K, V, O)
        torch.cuda.nvtx.range_pop()
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            torch.cuda.nvtx.range_push(f"cudnn {'causal' if causal else 'full'}")
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        print(f"launched egtile and cuDNN, {'causal' if causal else 'full'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
