"""Per-thread asynchronous global -> shared copies (PTX ISA 9.7.9.25, ``cp.async``) and their mbarrier
arrival (9.7.9.25.3.3, ``cp.async.mbarrier.arrive.noinc``) as CUDA C++.

A ``cp_async`` ``Copy`` moves chunks of ``TileOp.width`` bytes (16, 8 or 4) of consecutive elements; chunk
``c`` belongs to rank ``c % count``. The width is the schedule's decision (``egtile.rules.copy``, from the
``cp-async-width`` oracle): the backend emits exactly it and never substitutes another instruction. It only
re-proves the width against the final shared-memory layout (:func:`width_holds`); a width it cannot prove
is an error naming the copy, not a fallback. The source's data pointer must be aligned to the chunk
(:func:`param_align`, checked by the launcher).
"""

from __future__ import annotations

from egtile.ir.dtypes import dtype
from egtile.ir.kernel import Copy
from egtile.ir.scheduled import CpAsyncArrive, ThreadRange, TileOp, unflatten_c

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.ops.common import barrier_ref
from egtile.codegen.ops.copy import check_copy, chunks_fit, region_ref
from egtile.codegen.registry import register_emitter
from egtile.codegen.threads import partitioned_for

CP_ASYNC_SIZES = (16, 8, 4)
HEADERS = ("egtile_cp_async.cuh",)


def width_holds(c: Copy, w: int, ctx: Ctx) -> bool:
    """Whether ``w``-byte ``cp.async`` chunks provably fit copy ``c`` in the final layout: a cp-size, and
    :func:`egtile.codegen.ops.copy.chunks_fit` (PTX ISA cp.async: both addresses aligned to cp-size)."""
    return w in CP_ASYNC_SIZES and chunks_fit(c, w, ctx)


def param_align(s: TileOp, ctx: Ctx) -> list[tuple[str, int]]:
    """A ``cp_async`` copy's global source is read in chunks: its pointer must be a multiple of the chunk."""
    if s.inst != "cp_async" or not isinstance(s.op, Copy) or not s.width:
        return []
    return [(s.op.src.buffer.name, s.width)]


def cp_async_copy(c: Copy, r: ThreadRange, ctx: Ctx, w: int) -> list[str]:
    """This thread's share of a ``cp_async`` copy in ``w``-byte chunks (see the module docstring)."""
    check_copy(c, ctx)
    src_scope, dst_scope = ctx.buffer(c.src.buffer.name).scope, ctx.buffer(c.dst.buffer.name).scope
    if src_scope != "global" or dst_scope not in ("shared", "fragment"):
        raise codegen_error(ctx, f"cp.async copies global -> shared only; got {c.src.buffer.name} ({src_scope}) "
                                 f"-> {c.dst.buffer.name} ({dst_scope})", c.sid)
    if c.src.clip or c.dst.clip:
        raise codegen_error(ctx, f"the schedule moves {c.src.buffer.name} -> {c.dst.buffer.name} with cp.async, but the "
                                 "copy runs past its tensor's edge, which egtile's cp.async emitter does not predicate "
                                 "(the cp-async-eligible oracle refuses such copies: a bug in egtile)", c.sid)
    if not width_holds(c, w, ctx):
        raise codegen_error(ctx, f"the schedule asks for {w}-byte cp.async chunks for {c.src.buffer.name} -> "
                                 f"{c.dst.buffer.name}, which the final layout does not provably align (the copy "
                                 "rules' cp-async-width oracle and the backend disagree: a bug in egtile)", c.sid)
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
