"""Benchmark: egtile's row normalizations (examples/norms.py) against torch, in GB/s (CUDA only; no assertions).

Kernels and references: ``rms_norm`` against ``torch.nn.functional.rms_norm`` (no weight), ``layer_norm`` against
``torch.nn.functional.layer_norm`` (weight and bias), ``online_softmax`` against ``torch.softmax(dim=1)``; at
8192 x 8192 and 16384 x 4096 (a transformer's tokens x hidden), float16, bfloat16 and float32.

Method: torch and egtile get the same fresh random inputs. egtile's output (into a NaN-poisoned tensor) is checked
element by element against a float64 reference with the example's bound (examples/norms.py), and torch's
against the same reference (reported, not required); a wrong egtile kernel is not timed. Then torch and every
egtile configuration that passed take turns, as in benchmarks/kernels.py (benchmarks/_timing.py: a side timed
first on a cool card gains clock speed): in each of ``--rounds`` rounds, in an order drawn per round, each side is
warmed up, then timed with CUDA events around each call, the round's number being the median of ``--iters``;
a side's time is its median over the rounds, with the spread over rounds ((max - min) / median) beside it. The
inputs are larger than the L2 (60 MB) at the default sizes. GB/s counts the fewest bytes the operation must
move: the input read once and the output written once (plus gamma and beta); ``ratio`` is egtile's GB/s over
torch's (above 1: faster than torch).

``--sweep`` times a few block configurations of each kernel (rows per block, threads) and reports each.
Without a GPU of compute capability 9.0 it prints that it was skipped and exits 0.

    python benchmarks/norms.py [--only rms_norm,layer_norm,online_softmax] [--dtypes float16,float32]
                               [--sizes 8192x8192,16384x4096] [--iters 50] [--warmup 5] [--rounds 5] [--sweep]
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks")]

from _timing import medians_in_turns  # noqa: E402

#: block configurations: the default first; ``--sweep`` times all of them
CONFIGS = {
    "rms_norm": [{"blk_m": 1, "threads": 128}, {"blk_m": 1, "threads": 256}, {"blk_m": 1, "threads": 512},
                 {"blk_m": 2, "threads": 256}],
    "layer_norm": [{"blk_m": 1, "threads": 128}, {"blk_m": 1, "threads": 256}, {"blk_m": 1, "threads": 512}],
    "online_softmax": [{"blk_m": 1, "blk_n": 4096, "threads": 128}, {"blk_m": 1, "blk_n": 2048, "threads": 256},
                       {"blk_m": 1, "blk_n": 4096, "threads": 512}, {"blk_m": 1, "blk_n": 1024, "threads": 128}],
}


def torch_fn(name: str, args: tuple[torch.Tensor, ...], eps: float):
    F = torch.nn.functional
    X = args[0]
    N = X.shape[1]
    if name == "rms_norm":
        return lambda: F.rms_norm(X, (N,), eps=eps)
    if name == "layer_norm":
        return lambda: F.layer_norm(X, (N,), args[1], args[2], eps)
    return lambda: torch.softmax(X, dim=1)


def moved_bytes(name: str, M: int, N: int, elem: int) -> int:
    return (2 * M * N + (2 * N if name == "layer_norm" else 0)) * elem


def fits(name: str, M: int, N: int, cfg: dict, elem: int) -> bool:
    """Whether the configuration divides the shape and its shared memory fits a block (227 KiB)."""
    if M % cfg["blk_m"] or ("blk_n" in cfg and N % cfg["blk_n"]):
        return False
    rows = cfg["blk_m"] * (cfg.get("blk_n") or N)
    smem = {"rms_norm": rows * (elem + 4), "layer_norm": rows * (elem + 4),
            "online_softmax": rows * 4}[name]
    return smem <= 227 * 1024


def run_case(name: str, dt: str, M: int, N: int, args: argparse.Namespace) -> list[tuple]:
    """One case: check torch's output (reported, not required) and egtile's at each configuration, then time torch
    and the configurations that passed in turns (benchmarks/_timing.py); a line for torch, one per configuration.
    Returns the summary's rows: (case, configuration, egtile GB/s, torch GB/s, ratio)."""
    import norms
    from _devcheck import device_check as check

    elem = torch.tensor([], dtype=norms.TORCH_DTYPE[dt]).element_size()
    inputs = norms.inputs(name, M, N, dt, "cuda")
    ref, s = norms.reference(name, inputs, norms.EPS[name])
    tol = norms.tolerance(name, ref, s, N, dt)
    head = f"{name} {M}x{N} {dt}"
    fn = torch_fn(name, inputs, norms.EPS[name])
    torch_ok = check(f"torch {head}", fn(), ref, **tol)
    sides: dict[str, Callable[[], Any]] = {"torch": fn}
    why_not: dict[str, str] = {}  # a configuration that is not timed: what its line says instead
    labels = []
    for cfg in CONFIGS[name][:None if args.sweep else 1]:
        if not fits(name, M, N, cfg, elem):
            continue
        label = " ".join(f"{k}={v}" for k, v in cfg.items())
        labels.append(label)
        call = egtile_norm(name, dt, cfg, inputs, ref, tol, f"egtile {head} {label}")
        if callable(call):
            sides[label] = call
        else:
            why_not[label] = call
    t = medians_in_turns(sides, args.rounds, args.iters, args.warmup)
    gbs = lambda ms: moved_bytes(name, M, N, elem) / (ms * 1e-3) / 1e9  # noqa: E731
    t_torch, s_torch = t["torch"]
    print(f"{head:<34} torch {t_torch:8.4f} ms {gbs(t_torch):7.0f} GB/s (spread {s_torch:.1%})"
          f"{'' if torch_ok else ' (torch outside egtile bound)'}")
    rows = []
    for label in labels:
        if label not in t:
            print(f"  egtile {label:<32} {why_not[label]}")
            continue
        ms, spread = t[label]
        print(f"  egtile {label:<32} {ms:8.4f} ms {gbs(ms):7.0f} GB/s (spread {spread:.1%})   "
              f"ratio {t_torch / ms:5.2f}")
        rows.append((head, label, gbs(ms), gbs(t_torch), t_torch / ms))
    return rows


