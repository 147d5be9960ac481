"""Speed potential of carrying the wait of ``P V`` across the loop's back edge, measured before building it as a
decision (issue 13, docs/perf.md 2026-12-05).

In egtile's ping-pong (rules/pingpong.py) a warpgroup's turn is ``P V`` of block j, its ``wgmma.wait_group 0``, the
release of stage j, the loop's back edge, the mask fill, the wait for stage j+1 and ``Q K^T`` of block j+1: the tensor
core idles between the end of ``P V`` and the start of ``Q K^T`` (the DEPBAR wake-up and ~50 SASS instructions of one
warp). The patch (text, on the generated CUDA, through egtile's CUDA post-processing hook, egtile.engine.callback)
drops that wait and release from the end of the body; the ``wait_group 0`` after ``Q K^T`` of block j+1 completes
both groups, and stage j is released right after it (block j > 0); after the loop, one ``wait_group 0`` and the
release of the last stage. Legal with 2 stages (the producer refills stage j only after that release; with 1 stage it
would wait for a release that waits for its own load). Not applied where a branch writes the scores before ``Q K^T``
(the versioned causal mask): ptxas then serializes every wgmma (C7518). NVRTC keeps ``P``'s registers apart from the scores' (SASS:
the ``P V`` HGMMAs read R152.., ``Q K^T`` writes R24..; no DEPBAR before the next ``Q K^T``).

    benchmarks/attention.py ... --prototype carry_wait
"""

from __future__ import annotations

import re

TAIL = ("eg_wgmma_wait_group<0>();\n{i}  eg_wgmma_fence_operand(acc_o);\n{i}  eg_mbarrier_arrive(&eg_bar_empty_0[((k - 0) % 2)]);\n"
        "{i}}}\n")


def patch(src: str) -> str:
    m = re.search(r"\n( *)for \(int k = 0; k < (.+); \+\+k\) \{  // sid \d+\n", src[src.index("// role consumer"):])
    if m is None:
        raise ValueError("carry_wait: no consumer loop")
    ind, stop = m.group(1), m.group(2)
    top = src.index("// role consumer") + m.end()
    if "if (" in src[top:src.index("// wgmma T.gemm", top)]:
        # a branch writes the scores before Q K^T (the versioned causal mask) while P V is in flight: ptxas then
        # serializes every wgmma (C7518, a wait in a divergent path); left as generated
        return src
    tail = TAIL.format(i=ind)
    if src.count("        " + tail.split("\n")[0]) < 1 or src.count(tail) != 1:
        raise ValueError("carry_wait: the loop does not end with P V's wait and the stage release")
    src = src.replace(ind + "  " + tail, ind + "}\n" + f"{ind}if (({stop}) > 0) {{\n{ind}  eg_wgmma_wait_group<0>();\n"
                      f"{ind}  eg_wgmma_fence_operand(acc_o);\n"
                      f"{ind}  eg_mbarrier_arrive(&eg_bar_empty_0[((({stop}) - 1) % 2)]);\n{ind}}}\n")
    first = f"{ind}  eg_wgmma_wait_group<0>();\n{ind}  eg_wgmma_fence_operand(acc_s);\n"
    if src.count(first) != 1:
        raise ValueError("carry_wait: no single wait of Q K^T")
    return src.replace(first, first + f"{ind}  eg_wgmma_fence_operand(acc_o);\n"
                       f"{ind}  if (k > 0) eg_mbarrier_arrive(&eg_bar_empty_0[((k - 1) % 2)]);\n")


def install() -> None:
    from egtile.engine.callback import register_cuda_postproc_callback

    register_cuda_postproc_callback(lambda code, target: patch(code) if "eg_bar_empty_0" in code else code)
