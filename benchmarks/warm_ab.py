"""Warm compile with and without the trace memo and the protocol schedule's caching, in one process (A/B).

    python benchmarks/warm_ab.py [--repeat 15] [--only NAME[,NAME...]]

For each kernel of ``benchmarks/compile_time.py`` named: both caches filled, then ``egtile.compile(trace(),
target="cuda")`` timed ``--repeat`` times (best; wall clock and CPU time of this process) in two settings:
"off" (the trace memo keys nothing, the kernel's cache-key digest is recomputed, and a kernel with a
hand-written protocol is lowered and checked afresh, as before they were cached) and "on" (as shipped).
Prints ms; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "examples"), str(ROOT / "tests")]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--only", default="flash_attention (example),ws_gemm,flash-attn fwd,gemm wgmma,quickstart")
    args = ap.parse_args()
    sys.argv = sys.argv[:1]
    os.environ["EGTILE_CACHE_DIR"] = tempfile.mkdtemp()
    os.environ.pop("EGTILE_DISABLE_CACHE", None)
    import compile_time

    import egtile
    from egtile import schedule_cache
    from egtile.language import trace_memo

    kernels = compile_time.kernels()
    wanted = [w for w in args.only.split(",") if w]
    real_key, real_sha, real_enabled = trace_memo.key, schedule_cache._kernel_sha256, schedule_cache.enabled

    def setting(on: bool, protocol: bool) -> None:
        trace_memo.key = real_key if on else (lambda fn, anns: None)
        schedule_cache._kernel_sha256 = real_sha if on else (
            lambda k: __import__("hashlib").sha256(schedule_cache._codec().dumps(k).encode()).hexdigest())
        schedule_cache.enabled = real_enabled if on or not protocol else (lambda: False)

    print(f"{'kernel':36} {'off wall':>9} {'off cpu':>8} {'on wall':>8} {'on cpu':>7}  (ms, best of {args.repeat})")
    for name, trace in kernels.items():
        if not any(w in name for w in wanted):
            continue
        protocol = "protocol" in name
        egtile.compile(trace(), target="cuda")
        row = []
        for on in (False, True):
            setting(on, protocol)
            trace_memo.clear()
            egtile.compile(trace(), target="cuda")
            wall = cpu = 1e9
            for _ in range(args.repeat):
                t0, c0 = time.perf_counter(), time.process_time()
                egtile.compile(trace(), target="cuda")
                wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
            row += [wall * 1e3, cpu * 1e3]
        setting(True, protocol)
        print(f"{name:36} {row[0]:9.2f} {row[1]:8.2f} {row[2]:8.2f} {row[3]:7.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
