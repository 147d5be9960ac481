"""Encode / saturate / extract / decode times of ``egtile.optimize`` on the two seeds and a 50-statement kernel.

Run: ``.venv/bin/python benchmarks/egraph.py [--repeat N]``. The first call of the process (egglog import,
rule compilation) is reported separately as "cold"; the table shows the median of ``N`` warm calls.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from seed_schedules import bug1_kernel, bug2_kernel

from egtile.ir import (
    BinOp,
    Buffer,
    Const,
    Copy,
    For,
    Kernel,
    Load,
    Region,
    Store,
    Var,
    walk,
)


def fifty_statement_kernel(n: int = 50) -> Kernel:
    """A pipelined loop: one TMA-eligible copy into shared, then ``n - 2`` consumer stores reading it."""
    In = Buffer("In", (8, 64), "float16", "global")
    Out = Buffer("Out", (8, n), "float16", "global")
    X = Buffer("X_s", (64,), "float16", "shared")
    k = Var("k")
    body = [Copy(2, Region(In, (k, Const(0)), (1, 64)), Region.full(X))]
    for j in range(n - 2):
        body.append(Store(3 + j, Out, (k, Const(j)),
                          BinOp("+", Load(X, (Const(j % 64),)), Const(float(j), "float16"))))
    loop = For(1, k, Const(0), Const(8), "pipelined", tuple(body), num_stages=2)
    return Kernel("fifty", (In, Out), (1,), (Var("bx"),), 128, (X,), (loop,))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()

    t0 = time.perf_counter()
    import egtile.schedule.driver as opt

    t1 = time.perf_counter()
    cold = opt.optimize(bug2_kernel())
    t2 = time.perf_counter()
    print(f"cold: import egtile.schedule.driver (egglog) {1e3 * (t1 - t0):.0f} ms, first optimize {1e3 * (t2 - t1):.0f} ms "
          f"(rule compilation included)")
    assert cold.scheduled.threads == 256

    rows = []
    for name, make in (("seed bug 1", bug1_kernel), ("seed bug 2", bug2_kernel),
                       ("50 statements", fifty_statement_kernel)):
        k = make()
        stmts = sum(1 for _ in walk(k.body))
        samples, cpu = [], []
        for _ in range(args.repeat):
            c0 = time.process_time()
            r = opt.optimize(k)
            cpu.append(time.process_time() - c0)
            samples.append(r.timings)
        med = {f: statistics.median(getattr(t, f) for t in samples) for f in ("encode", "saturate", "extract", "decode")}
        total = statistics.median(t.total for t in samples)
        rows.append((name, stmts, med, total, statistics.median(cpu), r.stages))
    print(f"\nmedian of {args.repeat} warm runs (ms; wall clock per phase, 'cpu' = process CPU time of the call,")
    print("which stays meaningful when other processes compete for the cores):")
    print(f"{'kernel':<16}{'stmts':>6}{'encode':>9}{'saturate':>10}{'extract':>9}{'decode':>8}{'total':>8}{'cpu':>8}")
    for name, stmts, med, total, cpu_med, _ in rows:
        print(f"{name:<16}{stmts:>6}{1e3 * med['encode']:>9.1f}{1e3 * med['saturate']:>10.1f}"
              f"{1e3 * med['extract']:>9.1f}{1e3 * med['decode']:>8.1f}{1e3 * total:>8.1f}{1e3 * cpu_med:>8.1f}")
    print("\nstages of the last run of each kernel:")
    for name, _, _, _, _, stages in rows:
        print(f"  {name}: " + "; ".join(f"{s.stage} {s.stop_reason} {s.iterations} steps {s.nodes} rows"
                                        for s in stages))


if __name__ == "__main__":
    main()
