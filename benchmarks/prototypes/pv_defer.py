"""The wait for ``P V`` moved across the loop's back edge, measured by text before it is a decision (issue 13).

In egtile's attention loop each consumer warpgroup's turn of the ping-pong is ``P V`` of key block j, then
``Q K^T`` of block j + 1; between them the warpgroup waits for ``P V`` to complete (``wgmma.wait_group 0``) and
releases the K/V stage, so the tensor core drains while the other warpgroup runs its softmax. This variant issues
both gemms of a turn back to back: ``P V``'s wait is the next iteration's wait for ``Q K^T`` (wgmma groups
complete in order, PTX ISA 9.7.15.7.3), the stage of block j is released after it, and the loop's exit waits for
the last ``P V``. ``P``'s registers are declared outside the loop so that they stay allocated while that ``P V``
reads them. Every variant is checked against a float32 reference, then timed in turns with cuDNN.

ptxas moves the turn's ``bar.sync`` above the softmax in this form (SASS, docs/perf.md 2026-12-07 20:00), so the
variants pin it (:func:`pin_sync`); egtile's own form of the move (``rules/pingpong_carry.py``) is pinned by its
codegen now (``codegen/ops/pin.py``) and measured by ``benchmarks/attention.py --variants default,carry``. What this
script adds is K and V on mbarriers of their own (:func:`split_kv`), which egtile's stages do not have.

    python benchmarks/prototypes/pv_defer.py [--shape 4,32,4096,128] [--causal both|yes|no] [--rounds 6]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks"), str(ROOT / "benchmarks" / "prototypes")]


def _find(lines: list[str], pred, start: int = 0) -> int:
    return next(i for i in range(start, len(lines)) if pred(lines[i]))


def defer_pv_wait(src: str) -> str:
    lines = src.split("\n")
    c0 = _find(lines, lambda ln: "eg_setmaxnreg_inc<" in ln)
    loop = _find(lines, lambda ln: ln.lstrip().startswith("for (int k = 0;"), c0)
    ind = lines[loop][: len(lines[loop]) - len(lines[loop].lstrip())]
    ra = _find(lines, lambda ln: ln.strip() == "eg_u32 eg_ra2[32];", loop)
    del lines[ra]
    lines.insert(loop, ind + "eg_u32 eg_ra2[32];")
    loop += 1
    qk_wait = _find(lines, lambda ln: ln.strip() == "eg_wgmma_wait_group<0>();", loop)
    assert lines[qk_wait + 1].strip() == "eg_wgmma_fence_operand(acc_s);", lines[qk_wait + 1]
    body = ind + "  "
    release = _find(lines, lambda ln: ln.strip() == "eg_mbarrier_arrive(&eg_bar_empty_0[((k - 0) % 2)]);", qk_wait)
    assert [ln.strip() for ln in lines[release - 2: release]] == ["eg_wgmma_wait_group<0>();",
                                                                 "eg_wgmma_fence_operand(acc_o);"]
    assert lines[release + 1] == ind + "}", lines[release + 1]
    del lines[release - 2: release + 1]
    # after the loop: the last P V
    end = release - 2
    lines[end + 1: end + 1] = [ind + "eg_wgmma_wait_group<0>();", ind + "eg_wgmma_fence_operand(acc_o);",
                               ind + "eg_wgmma_fence_operand(eg_ra2);"]
    lines[qk_wait + 2: qk_wait + 2] = [body + "eg_wgmma_fence_operand(acc_o);", body + "eg_wgmma_fence_operand(eg_ra2);",
                                       body + "if (k > 0) eg_mbarrier_arrive(&eg_bar_empty_0[((k - 1) % 2)]);"]
    return "\n".join(lines)


def pin_pack(src: str) -> str:
    """``P``'s registers packed before the warpgroup's turn (the named-barrier sync before ``P V``), and fenced
    there: with ``P V``'s wait deferred, ptxas otherwise sinks the whole softmax below that sync (SASS), so the
    softmax waits for the other warpgroup's turn instead of overlapping it."""
    lines = src.split("\n")
    c0 = _find(lines, lambda ln: "eg_setmaxnreg_inc<" in ln)
    pv = _find(lines, lambda ln: "// register-A wgmma T.gemm" in ln, c0)
    sync = max(i for i in range(c0, pv) if "eg_named_barrier_sync" in lines[i]) - 1
    assert "eg_named_barrier_sync" in lines[sync], lines[sync]
    packs = [i for i in range(pv, pv + 50) if lines[i].strip().startswith("eg_ra2[")]
    ind = lines[sync][: len(lines[sync]) - len(lines[sync].lstrip())]
    moved = [ind + lines[i].strip() for i in packs] + [ind + "eg_wgmma_fence_operand(eg_ra2);"]
    for i in reversed(packs):
        del lines[i]
    lines[sync:sync] = moved
    return "\n".join(lines)


