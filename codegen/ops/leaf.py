"""Scalar statements (:class:`~egtile.ir.scheduled.Leaf`) as CUDA C++: one line per thread that reaches it."""

from __future__ import annotations

from egtile.ir.dtypes import dtype
from egtile.ir.kernel import AtomicAdd, Extern, Store
from egtile.ir.scheduled import Leaf

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.exprs import element, emit, emit_as
from egtile.codegen.ops.common import sid_comment
from egtile.codegen.registry import register_emitter


@register_emitter(Leaf, headers=("egtile_common.cuh",))
def leaf(s: Leaf, ctx: Ctx) -> list[str]:
    match s.stmt:
        case Store(sid=sid, buffer=b, indices=idx, value=v):
            t = dtype(ctx.buffer(b.name).dtype).name
            return [f"{element(b.name, idx, ctx)} = {emit_as(v, t, ctx)};{sid_comment(sid)}"]
        case AtomicAdd(sid=sid, buffer=b, indices=idx, value=v):
            t = dtype(ctx.buffer(b.name).dtype).name
            return [f"atomicAdd(&{element(b.name, idx, ctx)}, {emit_as(v, t, ctx)});{sid_comment(sid)}"]
        case Extern(sid=sid, name=name, args=args):
            return [f"{name}({', '.join(emit(a, ctx) for a in args)});{sid_comment(sid)}"]
    raise codegen_error(ctx, f"unknown leaf statement {type(s.stmt).__name__}")
