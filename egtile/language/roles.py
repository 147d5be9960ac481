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
* *Per-thread code inside a role* (TileLang's producer ``elif tx >= 256:`` computing ``(tx - 256) // 8``, storing
  per thread, branching on per-thread values, issuing ``T.ptx_cp_async``) runs once per thread of the role, as in
  TileLang: when the role closes, each maximal run of its statements that are per-thread (they use ``tx``, issue a
  ``T.ptx_cp_async``, or compute a per-thread variable from per-thread data) and hold no block-level work becomes
  one ``T.Parallel`` loop over the role's threads, ``tx`` the thread's block-wide index (the loop's variable is the
  rank ``r`` and ``tx`` reads as ``r + begin``; :func:`per_thread_role_body`). The protocol lowering partitions
  such a loop one iteration per thread of the role, so the verifier and the simulator see each thread's accesses
  (its owner) like any partitioned loop's. A serial loop or a branch that holds both per-thread code and barrier
  statements or tile ops stays at the role's level when its bounds or condition do not use ``tx``, and is split
  inside; tile ops and barrier statements *inside* per-thread code (under a loop or branch on ``tx`` or a
  per-thread value) are refused at their line: a barrier statement there would run on some threads only, and a
  tile op is the role's cooperative work.
* Beside the roles (at block level, after the suspension), any other use of ``tx`` is refused at its line
  (:func:`check_emit`).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any

from egtile.errors import DSLError, EgtileError, SourceLoc, UnsupportedError
from egtile.ir.kernel import Const, Copy, Expr, Fill, Gemm, Reduce, Var
from egtile.ir.protocol import (
    PROTOCOL_LEAVES, WARPGROUP, BarrierAlloc, BarrierArrive, BarrierCopy, BarrierExpectTx, BarrierWait, CpAsync,
    CpAsyncArriveNoinc, RoleBlock,
)
from egtile.language import tracer

_TILE_OPS = (Copy, Fill, Gemm, Reduce, BarrierArrive, BarrierCopy, BarrierExpectTx, BarrierWait, RoleBlock,
             CpAsyncArriveNoinc)
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
    if in_role(trace):
        if isinstance(stmt, _BLOCK_LEVEL) and not isinstance(stmt, CpAsync):
            raise UnsupportedError(
                f"{_what(stmt)} whose operands use the thread index `{name}` inside a warpgroup role: per-thread code "
                "of a role runs once per thread, but a tile op is the role's cooperative work and a barrier statement "
                "names one barrier for all its threads; index it by block-level values, or write the per-thread part "
                "as element statements", loc)
        return  # per-thread code of the role: one T.Parallel loop over its threads (per_thread_role_body)
    raise UnsupportedError(
        f"per-thread code on the thread index `{name}` beside the warpgroup roles of a hand-written warp-specialized "
        f"kernel: egtile reads `if {name} < 128:`-style conditions that select whole warpgroups as roles (T.ws) and "
        "runs per-thread code inside a role once per thread of the role, but not at block level beside the roles; "
        "move it into a role, or write it as tile ops (T.copy, T.Parallel)", loc)


_BLOCK_LEVEL = (Copy, Fill, Gemm, Reduce, BarrierCopy, RoleBlock) + PROTOCOL_LEAVES
"""Statements that are the role's (or the block's) work, not one thread's: never inside per-thread code."""


def in_role(trace: tracer.Trace) -> bool:
    """Is a statement being traced inside a warpgroup role (``T.ws`` or a role condition)?"""
    return any(f.kind == "T.ws" for f in trace.frames)


def _what(s: Any) -> str:
    from egtile.ir.protocol import format_protocol

    text = format_protocol(s)
    if text is not None:
        return f"`{text.split('(')[0]}`" if "(" in text else f"`{text}`"
    return {Copy: "T.copy", Fill: "T.fill", Gemm: "T.gemm", Reduce: "T.reduce_*"}.get(type(s), type(s).__name__)


def _block_level_inside(s: Any) -> Any | None:
    """The first statement under ``s`` (itself included) that is block-level work (a tile op, a barrier statement,
    a role, a ``T.Parallel`` loop), or ``None``."""
    from egtile.ir.kernel import For, walk

    for x in walk((s,)):
        if isinstance(x, _BLOCK_LEVEL) and not isinstance(x, CpAsync):
            return x
        if isinstance(x, For) and x.kind == "parallel":
            return x
    return None


def _local_writes(s: Any) -> set[str] | None:
    """The per-thread (``local``) buffers ``s`` writes, or ``None`` when it writes anything else."""
    from egtile.analysis.access import writes

    out = set()
    for a in writes(s):
        if getattr(a, "scope", None) != "local":
            return None
        out.add(a.buffer)
    return out


