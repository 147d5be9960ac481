"""Benchmark: egtile's flash-attention forward (examples/flash_attention.py) against torch's SDPA backends.

Contenders, in one process on the same inputs: egtile's kernel, and
``torch.nn.functional.scaled_dot_product_attention`` under ``torch.nn.attention.sdpa_kernel`` with each backend
alone: cuDNN, flash (FlashAttention-2), memory-efficient. A backend that refuses the case is reported as
such. Cases: float16 and bfloat16, head dim 64 and 128, sequence 1k to 16k, causal and not; batch x heads
is chosen so that every case has 16k query rows per head group (``B = max(1, 16384 // S)``, ``H = 32``), and the
grid always includes B=4 H=32 S=4096 D=128 (the issue's reference shape).

Method: egtile's output, written into a NaN-poisoned tensor, is checked element by element against a float32
reference on the GPU (softmax in float32, computed head by head to bound memory) with the example's bound
(examples/flash_attention.py); every SDPA backend's output is checked against it too. A wrong egtile output is not
timed. Then the contenders that passed take turns (benchmarks/_timing.py: a card warms and slows, and the one timed
first on a cool card gains): ``--rounds`` rounds, each timing every contender once, in an order drawn per round; in
its turn a contender first runs untimed for ``--warm-s`` seconds (the clock settles at what it draws), then is timed
with CUDA events around each call and the median taken (``--iters`` calls, fewer when one call takes long: at least
3, about ``--budget`` / ``--rounds`` seconds); ``--show-rounds`` prints every round's number. A contender's number
is the median over its rounds; the spread over rounds (max - min over median) is printed beside it: a difference
smaller than the spread is noise. An egtile call slower than ``--egtile-max-s`` is timed once (its second call,
marked ``(1 call)``) and takes no turns. TFLOP/s counts ``4 B H S^2 D`` (half of it when causal); ``ratio`` is
egtile's TFLOP/s over the best torch backend's (above 1: faster than torch).

Without a GPU of compute capability 9.0 it prints that it was skipped and exits 0.

    python benchmarks/attention.py [--dtypes float16,bfloat16] [--dims 64,128] [--seqs 1024,2048,4096,8192,16384]
                                   [--causal both|yes|no] [--shape B,H,S,D ...] [--blocks auto|128x128] [--threads 256]
                                   [--stages 2] [--configs BMxBNxTxS,...] [--iters 20] [--budget 2.0] [--rounds 5]
                                   [--warm-s 0.5] [--show-rounds]
                                   [--egtile-max-s 0.3] [--no-egtile] [--no-torch] [--without RULE,...] [--pingpong] [--overlap] [--fa3] [--late-rescale] [--carry]
                                   [--quiet-failures]

egtile's configuration: ``--blocks auto`` (default) takes each shape's row of the example's table
(``examples/flash_attention.py`` ``CONFIGS`` / ``config_for``: block_M, block_N, threads, stages per head dim,
causality and sequence length, from the H200 sweep in docs/perf.md); ``--blocks BMxBN`` with ``--threads`` and
``--stages`` fixes one; ``--configs`` runs several on the same inputs (a sweep: every configuration is compiled
cold and checked, then all take turns with the torch backends; a configuration egtile refuses prints its error
and the sweep goes on).

``--without`` removes rules from egtile's default ruleset for the run (each schedule decision measured alone:
the rest of the schedule is the e-graph's choice without that alternative). The consumer warpgroups' ping-pong is
the default schedule (measured faster, docs/perf.md 2026-12-02 06:27); ``--without pipeline-warp-specialize-pingpong``
measures the free-running warpgroups, and ``--pingpong`` (``egtile.rules.pingpong.preferred()``) is the default's cost.
``--overlap`` forces the intra-warpgroup rotation (``egtile.rules.overlap.preferred()``); ``--fa3`` forces both together
(``egtile.rules.overlap_pingpong.preferred()``: the rotated loop whose two consumer warpgroups take turns issuing
``Q K^T`` and ``P V``, FA3's schedule at head dim 128); ``--late-rescale`` with either rescales ``O`` after the softmax
(FA3's order at head dim 128) instead of right before ``P V``. ``--carry`` forces the ping-pong whose turn holds no
wait (``egtile.rules.pingpong_carry.preferred()``: ``P V`` of block j completes at the wait after ``Q K^T`` of block
j+1; measured slower, docs/perf.md 2026-12-05, in machine code whose turn sync ptxas had moved above the softmax;
pinned since 2026-12-07 20:00, not yet re-measured, nor are ``--overlap`` and ``--fa3``, whose wait it had moved). The Q tile is loaded by the producer's TMA before its first K/V
stage (``egtile.rules.prologue_tma``, the default); ``--without pipeline-prologue-tma``
measures the SIMT copy by every thread before the role split.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks")]

REFERENCE_SHAPE = (4, 32, 4096, 128)
CAUSALITIES = {"both": (False, True), "yes": (True,), "no": (False,)}
"""``--causal``'s choices: the causalities each runs (this benchmark's and the prototypes')."""


