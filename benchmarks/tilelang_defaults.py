"""TileLang's flash-attention example at its own defaults on the H200: correctness, then time (issue 13, item 1).

    python benchmarks/tilelang_defaults.py [--shape 8,32,4096,128] [--iters 10] [--rounds 5] [--warm-s 0.5]

The kernel is TileLang's ``examples/flash_attention/example_mha_fwd_bshd.py`` body ported by import change
(tests/attention_port.py) with the configuration its ``main()`` passes: 128x128 blocks, 1 stage, 128 threads (one
consumer warpgroup: its fragments exceed the registers and ptxas spills, egtile.rules.fragment), at its default
shape B=8 H=32 S=4096 D=128, causal and not. For scale the same inputs also run egtile's benchmark configuration
(examples/flash_attention.py ``config_for``: 128x128, 256 threads, 2 stages) and torch's SDPA (default backend);
both egtile kernels with fast math, as the example's ``@tilelang.jit`` asks (``TL_ENABLE_FAST_MATH``).
Each output, written into a NaN-poisoned tensor, is compared with a float32 reference under the example's bound
(examples/flash_attention.py ``tolerance``); a wrong output is not timed. The contenders take turns over
``--rounds`` rounds (benchmarks/_timing.py: an order drawn per round, each turn running ``--warm-s`` seconds untimed
first), a round's number the median of ``--iters`` CUDA-event-timed calls; the median over rounds is reported with
its spread. TFLOP/s = 4 B H S^2 D (halved when causal). Without an sm_90 GPU it says so, exit 0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "tests"), str(ROOT / "benchmarks")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="8,32,4096,128")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warm-s", type=float, default=0.5)
    args = ap.parse_args()
    from egtile.api import hopper_available

    if not hopper_available():
        print("benchmarks/tilelang_defaults.py: skipped (needs a CUDA GPU of compute capability 9.0)")
        return 0
    sys.argv = [sys.argv[0], "--target", "cuda"]  # the example reads --target at import
    import flash_attention as FA
    from _check import poisoned
    from _devcheck import device_check as check
    from _timing import medians_in_turns
    from attention import reference_f32
    from attention_port import flashattn as tilelang_port

    import egtile

    B, H, S, D = (int(x) for x in args.shape.split(","))
    print(f"device: {torch.cuda.get_device_name()}; B={B} H={H} S={S} D={D} float16")
    torch.manual_seed(0)
    for causal in (False, True):
        flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
        Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
        ref, scale = reference_f32(Q, K, V, causal)
        tol = FA.tolerance(scale, ref, "float16")
        bm, bn, nt, ns = FA.config_for(S, D, causal)
        kernels = {
            "tilelang defaults 128x128 128 threads 1 stage": tilelang_port(B, H, S, D, causal, block_M=128, block_N=128,
                                                                           num_stages=1, threads=128),
            f"egtile config {bm}x{bn} {nt} threads {ns} stages": FA.flashattn.__wrapped__(
                B, H, S, D, causal, block_M=bm, block_N=bn, threads=nt, num_stages=ns),
        }
        line = [f"{'causal' if causal else 'full':6}"]
        calls, spills = {}, {}
        for name, prim in kernels.items():
            # fast math, as the example's @tilelang.jit asks (pass_configs TL_ENABLE_FAST_MATH: True)
            k = egtile.compile(prim, target="cuda", pass_configs={egtile.PassConfigKey.TL_ENABLE_FAST_MATH: True})
            O = poisoned((B, S, H, D), torch.float16, "cuda")  # noqa: E741
            k(Q, K, V, O)
            torch.cuda.synchronize()
            if not check(f"{name} {'causal' if causal else 'full'}", O, ref, **tol):
                line.append(f"{name}: WRONG (not timed)")
                continue
            spills[name] = "fragment-registers" in k.explain()
            calls[name] = lambda k=k, O=O: k(Q, K, V, O)
        q, kk, v = (x.transpose(1, 2) for x in (Q, K, V))
        calls["torch SDPA default"] = lambda: torch.nn.functional.scaled_dot_product_attention(q, kk, v,
                                                                                              is_causal=causal)
        for name, (ms, spread) in medians_in_turns(calls, args.rounds, args.iters, warm_s=args.warm_s).items():
            line.append(f"{name}: {flops / ms / 1e9:7.1f} TFLOP/s (spread {spread:.1%})"
                        f"{' (spill noted)' if spills.get(name) else ''}")
        print("  " + " | ".join(line), flush=True)
        del Q, K, V, ref, scale
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
