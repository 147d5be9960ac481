"""The causal mask after ``Q K^T`` instead of before it, measured on the example's own kernel (issue 13).

TileLang's example fills the score tile with the mask (0 or ``-inf``) and lets ``T.gemm`` accumulate onto it.
The alternative, FlashAttention-3's order: ``Q K^T`` into a cleared tile (the wgmma's scale-d = 0, no fill), then
the mask applied to the scores (``-inf`` where the key may not be attended). For a fill of 0 / ``-inf`` and finite
scores both give the same values; the difference is where the work sits: the versioned blocks below the diagonal
do nothing at all, and the fill leaves the ping-pong's turn (between ``P V`` of block j and ``Q K^T`` of block j+1).
Both kernels come from egtile: the example as written, and the example's source with the mask moved (patched
here by text, not a rule yet), checked against a float32 reference, then timed in turns with cuDNN.

    python benchmarks/prototypes/mask_after.py [--shape 4,32,4096,128] [--causal yes] [--rounds 6] [--warm-s 0.5]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks"), str(ROOT / "benchmarks" / "prototypes")]

BEFORE = """                if is_causal:
                    # keys past the query (the causal diagonal) or past the end get -inf
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(
                            bx * block_M + i >= k * block_N + j,
                            T.if_then_else(k * block_N + j < seq_len, 0, -T.infinity(accum_dtype)),
                            -T.infinity(accum_dtype))
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(k * block_N + j >= seq_len, -T.infinity(accum_dtype), 0)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
"""
AFTER = """                T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(
                            bx * block_M + i >= k * block_N + j,
                            T.if_then_else(k * block_N + j < seq_len, acc_s[i, j], -T.infinity(accum_dtype)),
                            -T.infinity(accum_dtype))
                elif ragged:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(k * block_N + j >= seq_len, -T.infinity(accum_dtype),
                                                     acc_s[i, j])
"""


def patched_module():
    """examples/flash_attention.py with the mask after the gemm, as a module of its own (written to a file: egtile
    reads a kernel's source for its Python ``if``s)."""
    src = (ROOT / "examples" / "flash_attention.py").read_text()
    if BEFORE not in src:
        raise SystemExit("mask_after.py: the example's mask block changed; update BEFORE")
    path = Path(tempfile.mkdtemp()) / "flash_attention_mask_after.py"
    path.write_text(src.replace(BEFORE, AFTER))
    spec = importlib.util.spec_from_file_location("flash_attention_mask_after", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    from _variants import add_ab_arguments

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_ab_arguments(ap)
    args = ap.parse_args()
    sys.argv = [sys.argv[0], "--target", "cuda"]
    import flash_attention as FA
    from _variants import against_cudnn
    from attention import CAUSALITIES, reference_f32

    import egtile

    MA = patched_module()
    B, H, S, D = (int(x) for x in args.shape.split(","))
    torch.manual_seed(0)
    for causal in CAUSALITIES[args.causal]:
        bm, bn, nt, ns = FA.config_for(S, D, causal)
        kernels = {}
        for name, mod in (("egtile", FA), ("egtile, mask after Q K^T", MA)):
            prim = mod.flashattn.__wrapped__(B, H, S, D, causal, block_M=bm, block_N=bn, threads=nt, num_stages=ns)
            kernels[name] = egtile.compile(prim, target="cuda", pass_configs=FA.PASS_CONFIGS)
        Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
        ref, scale = reference_f32(Q, K, V, causal)
        against_cudnn(kernels, Q, K, V, causal, ref, FA.tolerance(scale, ref, "float16"), args.rounds, args.iters,
                      args.warm_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
