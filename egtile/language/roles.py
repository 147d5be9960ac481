"""TileLang's per-thread form of hand-written warp specialization: ``tx = T.get_thread_binding()`` followed by
``if tx < 128: ... elif tx >= 128 and tx < 256: ... else: ...`` whose conditions select whole warpgroups.

TileLang writes a warp-specialized kernel in per-thread code: each branch of such an ``if`` is the code of one
role (the warpgroups whose threads take it), and barrier statements (``T.tma_copy(barrier=)``,
``T.mbarrier_arrive`` ...) outside every branch run on all the block's threads. egtile's hand-written protocol
names roles with ``with T.ws(g):`` (:mod:`egtile.language.barrier`); this module reads the per-thread form as
those roles, so both spellings trace to the same IR (:class:`~egtile.ir.protocol.RoleBlock`) and the verifier and
simulator check the same protocol:

* In a *protocol kernel* (one that allocated mbarriers with ``T.alloc_barrier`` before the statement), the
  thread region that ``T.get_thread_binding()`` opened (:mod:`egtile.language.threads`) is *suspended* at the
  first barrier statement, tile op or role condition at the region's own level: what the region holds so far
  stays per-thread code, and from there on the block's statements are block-level statements again, ``tx``
  the block's thread index (:func:`suspend_region`).
* A condition is a *role condition* when it depends on ``tx`` alone and, evaluated for every thread of the
  block, is the same on all 128 threads of each warpgroup (PTX ISA 9.7.19.1: a warpgroup is four consecutive
  warps, the unit that ``wgmma`` and ``setmaxnreg`` act on, and TileLang's roles are warpgroups): its then-branch
  is the role of the warpgroups where it holds (:func:`role_groups`). ``else`` / ``elif`` is the role of the
  remaining warpgroups (of the enclosing ``else``, for an ``elif`` chain), so a chain of conditions becomes one
  role per branch.
* After the suspension, any other use of ``tx`` (per-thread code inside a role, a condition on part of a
  warpgroup) is refused at its line: egtile does not yet mix per-thread code with roles
  (:func:`check_emit`).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

from egtile.errors import DSLError, EgtileError, SourceLoc, UnsupportedError
from egtile.ir.kernel import Const, Copy, Expr, Fill, Gemm, Reduce, Var
from egtile.ir.protocol import (
    WARPGROUP, BarrierAlloc, BarrierArrive, BarrierCopy, BarrierExpectTx, BarrierWait, RoleBlock,
)
from egtile.language import tracer

_TILE_OPS = (Copy, Fill, Gemm, Reduce, BarrierArrive, BarrierCopy, BarrierExpectTx, BarrierWait, RoleBlock)
"""Statements that suspend the thread region of a protocol kernel when they stand at its level without naming
the thread index: block-level work (a tile op, a barrier statement, a role)."""


def is_protocol_kernel(trace: tracer.Trace) -> bool:
    """Has the kernel being traced allocated mbarriers (``T.alloc_barrier``) at its top level?"""
    return bool(trace.frames) and any(isinstance(s, BarrierAlloc) for s in trace.frames[0].stmts)


def _thread_var(trace: tracer.Trace) -> str | None:
    """The name of the block's thread index, in a suspended region or an open one."""
    if trace.role_tid is not None:
        return trace.role_tid
    region = trace.region
    return region.var.name if region is not None else None


_SERIAL_FRAMES = ("T.serial", "T.unroll", "T.Pipelined", "T.Serial", "T.Unroll", "T.ws")


def _suspendable(trace: tracer.Trace) -> bool:
    """Is the thread region open with only serial loops (or roles) between it and the innermost frame? Those
    loops run the same iterations on every thread, so they can as well stand at block level around the roles."""
    region = trace.region
    if region is None or region.frame not in trace.frames:
        return False
    above = trace.frames[trace.frames.index(region.frame) + 1:]
    return all(f.kind in _SERIAL_FRAMES for f in above)


def suspend_region(trace: tracer.Trace) -> None:
    """End the open thread region at this point (module docstring): its statements so far stay one per-thread
    loop (none if it is empty), the serial loops open inside it move to the region's parent, and the block's
    thread index lives on as ``trace.role_tid``."""
    from egtile.language.threads import close_region

    region = trace.region
    assert region is not None and _suspendable(trace)
    var = region.var
    at = trace.frames.index(region.frame)
    above = trace.frames[at + 1:]
    del trace.frames[at + 1:]
    if region.frame.stmts:
        close_region(trace)
    else:
        trace.region = None
        trace.close(region.frame)
        trace.var_ranges.pop(var.name, None)
    trace.frames.extend(above)
    trace.role_tid = var.name