def reference_f32(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, causal: bool, heads_per_chunk: int = 4):
    """``(O, P |V|)`` in float32 (bshd), head by head chunks so that the S x S scores stay a few GB."""
    from flash_attention import reference

    B, S, H, D = Q.shape
    out = torch.empty(B, S, H, D, dtype=torch.float32, device=Q.device)
    scale = torch.empty_like(out)
    for b in range(B):
        for h in range(0, H, heads_per_chunk):
            sl = (slice(b, b + 1), slice(None), slice(h, h + heads_per_chunk))
            o, s = reference(Q[sl], K[sl], V[sl], causal, torch.float32)
            out[sl], scale[sl] = o, s
    return out, scale


def backends():
    from torch.nn.attention import SDPBackend

    return [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
            ("efficient", SDPBackend.EFFICIENT_ATTENTION)]


@dataclasses.dataclass(frozen=True)
class Variant:
    """egtile's ruleset and arithmetic for one contender: the rule choices the flags of the same names make."""

    pingpong: bool = False
    overlap: bool = False
    fa3: bool = False
    carry: bool = False
    late_rescale: bool = False
    strict_math: bool = False
    without: tuple[str, ...] = ()
    lowering: tuple[str, ...] = ()
    """optional lowering passes switched on (``EGTILE_WITH_LOWERING``, egtile.lower.switches) for this compile"""

    @staticmethod
    def from_args(args) -> Variant:
        return Variant(args.pingpong, args.overlap, args.fa3, args.carry, args.late_rescale, args.strict_math,
                       tuple(r for r in args.without.split(",") if r))

    @staticmethod
    def parse(text: str) -> Variant:
        """``default``, or ``+``-joined flags: ``pingpong``, ``overlap``, ``fa3``, ``carry``, ``late-rescale``,
        ``strict-math``, ``without:RULE``, ``lowering:PASS`` (e.g. ``fa3+late-rescale``,
        ``without:pipeline-warp-specialize-pingpong``, ``lowering:heaviest-first``)."""
        flags: dict[str, object] = {}
        without: list[str] = []
        lowering: list[str] = []
        for part in (p for p in text.split("+") if p != "default"):
            if part.startswith("without:"):
                without.append(part[len("without:"):])
            elif part.startswith("lowering:"):
                lowering.append(part[len("lowering:"):])
            elif part.replace("-", "_") in Variant.__dataclass_fields__ and part != "without":
                flags[part.replace("-", "_")] = True
            else:
                raise SystemExit(f"benchmarks/attention.py: unknown variant part {part!r} in {text!r}")
        return Variant(**flags, without=tuple(without), lowering=tuple(lowering))  # type: ignore[arg-type]

    def label(self) -> str:
        return (f"{', without ' + ','.join(self.without) if self.without else ''}"
                f"{', with lowering ' + ','.join(self.lowering) if self.lowering else ''}"
                f"{', ping-pong preferred' if self.pingpong else ''}{', rotation forced' if self.overlap else ''}"
                f"{', rotation + ping-pong forced' if self.fa3 else ''}{', late rescale' if self.late_rescale else ''}"
                f"{', P V wait carried' if self.carry else ''}{', strict math' if self.strict_math else ', fast math'}")

    def rules(self):
        """The ruleset (``None``: egtile's default)."""
        import egtile

        rules = None
        if self.pingpong:
            from egtile.rules import pingpong

            rules = pingpong.preferred()
        if self.overlap:
            from egtile.rules import overlap

            rules = overlap.preferred(rules, early=not self.late_rescale)  # FA3's intra-warpgroup rotation forced
        if self.fa3:
            from egtile.rules import overlap_pingpong

            # the rotation and the ping-pong together (rules/overlap_pingpong.py)
            rules = overlap_pingpong.preferred(early=not self.late_rescale)
        if self.carry:
            from egtile.rules import pingpong_carry

            rules = pingpong_carry.preferred(rules)  # the ping-pong's turn without a wait (rules/pingpong_carry.py)
        for r in self.without:
            rules = (rules or egtile.rules.default()).without(r)
        return rules


