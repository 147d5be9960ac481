"""A third K/V stage for attention, measured by text before it is a decision (issue 13).

egtile's attention kernel at the benchmark's configuration (128x128 blocks, two consumer warpgroups and the TMA
producer) keeps Q (32 KB), two K/V stages (64 KB each) and O's staging tile for the TMA store (32 KB): 192 KB, so a
third stage does not fit under the 227 KB an H100/H200 block may have. Q is dead once the last ``Q K^T`` has
completed, and each consumer warpgroup writes only the staging rows that its own ``Q K^T`` read (rows 64 w to
64 w + 63), after its own last ``wgmma.wait_group``: the staging tile can live in Q's buffer. That frees 32 KB; a
third stage takes it (224 KB, the size cuDNN's kernel asks for: 232,448 bytes, ncu 2026-12-07 19:40). The variants:

* O staged in Q's buffer, two stages (the aliasing alone);
* O staged in Q's buffer, three K/V stages (the producer runs up to three key blocks ahead).

Each is checked against a float32 reference, then timed in turns with egtile's kernel and cuDNN.

    python benchmarks/prototypes/stages3.py [--shape 4,32,4096,128] [--causal both|yes|no] [--rounds 6]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks"), str(ROOT / "benchmarks" / "prototypes")]

STAGE = 32768  # bytes of one K (or V) stage: 128 rows x 128 halves


def _offset(src: str, name: str) -> int:
    return int(re.search(rf"\b{name} = reinterpret_cast<[^>]*>\(smem \+ (\d+)\);", src).group(1))


def _move(src: str, name: str, at: int) -> str:
    return re.sub(rf"(\b{name} = reinterpret_cast<[^>]*>\(smem \+ )\d+(\);)", rf"\g<1>{at}\g<2>", src, count=1)


def stage_in_q(src: str) -> str:
    """O's staging tile at Q's offset (its own 32 KB left unused)."""
    assert _offset(src, "Q_shared") == 0 and "acc_o_stage" in src
    return _move(src, "acc_o_stage", 0)


def three_stages(src: str) -> tuple[str, int]:
    """O staged in Q's buffer, and K and V with three stages in the bytes that frees; returns the source and the
    dynamic shared memory it needs."""
    assert src.count("(k - 0) % 2") >= 4 and src.count("(k - 0) / 2") == 2, "the pipeline's stage arithmetic"
    assert (_offset(src, "K_shared"), _offset(src, "V_shared"), _offset(src, "acc_o_stage")) == (
        STAGE, 3 * STAGE, 5 * STAGE), "the layout this patch expects"
    src = stage_in_q(src)
    src = _move(src, "K_shared", STAGE)
    src = _move(src, "V_shared", 4 * STAGE)
    bars = 7 * STAGE
    src = _move(src, "eg_bar_full_0", bars)
    src = _move(src, "eg_bar_empty_0", bars + 24)
    src = _move(src, "eg_bar_bar_2", bars + 48)
    src = src.replace("(k - 0) % 2", "(k - 0) % 3").replace("(k - 0) / 2", "(k - 0) / 3")
    for name, count in (("eg_bar_full_0", 2), ("eg_bar_empty_0", 256)):
        old = f"eg_mbarrier_init(&{name}[1], {count});"
        assert old in src, old
        src = src.replace(old, old + f"\n    eg_mbarrier_init(&{name}[2], {count});")
    return src, bars + 56 + 1024


def main() -> int:
    from _variants import add_ab_arguments

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_ab_arguments(ap)
    ap.add_argument("--dump", default="", help="write the patched sources here")
    args = ap.parse_args()
    sys.argv = [sys.argv[0], "--target", "cuda"]
    from _variants import patched_against_cudnn

    def make(kernel, causal):
        three, smem3 = three_stages(kernel._built.source)
        return {"O staged in Q's buffer": (kernel, stage_in_q(kernel._built.source), kernel._built.smem_bytes),
                "O staged in Q's buffer, 3 K/V stages": (kernel, three, smem3)}

    patched_against_cudnn(args, "s", make)
    return 0


if __name__ == "__main__":
    sys.exit(main())
