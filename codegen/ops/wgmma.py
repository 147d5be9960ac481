"""wgmma (PTX ISA 9.7.15) as CUDA C++ on ``egtile_wgmma.cuh``.

``WgmmaMma``: each warpgroup ``eg_wg`` of the node's threads builds the descriptors of the A and B tiles it
reads (the address of the operand region's first element: the stage's base, or a column slice's first panel;
LBO, SBO and swizzle from :meth:`egtile.layout.WgmmaOperand.descriptor`),
fences its accumulators against the compiler (``eg_wgmma_fence_operand``), issues ``wgmma.fence``, then for
each k16 step and instruction ``(mi, ni)`` of the tiling one ``eg_wgmma_ss<n, T, TA, TB>`` on the
instruction's ``n / 2`` accumulator registers (a contiguous slice of the fragment's per-thread array, slot
:meth:`egtile.layout.AccumulatorTiling.slot0`), its descriptors advanced by the byte offsets of the
instruction's first element (a constant per instruction, plus a constant per warpgroup: the layout is
linear in the warpgroup's rows or columns, checked here), and ``wgmma.commit_group``. 8-bit operands (e4m3 /
e5m2, either on each side) issue ``eg_wgmma_ss_f8<n, FA, FB>`` (``m64nNk32``, one per k32 step, both operands
K-major: the FP8 form has no imm-trans; an MN-major 8-bit operand is refused).
``WgmmaMma`` with ``a_registers`` (RS): no A descriptor; for each k16 step and instruction block ``mi`` the
eight 16-bit slots of A's register fragment that are the instruction's a0..a7
(:func:`egtile.layout.operand_a.rs_a_slots`) are packed, low half first, into four 32-bit registers and passed
to ``eg_wgmma_rs<n, T, TB>``.
``WgmmaWait``: ``wgmma.wait_group<N>`` then the compiler fence on the completed accumulators.

Refused before NVRTC (``CodegenError``): a descriptor the operand's layout cannot express, an operand
swizzle that is not its buffer's layout, an accumulator that is not a register fragment in the tiling's
layout.
"""

from __future__ import annotations

from egtile.ir.dtypes import dtype
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.layout import LayoutError
from egtile.tilemath import matrix_shape

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.names import ident
from egtile.codegen.ops.common import region_addr
from egtile.codegen.ops.pin import pin_lines, pin_needs
from egtile.codegen.registry import Needs, register_emitter
from egtile.codegen.threads import TID, guarded, indent

HEADERS = ("egtile_wgmma.cuh",)
FP8 = {"float8_e4m3fn": "EG_WGMMA_E4M3", "float8_e5m2": "EG_WGMMA_E5M2"}
"""The 8-bit operand types and the header's format tags (``eg_wgmma_ss_f8<N, FA, FB>``)."""


def _operand(s: WgmmaMma, role: str, ctx: Ctx):
    from egtile.rules.mma import operand
    from egtile.rules.swizzle import smem_tile

    r = s.gemm.a if role == "A" else s.gemm.b
    buf = ctx.buffer(r.buffer.name)
    swz = s.a_swizzle if role == "A" else s.b_swizzle
    if buf.layout != swz:
        raise codegen_error(ctx, f"wgmma (sid {s.sid}): operand {role} descriptors are {swz} but {buf.name} is laid out "
                                 f"{buf.layout}; the descriptor and every other reader must use the buffer's layout",
                            s.sid)
    # a column slice of the buffer (rules/mma.py, wgmma-operand-slice) is the tile of its own columns, based at its
    # first element: a slice starts on a panel, and panels are laid back to back in both
    rows, cols = matrix_shape(r)
    try:
        return operand(s.gemm, role, smem_tile(rows, cols, buf.dtype, swz)), buf
    except LayoutError as e:
        raise codegen_error(ctx, f"wgmma (sid {s.sid}) operand {role}: {e}", s.sid) from None


def _offsets(s: WgmmaMma, role: str, op, ctx: Ctx) -> tuple[dict[tuple[int, int, int], int], int]:
    """Start offsets (bytes) per (mi or ni, k step) for warpgroup 0, and the per-warpgroup step."""
    t = s.tiling
    ks = op.k_per_instruction
    k_steps = op.k_extent // ks
    out: dict[tuple[int, int, int], int] = {}
    starts: dict[tuple[int, int, int, int], int] = {}
    try:
        for w in range(t.warpgroups):
            for mi in range(t.m_blocks):
                for ni in range(t.n_blocks):
                    r0, c0 = t.origin(w, mi, ni)
                    for kk in range(k_steps):
                        d = op.descriptor(r0, kk * ks) if role == "A" else op.descriptor(c0, kk * ks, t.n)
                        starts[w, mi, ni, kk] = d.start
    except LayoutError as e:
        raise codegen_error(ctx, f"wgmma (sid {s.sid}) operand {role}: {e}", s.sid) from None
    step = starts[1, 0, 0, 0] - starts[0, 0, 0, 0] if t.warpgroups > 1 else 0
    for (w, mi, ni, kk), v in starts.items():
        if v != starts[0, mi, ni, kk] + w * step:
            raise codegen_error(ctx, f"wgmma (sid {s.sid}) operand {role}: descriptor starts are not linear in the "
                                     "warpgroup", s.sid)
        out[mi, ni, kk] = starts[0, mi, ni, kk]
    return out, step