def egtile_norm(name: str, dt: str, cfg: dict, inputs: tuple[torch.Tensor, ...], ref: torch.Tensor, tol: dict,
                what: str) -> Callable[[], Any] | str:
    """egtile's ``name`` kernel at the block configuration ``cfg``, checked on a NaN-poisoned output: a call of it
    into that output (the one timed), or why it is not timed (with the traceback when it failed to build or run)."""
    import norms
    from _check import poisoned
    from _devcheck import device_check as check

    import egtile

    M, N = inputs[0].shape
    try:
        prim = norms.FACTORIES[name].__wrapped__(M, N, dtype=dt, **cfg)
        kernel = egtile.compile(prim, target="cuda")
        Y = poisoned((M, N), norms.TORCH_DTYPE[dt], "cuda")
        kernel(*inputs, Y)
        torch.cuda.synchronize()
        if not check(what, Y, ref, **tol):
            return "output WRONG: not timed"
        return lambda: kernel(*inputs, Y)
    except Exception:  # noqa: BLE001  (report every kernel, then go on)
        return "FAILED to build or run:\n" + traceback.format_exc().rstrip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="rms_norm,layer_norm,online_softmax")
    ap.add_argument("--dtypes", default="float16,float32")
    ap.add_argument("--sizes", default="8192x8192,16384x4096")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds in which the sides of a case take turns (benchmarks/_timing.py)")
    ap.add_argument("--sweep", action="store_true", help="time every block configuration of CONFIGS")
    args = ap.parse_args()

    from egtile.api import hopper_available

    if not hopper_available():
        print("benchmarks/norms.py: skipped (needs a CUDA GPU of compute capability 9.0; "
              f"torch.cuda.is_available() = {torch.cuda.is_available()})")
        return 0
    sys.argv = [sys.argv[0], "--target", "cuda"]  # the examples read --target at import
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; median over {args.rounds} rounds, the "
          f"sides taking turns, of the median of {args.iters} calls after {args.warmup} warm-up calls; "
          "GB/s = (input + output bytes) / time")
    rows = []
    for name in args.only.split(","):
        for dt in args.dtypes.split(","):
            for size in args.sizes.split(","):
                M, N = (int(x) for x in size.split("x"))
                rows += run_case(name, dt, M, N, args)
                torch.cuda.empty_cache()
    print("\nsummary (best egtile configuration per case; ratio = egtile GB/s / torch GB/s)")
    best: dict[str, tuple] = {}
    for head, label, g, gt, r in rows:
        if head not in best or r > best[head][4]:
            best[head] = (head, label, g, gt, r)
    for head, label, g, gt, r in best.values():
        print(f"{head:<34} egtile {g:7.0f} GB/s ({label})   torch {gt:7.0f} GB/s   ratio {r:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
