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
from egtile.ir.kernel import Region
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


def _load_needs(s: TmaLoad, sched: Scheduled) -> Needs:
    return Needs(tensor_maps=((s.src.buffer.name, tuple(s.src.extents)),),
                 shared_align=((s.dst.buffer.name, TMA_SMEM_ALIGN),))


def _store_needs(s: TmaStore, sched: Scheduled) -> Needs:
    return Needs(tensor_maps=((s.dst.buffer.name, tuple(s.dst.extents)),),
                 shared_align=((s.src.buffer.name, TMA_SMEM_ALIGN),))


@register_emitter(TmaLoad, headers=HEADERS, needs=_load_needs)
def tma_load(s: TmaLoad, ctx: Ctx) -> list[str]:
    check_tma(s.src, s.dst, ctx, s.sid, f"TMA load (sid {s.sid})")
    t = ctx.tmap_for(s.src.buffer.name, tuple(s.src.extents))
    coords = ", ".join(_coords(s.src, ctx))
    return [f"eg_tma_load_{len(s.src.extents)}d({region_addr(s.dst, ctx)}, &{t.param}, "
            f"{barrier_ref(s.barrier, s.stage, ctx)}, {coords});{sid_comment(s.sid)}"]


@register_emitter(TmaStore, headers=HEADERS, needs=_store_needs)
def tma_store(s: TmaStore, ctx: Ctx) -> list[str]:
    check_tma(s.dst, s.src, ctx, s.sid, f"TMA store (sid {s.sid})")
    t = ctx.tmap_for(s.dst.buffer.name, tuple(s.dst.extents))
    coords = ", ".join(_coords(s.dst, ctx))
    return [f"eg_tma_store_{len(s.dst.extents)}d(&{t.param}, {region_addr(s.src, ctx)}, {coords});"
            f"{sid_comment(s.sid)}", "eg_tma_store_wait();"]