def run_case(B: int, H: int, S: int, D: int, dt: str, causal: bool, args,
             configs: list[tuple[int, int, int, int]], variants: list[Variant]) -> dict:
    """Check every contender of one case, then time those that passed in turns (benchmarks/_timing.py) and print
    a line per torch backend group and per egtile configuration."""
    import flash_attention as FA
    from _devcheck import device_check as check
    from _timing import event_median, in_turns, summary
    from torch.nn.attention import sdpa_kernel

    td = FA.TORCH_DTYPE[dt]
    flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
    tflops = lambda ms: flops / (ms * 1e-3) / 1e12  # noqa: E731
    head = f"B={B} H={H} S={S} D={D} {dt} {'causal' if causal else 'full'}"
    Q, K, V = (torch.randn(B, S, H, D, dtype=td, device="cuda") for _ in range(3))
    ref, scale = reference_f32(Q, K, V, causal)
    tol = FA.tolerance(scale, ref, dt)
    q, k, v = (x.transpose(1, 2) for x in (Q, K, V))  # bhsd views of the same storage
    res: dict[str, float | str] = {}
    timers: dict[str, object] = {}
    for name, be in ([] if args.no_torch else backends()):
        try:
            def fn(be=be):
                with sdpa_kernel([be]):
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            out = fn().transpose(1, 2)
            torch.cuda.synchronize()
            ok = check(f"torch {name} {head}", out, ref, **tol)
            res[name + "_ok"] = "" if ok else " (outside egtile's bound)"
            timers[name] = lambda fn=fn: event_median(fn, args.iters, args.budget / args.rounds, warm_s=args.warm_s)
        except Exception as e:  # noqa: BLE001  (a backend may refuse a case)
            res[name] = f"n/a ({type(e).__name__}: {str(e).splitlines()[0][:60] if str(e) else ''})"
    egtile_runs = {(cfg, var): prepare_egtile(B, H, S, D, dt, causal, args, cfg, var, Q, K, V, ref, tol, head)
                   for cfg in ([] if args.no_egtile else configs) for var in variants}
    for (cfg, var), eg in egtile_runs.items():
        if "call" in eg:
            timers[_contender(cfg, var)] = lambda c=eg["call"]: event_median(c, args.iters, args.budget / args.rounds,
                                                                            warm_s=args.warm_s)
    got = in_turns(timers, args.rounds)  # type: ignore[arg-type]
    if args.show_rounds:
        for name, times in got.items():
            print(f"    rounds {name}: " + " ".join(f"{tflops(ms):.0f}" for ms in times), flush=True)
    spread: dict[str, float] = {}
    for name, times in got.items():
        ms, spread[name] = summary(times)
        res[name] = tflops(ms)
    best = max((res[n] for n, _ in backends() if isinstance(res.get(n), float)), default=None)
    line = f"{head:<44}"
    for n, _ in backends():
        val = res.get(n)
        line += f" {n} {val:6.1f}{res.get(n + '_ok', '')}" if isinstance(val, float) else f" {n} {val}"
    if "cudnn" in spread:
        line += f"  (cudnn over {args.rounds} rounds: spread {spread['cudnn']:.1%})"
    print(line, flush=True)
    for (cfg, var), eg in egtile_runs.items():
        name = _contender(cfg, var)
        if name in got:
            eg["tflops"] = res[name]
        res[name] = eg  # type: ignore[assignment]
        line = f"  {name}:"
        if isinstance(eg.get("tflops"), float):
            line += f" {eg['tflops']:7.2f} TFLOP/s{eg.get('calls', '')}, compile {eg['compile_s']:.2f} s"
            if name in spread:
                line += f" (spread {spread[name]:.1%})"
            if best:
                line += f"   ratio {eg['tflops'] / best:6.3f}"
        else:
            line += f" {eg.get('tflops')}"
        print(line, flush=True)
    del Q, K, V, ref, scale, tol
    torch.cuda.empty_cache()
    return {"head": head, **res, "best": best}


