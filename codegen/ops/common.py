"""Pieces of C every family of emitters uses (and a new instruction's emitter may): statement markers,
mbarrier references and region addresses."""

from __future__ import annotations

from egtile.ir.kernel import Expr, Region

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.exprs import emit, flat_index
from egtile.codegen.names import barrier_ident, ident


def sid_comment(sid: int | None) -> str:
    """The trailing ``// sid N`` marker that maps a generated line back to the user's statement
    (:func:`egtile.codegen.builder.build` uses it to locate NVRTC errors)."""
    return f"  // sid {sid}" if sid is not None else ""


def barrier_ref(name: str, stage: Expr, ctx: Ctx) -> str:
    """C pointer to ``name[stage]``, an mbarrier of the schedule (stage ``0`` for a single barrier).

    Raises:
        CodegenError: the schedule does not declare ``name``.
    """
    try:
        m = ctx.sched.barrier(name)
    except KeyError:
        raise codegen_error(ctx, f"mbarrier {name!r} is used but not declared in Scheduled.barriers") from None
    st = emit(stage, ctx) if m.stages > 1 else "0"
    return f"&{barrier_ident(m.name)}[{st}]"


def region_addr(region: Region, ctx: Ctx) -> str:
    """C pointer to the first element of ``region`` (of any buffer, in the kernel's layout)."""
    buf = ctx.buffer(region.buffer.name)
    return f"&{ident(buf.name)}[{flat_index(buf, tuple(emit(o, ctx) for o in region.offsets), ctx)}]"
