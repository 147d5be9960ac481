"""Region addressing and the element-wise SIMT copy, shared by the tile-op and cp.async emitters.

The element of a region at per-dimension offsets ``digits`` (C expressions) is
``buf[flat(offsets + digits)]`` in the kernel's layout (:meth:`egtile.codegen.layout.SmemLayout.strides_of`).
A copy gives destination element ``e`` (row-major over the destination region) to rank ``e % count``;
source and destination elements pair by their row-major position (:func:`egtile.ir.scheduled.unflatten_c`).
"""

from __future__ import annotations

import math

from egtile.ir.dtypes import dtype
from egtile.ir.kernel import Copy, Region
from egtile.ir.scheduled import ThreadRange, unflatten_c

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.exprs import ctype, emit, flat_index, known_multiple
from egtile.codegen.names import ident
from egtile.codegen.threads import indent, partitioned_for


def _plus(a: str, b: str) -> str:
    if a == "0":
        return b
    if b == "0":
        return a
    return f"{a} + {b}"


def region_ref(region: Region, digits: tuple[str, ...], ctx: Ctx, sid: int | None) -> str:
    """C lvalue of the element of ``region`` at per-dimension offsets ``digits``."""
    buf = ctx.buffer(region.buffer.name)
    if len(region.offsets) != len(buf.shape) or len(region.extents) != len(buf.shape):
        raise codegen_error(ctx, f"region of buffer {buf.name!r} has rank {len(region.extents)}, the buffer has "
                                 f"shape {buf.shape}", sid)
    idx = tuple(_plus(emit(o, ctx), d) for o, d in zip(region.offsets, digits))
    return f"{ident(buf.name)}[{flat_index(buf, idx, ctx)}]"


def byte_multiple(region: Region, ctx: Ctx) -> int:
    """A known divisor of the byte offset of ``region``'s first element from its buffer's base."""
    buf = ctx.buffer(region.buffer.name)
    b = dtype(buf.dtype).bytes
    g = 0
    for off, st in zip(region.offsets, ctx.strides(buf)):
        g = math.gcd(g, known_multiple(off) * st * b)
    return g


def check_copy(c: Copy, ctx: Ctx) -> None:
    """Refuse a copy whose regions differ once unit dimensions are dropped."""
    if c.src.squeezed != c.dst.squeezed:
        raise codegen_error(ctx, f"T.copy from {c.src.buffer.name} {c.src.extents} to {c.dst.buffer.name} "
                                 f"{c.dst.extents}: squeezed extents {c.src.squeezed} and {c.dst.squeezed} differ",
                            c.sid)


def _copy_body(c: Copy, counter: str, ctx: Ctx) -> list[str]:
    dst_t, src_t = ctx.buffer(c.dst.buffer.name).dtype, ctx.buffer(c.src.buffer.name).dtype
    src = region_ref(c.src, unflatten_c(counter, c.src.extents), ctx, c.sid)
    dst = region_ref(c.dst, unflatten_c(counter, c.dst.extents), ctx, c.sid)
    value = src if dtype(src_t).name == dtype(dst_t).name else f"eg_cast<{ctype(dst_t)}>({src})"
    return [f"{dst} = {value};"]


def simt_copy(c: Copy, r: ThreadRange, ctx: Ctx) -> list[str]:
    """One load/store per element (with a C conversion between dtypes), element ``e`` on rank ``e % count``."""
    check_copy(c, ctx)
    k = f"eg_e{ctx.depth}"
    return [partitioned_for(k, c.dst.numel, r), *indent(_copy_body(c, k, ctx)), "}"]