@contextlib.contextmanager
def lowering_switched_on(passes: tuple[str, ...]):
    """``EGTILE_WITH_LOWERING`` names ``passes`` (with any it named already) while the block runs."""
    old = os.environ.get("EGTILE_WITH_LOWERING")
    if passes:
        os.environ["EGTILE_WITH_LOWERING"] = ",".join(filter(None, (old, *passes)))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("EGTILE_WITH_LOWERING", None)
        else:
            os.environ["EGTILE_WITH_LOWERING"] = old


def _contender(cfg: tuple[int, int, int, int], var: Variant) -> str:
    """egtile's contender at ``cfg`` = (block_M, block_N, threads, stages) with ``var``: its name in the turns and
    in the printed lines."""
    bm, bn, nt, ns = cfg
    return f"egtile {bm}x{bn} {nt} threads {ns} stage(s){var.label()}"


def prepare_egtile(B, H, S, D, dt, causal, args, cfg, var: Variant, Q, K, V, ref, tol, head) -> dict:
    """Compile egtile's kernel at ``cfg`` = (block_M, block_N, threads, stages) with ``var``'s rules and arithmetic
    and check it against ``ref``.
    Returns ``compile_s`` and, for a right kernel, ``call`` (one launch, to be timed); a right kernel slower than
    ``--egtile-max-s`` is measured here, by its second call, and gets ``tflops`` instead; a failure gets the
    reason in ``tflops``."""
    import flash_attention as FA
    from _check import poisoned
    from _devcheck import device_check as check

    import egtile

    bm, bn, nt, ns = cfg
    out: dict[str, object] = {}
    flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
    try:
        t0 = time.perf_counter()
        prim = FA.flashattn.__wrapped__(B, H, S, D, causal, block_M=bm, block_N=bn, threads=nt, num_stages=ns,
                                        dtype=dt)
        # as TileLang's example asks (pass_configs TL_ENABLE_FAST_MATH); strict math: egtile's default
        with lowering_switched_on(var.lowering):
            kernel = egtile.compile(prim, target="cuda", rules=var.rules(),
                                    pass_configs={egtile.PassConfigKey.TL_ENABLE_FAST_MATH: not var.strict_math})
        out["compile_s"] = time.perf_counter() - t0
        O = poisoned(tuple(Q.shape), Q.dtype, "cuda")  # noqa: E741
        kernel(Q, K, V, O)
        torch.cuda.synchronize()
        if not check(f"egtile {head} {bm}x{bn} t{nt} s{ns}{var.label()}", O, ref, **tol):
            out["tflops"] = "WRONG: not timed"
            return out
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        kernel(Q, K, V, O)
        end.record()
        torch.cuda.synchronize()
        one = start.elapsed_time(end)
        if one > args.egtile_max_s * 1e3:  # a slow kernel: that one (second) call is the measurement
            out["tflops"], out["calls"] = flops / (one * 1e-3) / 1e12, " (1 call)"
        else:
            out["call"] = lambda: kernel(Q, K, V, O)
    except Exception as e:  # noqa: BLE001  (report every kernel, then go on)
        out["tflops"] = f"FAILED to build or run ({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''})"
        if not args.quiet_failures:
            traceback.print_exc(file=sys.stdout)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--seqs", default="1024,2048,4096,8192,16384")
    ap.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    ap.add_argument("--shape", action="append", default=[], help="B,H,S,D: run exactly these shapes (repeatable)")
    ap.add_argument("--blocks", default="auto",
                    help="egtile's block_M x block_N; 'auto' (default): the example's per-shape table "
                         "(examples/flash_attention.py CONFIGS), which also sets threads and stages")
    ap.add_argument("--threads", type=int, default=256, help="egtile's threads per block (T.Kernel threads=), with --blocks")
    ap.add_argument("--stages", type=int, default=2, help="egtile's T.Pipelined num_stages, with --blocks")
    ap.add_argument("--configs", default="",
                    help="comma-separated BMxBNxTHREADSxSTAGES (e.g. 128x128x256x2,192x128x384x2): egtile at each, "
                         "on the same inputs, after one timing of each torch backend (a configuration sweep)")
    ap.add_argument("--quiet-failures", action="store_true", help="one line per failed egtile build, no traceback")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--budget", type=float, default=2.0,
                    help="seconds of timed calls per contender, about (over all rounds)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds in which the contenders of a case take turns (benchmarks/_timing.py)")
    ap.add_argument("--warm-s", type=float, default=0.5,
                    help="seconds each contender runs, untimed, at the start of its turn (its clock settles)")
    ap.add_argument("--show-rounds", action="store_true", help="print every contender's TFLOP/s in each round")
    ap.add_argument("--no-egtile", action="store_true", help="torch's backends only")
    ap.add_argument("--no-torch", action="store_true", help="egtile only (no SDPA backend is run or timed)")
    ap.add_argument("--without", default="",
                    help="comma-separated rule names removed from egtile's default ruleset (one decision at a time: "
                         "e.g. gemm-to-wgmma-async,gemm-to-wgmma-rs-async)")
    ap.add_argument("--overlap", action="store_true",
                    help="egtile with egtile.rules.overlap.preferred() (Q K^T of block j issued under P V of block j-1)")
    ap.add_argument("--fa3", action="store_true",
                    help="egtile with egtile.rules.overlap_pingpong.preferred() (the rotation and the ping-pong together)")
    ap.add_argument("--carry", action="store_true",
                    help="egtile with egtile.rules.pingpong_carry.preferred() (the ping-pong's turn without a wait: P V "
                         "of block j completes after Q K^T of block j+1)")
    ap.add_argument("--late-rescale", action="store_true",
                    help="with --overlap / --fa3: rescale O after the softmax, outside the turn (FA3 at head dim 128), "
                         "instead of right before P V")
    ap.add_argument("--pingpong", action="store_true",
                    help="egtile with egtile.rules.pingpong.preferred() (the consumer warpgroups take turns)")
    ap.add_argument("--strict-math", action="store_true",
                    help="compile egtile's kernel with egtile's default arithmetic instead of the fast math that "
                         "TileLang's example asks for (pass_configs TL_ENABLE_FAST_MATH)")
    ap.add_argument("--variants", default="",
                    help="comma-separated egtile variants that take turns in one case (each a Variant.parse string: "
                         "default, pingpong, overlap, fa3, carry, late-rescale, strict-math, without:RULE, lowering:PASS, joined "
                         "with +); instead of the single variant the flags above make")
    ap.add_argument("--egtile-max-s", type=float, default=0.3,
                    help="an egtile call slower than this is timed once (its second call), not repeatedly")
    args = ap.parse_args()

    from egtile.api import hopper_available

    if not hopper_available():
        print("benchmarks/attention.py: skipped (needs a CUDA GPU of compute capability 9.0; "
              f"torch.cuda.is_available() = {torch.cuda.is_available()})")
        return 0
    sys.argv = [sys.argv[0], "--target", "cuda"]  # the example reads --target at import

    def configs_for(S: int, D: int, causal: bool, dt: str) -> list[tuple[int, int, int, int]]:
        import flash_attention as FA

        if args.configs:
            return [tuple(int(x) for x in c.split("x")) for c in args.configs.split(",")]  # type: ignore[misc]
        if args.blocks == "auto":
            return [FA.config_for(S, D, causal, dt)]
        return [(*(int(x) for x in args.blocks.split("x")), args.threads, args.stages)]  # type: ignore[list-item]

    variants = ([Variant.parse(v) for v in args.variants.split(",")] if args.variants
                else [Variant.from_args(args)])
    causals = CAUSALITIES[args.causal]
    if args.shape:
        shapes = [tuple(int(x) for x in s.split(",")) for s in args.shape]
    else:
        shapes = [REFERENCE_SHAPE] + [(max(1, 16384 // S), 32, S, D) for D in map(int, args.dims.split(","))
                                      for S in map(int, args.seqs.split(","))]
        shapes = list(dict.fromkeys(shapes))  # the reference shape first, once
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; cuDNN "
          f"{torch.backends.cudnn.version()}; TFLOP/s = 4 B H S^2 D (/2 causal) / median time")
    for dt in args.dtypes.split(","):
        for B, H, S, D in shapes:
            for causal in causals:
                run_case(B, H, S, D, dt, causal, args, configs_for(S, D, causal, dt), variants)
    return 0


if __name__ == "__main__":
    sys.exit(main())