def _needs(s: WgmmaMma, sched) -> Needs:
    from egtile.rules.swizzle import mode_of

    align = []
    for r in ((s.gemm.b,) if s.a_registers else (s.gemm.a, s.gemm.b)):
        b = sched.buffer(r.buffer.name)
        align.append((b.name, max(128, mode_of(b.layout).pattern_bytes)))
    return Needs(shared_align=tuple(align))


@register_emitter(WgmmaMma, headers=HEADERS, needs=_needs)
def wgmma(s: WgmmaMma, ctx: Ctx) -> list[str]:
    from egtile.rules.swizzle import mode_of

    g, t = s.gemm, s.tiling
    what = f"wgmma T.gemm (sid {s.sid})"
    acc = ctx.sched.fragment(g.c.buffer.name)
    if acc is None or acc != t.fragment():
        raise codegen_error(ctx, f"{what}: the accumulator {g.c.buffer.name} is not a register fragment in the layout "
                                 f"of tiling {t.code}", s.sid)
    if s.a_registers:
        return _wgmma_rs(s, ctx)
    a_op, a_buf = _operand(s, "A", ctx)
    b_op, b_buf = _operand(s, "B", ctx)
    elem, b_elem = dtype(a_buf.dtype).name, dtype(b_buf.dtype).name
    if elem in FP8 and b_elem in FP8:
        # the FP8 form (m64nNk32, .atype/.btype each e4m3 or e5m2) has no imm-trans operands: K-major only
        if a_op.major.name != "K" or b_op.major.name != "K":
            raise codegen_error(ctx, f"{what}: 8-bit operands are read K-major only (no imm-trans for .e4m3/.e5m2); "
                                     f"A is {a_op.major.name}-major, B {b_op.major.name}-major", s.sid)
        call = f"eg_wgmma_ss_f8<{{n}}, {FP8[elem]}, {FP8[b_elem]}>"
    elif elem in ("float16", "bfloat16") and b_elem == elem:
        T = "half" if elem == "float16" else "__nv_bfloat16"
        call = f"eg_wgmma_ss<{{n}}, {T}, {a_op.major.transpose_flag}, {b_op.major.transpose_flag}>"
    else:
        raise codegen_error(ctx, f"{what}: operands {a_buf.dtype} x {b_buf.dtype}; wgmma here takes f16 x f16, "
                                 "bf16 x bf16 or e4m3/e5m2 x e4m3/e5m2", s.sid)
    a_off, a_step = _offsets(s, "A", a_op, ctx)
    b_off, b_step = _offsets(s, "B", b_op, ctx)
    ad, bd = a_op.descriptor(0, 0), b_op.descriptor(0, 0, t.n)
    d = ctx.depth
    wg, da, db = f"eg_wg{d}", f"eg_da{d}", f"eg_db{d}"
    rank = TID if s.threads.begin == 0 else f"({TID} - {s.threads.begin})"
    c = ident(g.c.buffer.name)
    lines = [f"const int {wg} = eg_warpgroup_of({rank});", f"(void){wg};",
             f"const eg_u64 {da} = eg_wgmma_desc({region_addr(g.a, ctx)}, {ad.lbo}u, {ad.sbo}u, "
             f"{mode_of(s.a_swizzle).descriptor_code}u)" + (f" + (eg_u64)(({wg} * {a_step}) >> 4)" if a_step else "") + ";",
             f"const eg_u64 {db} = eg_wgmma_desc({region_addr(g.b, ctx)}, {bd.lbo}u, {bd.sbo}u, "
             f"{mode_of(s.b_swizzle).descriptor_code}u)" + (f" + (eg_u64)(({wg} * {b_step}) >> 4)" if b_step else "") + ";",
             f"eg_wgmma_fence_operand({c});", "eg_wgmma_fence();"]
    ks = a_op.k_per_instruction
    k_steps = a_op.k_extent // ks
    half = t.n // 2
    for kk in range(k_steps):
        scale = "0u" if (g.clear_accum and kk == 0) else "1u"
        for mi in range(t.m_blocks):
            for ni in range(t.n_blocks):
                slot = t.slot0(mi, ni)
                lines.append(f"{call.format(n=t.n)}(*reinterpret_cast<float(*)[{half}]>(&{c}[{slot}]), "
                             f"{da} + {a_off[mi, 0, kk] >> 4}u, {db} + {b_off[0, ni, kk] >> 4}u, {scale});")
    lines += ["eg_wgmma_commit_group();", f"eg_wgmma_fence_operand({c});"]
    from egtile.rules.mma import instruction_name

    return [f"// {what}: {t.instructions} x {instruction_name(g, t.n)} per k{ks} step per warpgroup, "
            f"{t.warpgroups} warpgroup(s), A {s.a_swizzle} {s.a_major}-major, B {s.b_swizzle} {s.b_major}-major", "{",
            *indent(guarded(lines, s.threads, ctx, what, s.sid, exact=True)), "}"]


