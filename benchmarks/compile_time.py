"""Compile time of the two seed kernels: cold (nothing cached) and warm (cubin cache hit).

    python benchmarks/compile_time.py [--repeat N]

Phases, each timed separately (median of ``--repeat`` runs in this process, after one untimed run
that pays the one-off imports and NVRTC's library load, reported as "first cold"):

* trace: the seed's kernel factory builds the ``@T.prim_func`` (``egtile.language``);
* e-graph: :func:`egtile.optimize.optimize` (encode, saturate, extract, decode, lower);
* codegen+NVRTC: :func:`egtile.codegen.build` with the cubin cache disabled (cold), or
  codegen+cache: the same with the cubin in the cache (warm, no NVRTC call).

cold = trace + e-graph + codegen+NVRTC; warm = trace + e-graph + codegen+cache. Until
``egtile.optimize`` exists the hand-built schedules of tests/seed_schedules.py stand in for trace +
e-graph (both shown as 0). No GPU is needed.

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
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "examples")]


def _pipeline() -> tuple[str, dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]]]:
    """``(what runs, seed -> (trace, schedule))``: ``trace()`` gives what ``schedule`` turns into an
    ``ir.Scheduled``."""
    try:
        import seed_bug1
        import seed_bug2

        from egtile.optimize import optimize

        def factory(f):  # the undecorated kernel factory behind @egtile.jit
            return getattr(f, "fn", f)

        return "trace + e-graph + codegen", {
            "bug1": (lambda: factory(seed_bug1.bug1_kernel)(16, 32, 16, 16), lambda p: optimize(p).scheduled),
            "bug2": (lambda: factory(seed_bug2.bug2_kernel)(4, 64), lambda p: optimize(p).scheduled),
        }
    except ImportError:
        from seed_schedules import bug1_schedule, bug2_schedule

        return "hand-built schedules + codegen (no scheduler yet)", {
            "bug1": (bug1_schedule, lambda s: s), "bug2": (bug2_schedule, lambda s: s)}


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _one(trace: Callable[[], Any], schedule: Callable[[Any], Any]) -> tuple[float, float, float]:
    from egtile.codegen import build

    t_trace, prim = _timed(trace)
    t_sched, sched = _timed(lambda: schedule(prim))
    t_build, built = _timed(lambda: build(sched))
    want_hit = os.environ.get("EGTILE_DISABLE_CACHE") != "1"
    assert built.cache_hit == want_hit
    return t_trace, t_sched, t_build


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    what, seeds = _pipeline()
    rows = []
    with tempfile.TemporaryDirectory() as cache_dir:
        os.environ["EGTILE_CACHE_DIR"] = cache_dir
        for name, (trace, schedule) in seeds.items():
            os.environ["EGTILE_DISABLE_CACHE"] = "1"
            first = sum(_one(trace, schedule))
            cold = [_one(trace, schedule) for _ in range(args.repeat)]
            os.environ["EGTILE_DISABLE_CACHE"] = "0"
            from egtile.codegen import build

            build(schedule(trace()))  # fill the cache
            warm = [_one(trace, schedule) for _ in range(args.repeat)]
            med = [statistics.median(col) for col in zip(*cold)]
            wmed = [statistics.median(col) for col in zip(*warm)]
            rows.append((name, first, med, statistics.median(sum(r) for r in cold), wmed[2],
                         statistics.median(sum(r) for r in warm)))
    print(f"timed: {what}; median of {args.repeat} (ms)")
    print(f"{'seed':5} {'first cold':>10} {'trace':>7} {'e-graph':>8} {'codegen+NVRTC':>14} {'cold':>7} "
          f"{'codegen+cache':>14} {'warm':>7}")
    for name, first, (tt, ts, tb), cold, hit, warm in rows:
        print(f"{name:5} {first * 1e3:10.1f} {tt * 1e3:7.1f} {ts * 1e3:8.1f} {tb * 1e3:14.1f} {cold * 1e3:7.1f} "
              f"{hit * 1e3:14.2f} {warm * 1e3:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
