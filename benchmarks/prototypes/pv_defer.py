"""The wait for ``P V`` moved across the loop's back edge, measured by text before it is a decision (issue 13).

In egtile's attention loop each consumer warpgroup's turn of the ping-pong is ``P V`` of key block j, then
``Q K^T`` of block j + 1; between them the warpgroup waits for ``P V`` to complete (``wgmma.wait_group 0``) and
releases the K/V stage, so the tensor core drains while the other warpgroup runs its softmax. This variant issues
both gemms of a turn back to back: ``P V``'s wait is the next iteration's wait for ``Q K^T`` (wgmma groups
complete in order, PTX ISA 9.7.15.7.3), the stage of block j is released after it, and the loop's exit waits for
the last ``P V``. ``P``'s registers are declared outside the loop so that they stay allocated while that ``P V``
reads them. Every variant is checked against a float32 reference, then timed in turns with cuDNN.

    python benchmarks/prototypes/pv_defer.py [--shape 4,32,4096,128] [--causal both|yes|no] [--rounds 6]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

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


def pin_fa3(src: str, dummy_at: int) -> str:
    """The e-graph's FA3 schedule (``rules/overlap_pingpong.py``: the rotated loop issues ``Q K^T`` of block j + 1
    and ``P V`` of block j in one turn, waits for the first with ``wait_group 1``, runs block j + 1's softmax while
    ``P V`` runs, then ``wait_group 0``) with that last wait pinned after the softmax. As built, ptxas hoists the
    ``WARPGROUP.DEPBAR`` of ``wait_group 0`` above the softmax's exponentials (SASS), so the softmax no longer runs
    under ``P V``. A shared store of the row sums (every exponential feeds them) right before the wait keeps it
    there: ptxas does not move the wait above a shared-memory store. Each consumer thread stores to its own word at
    ``dummy_at`` (256 x 4 bytes past the kernel's shared memory), so nothing races. ``P V``'s A registers are also
    declared outside the loop and fenced after the wait, so they stay allocated while ``P V`` reads them."""
    lines = src.split("\n")
    ksw = _find(lines, lambda ln: ln.lstrip().startswith("for (int k_sw ="))
    decl = _find(lines, lambda ln: ln.strip() == "eg_u32 eg_ra3[32];", ksw)
    del lines[decl]
    lines.insert(ksw, lines[ksw][: len(lines[ksw]) - len(lines[ksw].lstrip())] + "eg_u32 eg_ra3[32];")
    ksw += 1
    w1 = _find(lines, lambda ln: ln.strip() == "eg_wgmma_wait_group<1>();", ksw)
    w0 = _find(lines, lambda ln: ln.strip() == "eg_wgmma_wait_group<0>();", w1)
    ind = lines[w0][: len(lines[w0]) - len(lines[w0].lstrip())]
    lines[w0 + 1: w0 + 1] = [ind + "eg_wgmma_fence_operand(eg_ra3);"]
    lines.insert(w0, ind + 'asm volatile("st.shared.b32 [%0], %1;" :: "r"(eg_smem_addr(smem + '
                 f'{dummy_at} + eg_tid * 4)), "r"(__float_as_uint(logsum[0]) ^ __float_as_uint(logsum[1])) '
                 ': "memory");')
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
    ap.add_argument("--fa3", action="store_true",
                    help="also the e-graph's FA3 schedule (rotation + ping-pong), as built and with its last wait pinned")
    ap.add_argument("--only-egraph", action="store_true", help="skip the text-patched deferred-wait variants")
    ap.add_argument("--carry", action="store_true",
                    help="also the e-graph's pingpong_carry schedule (the same deferred wait), as built and pinned")
    ap.add_argument("--all", action="store_true",
                    help="also the variants measured before: K and V on their own barriers, and the deferred wait "
                         "with P packed before the sync (pin_pack) instead of the pinned sync")
    args = ap.parse_args()
    sys.argv = [sys.argv[0], "--target", "cuda"]
    import flash_attention as FA
    from _variants import against_cudnn, example_kernel, variant
    from attention import CAUSALITIES, reference_f32

    B, H, S, D = (int(x) for x in args.shape.split(","))
    torch.manual_seed(0)
    for causal in CAUSALITIES[args.causal]:
        kernel = example_kernel(B, H, S, D, causal)
        base = kernel._built.source
        variants = {} if args.only_egraph else {
            "P V waited after next Q K^T, sync pinned": pin_sync(defer_pv_wait(base)),
            "K, V own barriers, P V deferred, sync pinned": pin_sync(split_kv(base, True))}
        if args.all:  # measured 2026-12-07 17:12 and 19:37 (docs/perf.md)
            variants["K, V on own barriers"] = split_kv(base, False)
            variants["K, V own barriers, P V waited after next Q K^T"] = pin_pack(split_kv(base, True))
            variants["P V waited after next Q K^T"] = pin_pack(defer_pv_wait(base))
        kernels = {name: kernel for name in variants}
        ck = None
        if args.carry:  # the e-graph's own form of the deferred wait (rules/pingpong_carry.py), as is and pinned
            from egtile.rules import pingpong_carry

            try:
                ck = example_kernel(B, H, S, D, causal, rules=pingpong_carry.preferred())
            except Exception as e:  # noqa: BLE001 (a refusal is a result here)
                print(f"pingpong_carry {'causal' if causal else 'full'}: not built: {str(e)[:200]}", flush=True)
            else:
                if "eg_named_barrier_sync(3u" not in ck._built.source:  # causal: the e-graph refuses the carry
                    print(f"pingpong_carry {'causal' if causal else 'full'}: no ping-pong in the schedule built; "
                          "skipped", flush=True)
                    ck = None
            if ck is not None:
                variants["pingpong_carry (e-graph)"] = ck._built.source
                variants["pingpong_carry (e-graph), sync pinned"] = pin_sync(ck._built.source)
                kernels.update({name: ck for name in list(variants)[-2:]})
        if args.fa3:  # the e-graph's FA3 schedule (rotation + ping-pong), as built and with its wait pinned
            from attention import Variant

            fk = example_kernel(B, H, S, D, causal, rules=Variant.parse("fa3").rules())
            variants["FA3 rotation (e-graph)"] = fk._built.source
            variants["FA3 rotation (e-graph), wait pinned"] = pin_fa3(fk._built.source, fk._built.smem_bytes - 1024)
            kernels.update({name: fk for name in list(variants)[-2:]})
        built = {}
        for i, (name, src) in enumerate(variants.items()):
            if args.dump:
                Path(args.dump).mkdir(parents=True, exist_ok=True)
                Path(args.dump, f"v{i}_{'causal' if causal else 'full'}.cu").write_text(src)
            k = kernels[name]
            built[name] = variant(k, src, f"v{i}", fast_math=k.fast_math, smem_bytes=k._built.smem_bytes + 1024)
            print(name, built[name].built.log or "", flush=True)
        if not torch.cuda.is_available():
            continue
        Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
        ref, scale = reference_f32(Q, K, V, causal)
        against_cudnn({"egtile": kernel, **built}, Q, K, V, causal, ref,
                      FA.tolerance(scale, ref, "float16"), args.rounds, args.iters, args.warm_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