def _wgmma_rs(s: WgmmaMma, ctx: Ctx) -> list[str]:
    from egtile.layout.fragment import Fragment
    from egtile.layout.operand_a import rs_a_layout, rs_a_problems, rs_a_slots, same_layout
    from egtile.rules.swizzle import mode_of

    g, t = s.gemm, s.tiling
    what = f"register-A wgmma T.gemm (sid {s.sid})"
    a = ctx.sched.fragment(g.a.buffer.name)
    if not isinstance(a, Fragment) or rs_a_problems(a.rows, a.cols, t.warpgroups) or \
            not same_layout(a, rs_a_layout(a.rows, a.cols, t.warpgroups)) or a.value_bits != 16:
        raise codegen_error(ctx, f"{what}: A ({g.a.buffer.name}) is not a register fragment in the register-A layout", s.sid)
    if tuple(s.a_k_order) != tuple(range(a.cols // 16)):
        raise codegen_error(ctx, f"{what}: A's k16 slices are read in order {list(s.a_k_order)}, not in order", s.sid)
    b_op, b_buf = _operand(s, "B", ctx)
    elem = dtype(b_buf.dtype).name
    if elem not in ("float16", "bfloat16") or dtype(ctx.buffer(g.a.buffer.name).dtype).name != elem:
        raise codegen_error(ctx, f"{what}: operands {ctx.buffer(g.a.buffer.name).dtype} x {b_buf.dtype}", s.sid)
    T = "half" if elem == "float16" else "__nv_bfloat16"
    bits = "__half_as_ushort" if elem == "float16" else "__bfloat16_as_ushort"
    b_off, b_step = _offsets(s, "B", b_op, ctx)
    bd = b_op.descriptor(0, 0, t.n)
    d = ctx.depth
    wg, db = f"eg_wg{d}", f"eg_db{d}"
    rank = TID if s.threads.begin == 0 else f"({TID} - {s.threads.begin})"
    c, an = ident(g.c.buffer.name), ident(g.a.buffer.name)
    tb = b_op.major.transpose_flag
    k_steps = a.cols // 16
    lines = [f"const int {wg} = eg_warpgroup_of({rank});", f"(void){wg};",
             f"const eg_u64 {db} = eg_wgmma_desc({region_addr(g.b, ctx)}, {bd.lbo}u, {bd.sbo}u, "
             f"{mode_of(s.b_swizzle).descriptor_code}u)" + (f" + (eg_u64)(({wg} * {b_step}) >> 4)" if b_step else "") + ";"]
    ra = f"eg_ra{d}"
    lines.append(f"eg_u32 {ra}[{t.m_blocks * k_steps * 4}];")
    for mi in range(t.m_blocks):
        for kk in range(k_steps):
            sl = rs_a_slots(a.cols, mi, kk)
            base = (mi * k_steps + kk) * 4
            for j in range(4):
                lo, hi = sl[2 * j], sl[2 * j + 1]
                lines.append(f"{ra}[{base + j}] = (eg_u32){bits}({an}[{lo}]) | ((eg_u32){bits}({an}[{hi}]) << 16);")
    lines += [f"eg_wgmma_fence_operand({c});", f"eg_wgmma_fence_operand({ra});", "eg_wgmma_fence();"]
    half = t.n // 2
    for kk in range(k_steps):
        scale = "0u" if (g.clear_accum and kk == 0) else "1u"
        for mi in range(t.m_blocks):
            for ni in range(t.n_blocks):
                slot = t.slot0(mi, ni)
                base = (mi * k_steps + kk) * 4
                lines.append(f"eg_wgmma_rs<{t.n}, {T}, {tb}>(*reinterpret_cast<float(*)[{half}]>(&{c}[{slot}]), "
                             f"*reinterpret_cast<const eg_u32(*)[4]>(&{ra}[{base}]), {db} + {b_off[0, ni, kk] >> 4}u, "
                             f"{scale});")
    lines += ["eg_wgmma_commit_group();", f"eg_wgmma_fence_operand({c});", f"eg_wgmma_fence_operand({ra});"]
    return [f"// {what}: {t.instructions} x m64n{t.n}k16 per k16 step per warpgroup, {t.warpgroups} warpgroup(s), "
            f"A from registers, B {s.b_swizzle} {s.b_major}-major", "{",
            *indent(guarded(lines, s.threads, ctx, what, s.sid, exact=True)), "}"]


@register_emitter(WgmmaWait, headers=(*HEADERS, "egtile_sync.cuh"), needs=pin_needs)
def wgmma_wait(s: WgmmaWait, ctx: Ctx) -> list[str]:
    if s.pending < 0:
        raise codegen_error(ctx, f"wgmma_wait_group {s.pending}: the count is non-negative", s.sid)
    body = [*pin_lines(s, ctx), f"eg_wgmma_wait_group<{s.pending}>();",
            *(f"eg_wgmma_fence_operand({ident(f)});" for f in s.fragments)]
    return guarded(body, s.threads, ctx, "wgmma_wait_group", s.sid, exact=True)


__all__ = ["wgmma", "wgmma_wait"]
