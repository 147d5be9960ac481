"""Listings of the register-fragment and wgmma nodes (:mod:`egtile.ir.fragment`, :mod:`egtile.ir.wgmma`),
registered with :func:`egtile.ir.printer.register_listing` like every node's."""

from __future__ import annotations

from egtile.ir.fragment import FragmentOp, LayoutLoop, RowCombine, RowReduce
from egtile.ir.printer import format_region, format_stmt, indent, listing_lines, register_listing, threads_text
from egtile.ir.wgmma import WgmmaMma, WgmmaWait


@register_listing(FragmentOp)
def _fragment_op(s: FragmentOp) -> list[str]:
    return [f"{format_stmt(s.op)}  # by the layout of {s.fragment} on {threads_text(s.threads)} [{s.op.sid}]"]


@register_listing(LayoutLoop)
def _layout_loop(s: LayoutLoop) -> list[str]:
    names = ", ".join(v.name for v in s.vars)
    peers = f" with peers {', '.join(s.peers)}" if s.peers else ""
    return [f"for {names} in T.Parallel({', '.join(map(str, s.extents))}):  # by the layout of {s.fragment} on "
            f"{threads_text(s.threads)}{peers}"
            f"{'' if s.sid is None else f' [{s.sid}]'}", *indent(listing_lines(s.body))]


@register_listing(RowReduce)
def _row_reduce(s: RowReduce) -> list[str]:
    lanes = ", ".join(map(str, s.lanes)) or "none"
    return [f"{format_stmt(s.reduce)}  # by the layout of {s.fragment} on {threads_text(s.threads)}: partials, then "
            f"shfl.bfly over lanes xor {lanes}"
            + (f", each warp's partial to {s.scratch.name}[{s.groups} groups]" if s.scratch is not None else "")
            + f" [{s.reduce.sid}]"]


@register_listing(RowCombine)
def _row_combine(s: RowCombine) -> list[str]:
    return [f"{s.reduce.dst.name}[i] = fold of {s.scratch.name}[0..{s.groups - 1}, i] ({s.reduce.kind}"
            f"{'' if s.reduce.clear else ', into the old value'})  # by the row layout of {s.fragment} on "
            f"{threads_text(s.threads)} [{s.reduce.sid}]"]


@register_listing(WgmmaMma)
def _wgmma(s: WgmmaMma) -> list[str]:
    t, g = s.tiling, s.gemm
    return [f"wgmma m64n{t.n}k16 x {t.instructions} per k16 ({t.split} split over {t.warpgroups} warpgroup(s)): "
            f"{format_region(g.c)} += {format_region(g.a)} "
            f"({'registers' if s.a_registers else s.a_swizzle + ', ' + s.a_major + '-major'}) @ {format_region(g.b)} "
            f"({s.b_swizzle}, {s.b_major}-major){' (clear)' if g.clear_accum else ''}; commit_group on "
            f"{threads_text(s.threads)}  # [{g.sid}]"]


@register_listing(WgmmaWait)
def _wgmma_wait(s: WgmmaWait) -> list[str]:
    pin = f", pinned after {', '.join(s.pinned_after)}" if s.pinned_after else ""
    return [f"wgmma_wait_group {s.pending} on {threads_text(s.threads)}{pin}"]
