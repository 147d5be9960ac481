"""The warpgroup handshake nodes (:mod:`egtile.ir.handshake`) as CUDA C++: per warpgroup of the role,
``bar.sync id, count`` / ``bar.arrive id, count`` (PTX ISA 9.7.13.4), chosen by the thread's warpgroup
(warp-uniform, as ``bar`` requires)."""

from __future__ import annotations

from egtile.ir.handshake import WARPGROUP, NamedArrive, NamedSync, WarpgroupBarrier

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.ops.common import sid_comment
from egtile.codegen.ops.pin import pin_lines, pin_needs
from egtile.codegen.registry import register_emitter

SYNC = ("egtile_sync.cuh",)


def _emit(s: WarpgroupBarrier, ctx: Ctx, fn: str, before: list[str] = ()) -> list[str]:
    """Per warpgroup of ``s`` that takes part, guarded by its threads: ``before`` (a pin), then ``fn(id, count)``."""
    if s.count % 32 or any(i is not None and not 0 <= i < 16 for i in s.ids):
        raise codegen_error(ctx, f"named barrier {s.ids} over {s.count} threads; bar needs ids in 0..15 and a "
                                 "multiple of 32 threads (PTX ISA 9.7.13.4)")
    out = []
    for w, i in enumerate(s.ids):
        if i is None:
            continue
        lo = s.base + WARPGROUP * w
        guard = f"if (eg_tid >= {lo} && eg_tid < {lo + WARPGROUP})"
        if before:
            out += [f"{guard} {{{sid_comment(s.sid)}", *(f"  {b}" for b in before), f"  {fn}({i}u, {s.count}u);", "}"]
        else:
            out.append(f"{guard} {fn}({i}u, {s.count}u);{sid_comment(s.sid)}")
    return out


@register_emitter(NamedSync, headers=SYNC, needs=pin_needs)
def named_sync(s: NamedSync, ctx: Ctx) -> list[str]:
    return _emit(s, ctx, "eg_named_barrier_sync", pin_lines(s, ctx))


@register_emitter(NamedArrive, headers=SYNC)
def named_arrive(s: NamedArrive, ctx: Ctx) -> list[str]:
    return _emit(s, ctx, "eg_named_barrier_arrive")
