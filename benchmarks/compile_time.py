"""Compile time, cold and warm, per phase, over every example kernel, real GEMM tiles and growing programs.

    python benchmarks/compile_time.py [--repeat N] [--only NAME ...] [--no-nvrtc]

No GPU is needed: ``target="cuda"`` compiles to a cubin and only a launch would need the device.

Phases of a cold compile (each the median of ``--repeat`` runs in this process, after one untimed run that
pays the one-off imports and egglog's program set-up, reported as "first"):

* trace: the ``@egtile.jit`` factory or ``@T.prim_func`` builds the kernel IR;
* e-graph: :func:`egtile.optimize` (encode, saturate, extract, decode, lower);
* verify: :func:`egtile.verify` on the schedule (``egtile.compile`` runs it before any target);
* codegen: :func:`egtile.codegen.generate` (CUDA C++);
* NVRTC: :func:`egtile.codegen.build` minus codegen (compile to a cubin, caches off).

warm: ``egtile.compile(prim, target="cuda")`` end to end with the schedule and cubin caches filled (trace +
cache reads; no e-graph, no verify, no NVRTC).

Kernels: every example's kernel at its default size, the GEMM example at 128x128x64 and 128x256x64 with 3
stages and 256 threads, and ``chain-N``: a pipelined loop of N statements (a copy and N - 1 T.Parallel
stages, through 4 shared buffers; also through ``N`` buffers), to show how compile time grows with the
statement count.

Targets (issue 11): cold under 1 s (verify under 200 ms), warm under 5 ms, linear growth in statements.
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


def chain(n: int, buffers: int = 4):
    """A pipelined loop of ``n`` statements: one T.copy into shared and ``n - 1`` T.Parallel stages, each
    reading the previous stage's shared buffer; the stages rotate through ``buffers`` shared buffers (the
    dataflow relations are per statement and buffer, so ``buffers = n`` grows them quadratically)."""
    from egtile import language as T

    @T.prim_func
    def main(X: T.Tensor((128, 256), "float16"), Y: T.Tensor((128, 256), "float16")):
        with T.Kernel(2, threads=128) as bx:
            bufs = [T.alloc_shared((64,), "float16") for _ in range(min(n, buffers))]
            for k in T.Pipelined(4, num_stages=2):
                T.copy(X[bx * 64 + k, 0:64], bufs[0])
                for s in range(1, n):
                    for i in T.Parallel(64):
                        bufs[s % len(bufs)][i] = bufs[(s - 1) % len(bufs)][i] * 2.0 + 1.0
                for i in T.Parallel(64):
                    Y[bx * 64 + k, i] = bufs[(n - 1) % len(bufs)][i]

    return main


def kernels() -> dict[str, Callable[[], Any]]:
    import elementwise_add
    import gemm
    import pipelined_scale
    import quickstart
    import row_softmax
    import seed_bug1
    import seed_bug2

    return {
        "quickstart": lambda: quickstart.scale.fn(),
        "elementwise_add": lambda: elementwise_add.elementwise_add.fn(128, 128),
        "pipelined_scale": lambda: pipelined_scale.pipelined_scale.fn(64, 256),
        "row_softmax": lambda: row_softmax.row_softmax.fn(64, 128),
        "gemm (example)": lambda: gemm.matmul.fn(256, 256, 256),
        "gemm 128x128x64 s3": lambda: gemm.matmul.fn(4096, 4096, 4096, 128, 128, 64, 3, 256),
        "gemm 128x256x64 s3": lambda: gemm.matmul.fn(4096, 4096, 4096, 128, 256, 64, 3, 256),
        "seed bug1": lambda: seed_bug1.bug1_kernel.fn(16, 32, 16, 16),
        "seed bug2": lambda: seed_bug2.bug2_kernel.fn(4, 64),
        **{f"chain-{n}": (lambda n=n: chain(n)) for n in (10, 50, 200)},
        **{f"chain-{n} {n} bufs": (lambda n=n: chain(n, n)) for n in (10, 50)},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="kernel names (substrings) to measure")
    ap.add_argument("--no-nvrtc", action="store_true", help="stop after codegen (no cubin, no warm column)")
    args, _ = ap.parse_known_args()

    import egtile
    from egtile.codegen import build, generate

    def cold(trace: Callable[[], Any]) -> tuple[float, ...]:
        t_trace, prim = _timed(trace)
        t_sched, result = _timed(lambda: egtile.optimize(prim))
        t_verify, problems = _timed(lambda: egtile.verify(result.scheduled))
        if problems:
            raise RuntimeError(f"verify: {problems[0].property}: {problems[0].message[:90]}")
        t_gen, _ = _timed(lambda: generate(result.scheduled))
        t_nvrtc = 0.0
        if not args.no_nvrtc:
            t_build, built = _timed(lambda: build(result.scheduled))
            assert not built.cache_hit
            t_nvrtc = max(0.0, t_build - t_gen)
        return t_trace, t_sched, t_verify, t_gen, t_nvrtc

    def warm(trace: Callable[[], Any]) -> float:
        t, kernel = _timed(lambda: egtile.compile(trace(), target="cuda"))
        assert kernel.scheduled is not None
        return t

    selected = {k: v for k, v in kernels().items() if not args.only or any(s in k for s in args.only)}
    head = (f"{'kernel':20} {'stmts':>5} {'first':>8} {'trace':>7} {'e-graph':>8} {'verify':>7} {'codegen':>8} "
            f"{'NVRTC':>7} {'cold':>8} {'warm':>7}")
    print(f"compile time in ms, median of {args.repeat} (cold: caches off; warm: schedule + cubin cache hit)")
    print(head)
    with tempfile.TemporaryDirectory() as cache_dir:
        os.environ["EGTILE_CACHE_DIR"] = cache_dir
        for name, trace in selected.items():
            os.environ["EGTILE_DISABLE_CACHE"] = "1"
            try:
                first = sum(cold(trace))
            except Exception as e:  # noqa: BLE001  (report the kernel, go on with the others)
                print(f"{name:20} not compiled: {e}", flush=True)
                continue
            runs = [cold(trace) for _ in range(args.repeat)]
            phases = [statistics.median(col) for col in zip(*runs)]
            total = statistics.median(sum(r) for r in runs)
            warm_ms = float("nan")
            if not args.no_nvrtc:
                os.environ["EGTILE_DISABLE_CACHE"] = "0"
                egtile.compile(trace(), target="cuda")  # fill both caches
                warm_ms = statistics.median(warm(trace) for _ in range(args.repeat)) * 1e3
            stmts = _count(trace())
            tt, ts, tv, tg, tn = (p * 1e3 for p in phases)
            print(f"{name:20} {stmts:5d} {first * 1e3:8.1f} {tt:7.1f} {ts:8.1f} {tv:7.1f} {tg:8.1f} {tn:7.1f} "
                  f"{total * 1e3:8.1f} {warm_ms:7.2f}", flush=True)
    return 0


def _count(prim) -> int:
    from egtile.ir import walk

    return sum(1 for _ in walk(prim.kernel.body))


if __name__ == "__main__":
    sys.exit(main())
