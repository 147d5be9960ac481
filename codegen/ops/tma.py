"""TMA tile copies (PTX ISA 9.7.9.27, ``cp.async.bulk.tensor``) as CUDA C++, and the tensor maps and shared
alignment they need.

* ``TmaLoad``: ``eg_tma_load_<rank>d(smem, &tmap, &bar[stage], coords...)``, completing the box's bytes on
  the mbarrier (``.mbarrier::complete_tx::bytes``).
* ``TmaStore``: ``eg_tma_store_<rank>d(&tmap, smem, coords...)`` then ``commit_group`` + ``wait_group.read 0``
  (9.7.9.28), so the shared source may be overwritten afterwards.

Each needs one tensor map per distinct ``(global buffer, box)`` (``cuTensorMapEncodeTiled``; the launcher
encodes it) and a shared operand whose every stage starts 128-byte aligned (CUDA C++ Programming Guide,
"Alignment requirements for multi-dimensional TMA"). The checks below refuse, before NVRTC, what
``cuTensorMapEncodeTiled`` or the instruction would refuse.
"""

from __future__ import annotations

from math import gcd

from egtile.ir.dtypes import dtype
from egtile.ir.kernel import Const, Region
from egtile.ir.scheduled import Scheduled, TmaLoad, TmaStore

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.exprs import emit, known_multiple
from egtile.codegen.layout import row_major
from egtile.codegen.ops.common import barrier_ref, region_addr, sid_comment
from egtile.codegen.registry import Needs, register_emitter

TMA_SMEM_ALIGN = 128
TMA_MAX_BOX = 256
TMA_MAX_RANK = 5
HEADERS = ("egtile_mbarrier.cuh", "egtile_tma.cuh")


def _coords(region: Region, ctx: Ctx) -> list[str]:
    return [emit(o, ctx) for o in reversed(region.offsets)]


def check_tma(glob: Region, smem: Region, ctx: Ctx, sid: int | None, what: str) -> None:
    """Refuse a TMA copy between ``glob`` and ``smem`` that the hardware cannot do.

    Raises:
        CodegenError: naming the constraint (scopes, dtype, box rank and extents, 16-byte strides, dense
            and 128-byte-aligned shared side).
    """
    gbuf, sbuf = ctx.buffer(glob.buffer.name), ctx.buffer(smem.buffer.name)
    if gbuf.scope != "global" or sbuf.scope not in ("shared", "fragment"):
        raise codegen_error(ctx, f"{what}: expected a global and a shared region, got {gbuf.name} ({gbuf.scope}) and "
                                 f"{sbuf.name} ({sbuf.scope})", sid)
    d = dtype(gbuf.dtype)
    if d.tma is None or dtype(sbuf.dtype).name != d.name:
        raise codegen_error(ctx, f"{what}: TMA cannot move {gbuf.dtype} -> {sbuf.dtype}", sid)
    box = glob.extents
    if not 1 <= len(box) <= TMA_MAX_RANK or any(not 1 <= e <= TMA_MAX_BOX for e in box):
        raise codegen_error(ctx, f"{what}: box {box} of {gbuf.name}; TMA boxes have rank 1..{TMA_MAX_RANK} and "
                                 f"extents 1..{TMA_MAX_BOX} (cuTensorMapEncodeTiled)", sid)
    if (box[-1] * d.bytes) % 16:
        raise codegen_error(ctx, f"{what}: innermost box extent {box[-1]} x {d.bytes} bytes of {gbuf.name} is not a "
                                 f"multiple of 16 bytes (cuTensorMapEncodeTiled, interleave none)", sid)
    if any((s * d.bytes) % 16 for s in row_major(gbuf.shape)[:-1]):
        raise codegen_error(ctx, f"{what}: {gbuf.name} {gbuf.shape} has a row stride that is not a multiple of 16 "
                                 f"bytes (cuTensorMapEncodeTiled globalStrides)", sid)
    if glob.squeezed != smem.squeezed:
        raise codegen_error(ctx, f"{what}: box {box} and shared region {smem.extents} differ", sid)
    if sbuf.layout != "linear":
        _check_swizzled(glob, smem, sbuf, ctx, sid, what)
        return
    # the shared side must be one dense box: after the first non-unit dimension, whole rows
    ext, shp, lay = smem.extents, sbuf.shape, ctx.strides(sbuf)
    first = next((i for i, e in enumerate(ext) if e != 1), len(ext))
    dense = row_major(shp)
    if any(ext[i] != shp[i] for i in range(first + 1, len(ext))) or \
            any(lay[i] != dense[i] for i in range(first, len(ext))):
        raise codegen_error(ctx, f"{what}: shared region {ext} of {sbuf.name} {shp} is not contiguous", sid)
    off = 0
    for o, st in zip(smem.offsets, lay):
        off = gcd(off, known_multiple(o) * st * d.bytes)
    if off % TMA_SMEM_ALIGN:
        raise codegen_error(ctx, f"{what}: shared address of {sbuf.name} region is not provably {TMA_SMEM_ALIGN}-byte "
                                 f"aligned (PTX ISA 9.7.9.27)", sid)


