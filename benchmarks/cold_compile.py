"""One truly cold compile of the attention benchmark's kernel, per stage, in a fresh process.

    python benchmarks/cold_compile.py [--shape B,H,S,D] [--blocks BMxBNxTHREADSxSTAGES] [--causal] [--plain] [--top 14]

``benchmarks/compile_time.py`` reports the best of several runs in one process, so its later runs reuse what the
first left in memory (layout tables, memoized oracles); this script pays the imports once on an unrelated small
kernel (``examples/quickstart.py``), then compiles the benchmark's kernel once with the disk caches off
(``EGTILE_DISABLE_CACHE=1``) under cProfile, and prints the wall time and the functions with the most cumulative
time (``egtile.compile`` -> schedule, verify, codegen, NVRTC). No GPU is needed. It asserts nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "examples")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="4,32,4096,128")
    ap.add_argument("--blocks", default="128x128x256x2")
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("--causal", action="store_true", help="the causal kernel (its key loop's bound reads the block)")
    ap.add_argument("--plain", action="store_true", help="no profiler: the wall time only (cProfile inflates Python)")
    args = ap.parse_args()
    os.environ["EGTILE_DISABLE_CACHE"] = "1"
    sys.argv = [sys.argv[0], "--target", "cuda"]  # the examples read --target at import
    import flash_attention as FA
    import quickstart

    import egtile

    t0 = time.perf_counter()
    egtile.compile(quickstart.scale.fn(), target="cuda")
    print(f"imports + quickstart (one-offs): {time.perf_counter() - t0:.3f} s")
    B, H, S, D = (int(x) for x in args.shape.split(","))
    bm, bn, nt, ns = (int(x) for x in args.blocks.split("x"))
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    if not args.plain:
        prof.enable()
    egtile.compile(FA.flashattn.fn(B, H, S, D, args.causal, bm, bn, ns, nt), target="cuda")
    prof.disable()
    print(f"cold compile {args.shape} {args.blocks}{' causal' if args.causal else ''}"
          f"{'' if args.plain else ' (under cProfile)'}: {time.perf_counter() - t0:.3f} s")
    if args.plain:
        return 0
    stats = pstats.Stats(prof)
    rows = []
    for (file, line, fn), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if "egtile" in file or "codegen" in file:
            rows.append((ct, f"{Path(file).parent.name}/{Path(file).name}:{line}({fn})"))
    for ct, name in sorted(rows, reverse=True)[: args.top]:
        print(f"  {ct * 1e3:8.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
