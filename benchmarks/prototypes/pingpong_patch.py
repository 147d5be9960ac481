"""Speed potential of FA3's ping-pong, measured before building it as a decision (issue 13).

Takes egtile's generated CUDA for the benchmark's flash-attention kernel (examples/flash_attention.py at
128x128 blocks, 2 consumer warpgroups + the TMA producer, 2 stages), inserts a named-barrier handshake between
the two consumer warpgroups by text, compiles it through egtile's NVRTC path and times it against the unpatched
kernel on the same inputs, after checking both against a float32 reference.

Handshake (named barriers 3 and 4, 256 threads each: 128 syncing + 128 arriving; PTX ISA 9.7.13.4):

* ``fa3``: the tensor-core section of warpgroup w is ``P V`` of block j followed by ``Q K^T`` of block j+1
  (FA3's order): ``bar.sync 3+w`` before ``P V``, ``bar.arrive 3+(1-w)`` right after ``Q K^T``'s commit;
  before the loop warpgroup 1 arrives on 3 and both sync on their own barrier, after it warpgroup 0 arrives
  on 4 (so each barrier gets exactly its 256 each round).
* ``g0``: only ``Q K^T`` is in the section: ``bar.sync 3+w`` before the mask fill, ``bar.arrive`` after the
  commit; warpgroup 1 arrives on 3 before the loop, warpgroup 0 syncs on 3 once after it.

    python benchmarks/prototypes/pingpong_patch.py [--shape 4,32,4096,128] [--iters 20]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks")]

HELPERS = """
__device__ __forceinline__ void eg_pp_arrive(unsigned id, unsigned count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}
"""


def _insert_before(lines: list[str], idx: int, text: str) -> None:
    lines.insert(idx, text)


def patch(src: str, variant: str) -> str:
    lines = src.split("\n")
    start = next(i for i, ln in enumerate(lines) if "// role consumer" in ln)
    loop = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("for (int k = 0;"))
    ind = lines[loop][: len(lines[loop]) - len(lines[loop].lstrip())]
    g0 = next(i for i in range(loop, len(lines)) if re.search(r"// wgmma T\.gemm \(sid \d+\)", lines[i]))
    commit = next(i for i in range(g0, len(lines)) if "eg_wgmma_commit_group();" in lines[i])
    g1 = next(i for i in range(commit, len(lines)) if "// register-A wgmma T.gemm" in lines[i])
    release = next(i for i in range(g1, len(lines)) if "eg_mbarrier_arrive(&eg_bar_empty" in lines[i])
    end = next(i for i in range(release, len(lines)) if lines[i] == ind + "}")
    me, other = "(3u + (unsigned)eg_wg0)", "(4u - (unsigned)eg_wg0)"
    edits: list[tuple[int, str]] = []  # (line index to insert before, text)
    if variant == "fa3":
        edits += [(loop, f"{ind}if (eg_wg0 == 1) eg_pp_arrive(3u, 256u);\n{ind}eg_named_barrier_sync({me}, 256u);"),
                  (commit + 1, f"{ind}    eg_pp_arrive({other}, 256u);"),
                  (g1, f"{ind}  eg_named_barrier_sync({me}, 256u);"),
                  (end + 1, f"{ind}if (eg_wg0 == 0) eg_pp_arrive(4u, 256u);")]
    elif variant == "g0":
        body0 = loop + 1
        edits += [(loop, f"{ind}if (eg_wg0 == 1) eg_pp_arrive(3u, 256u);"),
                  (body0, f"{ind}  eg_named_barrier_sync({me}, 256u);"),
                  (commit + 1, f"{ind}    eg_pp_arrive({other}, 256u);"),
                  (end + 1, f"{ind}if (eg_wg0 == 0) eg_named_barrier_sync(3u, 256u);")]
    else:
        raise ValueError(variant)
    for idx, text in sorted(edits, key=lambda e: -e[0]):
        _insert_before(lines, idx, text)
    out = "\n".join(lines)
    k = out.index('extern "C"')
    return out[:k] + HELPERS + "\n" + out[k:]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="4,32,4096,128")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--dump", default="")
    args = ap.parse_args()
    sys.argv = [sys.argv[0], "--target", "cuda"]
    import flash_attention as FA
    from _devcheck import device_check
    from _timing import event_median
    from attention import reference_f32

    from _variants import check_then_time
    from _variants import variant as build_variant

    import egtile

    B, H, S, D = (int(x) for x in args.shape.split(","))
    torch.manual_seed(0)
    for causal in (False, True):
        prim = FA.flashattn.__wrapped__(B, H, S, D, causal, block_M=128, block_N=128, threads=256, num_stages=2)
        k0 = egtile.compile(prim, target="cuda")
        built = k0._built
        Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
        ref, scale = reference_f32(Q, K, V, causal)
        tol = FA.tolerance(scale, ref, "float16")
        flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
        kernels = {"egtile (unpatched)": k0}
        for variant in ("fa3", "g0"):
            src = patch(built.source, variant)
            if args.dump:
                Path(args.dump).mkdir(parents=True, exist_ok=True)
                Path(args.dump, f"{variant}_{'causal' if causal else 'full'}.cu").write_text(src)
            kernels[f"ping-pong {variant}"] = build_variant(k0, src, variant)
        label = "causal" if causal else "full"
        times = check_then_time(kernels, (Q, K, V), Q, lambda n, got: device_check(f"{n} {label}", got, ref, **tol),
                                lambda fn: event_median(fn, args.iters, 1.0), 3)
        for name, t in times.items():
            what = "WRONG" if t is None else f"{flops / (min(t) * 1e-3) / 1e12:7.1f} TFLOP/s ({min(t):.3f} ms)"
            print(f"B={B} H={H} S={S} D={D} {'causal' if causal else 'full':6} {name:22} {what}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
