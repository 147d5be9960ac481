"""Where a block of the attention kernel spends its time: a per-block timeline read from the GPU (issue 13).

egtile's generated kernel for the benchmark's shape, patched by text so that consumer thread 0 of every block
records ``%globaltimer`` at four points and the SM it ran on: the block's start, the Q tile's arrival (the consumers'
first wait), the end of the key loop, and the end of the O store (after the TMA store's wait). The stamps stay in
registers until the end, where one thread writes them to a ``__device__`` array that the host reads back through the
module (``cuModuleGetGlobal``). The patched kernel's output is checked against a float32 reference first; the trace
comes from a launch after a warm-up (``--warm-s``). Printed per kernel: the makespan, the share of SM time inside
the key loop, the mean start (start to Q arrival) and end (loop end to store done) of a block, the time per key
block, and the gap between one block's end and the next block's start on the same SM.

    python benchmarks/prototypes/block_trace.py [--shape 4,32,4096,128] [--causal both] [--warm-s 0.5] [--repeat 1]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks"), str(ROOT / "benchmarks" / "prototypes")]

FIELDS = 6  # start, Q arrived, loop end, store done, SM id, the query block index bx

PRELUDE = """
__device__ unsigned long long eg_trace[{n}];
static __device__ __forceinline__ unsigned long long eg_now() {{
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}}
"""


def _closing(lines: list[str], i: int) -> int:
    """The line that closes the brace opened on line ``i``."""
    depth = 0
    for j in range(i, len(lines)):
        depth += lines[j].count("{") - lines[j].count("}")
        if depth == 0 and j > i:
            return j
    raise ValueError("unbalanced braces")


def patch(src: str, blocks: int) -> str:
    lines = src.split("\n")
    kernel = next(i for i, ln in enumerate(lines) if "__global__" in ln)
    lines.insert(kernel, PRELUDE.format(n=blocks * FIELDS))
    tid = next(i for i, ln in enumerate(lines) if "const int eg_tid =" in ln)
    lines.insert(tid + 1, "  unsigned long long eg_t0 = eg_now(), eg_t1 = 0, eg_t2 = 0;")
    q = next(i for i, ln in enumerate(lines) if re.search(r"eg_mbarrier_wait_parity\(&eg_bar_bar_2\[0\], 0\);", ln))
    lines.insert(q + 1, "      if (eg_tid == 0) eg_t1 = eg_now();")
    loop = next(i for i, ln in enumerate(lines) if "for (int k = 0" in ln and i > q)
    end = _closing(lines, loop)
    lines.insert(end + 1, "      if (eg_tid == 0) eg_t2 = eg_now();")
    wait = next(i for i, ln in enumerate(lines) if "eg_tma_store_wait();" in ln)
    lines.insert(wait + 1, "\n".join([
        "        { unsigned sm; asm volatile(\"mov.u32 %0, %%smid;\" : \"=r\"(sm));",
        "          const unsigned lin = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);",
        f"          unsigned long long* o = eg_trace + (unsigned long long)lin * {FIELDS};",
        "          o[0] = eg_t0; o[1] = eg_t1; o[2] = eg_t2; o[3] = eg_now(); o[4] = sm; o[5] = (unsigned long long)bx; }"]))
    return "\n".join(lines)


def read_trace(kernel, blocks: int) -> np.ndarray:
    from egtile.runtime.driver import driver

    d = driver()
    fn = kernel.plan(torch.cuda.current_device()).function
    err, module = d.cuFuncGetModule(fn)
    err2, ptr, size = d.cuModuleGetGlobal(module, b"eg_trace")
    out = np.zeros(blocks * FIELDS, dtype=np.uint64)
    (err3,) = d.cuMemcpyDtoH(out.ctypes.data, ptr, out.nbytes)
    if any(int(e) for e in (err, err2, err3)):
        raise RuntimeError(f"reading eg_trace: {err} {err2} {err3}")
    return out.reshape(blocks, FIELDS)


def summarize(label: str, tr: np.ndarray, per_bx: np.ndarray) -> None:
    t0, t1, t2, t3, sm = (tr[:, i].astype(np.float64) for i in range(5))
    trips = per_bx[tr[:, 5].astype(np.int64)]
    base = t0.min()
    t0, t1, t2, t3 = t0 - base, t1 - base, t2 - base, t3 - base
    span = t3.max()
    nsm = len(np.unique(sm))
    loop = (t2 - t1).sum()
    gaps = []
    tails = []
    for s in np.unique(sm):
        idx = np.flatnonzero(sm == s)
        order = idx[np.argsort(t0[idx])]
        gaps += list(t0[order[1:]] - t3[order[:-1]])
        tails.append(span - t3[order[-1]])
    gaps = np.asarray(gaps)
    print(f"{label}: {len(tr)} blocks on {nsm} SMs, makespan {span / 1e3:.1f} us; SM time in the key loop "
          f"{loop / (nsm * span):.1%}; per block: start (to Q arrival) {np.mean(t1 - t0) / 1e3:.2f} us, "
          f"end (loop end to store done) {np.mean(t3 - t2) / 1e3:.2f} us, key block {np.sum(t2 - t1) / np.sum(trips) / 1e3:.3f} us; "
          f"between blocks on one SM: median {np.median(gaps) / 1e3:.2f} us, mean {gaps.mean() / 1e3:.2f} us; "
          f"first block starts spread {np.sort(t0)[nsm - 1] / 1e3:.2f} us; tail (last SM idle) mean {np.mean(tails) / 1e3:.1f} us",
          flush=True)
    per = (t3 - t0).sum()
    print(f"  SM time: in blocks {per / (nsm * span):.1%} (loop {loop / (nsm * span):.1%}, start "
          f"{(t1 - t0).sum() / (nsm * span):.1%}, end {(t3 - t2).sum() / (nsm * span):.1%}), between blocks "
          f"{gaps.sum() / (nsm * span):.1%}, after its last block {np.sum(tails) / (nsm * span):.1%}", flush=True)


def main() -> int:
    from _variants import variant

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="4,32,4096,128")
    ap.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    ap.add_argument("--warm-s", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=1, help="traced launches (each summarized)")
    args = ap.parse_args()
    sys.argv = [sys.argv[0], "--target", "cuda"]
    import flash_attention as FA
    from _devcheck import device_check
    from attention import CAUSALITIES, reference_f32

    import egtile

    B, H, S, D = (int(x) for x in args.shape.split(","))
    torch.manual_seed(0)
    Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
    for causal in CAUSALITIES[args.causal]:
        bm, bn, nt, ns = FA.config_for(S, D, causal)
        prim = FA.flashattn.__wrapped__(B, H, S, D, causal, block_M=bm, block_N=bn, threads=nt, num_stages=ns)
        kernel = egtile.compile(prim, target="cuda", pass_configs=FA.PASS_CONFIGS)
        grid = kernel._built.grid
        blocks = int(np.prod(grid))
        traced = variant(kernel, patch(kernel._built.source, blocks), "traced", fast_math=kernel.fast_math)
        ref, scale = reference_f32(Q, K, V, causal)
        O = torch.full_like(Q, float("nan"))  # noqa: E741
        traced(Q, K, V, O)
        torch.cuda.synchronize()
        label = f"B={B} H={H} S={S} D={D} {'causal' if causal else 'full'} {bm}x{bn}"
        if not device_check(label, O, ref, **FA.tolerance(scale, ref, "float16")):
            print(f"{label}: the traced kernel is WRONG; no trace")
            continue
        end = time.perf_counter() + args.warm_s
        while time.perf_counter() < end:
            traced(Q, K, V, O)
        torch.cuda.synchronize()
        nq = grid[0]
        nk = -(-S // bn)
        per_bx = np.array([min(nk, -(-(x + 1) * bm // bn)) if causal else nk for x in range(nq)])
        for _ in range(args.repeat):
            traced(Q, K, V, O)
            torch.cuda.synchronize()
            summarize(label, read_trace(traced, blocks), per_bx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