def _check_swizzled(glob: Region, smem: Region, sbuf, ctx: Ctx, sid: int | None, what: str) -> None:
    """A swizzled shared side: the whole tile (one stage of it), and a box per panel the mode accepts."""
    from egtile.layout import LayoutError, tma_inner_box_problems
    from egtile.rules.swizzle import mode_of, smem_tile

    staged = len(sbuf.shape) == 3
    tile = sbuf.shape[1:] if staged else sbuf.shape
    offs = smem.offsets[1:] if staged else smem.offsets
    if len(tile) != 2 or tuple(smem.extents[-2:]) != tuple(tile) or any(e != 1 for e in smem.extents[:-2]) or \
            not all(isinstance(o, Const) and o.value == 0 for o in offs):
        raise codegen_error(ctx, f"{what}: {sbuf.name} is {sbuf.layout}; a TMA copy moves its whole {tile} tile, not "
                                 f"region {smem.extents}", sid)
    try:
        t = smem_tile(tile[0], tile[1], sbuf.dtype, sbuf.layout)
    except LayoutError as e:
        raise codegen_error(ctx, f"{what}: {e}", sid) from None
    problems = tma_inner_box_problems(t.row_bytes, mode_of(sbuf.layout))
    # the box's non-unit extents are the tile's, the innermost one its columns (a bshd tensor's (1, 64, 1, 64)
    # box is the 64 x 64 tile: TMA writes a box row-major, innermost first)
    if problems or tuple(glob.squeezed) != tuple(tile) or glob.extents[-1] != tile[1]:
        raise codegen_error(ctx, f"{what}: {'; '.join(problems) or f'box {glob.extents} is not the tile {tile}'}", sid)


def _panels(buf) -> tuple[int, int, int]:
    """``(panels, panel columns, panel bytes)`` of a swizzled shared tile (one per TMA box)."""
    from egtile.rules.swizzle import smem_tile

    t = smem_tile(buf.shape[-2], buf.shape[-1], buf.dtype, buf.layout)
    return t.num_panels, t.panel_cols, t.panel_stride


def _map_box(glob: Region, sbuf) -> tuple[int, ...]:
    """The tensor map's box: the region's extents, with the inner one a panel's columns for a swizzled tile."""
    if sbuf.layout == "linear":
        return tuple(glob.extents)
    return (*glob.extents[:-1], _panels(sbuf)[1])


def _pattern_align(buf) -> int:
    from egtile.rules.swizzle import mode_of

    return max(TMA_SMEM_ALIGN, mode_of(buf.layout).pattern_bytes if buf.layout != "linear" else 0)


