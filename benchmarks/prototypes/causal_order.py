"""Prototype measurement (issue 13): does dispatching the causal attention's heaviest query blocks first pay?

Under causality query block ``i`` runs ``i + 1`` key blocks. The hardware starts CTAs in ``blockIdx`` order, so
in the example's grid (query block fastest) the last CTAs to start are the heaviest blocks of the last head, and
the SMs that finish early idle while they run. This script builds the example's kernel twice on the same
inputs: as written, and with the query block index reversed (``bx = nb - 1 - blockIdx.x``: the same set of
blocks, heaviest first in each head), checks both against a float32 reference, and times them with cuDNN.
The reversed copy is made textually from ``examples/flash_attention.py`` into a temporary module (a measurement
only: if it pays, the decision belongs in egtile's e-graph, not in the user's kernel).

    python benchmarks/prototypes/causal_order.py [--shape 4,32,4096,128] [--causal both]
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks")]

KERNEL_LINE = "        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):\n"


def reversed_module(tmp: Path):
    text = (ROOT / "examples" / "flash_attention.py").read_text()
    assert KERNEL_LINE in text, "the example's T.Kernel line changed"
    text = text.replace(KERNEL_LINE, KERNEL_LINE.replace("(bx, by, bz)", "(bx_launch, by, bz)")
                        + "            bx = T.ceildiv(seq_len, block_M) - 1 - bx_launch  # heaviest first\n")
    (tmp / "flash_attention_rev.py").write_text(text)
    (tmp / "_check.py").write_text((ROOT / "examples" / "_check.py").read_text())
    sys.path.insert(0, str(tmp))
    return importlib.import_module("flash_attention_rev")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="4,32,4096,128")
    ap.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    sys.argv = [sys.argv[0], "--target", "cuda"]
    import flash_attention as FA
    from _timing import event_median
    from attention import CAUSALITIES, reference_f32
    from torch.nn.attention import SDPBackend, sdpa_kernel

    tmp = Path(tempfile.mkdtemp())
    REV = reversed_module(tmp)
    B, H, S, D = (int(x) for x in args.shape.split(","))
    torch.manual_seed(0)
    Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
    for causal in CAUSALITIES[args.causal]:
        bm, bn, threads, stages = FA.config_for(S, D, causal, "float16")
        flops = 4 * B * H * S * S * D / (2 if causal else 1)
        ref, pv = reference_f32(Q, K, V, causal)
        u = 2.0 ** -11
        tol = 4 * u * pv + u * ref.abs() + 1e-4
        kernels = {}
        for name, mod in (("as written", FA), ("heaviest first", REV)):
            k = mod.flashattn(B, H, S, D, causal, block_M=bm, block_N=bn, num_stages=stages, threads=threads)
            O = k(Q, K, V)
            bad = int(((O.float() - ref).abs() > tol).sum())
            print(f"causal={causal} {name}: {bm}x{bn} {threads}t {stages}st, elements beyond tolerance {bad}")
            assert bad == 0, name
            kernels[name] = k
        qt, kt, vt = (x.transpose(1, 2) for x in (Q, K, V))

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

        for r in range(args.rounds):
            row = {"cudnn": event_median(cudnn, 50, args.budget)}
            for name, k in kernels.items():
                row[name] = event_median(lambda k=k: k(Q, K, V), 50, args.budget)
            print(f"causal={causal} round {r}: " + ", ".join(
                f"{n} {flops / ms / 1e9:.1f} TFLOP/s ({ms:.3f} ms)" for n, ms in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
