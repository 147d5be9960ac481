"""Speed potential of a persistent attention kernel, measured before building it as a decision (issue 13).

At B=4 H=32 S=4096 D=128 egtile's attention is about 5% short of cuDNN, and about 1% ahead at S=16384 where each
block runs four times as many key blocks: the suspect is the per-block cost nothing overlaps (block launch,
mbarrier init, the Q and first K/V loads' latency before the first gemm). FA3's answer is a persistent kernel:
one block per SM loops over the tiles, and its producer loads the next tile's Q and K/V while the consumers still
finish the current one. egtile's e-graph cannot express that yet (``ws-runs-once``), so this script measures it
first: it takes egtile's generated CUDA for the benchmark's kernel (examples/flash_attention.py at 128x128 blocks,
two consumer warpgroups in ping-pong + the TMA producer, 2 stages, fast math), rewrites it by text into the
persistent form, compiles it through egtile's NVRTC path, checks it against a float32 reference and times it
against the unpatched kernel and cuDNN on the same inputs, in interleaved rounds.

The rewrite (what a ``kernel-persistent`` decision would lower to):

* grid ``(P, 1, 1)`` with ``P`` = the SM count; each role runs ``for (t = blockIdx.x; t < tiles; t += gridDim.x)``
  and decodes ``(bx, by, bz)`` from ``t`` (``bx`` fastest, as the hardware's order; causal kernels are also timed
  with ``bx`` reversed, so that a head's longest rows come first).
* the full/empty stage and parity use a counter carried across tiles (``k + it``, ``it += trip count`` after each
  tile) in both roles, so the ring of stages never restarts (unsigned: ``% S`` and ``/ S`` a mask and a shift);
* the Q tile's barrier is waited with parity ``n & 1`` (``n``: the role's tile count), and a new Q-empty mbarrier
  (256 arrivals: every consumer thread after its last ``Q K^T`` completed) is waited by the producer, parity
  ``(n & 1) ^ 1``, before it loads the next Q;
* the consumers' fills of ``acc_o``, ``logsum`` and ``scores_max`` move into their tile loop.

Every variant starts from egtile's code with the warpgroup index as ``rank / 128`` (:func:`plain`, the code before
``eg_warpgroup_of``), which is also timed; ``--uniform`` adds the persistent kernel with the warpgroup index and the
carried counter read through ``__shfl_sync`` (:func:`uniform`, :func:`uniform_counter`), ``--loop-once`` the
unpatched consumer inside a loop that runs once (what an enclosing loop alone costs), ``--double-q`` two Q tiles
(:func:`double_q`), ``--wg-epilogue`` a store per consumer warpgroup with the ping-pong carried across tiles
(:func:`wg_epilogue`).

    python benchmarks/prototypes/persistent_patch.py [--shape 4,32,4096,128] [--causal both] [--dump DIR]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks")]


def _find(lines: list[str], pred, start: int = 0) -> int:
    return next(i for i in range(start, len(lines)) if pred(lines[i]))


def _close(lines: list[str], opener: int) -> int:
    """Index of the line closing the brace block opened on line ``opener`` (same indentation, ``}``)."""
    ind = lines[opener][: len(lines[opener]) - len(lines[opener].lstrip())]
    return _find(lines, lambda ln: ln == ind + "}" or ln.startswith(ind + "} else"), opener + 1)


def patch(src: str, grid: tuple[int, int, int], heavy_first: bool, smem_at: int, mirror: bool = False) -> str:
    gx, gy, gz = grid
    lines = src.split("\n")
    # block indices: decoded per tile inside each role's tile loop
    for name in ("bx", "by", "bz"):
        i = _find(lines, lambda ln, n=name: ln.strip().startswith((f"const int {n} = (int)blockIdx.",
                                                                    f"const int {n} = (int)(blockIdx.")))
        del lines[i: i + 2]  # the declaration and its "(void)" line
    bar = _find(lines, lambda ln: "eg_u64* eg_bar_bar_2" in ln)
    lines.insert(bar + 1, f"  eg_u64* eg_bar_qempty = reinterpret_cast<eg_u64*>(smem + {smem_at});")
    init = _find(lines, lambda ln: "eg_mbarrier_init(&eg_bar_bar_2[0], 1);" in ln)
    lines.insert(init + 1, "    eg_mbarrier_init(&eg_bar_qempty[0], 256);")
    sync = _find(lines, lambda ln: ln.strip() == "__syncthreads();")
    ws = _find(lines, lambda ln: "// warp specialization" in ln, sync)
    fills = lines[sync + 1: ws]
    del lines[sync + 1: ws]
    bx = f"({gx} - 1 - eg_t % {gx})" if heavy_first else f"(eg_t % {gx})"
    if mirror:  # a block's second tile is the mirror row of its first: every block runs the same causal work
        bx = f"((eg_n & 1) ? ({gx} - 1 - eg_t % {gx}) : (eg_t % {gx}))"
    head = [f"for (int eg_t = (int)blockIdx.x, eg_n = 0; eg_t < {gx * gy * gz}; eg_t += (int)gridDim.x, ++eg_n) {{",
            f"  const int bx = {bx}; const int by = (eg_t / {gx}) % {gy}; const int bz = eg_t / {gx * gy};",
            "  (void)bx; (void)by; (void)bz;"]

    def wrap(first: int, last: int, ind: str, extra: list[str]) -> None:
        """Put lines[first:last] (a role's body after its setmaxnreg) in the tile loop."""
        body = ["  " + ln if ln else ln for ln in lines[first:last]]
        lines[first:last] = [ind + "unsigned eg_it = 0;"] + [ind + h for h in head] + extra + body + [ind + "}"]

    # consumer
    c0 = _find(lines, lambda ln: "eg_setmaxnreg_inc<" in ln)
    cind = lines[c0][: len(lines[c0]) - len(lines[c0].lstrip())]
    c_end = _find(lines, lambda ln: ln.startswith("    } else {"), c0)
    cl = _find(lines, lambda ln: ln.lstrip().startswith("for (int k = 0;"), c0)
    trip = re.match(r"\s*for \(int k = 0; k < (.*); \+\+k\) \{", lines[cl]).group(1)
    ce = _close(lines, cl)
    lines[ce + 1: ce + 1] = [cind + "eg_mbarrier_arrive(&eg_bar_qempty[0]);", cind + f"eg_it += (unsigned)({trip});"]
    c_end += 2
    w = _find(lines, lambda ln: "eg_mbarrier_wait_parity(&eg_bar_bar_2[0], 0);" in ln, c0)
    lines[w] = lines[w].replace("&eg_bar_bar_2[0], 0)", "&eg_bar_bar_2[0], eg_n & 1)")
    for i in range(cl, ce + 1):
        lines[i] = lines[i].replace("(k - 0)", "((unsigned)k + eg_it)")
    wrap(c0 + 1, c_end, cind, ["  " + ln for ln in fills])
    # producer
    p0 = _find(lines, lambda ln: "eg_setmaxnreg_dec<" in ln)
    pind = lines[p0][: len(lines[p0]) - len(lines[p0].lstrip())]
    pq = _find(lines, lambda ln: "eg_mbarrier_arrive_expect_tx(&eg_bar_bar_2[0]" in ln, p0)
    lines.insert(pq, lines[pq][: len(lines[pq]) - len(lines[pq].lstrip())]
                 + "eg_mbarrier_wait_parity(&eg_bar_qempty[0], (eg_n & 1) ^ 1);")
    pl = _find(lines, lambda ln: ln.lstrip().startswith("for (int k = 0;"), p0)
    pe = _close(lines, pl)
    for i in range(pl, pe + 1):
        lines[i] = lines[i].replace("(k - 0)", "((unsigned)k + eg_it)")
    lines.insert(pe + 1, pind + f"eg_it += (unsigned)({trip});")
    p_end = _close(lines, _find(lines, lambda ln: ln.startswith("    } else {"), 0))
    wrap(p0 + 1, p_end, pind, [])
    return "\n".join(lines)


def double_q(src: str, smem_at: int) -> tuple[str, int]:
    """The persistent kernel with two Q tiles: tile n reads Q buffer ``n & 1``, each with its own full and empty
    mbarriers (parity ``(n >> 1) & 1``), so the producer loads the next tile's Q while the consumers still run the
    current tile's key loop (it is at most two stages ahead), instead of after their last ``Q K^T``. Returns the
    source and the dynamic shared memory it needs (the second tile after the barriers, 1024-byte aligned)."""
    qb = (smem_at + 48 + 1023) // 1024 * 1024
    old = "  half* Q_shared = reinterpret_cast<half*>(smem + 0);"
    assert old in src
    src = src.replace(old, "  half* const eg_Q_a = reinterpret_cast<half*>(smem + 0);\n"
                           f"  half* const eg_Q_b = reinterpret_cast<half*>(smem + {qb});")
    decl = f"  eg_u64* eg_bar_qempty = reinterpret_cast<eg_u64*>(smem + {smem_at});"
    src = src.replace(decl, decl + f"\n  eg_u64* eg_bar_q2 = reinterpret_cast<eg_u64*>(smem + {smem_at + 8});"
                                   f"\n  eg_u64* eg_bar_qe2 = reinterpret_cast<eg_u64*>(smem + {smem_at + 24});")
    init = "    eg_mbarrier_init(&eg_bar_qempty[0], 256);"
    src = src.replace(init, init + "".join(f"\n    eg_mbarrier_init(&eg_bar_q2[{i}], 1);"
                                           f"\n    eg_mbarrier_init(&eg_bar_qe2[{i}], 256);" for i in (0, 1)))
    for a, b in (("eg_mbarrier_wait_parity(&eg_bar_bar_2[0], eg_n & 1)",
                  "eg_mbarrier_wait_parity(&eg_bar_q2[eg_n & 1], (eg_n >> 1) & 1)"),
                 ("eg_mbarrier_arrive(&eg_bar_qempty[0]);", "eg_mbarrier_arrive(&eg_bar_qe2[eg_n & 1]);"),
                 ("eg_mbarrier_wait_parity(&eg_bar_qempty[0], (eg_n & 1) ^ 1);",
                  "eg_mbarrier_wait_parity(&eg_bar_qe2[eg_n & 1], ((eg_n >> 1) & 1) ^ 1);"),
                 ("&eg_bar_bar_2[0]", "&eg_bar_q2[eg_n & 1]"),
                 ("(void)bx; (void)by; (void)bz;",
                  "(void)bx; (void)by; (void)bz; half* const Q_shared = (eg_n & 1) ? eg_Q_b : eg_Q_a;")):
        assert a in src, a
        src = src.replace(a, b)
    # the old Q barrier keeps its init (its one use left: harmless)
    src = src.replace("eg_mbarrier_init(&eg_bar_q2[eg_n & 1], 1);", "eg_mbarrier_init(&eg_bar_bar_2[0], 1);")
    return src, qb + 32768 + 1024


def wg_epilogue(src: str, persistent: bool) -> str:
    """Each consumer warpgroup stores its own 64 rows of O (a named barrier of its 128 threads, then its first
    thread's two TMA stores of a 64 x 64 box, ``wg_output_maps``) instead of both warpgroups meeting at one
    256-thread barrier before thread 0 stores all 128 rows: warpgroup 0's store then overlaps warpgroup 1's last
    ``P V``. In the persistent kernel (``persistent``) the ping-pong's tokens also run on across tiles, as FA3's
    scheduler barriers do: warpgroup 1 hands warpgroup 0 the next tile's first turn right after its last ``P V``
    (the arrive that opened every tile), so warpgroup 0 starts the next tile's ``Q K^T`` while warpgroup 1 still
    normalizes and stores, and warpgroup 1's store overlaps warpgroup 0's next ``Q K^T`` and softmax."""
    lines = src.split("\n")
    fence = _find(lines, lambda ln: ln.strip() == "eg_fence_proxy_async_shared();")
    assert lines[fence + 1].strip() == "eg_named_barrier_sync(1, 256);", lines[fence + 1]
    assert lines[fence + 2].strip() == "if (eg_tid == 0) {", lines[fence + 2]
    ind = lines[fence][: len(lines[fence]) - len(lines[fence].lstrip())]
    end = _find(lines, lambda ln: ln.strip() == "eg_tma_store_wait();", fence) + 1
    assert lines[end].strip() == "}", lines[end]
    stores = [ln for ln in lines[fence + 3: end - 1] if "eg_tma_store_4d(" in ln]
    assert len(stores) == 2, stores
    body = []
    for ln in stores:  # the warpgroup's rows: stage row 64 w (a whole number of 1024-byte swizzle atoms), O row + 64 w
        ln = ln.replace("&acc_o_stage[((0) / 64) * 8192 + (0) * 64 + (((((0) % 64) / 8) ^ ((0) & 7)) * 8 + ((0) % 8))]",
                        "&acc_o_stage[eg_ow * 4096]", 1)
        assert "&acc_o_stage[eg_ow * 4096]" in ln and "(bx * 128)" in ln, ln
        body.append(ln.replace("(bx * 128)", "(bx * 128 + eg_ow * 64)"))
    lines[fence + 1: end + 1] = [
        ind + "eg_named_barrier_sync(5u + (eg_u32)(eg_tid / 128), 128u);",
        ind + "if ((eg_tid & 127) == 0) {",
        ind + "  const int eg_ow = eg_tid / 128;",
        *body,
        ind + "  eg_tma_store_wait();",
        ind + "}"]
    if persistent:
        opening = "if (eg_tid >= 128 && eg_tid < 256) eg_named_barrier_arrive(3u, 256u);  // sid 5"
        o = _find(lines, lambda ln: ln.strip() == opening)
        assert lines[o + 1].strip().startswith("if (eg_tid >= 0 && eg_tid < 128) eg_named_barrier_sync(3u"), lines[o + 1]
        lines[o] = lines[o].replace("if (eg_tid >= 128", "if (eg_n == 0 && eg_tid >= 128")
        close = _find(lines, lambda ln: ln.strip() == "if (eg_tid >= 0 && eg_tid < 128) eg_named_barrier_arrive(4u, 256u);"
                      "  // sid 5", _find(lines, lambda ln: ln.strip().startswith("eg_it += (unsigned)"), o))
        head = _find(lines, lambda ln: ln.lstrip().startswith("for (int eg_t = (int)blockIdx.x"))
        tiles = re.search(r"eg_t < (\d+);", lines[head]).group(1)
        cind = lines[close][: len(lines[close]) - len(lines[close].lstrip())]
        lines.insert(close + 1, cind + f"if (eg_tid >= 128 && eg_tid < 256 && eg_t + (int)gridDim.x < {tiles}) "
                                       "eg_named_barrier_arrive(3u, 256u);")
    return "\n".join(lines)


def wg_output_maps(built):
    """``built``'s tensor maps with O's box cut to the 64 rows one consumer warpgroup stores (``wg_epilogue``)."""
    import dataclasses

    out = []
    for t in built.tma:
        if t.buffer == "Output":
            assert t.box == (1, 128, 1, 64), t.box
            t = dataclasses.replace(t, box=(1, 64, 1, 64))
        out.append(t)
    return tuple(out)


def uniform(src: str) -> str:
    """Warpgroup indices through ``__shfl_sync(..., 0)`` (CUTLASS's ``canonical_warp_group_idx``): ptxas then
    knows them warp-uniform and keeps the wgmma descriptors that depend on them in uniform registers instead
    of computing them per thread and moving them over with ``R2UR``."""
    return re.sub(r"const int (eg_wg\d+) = \(?eg_tid\)? / 128;",
                  r"const int \1 = __shfl_sync(0xffffffffu, eg_tid / 128, 0);", src)


def plain(src: str) -> str:
    """The warpgroup index as ``rank / 128`` (egtile's code before ``eg_warpgroup_of``), for the comparison."""
    return re.sub(r"eg_warpgroup_of\(([^;]*)\);", r"(\1) / 128;", src)


def uniform_counter(src: str) -> str:
    """In the persistent consumer's loop, the carried counter ``k + it`` through ``__shfl_sync(..., 0)``: inside
    the tile loop ptxas no longer keeps ``k`` in a uniform register, and every descriptor of the loop that
    depends on the stage goes through ``R2UR`` (33 of them per iteration)."""
    lines = src.split("\n")
    c0 = _find(lines, lambda ln: "eg_setmaxnreg_inc<" in ln)
    cl = _find(lines, lambda ln: ln.lstrip().startswith("for (int k = 0;"), c0)
    ce = _close(lines, cl)
    ind = lines[cl][: len(lines[cl]) - len(lines[cl].lstrip())]
    for i in range(cl + 1, ce):
        lines[i] = lines[i].replace("((unsigned)k + eg_it)", "eg_kk")
    lines.insert(cl + 1, ind + "  const unsigned eg_kk = __shfl_sync(0xffffffffu, (unsigned)k + eg_it, 0);")
    return "\n".join(lines)


def loop_once(src: str) -> str:
    """The unpatched kernel with the consumer's body inside a loop that runs once (``gridDim.y`` is at most
    65535): isolates what an enclosing loop costs the code ptxas makes of the consumer's own loop."""
    lines = src.split("\n")
    c0 = _find(lines, lambda ln: "eg_setmaxnreg_inc<" in ln)
    c_end = _find(lines, lambda ln: ln.startswith("    } else {"), c0)
    lines[c0 + 1: c_end] = (["      for (int eg_once = 0; eg_once < (int)gridDim.y; eg_once += 65536) {"]
                            + lines[c0 + 1: c_end] + ["      }"])
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dump", default="")
    ap.add_argument("--profile", action="store_true", help="launch each variant once, no check or timing (for ncu)")
    ap.add_argument("--uniform", action="store_true",
                    help="also time the persistent kernel with its warpgroup index and stage counter made warp-uniform")
    ap.add_argument("--loop-once", action="store_true",
                    help="also time the unpatched kernel with its consumer body in a loop that runs once")
    ap.add_argument("--pairs", action="store_true",
                    help="also launch the persistent code with two tiles per block (half the grid); causal: the "
                         "second tile is the mirror query block of the first, so that every block's work is equal")
    ap.add_argument("--double-q", action="store_true",
                    help="also each uniform persistent variant with two Q tiles (the next tile's Q loaded early)")
    ap.add_argument("--wg-epilogue", action="store_true",
                    help="also the unpatched kernel and each two-Q variant with a store per consumer warpgroup, the "
                         "persistent ones with the ping-pong's tokens carried across tiles (wg_epilogue)")
    ap.add_argument("--no-heavy", action="store_true", help="skip the heavy-first tile orders")
    ap.add_argument("--only-uniform", action="store_true",
                    help="skip the persistent variants without --uniform, and the unpatched code with rank / 128")
    ap.add_argument("--warm-s", type=float, default=0.5, help="untimed calls before each turn (settled clock)")
    ap.add_argument("--one-tile-too", action="store_true",
                    help="also launch the persistent code with one block per tile (isolates the code's own cost)")
    args = ap.parse_args()
    sys.argv = [sys.argv[0], "--target", "cuda"]
    import flash_attention as FA
    from _devcheck import device_check
    from _timing import event_median
    from attention import CAUSALITIES, reference_f32
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from _variants import check_then_time, variant

    import egtile

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"# {torch.cuda.get_device_name(0)}, {sms} SMs, torch {torch.__version__}", flush=True)
    torch.manual_seed(0)
    for shape in args.shape or ["4,32,4096,128"]:
        B, H, S, D = (int(x) for x in shape.split(","))
        for causal in CAUSALITIES[args.causal]:
            prim = FA.flashattn.__wrapped__(B, H, S, D, causal, block_M=128, block_N=128, threads=256, num_stages=2)
            k0 = egtile.compile(prim, target="cuda", pass_configs=FA.PASS_CONFIGS)
            built = k0._built
            Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
            flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
            q, k, v = (x.transpose(1, 2) for x in (Q, K, V))
            kernels = {"egtile": k0}
            base = plain(built.source)
            if base != built.source and not args.only_uniform:
                kernels["egtile, warpgroup index rank / 128"] = variant(k0, base, "plain", fast_math=True)
            gx_all = built.grid[0] * built.grid[1] * built.grid[2]
            smem_at = max(int(m) for m in re.findall(r"smem \+ (\d+)\);", built.source)) + 8
            if args.wg_epilogue:
                kernels["egtile, a store per warpgroup"] = variant(k0, wg_epilogue(built.source, False), "wgo", fast_math=True,
                                                                   tma=wg_output_maps(built))
            if args.loop_once:
                kernels["consumer in a one-pass loop"] = variant(k0, loop_once(base), "once", fast_math=True)
            grids = (sms,) + ((gx_all,) if args.one_tile_too else ()) + ((gx_all // 2,) if args.pairs else ())
            for heavy, uni, ctas in [(h, u, c) for h in ((False, True) if causal and not args.no_heavy else (False,))
                                     for u in (((True,) if args.only_uniform else (False, True))
                                               if args.uniform else (False,))
                                     for c in grids]:
                mirror = ctas == gx_all // 2 and causal and args.pairs
                if mirror and heavy:
                    continue
                src = patch(base, tuple(built.grid), heavy, smem_at, mirror=mirror)
                if uni:
                    src = uniform_counter(uniform(src))
                tag = f"persistent {ctas}" + (" heavy-first" if heavy else "") + (" mirror" if mirror else "") + (" uniform" if uni else "")
                if args.dump:
                    Path(args.dump).mkdir(parents=True, exist_ok=True)
                    Path(args.dump, f"{tag.replace(' ', '_')}_{'causal' if causal else 'full'}.cu").write_text(src)
                kernels[tag] = variant(k0, src, "persistent", fast_math=True, grid=(ctas, 1, 1),
                                       smem_bytes=max(built.smem_bytes, smem_at + 8 + 1024))
                if uni and args.double_q:
                    src2, smem2 = double_q(src, smem_at)
                    if args.dump:
                        Path(args.dump, f"{tag.replace(' ', '_')}_2q_{'causal' if causal else 'full'}.cu").write_text(src2)
                    kernels[tag + " 2Q"] = variant(k0, src2, "persistent2q", fast_math=True, grid=(ctas, 1, 1),
                                                   smem_bytes=smem2)
                    if args.wg_epilogue:
                        src3 = wg_epilogue(src2, True)
                        if args.dump:
                            Path(args.dump, f"{tag.replace(' ', '_')}_2q_wgo_{'causal' if causal else 'full'}.cu"
                                 ).write_text(src3)
                        kernels[tag + " 2Q wgO"] = variant(k0, src3, "persistent2qw", fast_math=True,
                                                           grid=(ctas, 1, 1), smem_bytes=smem2,
                                                           tma=wg_output_maps(built))

            if args.profile:  # one launch of each, for ncu
                for kern in kernels.values():
                    kern(Q, K, V, torch.empty_like(Q))
                torch.cuda.synchronize()
                continue
            ref, scale = reference_f32(Q, K, V, causal)
            tol = FA.tolerance(scale, ref, "float16")

            def cudnn(Q, K, V, O):  # noqa: N803
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2)

            kernels["cuDNN"] = cudnn
            label = "causal" if causal else "full"
            # cuDNN is checked and reported, and timed either way (its rounding is not egtile's bound's business)
            times = check_then_time(
                kernels, (Q, K, V), Q, lambda n, got: device_check(f"{n} {label}", got, ref, **tol) or n == "cuDNN",
                lambda fn: event_median(fn, args.iters, args.budget, warm_s=args.warm_s), args.rounds)
            best_ref = min(times["cuDNN"] or [float("nan")])
            for name, t in times.items():
                best = None if t is None else min(t)
                what = ("WRONG" if best is None else
                        f"{flops / (best * 1e-3) / 1e12:7.1f} TFLOP/s ({best:.3f} ms, x cuDNN {best_ref / best:.3f})")
                print(f"B={B} H={H} S={S} D={D} {'causal' if causal else 'full':6} {name:34} {what}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
