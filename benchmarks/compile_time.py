"""Compile time of the two seed kernels: cold (nothing cached) and warm (on-disk caches hit).

    python benchmarks/compile_time.py [--repeat N]

No GPU is needed: ``target="cuda"`` compiles to a cubin and only a launch would need the device.
Each figure is the median of ``--repeat`` runs in this process, after one untimed run that pays the
one-off imports (egglog, NVRTC's library), reported as "first cold".

* cold, by phase: trace (the seed's ``@egtile.jit`` factory builds the ``@T.prim_func``), e-graph
  (:func:`egtile.schedule.driver.optimize`: encode, saturate, extract, decode, lower), codegen+NVRTC
  (:func:`egtile.codegen.build` with the caches disabled); cold = their sum.
* warm: ``egtile.compile(prim_func, target="cuda")`` end to end with the schedule cache
  (:mod:`egtile.schedule_cache`) and the cubin cache filled: trace + one cache read, no e-graph run and
  no NVRTC call.

Targets (issue "Hopper backend"): cold under 1 s, warm under 10 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "examples")]


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    import seed_bug1
    import seed_bug2

    import egtile
    from egtile.codegen import build
    from egtile.schedule.driver import optimize

    traces = {
        "bug1": lambda: seed_bug1.bug1_kernel.fn(16, 32, 16, 16),
        "bug2": lambda: seed_bug2.bug2_kernel.fn(4, 64),
    }

    def cold(trace: Callable[[], Any]) -> tuple[float, float, float]:
        t_trace, prim = _timed(trace)
        t_sched, result = _timed(lambda: optimize(prim))
        t_build, built = _timed(lambda: build(result.scheduled))
        assert not built.cache_hit
        return t_trace, t_sched, t_build

    def warm(trace: Callable[[], Any]) -> float:
        t, kernel = _timed(lambda: egtile.compile(trace(), target="cuda"))
        assert kernel.scheduled is not None
        return t

    rows = []
    with tempfile.TemporaryDirectory() as cache_dir:
        os.environ["EGTILE_CACHE_DIR"] = cache_dir
        for name, trace in traces.items():
            os.environ["EGTILE_DISABLE_CACHE"] = "1"
            first = sum(cold(trace))
            cold_runs = [cold(trace) for _ in range(args.repeat)]
            os.environ["EGTILE_DISABLE_CACHE"] = "0"
            egtile.compile(trace(), target="cuda")  # fill both caches
            warm_runs = [warm(trace) for _ in range(args.repeat)]
            phases = [statistics.median(col) for col in zip(*cold_runs)]
            rows.append((name, first, phases, statistics.median(sum(r) for r in cold_runs),
                         statistics.median(warm_runs)))
    print(f"median of {args.repeat} (ms)")
    print(f"{'seed':5} {'first cold':>10} {'trace':>7} {'e-graph':>8} {'codegen+NVRTC':>14} {'cold':>7} {'warm':>7}")
    for name, first, (tt, ts, tb), cold_ms, warm_ms in rows:
        print(f"{name:5} {first * 1e3:10.1f} {tt * 1e3:7.1f} {ts * 1e3:8.1f} {tb * 1e3:14.1f} {cold_ms * 1e3:7.1f} "
              f"{warm_ms * 1e3:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