PINNED_SYNC = """
// bar.sync that ptxas cannot hoist above the softmax: two complementary predicated forms (exactly one runs), whose
// predicate reads `dep`, a value computed from every exponential of the thread's rows (its row sums).
__device__ __forceinline__ void eg_named_barrier_sync_after(eg_u32 id, eg_u32 count, eg_u32 dep) {
  asm volatile("{\\n .reg .pred p;\\n setp.ne.u32 p, %2, 0x7fc00001;\\n @p bar.sync %0, %1;\\n @!p bar.sync %0, %1;\\n}"
               ::"r"(id), "r"(count), "r"(dep) : "memory");
}
"""


def pin_sync(src: str) -> str:
    """The ping-pong's sync before ``P V`` made to depend on the row sums (:data:`PINNED_SYNC`): with ``P V``'s wait
    deferred, ptxas hoists the plain ``bar.sync`` above the whole softmax (SASS), which then runs inside the
    warpgroup's turn instead of overlapping the other warpgroup's gemms."""
    lines = src.split("\n")
    inc = max(i for i, ln in enumerate(lines) if ln.startswith("#include"))
    lines[inc + 1: inc + 1] = PINNED_SYNC.split("\n")
    c0 = _find(lines, lambda ln: "eg_setmaxnreg_inc<" in ln)
    pv = _find(lines, lambda ln: "// register-A wgmma T.gemm" in ln, c0)
    syncs = [i for i in range(pv - 3, pv) if "eg_named_barrier_sync(" in lines[i]]
    assert len(syncs) == 2, lines[pv - 3: pv]
    dep = "__float_as_uint(logsum[0]) ^ __float_as_uint(logsum[1])"
    for i in syncs:
        lines[i] = re.sub(r"eg_named_barrier_sync\((\w+), (\w+)\);",
                          rf"eg_named_barrier_sync_after(\1, \2, {dep});", lines[i])
        assert "_after(" in lines[i], lines[i]
    return "\n".join(lines)


