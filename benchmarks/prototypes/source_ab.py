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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drop", required=True, help="a regular expression: generated lines that match it are removed")
    ap.add_argument("--shape", default="4,32,4096,128")
    ap.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warm-s", type=float, default=0.5)
    args = ap.parse_args()
    sys.argv = [sys.argv[0], "--target", "cuda"]
    import flash_attention as FA
    from _devcheck import device_check
    from _timing import event_median, summary
    from _variants import check_then_time, variant
    from attention import reference_f32
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import egtile

    B, H, S, D = (int(x) for x in args.shape.split(","))
    drop = re.compile(args.drop)
    torch.manual_seed(0)
    for causal in {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]:
        bm, bn, nt, ns = FA.config_for(S, D, causal)
        prim = FA.flashattn.__wrapped__(B, H, S, D, causal, block_M=bm, block_N=bn, threads=nt, num_stages=ns)
        kernel = egtile.compile(prim, target="cuda", pass_configs=FA.PASS_CONFIGS)
        src = kernel._built.source
        kept = "\n".join(line for line in src.split("\n") if not drop.search(line))
        removed = src.count("\n") - kept.count("\n")
        if not removed:
            print(f"--drop {args.drop!r} matches no line of the generated kernel")
            return 1
        Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
        ref, scale = reference_f32(Q, K, V, causal)
        tol = FA.tolerance(scale, ref, "float16")
        q, k, v = (x.transpose(1, 2) for x in (Q, K, V))

        def cudnn(Q, K, V, O, causal=causal):  # noqa: N803
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2)

        kernels = {"egtile": kernel, f"egtile without {removed} line(s)": variant(kernel, kept, "dropped",
                                                                                 fast_math=kernel.fast_math),
                   "cuDNN": cudnn}
        label = "causal" if causal else "full"
        times = check_then_time(kernels, (Q, K, V), Q, lambda n, got: device_check(f"{n} {label}", got, ref, **tol),
                                lambda fn: event_median(fn, args.iters, 0.5, warm_s=args.warm_s), args.rounds)
        flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
        best = summary(times["cuDNN"])[0] if times.get("cuDNN") else None
        for name, t in times.items():
            if t is None:
                print(f"B={B} H={H} S={S} D={D} {label:6} {name:30} WRONG")
                continue
            ms, spread = summary(t)
            vs = f", x cuDNN {best / ms:.3f}" if best else ""
            print(f"B={B} H={H} S={S} D={D} {label:6} {name:30} {flops / (ms * 1e-3) / 1e12:7.1f} TFLOP/s "
                  f"(spread {spread:.1%}{vs})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
