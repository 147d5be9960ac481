"""Errors the backend raises for schedules it cannot lower."""

from __future__ import annotations

from typing import TYPE_CHECKING

from egtile.errors import CodegenError, SourceLoc

if TYPE_CHECKING:
    from egtile.codegen.context import Ctx


def codegen_error(ctx: Ctx | None, message: str, sid: int | None = None) -> CodegenError:
    """A :class:`~egtile.errors.CodegenError` naming the kernel and, when known, the user's line."""
    loc: SourceLoc | None = None
    kernel = "?"
    if ctx is not None:
        kernel = ctx.sched.kernel.name
        loc = ctx.loc_of(sid) or ctx.sched.kernel.loc
    return CodegenError(f"kernel {kernel!r}: {message}", loc)
