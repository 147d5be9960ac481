"""Benchmark: egtile's row normalizations (examples/norms.py) against torch, in GB/s (CUDA only; no assertions).

Kernels and references: ``rms_norm`` against ``torch.nn.functional.rms_norm`` (no weight), ``layer_norm`` against
``torch.nn.functional.layer_norm`` (weight and bias), ``online_softmax`` against ``torch.softmax(dim=1)``; at
8192 x 8192 and 16384 x 4096 (a transformer's tokens x hidden), float16, bfloat16 and float32.

Method: both sides get the same fresh random inputs. egtile's output (into a NaN-poisoned tensor) is checked
element by element against a float64 reference with the example's bound (examples/norms.py), and torch's
against the same reference (reported, not required); a wrong egtile kernel is not timed. Each side is warmed
up, then timed as in benchmarks/kernels.py (CUDA events around each call, median of ``--iters``); the inputs
are larger than the L2 (60 MB) at the default sizes. GB/s counts the fewest bytes the operation must move:
the input read once and the output written once (plus gamma and beta); ``ratio`` is egtile's GB/s over
torch's (above 1: faster than torch).

``--sweep`` times a few block configurations of each kernel (rows per block, threads) and reports each.
Without a GPU of compute capability 9.0 it prints that it was skipped and exits 0.

    python benchmarks/norms.py [--only rms_norm,layer_norm,online_softmax] [--dtypes float16,float32]
                               [--sizes 8192x8192,16384x4096] [--iters 50] [--warmup 5] [--sweep]
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks")]

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="rms_norm,layer_norm,online_softmax")
    ap.add_argument("--dtypes", default="float16,float32")
    ap.add_argument("--sizes", default="8192x8192,16384x4096")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--sweep", action="store_true", help="time every block configuration of CONFIGS")
    args = ap.parse_args()

    from egtile.api import hopper_available

    if not hopper_available():
        print("benchmarks/norms.py: skipped (needs a CUDA GPU of compute capability 9.0; "
              f"torch.cuda.is_available() = {torch.cuda.is_available()})")
        return 0
    sys.argv = [sys.argv[0], "--target", "cuda"]  # the examples read --target at import
    import norms
    from _check import poisoned
    from _devcheck import device_check as check
    from kernels import median_ms

    import egtile

    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; median of {args.iters} calls after "
          f"{args.warmup} warm-up calls; GB/s = (input + output bytes) / time")
    rows = []
    for name in args.only.split(","):
        for dt in args.dtypes.split(","):
            td = norms.TORCH_DTYPE[dt]
            elem = torch.tensor([], dtype=td).element_size()
            for size in args.sizes.split(","):
                M, N = (int(x) for x in size.split("x"))
                inputs = norms.inputs(name, M, N, dt, "cuda")
                ref, s = norms.reference(name, inputs, norms.EPS[name])
                tol = norms.tolerance(name, ref, s, N, dt)
                nbytes = moved_bytes(name, M, N, elem)
                gbs = lambda ms: nbytes / (ms * 1e-3) / 1e9  # noqa: E731
                fn = torch_fn(name, inputs, norms.EPS[name])
                torch_ok = check(f"torch {name} {M}x{N} {dt}", fn(), ref, **tol)
                t_torch = median_ms(fn, args.iters, args.warmup)
                head = f"{name} {M}x{N} {dt}"
                print(f"{head:<34} torch {t_torch:8.4f} ms {gbs(t_torch):7.0f} GB/s"
                      f"{'' if torch_ok else ' (torch outside egtile bound)'}")
                for cfg in CONFIGS[name][:None if args.sweep else 1]:
                    if not fits(name, M, N, cfg, elem):
                        continue
                    label = " ".join(f"{k}={v}" for k, v in cfg.items())
                    try:
                        prim = norms.FACTORIES[name].__wrapped__(M, N, dtype=dt, **cfg)
                        kernel = egtile.compile(prim, target="cuda")
                        Y = poisoned((M, N), td, "cuda")
                        kernel(*inputs, Y)
                        torch.cuda.synchronize()
                        if not check(f"egtile {head} {label}", Y, ref, **tol):
                            print(f"  egtile {label:<32} output WRONG: not timed")
                            continue
                        t = median_ms(lambda: kernel(*inputs, Y), args.iters, args.warmup)
                        print(f"  egtile {label:<32} {t:8.4f} ms {gbs(t):7.0f} GB/s   ratio {t_torch / t:5.2f}")
                        rows.append((head, label, gbs(t), gbs(t_torch), t_torch / t))
                    except Exception:  # noqa: BLE001  (report every kernel, then go on)
                        print(f"  egtile {label}: FAILED to build or run:")
                        traceback.print_exc(file=sys.stdout)
                del inputs, ref, s, tol
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