def maybe_suspend(trace: tracer.Trace, stmt: Any | None = None) -> bool:
    """Suspend the open thread region before a block-level statement (``stmt``, or a barrier call when
    ``None``) of a protocol kernel that stands at the region's own level or in serial loops inside it. Returns
    whether it did."""
    if not _suspendable(trace) or not is_protocol_kernel(trace):
        return False
    if stmt is not None and (not isinstance(stmt, _TILE_OPS) or _mentions(stmt, trace.region.var.name)):
        return False
    suspend_region(trace)
    return True


def _walk(obj: Any):
    if isinstance(obj, Var):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            yield from _walk(x)
    elif is_dataclass(obj) and not isinstance(obj, type):
        for f in fields(obj):
            if f.name != "loc":
                yield from _walk(getattr(obj, f.name))


def _mentions(stmt: Any, name: str) -> bool:
    return any(v.name == name for v in _walk(stmt))


def check_emit(trace: tracer.Trace, stmt: Any) -> None:
    """Refuse a statement that uses the thread index of a suspended region (module docstring).

    Raises:
        UnsupportedError: ``stmt`` mentions ``trace.role_tid``.
    """
    name = trace.role_tid
    if name is None or not _mentions(stmt, name):
        return
    loc = getattr(stmt, "loc", None) or tracer.user_loc()
    raise UnsupportedError(
        f"per-thread code on the thread index `{name}` in a hand-written warp-specialized kernel: egtile reads "
        f"`if {name} < 128:`-style conditions that select whole warpgroups as roles (T.ws), but not yet per-thread "
        "code inside or beside them (an index or a condition on part of a warpgroup); write that part as tile ops "
        "(T.copy, T.Parallel) of the role", loc)


def role_groups(cond: Expr, trace: tracer.Trace, universe: tuple[int, ...]) -> tuple[int, ...] | None:
    """The warpgroups of ``universe`` where ``cond`` holds, if ``cond`` is a role condition (module docstring);
    ``None`` when it is not one (it names another variable, memory, or splits a warpgroup)."""
    from egtile.analysis.access import free_vars
    from egtile.evaluate import evaluate

    name = _thread_var(trace)
    if name is None or free_vars(cond) != {name}:
        return None

    def no_load(*_: Any) -> Any:
        raise KeyError("load")

    groups = []
    for g in universe:
        try:
            vals = {bool(evaluate(cond, {name: t}, no_load)) for t in range(g * WARPGROUP, (g + 1) * WARPGROUP)}
        except (KeyError, EgtileError):
            return None
        if len(vals) != 1:
            return None
        if vals == {True}:
            groups.append(g)
    return tuple(groups)


def all_groups(trace: tracer.Trace) -> tuple[int, ...]:
    return tuple(range(trace.threads // WARPGROUP))


def enclosing_universe(trace: tracer.Trace) -> tuple[int, ...] | None:
    """The warpgroups a role condition opened here chooses among: all of them at block level, the remaining
    ones inside an ``else`` of a role chain, ``None`` inside a ``T.ws`` role (roles do not nest)."""
    for f in reversed(trace.frames):
        if f.kind == "T.ws":
            return f.groups
    return all_groups(trace)


def role_condition(cond: Expr, loc: SourceLoc | None) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """``(groups, universe)`` when ``if cond:`` opened here is a role (module docstring), else ``None``.
    Suspends the thread region first when it is.

    Raises:
        DSLError: a role condition that selects no warpgroup, or splits the block into parts that are not whole
            warpgroups (``threads`` not a multiple of 128).
    """
    trace = tracer.active()
    if trace is None or not trace.in_kernel or _thread_var(trace) is None or not is_protocol_kernel(trace):
        return None
    if trace.region is not None and not _suspendable(trace):
        return None  # inside a per-thread loop or branch: per-thread code, as before
    universe = enclosing_universe(trace)
    if not universe or trace.threads % WARPGROUP:
        return None
    groups = role_groups(cond, trace, universe)
    if groups is None:
        return None
    if trace.region is not None:
        suspend_region(trace)
    return groups, universe


def role_block(sid: int, groups: tuple[int, ...], body: tuple, loc: SourceLoc | None) -> list:
    """The statements of a role branch: a :class:`RoleBlock` for ``groups`` (nothing for no warpgroup or an
    empty body); a body that is itself only roles (an ``elif`` chain) is kept as those roles.

    Raises:
        UnsupportedError: a branch that mixes roles with other statements.
    """
    if not body:
        return []
    if all(isinstance(s, RoleBlock) for s in body):
        return list(body)
    if any(isinstance(s, RoleBlock) for s in body):
        raise UnsupportedError("an `else` of a warpgroup condition that holds both a nested warpgroup condition "
                               "and other statements: write one role per branch (`elif` for each)", loc)
    if not groups:
        raise DSLError("this branch of a warpgroup condition is taken by no warpgroup of the block (the condition "
                       "holds for all of them or none): its statements would never run", loc)
    return [RoleBlock(sid, Const(True, "bool"), body, (), loc, groups)]


__all__ = ["check_emit", "is_protocol_kernel", "maybe_suspend", "role_block", "role_condition", "role_groups",
           "suspend_region"]