def per_thread_role_body(body: tuple, groups: tuple[int, ...], trace: tracer.Trace | None) -> tuple:
    """``body`` of the role of warpgroups ``groups`` with its per-thread code as ``T.Parallel`` loops over the role's
    threads (module docstring). A statement is per-thread when it uses the thread index, is or holds a
    ``T.ptx_cp_async``, or only writes per-thread variables (``local`` buffers) from data that differs between the
    threads (a per-thread variable or buffer written by per-thread code of this role).

    Raises:
        UnsupportedError: a tile op or barrier statement inside per-thread code, at its line.
    """
    from egtile.analysis.access import reads, writes
    from egtile.ir.kernel import BinOp, For, If, walk
    from egtile.lower.irmap import substitute

    name = _thread_var(trace) if trace is not None else None
    if name is None or not groups or not body:
        return body
    stmts = list(walk(body))
    direct = [x for x in stmts if _mentions(x, name) or isinstance(x, CpAsync)]
    if not direct:
        return body
    begin, count = groups[0] * WARPGROUP, len(groups) * WARPGROUP
    varying: set[str] = set()  # buffers whose data differs between the role's threads
    for x in direct:
        varying |= {a.buffer for a in writes(x)}
    changed = True
    while changed:
        changed = False
        for x in stmts:
            lw = _local_writes(x)
            if lw and not lw <= varying and any(a.buffer in varying for a in reads(x)):
                varying |= lw
                changed = True

    def per_thread(s: Any) -> bool:
        for x in walk((s,)):
            if _mentions(x, name) or isinstance(x, CpAsync):
                return True
            lw = _local_writes(x)
            # a per-thread variable's every write is per-thread, its initialization by a constant too (one copy per
            # thread: written once at the role's level, the threads' loop would carry one thread's value to the next)
            if lw and not isinstance(x, (For, If)) and (lw & varying or any(a.buffer in varying for a in reads(x))):
                return True
        return False

    rank = Var(trace.fresh_var_name(f"{name}_rank", "rank"))
    tid = rank if begin == 0 else BinOp("+", rank, Const(begin, "int32"))  # the thread's block-wide index

    def loop(run: list) -> Any:
        inner = tuple(substitute(x, {name: tid}) for x in run)
        loc = getattr(run[0], "loc", None)
        return For(trace.sid(), rank, Const(0, "int32"), Const(count, "int32"), "parallel", inner, 0, loc)

    def split(stmts: tuple) -> tuple:
        out: list = []
        run: list = []
        for s in stmts:
            if not per_thread(s):
                if run:
                    out.append(loop(run))
                    run = []
                out.append(s)
                continue
            block = _block_level_inside(s)
            if block is None:
                run.append(s)
                continue
            if run:
                out.append(loop(run))
                run = []
            if isinstance(s, For) and s.kind != "parallel" and not any(
                    _mentions(e, name) for e in (s.start, s.stop)):
                out.append(replace(s, body=split(s.body)))
            elif isinstance(s, If) and not isinstance(s, RoleBlock) and not _mentions(s.cond, name) \
                    and not _reads_varying(s.cond, varying):
                out.append(replace(s, then_body=split(s.then_body), else_body=split(s.else_body)))
            else:
                loc = getattr(block, "loc", None) or getattr(s, "loc", None)
                raise UnsupportedError(
                    f"{_what(block)} inside per-thread code of a warpgroup role (a loop or branch whose bounds or "
                    f"condition differ between the role's threads, or a T.Parallel loop among per-thread statements): "
                    "per-thread code runs once per thread, but a barrier statement must be reached by every thread "
                    "that the barrier's arrival count and waits assume, and a tile op is the role's cooperative work; "
                    "move it out of the per-thread loop or branch", loc)
        if run:
            out.append(loop(run))
        return tuple(out)

    return split(tuple(body))


def _reads_varying(e: Any, varying: set[str]) -> bool:
    from egtile.analysis.access import walk_expr
    from egtile.ir.kernel import Load

    return any(isinstance(x, Load) and x.buffer.name in varying for x in walk_expr(e))


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
    body = per_thread_role_body(tuple(body), groups, tracer.active())
    return [RoleBlock(sid, Const(True, "bool"), body, (), loc, groups)]


__all__ = ["check_emit", "in_role", "is_protocol_kernel", "per_thread_role_body", "maybe_suspend", "role_block", "role_condition", "role_groups",
           "suspend_region"]