def _align_request(region, buf) -> tuple[tuple[str, int], ...]:
    """The alignment a TMA operand asks of its shared buffer. A linear buffer's request pads its outermost stride
    (:func:`egtile.codegen.layout.plan_smem`: each stage of a staged tile starts aligned), which a box spanning
    several outermost rows must not get: its rows would no longer be one dense box. Every buffer's base is
    128-byte aligned anyway (``BUFFER_ALIGN``), which is what such a box needs."""
    if buf.layout == "linear" and len(buf.shape) >= 2 and region.extents[0] > 1:
        return ()
    return ((buf.name, _pattern_align(buf)),)


def _load_needs(s: TmaLoad, sched: Scheduled) -> Needs:
    dst = sched.buffer(s.dst.buffer.name)
    return Needs(tensor_maps=((s.src.buffer.name, _map_box(s.src, dst), dst.layout),),
                 shared_align=_align_request(s.dst, dst))


def _store_needs(s: TmaStore, sched: Scheduled) -> Needs:
    src = sched.buffer(s.src.buffer.name)
    return Needs(tensor_maps=((s.dst.buffer.name, _map_box(s.dst, src), src.layout),),
                 shared_align=_align_request(s.src, src))


def _check_agrees(node_swizzle: str, sbuf, ctx: Ctx, sid: int | None, what: str) -> None:
    if node_swizzle != sbuf.layout:
        raise codegen_error(ctx, f"{what}: its tensor map is {node_swizzle} but {sbuf.name} is laid out {sbuf.layout}; "
                                 "the TMA copy and every other reader of a buffer must use its layout", sid)


def _panel_copies(glob: Region, smem: Region, ctx: Ctx):
    """``(shared address, coordinates)`` of each TMA box of the copy (one per panel when swizzled)."""
    sbuf = ctx.buffer(smem.buffer.name)
    coords = _coords(glob, ctx)
    base = region_addr(smem, ctx)
    if sbuf.layout == "linear":
        return [(base, coords)]
    n, pc, stride = _panels(sbuf)
    out = []
    for p in range(n):
        addr = base if p == 0 else f"reinterpret_cast<unsigned char*>({base}) + {p * stride}"
        c0 = coords[0] if p == 0 else f"{coords[0]} + {p * pc}"
        out.append((addr, [c0, *coords[1:]]))
    return out


@register_emitter(TmaLoad, headers=HEADERS, needs=_load_needs)
def tma_load(s: TmaLoad, ctx: Ctx) -> list[str]:
    what = f"TMA load (sid {s.sid})"
    sbuf = ctx.buffer(s.dst.buffer.name)
    _check_agrees(s.swizzle, sbuf, ctx, s.sid, what)
    check_tma(s.src, s.dst, ctx, s.sid, what)
    t = ctx.tmap_for(s.src.buffer.name, _map_box(s.src, sbuf), sbuf.layout)
    bar = barrier_ref(s.barrier, s.stage, ctx)
    return [f"eg_tma_load_{len(s.src.extents)}d({addr}, &{t.param}, {bar}, {', '.join(c)});{sid_comment(s.sid)}"
            for addr, c in _panel_copies(s.src, s.dst, ctx)]


@register_emitter(TmaStore, headers=HEADERS, needs=_store_needs)
def tma_store(s: TmaStore, ctx: Ctx) -> list[str]:
    what = f"TMA store (sid {s.sid})"
    sbuf = ctx.buffer(s.src.buffer.name)
    _check_agrees(s.swizzle, sbuf, ctx, s.sid, what)
    check_tma(s.dst, s.src, ctx, s.sid, what)
    t = ctx.tmap_for(s.dst.buffer.name, _map_box(s.dst, sbuf), sbuf.layout)
    return [*(f"eg_tma_store_{len(s.dst.extents)}d(&{t.param}, {addr}, {', '.join(c)});{sid_comment(s.sid)}"
              for addr, c in _panel_copies(s.dst, s.src, ctx)), "eg_tma_store_wait();"]
