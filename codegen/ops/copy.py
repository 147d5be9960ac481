"""Region addressing and the element-wise SIMT copy, shared by the tile-op and cp.async emitters.

The element of a region at per-dimension offsets ``digits`` (C expressions) is
``buf[flat(offsets + digits)]`` in the kernel's layout (:meth:`egtile.codegen.layout.SmemLayout.strides_of`).
A copy gives destination element ``e`` (row-major over the destination region) to rank ``e % count``;
source and destination elements pair by their row-major position (:func:`egtile.ir.scheduled.unflatten_c`).
A side past its tensor's edge (``Region.clip``) is predicated per element, as TileLang's copy is: an outside
source element gives zero, an outside destination element is not stored (:func:`inside_cond`).
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


def inside_cond(region: Region, digits: tuple[str, ...], ctx: Ctx) -> str | None:
    """C condition that the element of ``region`` at ``digits`` lies inside its tensor, for a region past its
    tensor's edge (``Region.clip``: outside elements read as zero and are not written); ``None`` otherwise.
    Only the condition's chosen side is evaluated, so no address outside the tensor is ever formed into a load."""
    if not region.clip:
        return None
    buf = ctx.buffer(region.buffer.name)
    terms = []
    for o, d, n in zip(region.offsets, digits, buf.shape):
        i = _plus(emit(o, ctx), d)
        terms.append(f"({i}) >= 0 && ({i}) < {n}")
    return " && ".join(terms)


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
    sd, dd = unflatten_c(counter, c.src.extents), unflatten_c(counter, c.dst.extents)
    src = region_ref(c.src, sd, ctx, c.sid)
    dst = region_ref(c.dst, dd, ctx, c.sid)
    value = src if dtype(src_t).name == dtype(dst_t).name else f"eg_cast<{ctype(dst_t)}>({src})"
    return guarded_copy(dst, value, inside_cond(c.src, sd, ctx), inside_cond(c.dst, dd, ctx), dst_t)


def guarded_copy(dst: str, value: str, src_in: str | None, dst_in: str | None, dst_t: str) -> list[str]:
    """``dst = value;`` past a tensor's edge: zero where the source element is outside (``src_in`` false), no
    store where the destination element is (``dst_in`` false); TileLang's predicated copy."""
    if src_in is not None:
        value = f"(({src_in}) ? ({value}) : eg_cast<{ctype(dst_t)}>(0.0f))"
    line = f"{dst} = {value};"
    return [line] if dst_in is None else [f"if ({dst_in}) {line}"]


def chunks_fit(c: Copy, w: int, ctx: Ctx) -> bool:
    """Whether copy ``c`` moves in ``w``-byte chunks of consecutive elements that are contiguous and ``w``-aligned
    on both sides, given the first element's address is: one element size on both sides, ``w`` divides the
    contiguous run (the last extent, when both regions end in the same one), every row stride and both start
    offsets. A swizzled shared buffer keeps 16-byte chunks whole (its swizzle permutes 16-byte units, whatever the
    mode: :func:`egtile.codegen.layout.swizzle_index`), so ``w <= 16`` fits it as a row-major one."""
    src_b, dst_b = ctx.buffer(c.src.buffer.name), ctx.buffer(c.dst.buffer.name)
    b = dtype(src_b.dtype).bytes
    if dtype(dst_b.dtype).bytes != b or w % b or w > 16:
        return False
    run = c.src.extents[-1] if c.src.extents[-1] == c.dst.extents[-1] else 1
    if (run * b) % w:
        return False
    rows_ok = all((st * b) % w == 0 for x in (src_b, dst_b) for st in ctx.strides(x)[:-1])
    return rows_ok and all(byte_multiple(x, ctx) % w == 0 for x in (c.src, c.dst))


VECTOR_COPY_BYTES = (16, 8, 4)
"""Widths of a vectorized SIMT copy (PTX ISA 9.7.9.8/9.7.9.10, ``ld``/``st`` ``.v2``/``.v4``), widest first."""


def vector_bytes(c: Copy, ctx: Ctx) -> int:
    """The widest vector (bytes) in which the SIMT copy ``c`` can move at least two elements at a time, or 0: one
    dtype on both sides, no side past its tensor's edge, global or shared buffers, and :func:`chunks_fit`."""
    src_b, dst_b = ctx.buffer(c.src.buffer.name), ctx.buffer(c.dst.buffer.name)
    if dtype(src_b.dtype).name != dtype(dst_b.dtype).name or c.src.clip or c.dst.clip:
        return 0
    if src_b.scope not in ("global", "shared") or dst_b.scope not in ("global", "shared"):
        return 0
    if any(x.scope == "shared" and ctx.sched.fragment(x.name) is not None for x in (src_b, dst_b)):
        return 0
    b = dtype(src_b.dtype).bytes
    return next((w for w in VECTOR_COPY_BYTES if w >= 2 * b and chunks_fit(c, w, ctx)), 0)


def simt_copy(c: Copy, r: ThreadRange, ctx: Ctx) -> list[str]:
    """One load/store per element (with a C conversion between dtypes), element ``e`` on rank ``e % count``; where
    :func:`vector_bytes` finds a width, a vector load and store per ``w`` bytes instead (chunk ``g`` on rank
    ``g % count``), taken when both first elements are ``w``-aligned at run time (a tensor view may start anywhere:
    the scalar loop otherwise). TileLang vectorizes its copies the same way; egtile's SIMT copy of a flash-attention
    Q tile (128 x 128 halves) was 43 two-byte loads per thread."""
    check_copy(c, ctx)
    k = f"eg_e{ctx.depth}"
    scalar = [partitioned_for(k, c.dst.numel, r), *indent(_copy_body(c, k, ctx)), "}"]
    w = vector_bytes(c, ctx)
    if not w:
        return scalar
    t = ctype(ctx.buffer(c.src.buffer.name).dtype)
    per = w // dtype(ctx.buffer(c.src.buffer.name).dtype).bytes
    g, e = f"eg_g{ctx.depth}", f"eg_e{ctx.depth}"
    zeros = ("0",) * len(c.src.extents), ("0",) * len(c.dst.extents)
    first = (f"(reinterpret_cast<unsigned long long>(&{region_ref(c.src, zeros[0], ctx, c.sid)}) | "
             f"reinterpret_cast<unsigned long long>(&{region_ref(c.dst, zeros[1], ctx, c.sid)}))")
    src = region_ref(c.src, unflatten_c(e, c.src.extents), ctx, c.sid)
    dst = region_ref(c.dst, unflatten_c(e, c.dst.extents), ctx, c.sid)
    # unrolled: a thread's loads are all in flight before the first store waits for one
    vec = ["#pragma unroll 4", partitioned_for(g, c.dst.numel // per, r), f"  const int {e} = {g} * {per};",
           f"  eg_vstore<{t}, {per}>(&{dst}, eg_vload<{t}, {per}>(&{src}));", "}"]
    return [f"if ({first} % {w}u == 0) {{  // {w}-byte vectors", *indent(vec), "} else {", *indent(scalar), "}"]
