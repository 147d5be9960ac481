"""Per-thread asynchronous global -> shared copies (PTX ISA 9.7.9.25, ``cp.async``) and their mbarrier
arrival (9.7.9.25.3.3, ``cp.async.mbarrier.arrive.noinc``) as CUDA C++.

A ``cp_async`` ``Copy`` moves 16-, 8- or 4-byte chunks of consecutive elements; chunk ``c`` belongs to rank
``c % count``. The widest chunk whose size divides the contiguous run and whose addresses are provably
aligned is used; when no chunk size fits (e.g. an odd number of 2-byte elements) the copy falls back to
SIMT stores followed by a CTA-scope fence, so the thread's later ``CpAsyncArrive`` still publishes them.
The source's data pointer must be aligned to the chunk (:func:`param_align`, checked by the launcher).
"""

from __future__ import annotations

from egtile.ir.dtypes import dtype
from egtile.ir.kernel import Copy
from egtile.ir.scheduled import CpAsyncArrive, ThreadRange, TileOp, unflatten_c

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.ops.common import barrier_ref
from egtile.codegen.ops.copy import byte_multiple, check_copy, region_ref, simt_copy
from egtile.codegen.registry import register_emitter
from egtile.codegen.threads import partitioned_for

CP_ASYNC_SIZES = (16, 8, 4)
HEADERS = ("egtile_cp_async.cuh",)


def cp_async_width(c: Copy, ctx: Ctx) -> int | None:
    """Bytes per ``cp.async`` of copy ``c`` (16, 8 or 4), or ``None`` when no size is provably legal."""
    src_b, dst_b = ctx.buffer(c.src.buffer.name), ctx.buffer(c.dst.buffer.name)
    b = dtype(src_b.dtype).bytes
    if dtype(dst_b.dtype).bytes != b:
        return None
    run = c.src.extents[-1] if c.src.extents[-1] == c.dst.extents[-1] else 1
    for w in CP_ASYNC_SIZES:
        if w % b or (run * b) % w:
            continue
        rows_ok = all((st * b) % w == 0 for x in (src_b, dst_b) for st in ctx.strides(x)[:-1])
        offs_ok = all(byte_multiple(x, ctx) % w == 0 for x in (c.src, c.dst))
        if rows_ok and offs_ok:
            return w
    return None


def param_align(s: TileOp, ctx: Ctx) -> list[tuple[str, int]]:
    """A ``cp_async`` copy's global source is read in chunks: its pointer must be a multiple of the chunk."""
    if s.inst != "cp_async" or not isinstance(s.op, Copy):
        return []
    w = cp_async_width(s.op, ctx)
    return [] if w is None else [(s.op.src.buffer.name, w)]


def cp_async_copy(c: Copy, r: ThreadRange, ctx: Ctx) -> list[str]:
    """This thread's share of a ``cp_async`` copy (see the module docstring)."""
    check_copy(c, ctx)
    src_scope, dst_scope = ctx.buffer(c.src.buffer.name).scope, ctx.buffer(c.dst.buffer.name).scope
    if src_scope != "global" or dst_scope not in ("shared", "fragment"):
        raise codegen_error(ctx, f"cp.async copies global -> shared only; got {c.src.buffer.name} ({src_scope}) "
                                 f"-> {c.dst.buffer.name} ({dst_scope})", c.sid)
    w = cp_async_width(c, ctx)
    if w is None:
        return ["// cp.async: no 16/8/4-byte chunk is provably aligned; SIMT fallback", *simt_copy(c, r, ctx),
                "__threadfence_block();"]
    per = w // dtype(ctx.buffer(c.src.buffer.name).dtype).bytes
    k, e = f"eg_c{ctx.depth}", f"eg_e{ctx.depth}"
    src = region_ref(c.src, unflatten_c(e, c.src.extents), ctx, c.sid)
    dst = region_ref(c.dst, unflatten_c(e, c.dst.extents), ctx, c.sid)
    return [partitioned_for(k, c.dst.numel // per, r),
            f"  const int {e} = {k} * {per};" if per > 1 else f"  const int {e} = {k};",
            f"  eg_cp_async_{w}(&{dst}, &{src});",
            "}"]


@register_emitter(CpAsyncArrive, headers=HEADERS)
def cp_async_arrive(s: CpAsyncArrive, ctx: Ctx) -> list[str]:
    return [f"eg_cp_async_mbarrier_arrive_noinc({barrier_ref(s.barrier, s.stage, ctx)});"]