def split_kv(src: str, defer: bool) -> str:
    """K and V on mbarriers of their own (FA3's two pipelines): ``Q K^T`` waits for K only and releases it as soon
    as it completed; ``P V`` waits for V and releases it after it completed (with ``defer``: after the next
    iteration's ``Q K^T`` wait, as :func:`defer_pv_wait`)."""
    if defer:
        src = defer_pv_wait(src)
    lines = src.split("\n")
    bar = _find(lines, lambda ln: "eg_u64* eg_bar_bar_2 = reinterpret_cast<eg_u64*>(smem + " in ln)
    at = int(lines[bar].split("smem + ")[1].split(")")[0]) + 8
    lines[bar + 1: bar + 1] = [f"  eg_u64* eg_bar_fullv = reinterpret_cast<eg_u64*>(smem + {at});",
                               f"  eg_u64* eg_bar_emptyv = reinterpret_cast<eg_u64*>(smem + {at + 16});"]
    for s in (0, 1):
        i = _find(lines, lambda ln, s=s: ln.strip() == f"eg_mbarrier_init(&eg_bar_full_0[{s}], 2);")
        lines[i] = lines[i].replace(", 2);", ", 1);")
        lines[i + 1: i + 1] = [f"    eg_mbarrier_init(&eg_bar_fullv[{s}], 1);", f"    eg_mbarrier_init(&eg_bar_emptyv[{s}], 256);"]
    # producer: V's own empty wait and full barrier
    p0 = _find(lines, lambda ln: "eg_setmaxnreg_dec<" in ln)
    ve = [i for i in range(p0, len(lines)) if "eg_mbarrier_arrive_expect_tx(&eg_bar_full_0[" in lines[i]][1]
    ind = lines[ve][: len(lines[ve]) - len(lines[ve].lstrip())]
    lines[ve] = lines[ve].replace("eg_bar_full_0", "eg_bar_fullv")
    for i in range(ve + 1, ve + 3):
        assert "eg_tmap_V_0" in lines[i], lines[i]
        lines[i] = lines[i].replace("eg_bar_full_0", "eg_bar_fullv")
    lines.insert(ve, ind + "eg_mbarrier_wait_parity(&eg_bar_emptyv[((k - 0) % 2)], ((((k - 0) / 2) & 1) ^ 1));")
    # consumer: K released after Q K^T, V waited before P V and released after it
    c0 = _find(lines, lambda ln: "eg_setmaxnreg_inc<" in ln)
    loop = _find(lines, lambda ln: ln.lstrip().startswith("for (int k = 0;"), c0)
    qk = _find(lines, lambda ln: ln.strip() == "eg_wgmma_fence_operand(acc_s);", _find(
        lines, lambda ln: ln.strip() == "eg_wgmma_wait_group<0>();", loop))
    body = lines[qk][: len(lines[qk]) - len(lines[qk].lstrip())]
    lines.insert(qk + 1, body + "eg_mbarrier_arrive(&eg_bar_empty_0[((k - 0) % 2)]);")
    if defer:
        r = _find(lines, lambda ln: "if (k > 0) eg_mbarrier_arrive(&eg_bar_empty_0[((k - 1) % 2)]);" in ln, loop)
        lines[r] = lines[r].replace("eg_bar_empty_0", "eg_bar_emptyv")
    else:
        r = _find(lines, lambda ln: ln.strip() == "eg_mbarrier_arrive(&eg_bar_empty_0[((k - 0) % 2)]);", qk + 2)
        lines[r] = lines[r].replace("eg_bar_empty_0", "eg_bar_emptyv")
    pv = _find(lines, lambda ln: "// register-A wgmma T.gemm" in ln, qk)
    lines.insert(pv, body + "eg_mbarrier_wait_parity(&eg_bar_fullv[((k - 0) % 2)], (((k - 0) / 2) & 1));")
    return "\n".join(lines)


def main() -> int:
    from _variants import add_ab_arguments

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_ab_arguments(ap)
    ap.add_argument("--dump", default="", help="write the patched sources here")
    ap.add_argument("--only-text-carry", action="store_true",
                    help="only the deferred wait with the pinned sync (what rules/pingpong_carry.py now builds)")
    ap.add_argument("--all", action="store_true",
                    help="also the variants measured before: K and V on their own barriers, and the deferred wait "
                         "with P packed before the sync (pin_pack) instead of the pinned sync")
    args = ap.parse_args()
    sys.argv = [sys.argv[0], "--target", "cuda"]
    from _variants import patched_against_cudnn

    def make(kernel, causal):
        base, smem = kernel._built.source, kernel._built.smem_bytes + 32  # split_kv's two more barrier pairs
        out = {} if args.only_text_carry else {
            "K, V own barriers, P V deferred, sync pinned": pin_sync(split_kv(base, True))}
        out["P V waited after next Q K^T, sync pinned"] = pin_sync(defer_pv_wait(base))
        if args.all:  # measured 2026-12-07 17:12 and 19:37 (docs/perf.md)
            out["K, V on own barriers"] = split_kv(base, False)
            out["K, V own barriers, P V waited after next Q K^T"] = pin_pack(split_kv(base, True))
            out["P V waited after next Q K^T"] = pin_pack(defer_pv_wait(base))
        return {name: (kernel, src, smem) for name, src in out.items()}

    patched_against_cudnn(args, "v", make)
    return 0


if __name__ == "__main__":
    sys.exit(main())
