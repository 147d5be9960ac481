"""Where NVRTC's time goes for one generated kernel: the option variants egtile could use, timed alike.

    python benchmarks/nvrtc_options.py [--repeat N] [--shape B,H,S,D] [--blocks BMxBNxTHREADSxSTAGES]

It schedules ``examples/flash_attention.py`` (the kernel ``benchmarks/attention.py`` times) once, generates its
CUDA C++ once, then compiles that source with NVRTC under each variant, ``--repeat`` times (best and median):

* ``as is``: :data:`egtile.codegen.nvrtc.BASE_OPTIONS` for ``sm_90a`` (what a cold compile runs);
* ``no -lineinfo``: the same without line tables (compute-sanitizer and cuobjdump then lose source lines);
* ``PTX only``: ``compute_90a`` (NVRTC's front end and optimizer, no ptxas): the rest of ``as is`` is ptxas;
* ``headers only``: an empty kernel with the same ``#include`` lines (the part of the front end that a
  precompiled header could save);
* ``-Xptxas -O1`` / ``-O0``: ptxas optimization levels (never used by egtile: slower kernels; shown for scale).

No GPU is needed. It prints a table and asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "examples")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shape", default="4,32,4096,128")
    ap.add_argument("--blocks", default="128x128x256x2")
    args = ap.parse_args()
    sys.argv = [sys.argv[0], "--target", "sim"]  # the example reads --target at import
    import flash_attention as FA

    import egtile
    from egtile.codegen import generate, nvrtc

    B, H, S, D = (int(x) for x in args.shape.split(","))
    bm, bn, nt, ns = (int(x) for x in args.blocks.split("x"))
    r = egtile.optimize(FA.flashattn.__wrapped__(B, H, S, D, False, block_M=bm, block_N=bn, threads=nt, num_stages=ns))
    low = generate(r.scheduled)
    includes = "\n".join(line for line in low.source.splitlines() if line.startswith("#include"))
    empty = includes + '\nextern "C" __global__ void eg_empty(float* x) { x[threadIdx.x] = 0.f; }\n'
    base = nvrtc.BASE_OPTIONS
    lean = tuple(o for o in base if o != "-lineinfo")
    variants = [
        ("as is", base, "sm_90a", low.source),
        ("no -lineinfo", lean, "sm_90a", low.source),
        ("PTX only (no ptxas)", base, "compute_90a", low.source),
        ("headers only (empty kernel)", base, "sm_90a", empty),
        ("-Xptxas -O1 (for scale)", (*base, "-Xptxas", "-O1"), "sm_90a", low.source),
    ]
    print(f"{args.shape} {args.blocks}: {low.source.count(chr(10))} generated lines; NVRTC {nvrtc.nvrtc_version()}; "
          f"ms over {args.repeat} runs")
    nvrtc.compile_cuda(empty, "warmup.cu")  # the library's one-off load
    for name, opts, arch, src in variants:
        ts = []
        for _ in range(args.repeat):
            nvrtc.BASE_OPTIONS = opts
            try:
                t0 = time.perf_counter()
                nvrtc.compile_cuda(src, f"{low.symbol}.cu", arch=arch)
                ts.append(time.perf_counter() - t0)
            finally:
                nvrtc.BASE_OPTIONS = base
        print(f"  {name:32} best {min(ts) * 1e3:7.1f}   median {statistics.median(ts) * 1e3:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
