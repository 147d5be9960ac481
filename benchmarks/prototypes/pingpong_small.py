"""One launch of the ping-pong schedule (egtile.rules.pingpong.preferred()) of examples/flash_attention.py at a small
shape, checked against a float32 reference: the program compute-sanitizer's racecheck and synccheck run.

    compute-sanitizer --tool synccheck python benchmarks/prototypes/pingpong_small.py [--causal] [--big] [--default]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "examples")]
causal = "--causal" in sys.argv
big = "--big" in sys.argv  # B=1 H=32 S=4096: a full wave of blocks, for ncu
default = "--default" in sys.argv  # the default ruleset (no ping-pong), for comparison
sys.argv = [sys.argv[0], "--target", "cuda"]
import flash_attention as FA  # noqa: E402
from _check import check, poisoned  # noqa: E402

import egtile  # noqa: E402
from egtile.rules import pingpong  # noqa: E402

B, H, S, D = (1, 32, 4096, 128) if big else (1, 2, 512, 128)
k = egtile.compile(FA.flashattn.__wrapped__(B, H, S, D, causal, block_M=128, block_N=128, threads=256, num_stages=2),
                   target="cuda", rules=None if default else pingpong.preferred())
assert default or "eg_named_barrier_arrive" in k._built.source
Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
O = poisoned((B, S, H, D), torch.float16, "cuda")  # noqa: E741
k(Q, K, V, O)
torch.cuda.synchronize()
ref, scale = FA.reference(Q, K, V, causal, torch.float32)
ok = check(f"pingpong small causal={causal}", O, ref, **FA.tolerance(scale, ref, "float16"))
print("pingpong_small", "default" if default else "ping-pong", (B, H, S, D), "causal" if causal else "full",
      "OK" if ok else "WRONG")
sys.exit(0 if ok else 1)
