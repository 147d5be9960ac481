"""Compile time of every example and of the large kernels, cold and warm, split per stage.

    python benchmarks/compile_time.py [--repeat N] [--only NAME[,NAME...]] [--no-nvrtc]

No GPU is needed: the ``cuda`` target compiles to a cubin; only a launch would need the device. Each
figure is the best (least) of ``--repeat`` runs in this process, after one untimed run that pays the
one-off imports (egglog, NVRTC's library, the modules' bytecode): on a machine whose cores are shared the
least time is the one least disturbed (``--median`` prints medians instead). It prints a table and asserts
nothing.

Stages of a cold compile (every cache disabled), each timed on its own:

* trace: the ``@egtile.jit`` factory builds the ``@T.prim_func`` (tracing the DSL into ``ir.Kernel``);
* e-graph: :func:`egtile.optimize.optimize` (encode, saturate, extract, decode, lower);
* verify: :func:`egtile.verify` on the extracted schedule (the static checker every fresh compile runs);
* codegen: :func:`egtile.codegen.lower` (CUDA C++ and launch metadata);
* NVRTC: :func:`egtile.codegen.nvrtc.compile_cuda` (CUDA C++ to cubin).

cold = their sum. warm: ``egtile.compile(prim_func, target="cuda")`` end to end with the schedule cache
and the cubin cache filled (trace + cache reads: no e-graph, no verify, no NVRTC).

A second table splits the e-graph stage (of the same best run) as ``optimize`` reports it
(``ScheduleResult.timings``): encode, saturate (every stage, the cost pass included), extract, and decode
(lowering, the decisions and their explanations), with the e-graph's rows after the last stage.

Kernels: every example in ``examples/`` at the size its ``main()`` uses on the GPU (but
``user_instruction_bulk_copy``, whose user rule bypasses the schedule cache; the hand-written protocol of
``warp_specialized_gemm`` is lowered and checked as written: its "e-graph" and "verify" columns are
:func:`egtile.lower.protocol.schedule_protocol` and :func:`egtile.verifier.protocol.check_protocol`), the
128x256x64 3-stage GEMM of ``benchmarks/gemm.py`` (``examples/gemm.py`` at that tile: wgmma, 2 consumer
warpgroups) and of ``tests/verify/kernels.py`` (with a 128x256x32 one), TileLang's 128x128x64 3-stage GEMM at 4096^3 and at
K=16384, a flash-attention forward pass (``tests/verify/kernels.py``), and statement-count families at
n = 10, 50, 200: the reliability review's ``pipe_par`` (n ``T.Parallel`` statements per pipelined
iteration) and ``if_nest`` (n nested ``T.If``; n = 10, 50, 100: egtile allows 128 nested levels), and
``chain`` (a copy and n - 1 ``T.Parallel`` stages through 4 shared buffers, or through n buffers). The
``stmts`` column counts tile-IR statements.

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
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "tests")]


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def chain(n: int, buffers: int = 4):
    """A pipelined loop of ``n`` statements: one T.copy into shared and ``n - 1`` T.Parallel stages, each
    reading the previous stage's shared buffer; the stages rotate through ``buffers`` shared buffers."""
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
    """name -> a function tracing the kernel (returns a ``PrimFunc``)."""
    saved, sys.argv = sys.argv, [sys.argv[0]]  # the examples read --target at import
    try:
        import block_sparse_gemm
        import elementwise_add
        import flash_attention
        import gemm
        import norms
        import pipelined_scale
        import quickstart
        import row_softmax
        import seed_bug1
        import seed_bug2
        import warp_specialized_gemm
    finally:
        sys.argv = saved
    from verify import kernels as K

    out: dict[str, Callable[[], Any]] = {
        "quickstart": lambda: quickstart.scale.fn(),
        "elementwise_add": lambda: elementwise_add.elementwise_add.fn(128, 128),
        "pipelined_scale": lambda: pipelined_scale.pipelined_scale.fn(64, 256),
        "row_softmax": lambda: row_softmax.row_softmax.fn(64, 128),
        "gemm (example)": lambda: gemm.matmul.fn(256, 256, 256),
        # benchmarks/gemm.py's tile: the e-graph extracts wgmma, 2 consumer warpgroups, a TMA-store epilogue
        "gemm wgmma 128x256x64 s3 4096^3": lambda: gemm.matmul.fn(4096, 4096, 4096, block_M=128, block_N=256,
                                                                  block_K=64, num_stages=3, threads=256),
        # the other examples at their main()'s GPU sizes (user_instruction_bulk_copy registers a user rule,
        # which bypasses the schedule cache by design, so it has no warm compile: not listed)
        "block_sparse_gemm 512x512x1024": lambda: block_sparse_gemm.block_sparse_matmul.fn(512, 512, 1024),
        "flash_attention (example) 512x64": lambda: flash_attention.flashattn.fn(2, 4, 512, 64, False, 64, 64),
        "flash_attention (example) 384x128": lambda: flash_attention.flashattn.fn(1, 2, 384, 128, False, 128, 64),
        "norms rms_norm 256x4096 f16": lambda: norms.rms_norm.fn(256, 4096, blk_m=1),
        "norms layer_norm 256x4096 bf16": lambda: norms.layer_norm.fn(256, 4096, blk_m=1, dtype="bfloat16"),
        "norms online_softmax 256x8192": lambda: norms.online_softmax.fn(256, 8192, blk_m=1, blk_n=4096),
        "ws_gemm 512^3 (protocol)": lambda: warp_specialized_gemm.ws_matmul.fn(512, 512, 512, 128, 128, 64),
        "seed_bug1": lambda: seed_bug1.bug1_kernel.fn(16, 32, 16, 16),
        "seed_bug2": lambda: seed_bug2.bug2_kernel.fn(4, 64),
        "gemm 128x128x64 s3 4096^3": lambda: K.gemm(4096, 4096, 4096, 128, 128, 64, 3, 256),
        "gemm 128x256x64 s3 4096^3": lambda: K.gemm(4096, 4096, 4096, 128, 256, 64, 3, 256),
        "gemm 128x256x32 s3 4096^3": lambda: K.gemm(4096, 4096, 4096, 128, 256, 32, 3, 256),
        "gemm 128x128x32 s3 K=16384": lambda: K.gemm(256, 256, 16384, 128, 128, 32, 3, 256),
        "flash-attn fwd 4096x64 128x64": lambda: K.flash_attention(4096, 64, 128, 64, 2, 256),
        # benchmarks/attention.py's kernel (examples/flash_attention.py at the shapes, 128x128 blocks,
        # 256 threads, 2 stages)
        "flash_attention bench 4096x128": lambda: flash_attention.flashattn.fn(4, 32, 4096, 128, False, 128, 128, 2, 256),
        "flash_attention bench 1024x64": lambda: flash_attention.flashattn.fn(16, 32, 1024, 64, False, 128, 128, 2, 256),
        # the causal one: its key loop's bound reads the query block index, so the verifier traces several blocks
        "flash_attention bench 4096x128 causal":
            lambda: flash_attention.flashattn.fn(4, 32, 4096, 128, True, 128, 128, 2, 256),
    }
    for n in (10, 50, 200):
        out[f"pipe_par n={n}"] = lambda n=n: K.pipe_par(n)
    for n in (10, 50, 100):  # 200 nested T.If exceed EGTILE_MAX_NESTING (128 levels): a LimitError, by design
        out[f"if_nest n={n}"] = lambda n=n: K.if_nest(n)
    for n in (10, 50, 200):
        out[f"chain n={n}"] = lambda n=n: chain(n)
    for n in (10, 50, 200):
        out[f"chain n={n}, {n} buffers"] = lambda n=n: chain(n, n)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated substrings of kernel names")
    ap.add_argument("--no-nvrtc", action="store_true", help="skip codegen, NVRTC and the warm compile")
    ap.add_argument("--no-nvrtc-keep-codegen", action="store_true",
                    help="time codegen, skip NVRTC and the warm compile (cold then lacks NVRTC)")
    ap.add_argument("--median", action="store_true", help="medians of the runs instead of the least times")
    args = ap.parse_args()

    import egtile
    from egtile.codegen import generate, nvrtc
    from egtile.errors import EgtileError
    from egtile.ir import walk
    from egtile.ir.protocol import uses_protocol
    from egtile.lower.protocol import schedule_protocol
    from egtile.schedule.driver import optimize
    from egtile.verifier.protocol import check_protocol

    def cold(trace: Callable[[], Any]) -> tuple[list[float | None], str, Any]:
        t_trace, prim = _timed(trace)
        if uses_protocol(prim.kernel.body):
            # a hand-written protocol: lowered as written (the "e-graph" column) and checked as the user's
            t_sched, result = _timed(lambda: schedule_protocol(prim.kernel))
            t_verify, _ = _timed(lambda: check_protocol(result.scheduled))
            violations = []
        else:
            t_sched, result = _timed(lambda: optimize(prim))
            t_verify, violations = _timed(lambda: egtile.verify(result.scheduled))
        note = "; ".join(sorted({v.property for v in violations}))
        if getattr(result, "limits_hit", False):
            note = "; ".join(filter(None, (note, "e-graph limit hit")))
        if violations or args.no_nvrtc:
            return [t_trace, t_sched, t_verify, None, None], note, result
        try:
            t_low, low = _timed(lambda: generate(result.scheduled))
            if args.no_nvrtc_keep_codegen:
                return [t_trace, t_sched, t_verify, t_low, None], note, result
            t_nvrtc, _ = _timed(lambda: nvrtc.compile_cuda(low.source, f"{low.symbol}.cu"))
        except EgtileError as err:
            return [t_trace, t_sched, t_verify, None, None], type(err).__name__, result
        return [t_trace, t_sched, t_verify, t_low, t_nvrtc], note, result

    def warm(trace: Callable[[], Any]) -> float:
        t, _ = _timed(lambda: egtile.compile(trace(), target="cuda"))
        return t

    pick = statistics.median if args.median else min
    wanted = [w for w in args.only.split(",") if w]
    rows = []
    splits = []
    with tempfile.TemporaryDirectory() as cache_dir:
        os.environ["EGTILE_CACHE_DIR"] = cache_dir
        for name, trace in kernels().items():
            if wanted and not any(w in name for w in wanted):
                continue
            os.environ["EGTILE_DISABLE_CACHE"] = "1"
            cold(trace)  # one-off imports and bytecode
            runs = [cold(trace) for _ in range(args.repeat)]
            note = runs[0][1]
            cols = []
            for i in range(5):
                vals = [r[0][i] for r in runs]
                cols.append(None if any(v is None for v in vals) else pick(vals))
            warm_t = None
            if cols[4] is not None:
                os.environ["EGTILE_DISABLE_CACHE"] = "0"
                egtile.compile(trace(), target="cuda")  # fill both caches
                warm_t = pick([warm(trace) for _ in range(args.repeat)])
            stmts = sum(1 for _ in walk(trace().kernel.body))
            rows.append((name, stmts, cols, warm_t, note))
            best = min(runs, key=lambda r: r[0][1])[2]
            t = getattr(best, "timings", None)
            if t is not None:  # a protocol kernel has no e-graph
                splits.append((name, stmts, t.encode, t.saturate, t.extract, t.decode, best.stages[-1].nodes
                               if best.stages else 0))
            print(f"... {name}", file=sys.stderr, flush=True)

    def ms(v: float | None, width: int, digits: int = 1) -> str:
        return f"{'-':>{width}}" if v is None else f"{v * 1e3:{width}.{digits}f}"

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    how = "median" if args.median else "best"
    print(f"{how} of {args.repeat} runs, ms (load average {load:.1f} on {os.cpu_count()} cores)")
    print(f"{'kernel':32} {'stmts':>5} {'trace':>7} {'e-graph':>8} {'verify':>8} {'codegen':>8} {'NVRTC':>8} "
          f"{'cold':>8} {'warm':>7}  note")
    for name, stmts, (tt, ts, tv, tl, tn), warm_t, note in rows:
        total = sum(v for v in (tt, ts, tv, tl, tn) if v is not None)
        print(f"{name:32} {stmts:5d} {ms(tt, 7)} {ms(ts, 8)} {ms(tv, 8)} {ms(tl, 8)} {ms(tn, 8)} {ms(total, 8)} "
              f"{ms(warm_t, 7, 2)}  {note}")
    print()
    print("e-graph stage of the fastest run, ms")
    print(f"{'kernel':32} {'stmts':>5} {'encode':>8} {'saturate':>9} {'extract':>8} {'decode':>8} {'rows':>8}")
    for name, stmts, te, ts, tx, td, nodes in splits:
        print(f"{name:32} {stmts:5d} {ms(te, 8)} {ms(ts, 9)} {ms(tx, 8)} {ms(td, 8)} {nodes:8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
