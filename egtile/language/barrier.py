"""Hand-written warp specialization, TileLang's API: ``T.alloc_barrier``, ``T.ws``, ``T.mbarrier_wait_parity`` /
``T.barrier_wait``, ``T.mbarrier_arrive`` / ``T.barrier_arrive``, ``T.mbarrier_expect_tx``,
``T.mbarrier_arrive_expect_tx`` and ``T.tma_copy(..., barrier=)``.

Names, argument order and defaults are TileLang's (``tilelang/language/allocate.py``, ``builtin.py``,
``copy_op.py``, ``tilelang/cuda/language/warpgroup.py``). Semantics:

* ``bars = T.alloc_barrier(arrive_count)``: one mbarrier (an int) or one per list element, each initialized
  with its arrival count; ``bars[i]`` names barrier ``i`` (an expression), ``bars`` alone barrier 0.
* ``with T.ws(g, ...):``: the body runs on warpgroups ``g, ...`` only (threads ``[128 g, 128 g + 128)``);
  tile ops inside are run cooperatively by those threads.
* ``T.mbarrier_wait_parity(bar, parity)``: every thread that reaches it waits for the phase of that parity;
  ``T.mbarrier_arrive(bar)``: one arrival per thread that reaches it.
* ``T.tma_copy(src, dst, barrier=bar)`` (global -> shared): the role's first thread expects ``dst``'s bytes on
  ``bar`` and issues the TMA load; nothing waits (the user waits on ``bar``).

The protocol is the user's: egtile schedules such a kernel as written (no e-graph re-scheduling of the roles
or barriers), and its verifier and simulator check the protocol (:mod:`egtile.lower.protocol`). Errors
point at the user's line.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from egtile.errors import DSLError, ShapeError, SourceLoc, UnsupportedError
from egtile.ir.kernel import Const, Copy, Expr, Load, Region
from egtile.ir.protocol import (
    WARPGROUP, BarrierAlloc, BarrierArrive, BarrierCopy, BarrierExpectTx, BarrierWait, RoleBlock,
)
from egtile.language import roles, tracer
from egtile.language.expr import Value, as_expr
from egtile.language.buffer import bounds, check_region
from egtile.language.operand import operand, resolve_pair

_MAX_BARRIERS = 1024  # 8 bytes each: far below shared memory; a larger list is a typo, not a protocol
_MAX_ARRIVE_COUNT = (1 << 20) - 1
"""The largest expected arrival count an mbarrier holds (its pending count is a 20-bit field)."""


class BarrierArray:
    """What ``T.alloc_barrier`` returns: ``len(counts)`` mbarriers; ``bars[i]`` is barrier ``i``."""

    def __init__(self, name: str, counts: tuple[int, ...], trace: tracer.Trace) -> None:
        self.name, self.counts, self._trace = name, counts, trace

    def __getitem__(self, index: Any) -> BarrierRef:
        loc = tracer.user_loc()
        if isinstance(index, tuple) or isinstance(index, slice):
            raise DSLError(f"{self.name}[...]: a barrier array takes one index, got {index!r}", loc)
        idx = as_expr(index)
        if isinstance(idx, Const) and not 0 <= int(idx.value) < len(self.counts):
            raise ShapeError(f"{self.name}[{idx.value}]: the barrier array has {len(self.counts)} barriers", loc)
        return BarrierRef(self, idx)

    def __len__(self) -> int:
        return len(self.counts)

    def __repr__(self) -> str:
        return f"<barriers {self.name} counts={list(self.counts)}>"


class BarrierRef:
    """One barrier of a :class:`BarrierArray`: ``bars[i]``."""

    def __init__(self, array: BarrierArray, index: Expr) -> None:
        self.array, self.index = array, index

    def __repr__(self) -> str:
        return f"<barrier {self.array.name}[{self.index}]>"


def _ref(x: Any, what: str, loc: SourceLoc | None) -> tuple[str, Expr]:
    """``x`` (a barrier array or one of its barriers) as ``(array name, index)``."""
    if isinstance(x, BarrierRef):
        arr, idx = x.array, x.index
    elif isinstance(x, BarrierArray):
        arr, idx = x, Const(0)
    else:
        raise DSLError(f"{what}: the barrier must come from T.alloc_barrier (bars or bars[i]), got "
                       f"{type(x).__name__} {x!r}", loc)
    if arr._trace is not tracer.current(what):
        raise DSLError(f"{what}: barrier {arr.name} belongs to another prim_func", loc)
    return arr.name, idx


def _static_int(v: Any, what: str, arg: str, loc: SourceLoc | None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        e = as_expr(v) if isinstance(v, Value) else None
        if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
            return int(e.value)
        from egtile.ir.kernel import Var

        hint = (f" (`{e.name}` is a loop variable: in a kernel with barriers `for {e.name} in range(...)` is a serial loop "
                f"on the GPU, as in TileLang; unroll it while tracing with `for {e.name} in list(range(...))`)"
                if isinstance(e, Var) else "")
        raise DSLError(f"{what}: {arg} must be a Python int known when the kernel is traced, got {v!r}{hint}", loc)
    return v


def _begin(what: str) -> tuple[tracer.Trace, SourceLoc | None]:
    loc = tracer.user_loc()
    trace = tracer.current(what)
    trace.require_kernel(what)
    if trace.region is not None and trace.region.frame in trace.frames and not roles.maybe_suspend(trace):
        raise UnsupportedError(f"{what} inside a loop or branch of per-thread code (after T.get_thread_binding()): "
                               "egtile reads barrier statements beside per-thread code, and in branches on "
                               "conditions that select whole warpgroups (`if tx < 128:`), or `with T.ws(g):`, as "
                               "roles; not inside a per-thread loop or a branch on part of a warpgroup", loc)
    return trace, loc


def in_protocol_kernel() -> bool:
    """Is a kernel being traced that has allocated mbarriers (``T.alloc_barrier``)? Then a Python ``range`` loop
    is a serial loop, as in TileLang: the rounds of a barrier protocol must be loop iterations, which the
    verifier tells apart (:func:`egtile.lower.protocol._check_not_unrolled`)."""
    trace = tracer.active()
    if trace is None or not trace.in_kernel or not trace.frames:
        return False
    return any(isinstance(s, BarrierAlloc) for s in trace.frames[0].stmts)


def alloc_barrier(arrive_count: int | list[int]) -> BarrierArray:
    """``T.alloc_barrier(arrive_count)``: mbarriers initialized with these arrival counts (one per element of
    a list; an int is one barrier), phase 0, before the block's first statement (PTX ISA 9.7.13.15.9).

    Raises:
        DSLError: a count that is not a positive int known at trace time, an empty list, or the call
            inside a loop, a branch or a ``T.ws`` block (barriers belong to the whole block).
    """
    trace, loc = _begin("T.alloc_barrier")
    counts_in = [arrive_count] if not isinstance(arrive_count, (list, tuple)) else list(arrive_count)
    counts = tuple(_static_int(c, "T.alloc_barrier", "arrive_count", loc) for c in counts_in)
    if not counts or len(counts) > _MAX_BARRIERS:
        raise DSLError(f"T.alloc_barrier: between 1 and {_MAX_BARRIERS} barriers, got {len(counts)}", loc)
    if any(not 1 <= c <= _MAX_ARRIVE_COUNT for c in counts):
        # a thread may arrive several times per phase (from a loop), so the block's thread count is no bound
        raise DSLError(f"T.alloc_barrier: every arrive_count must be between 1 and {_MAX_ARRIVE_COUNT} (mbarrier.init, "
                       f"PTX ISA 9.7.13.15.9), got {list(counts)}", loc)
    if len(trace.frames) != 1:
        raise DSLError("T.alloc_barrier must be at the top level of the T.Kernel body (the block initializes its "
                       "barriers once, before its first statement)", loc)
    name = trace.fresh_buffer_name(tracer.assign_target_name(loc), "mbar")
    trace.emit(BarrierAlloc(trace.sid(), name, counts, loc), "T.alloc_barrier")
    return BarrierArray(name, counts, trace)


def mbarrier_wait_parity(mbarrier: Any, parity: Any) -> None:
    """``T.mbarrier_wait_parity(mbarrier, parity)``: wait until the phase of parity ``parity`` (0 or 1; an
    expression, taken modulo 2 as the hardware does) of the barrier has completed."""
    trace, loc = _begin("T.mbarrier_wait_parity")
    name, idx = _ref(mbarrier, "T.mbarrier_wait_parity", loc)
    trace.emit(BarrierWait(trace.sid(), name, idx, as_expr(parity), loc), "T.mbarrier_wait_parity")


def barrier_wait(mbarrier: Any, parity: Any) -> None:
    """``T.barrier_wait(mbarrier, parity)``: TileLang's spelling of :func:`mbarrier_wait_parity`."""
    mbarrier_wait_parity(mbarrier, parity)


def mbarrier_arrive(mbarrier: Any, cta_id: Any = None) -> None:
    """``T.mbarrier_arrive(mbarrier)``: one arrival on the barrier per thread that runs it.

    Raises:
        UnsupportedError: ``cta_id`` (a cluster barrier of another block).
    """
    trace, loc = _begin("T.mbarrier_arrive")
    if cta_id is not None:
        raise UnsupportedError("T.mbarrier_arrive(cta_id=...): thread-block clusters are not supported yet", loc)
    name, idx = _ref(mbarrier, "T.mbarrier_arrive", loc)
    trace.emit(BarrierArrive(trace.sid(), name, idx, loc), "T.mbarrier_arrive")


def barrier_arrive(mbarrier: Any) -> None:
    """``T.barrier_arrive(mbarrier)``: TileLang's spelling of :func:`mbarrier_arrive`."""
    mbarrier_arrive(mbarrier)


def _expect(mbarrier: Any, tx: Any, arrive: bool, what: str) -> None:
    trace, loc = _begin(what)
    name, idx = _ref(mbarrier, what, loc)
    n = _static_int(tx, what, "tx", loc)
    if n < 0:
        raise DSLError(f"{what}: tx is a byte count, got {n}", loc)
    trace.emit(BarrierExpectTx(trace.sid(), name, idx, n, arrive, loc), what)


def mbarrier_expect_tx(mbarrier: Any, tx: int) -> None:
    """``T.mbarrier_expect_tx(mbarrier, tx)``: ``tx`` more transaction bytes in the barrier's current phase,
    per thread that runs it, without an arrival (``mbarrier.expect_tx``, PTX ISA 9.7.13.15.11)."""
    _expect(mbarrier, tx, False, "T.mbarrier_expect_tx")


def mbarrier_arrive_expect_tx(mbarrier: Any, tx: int) -> None:
    """``T.mbarrier_arrive_expect_tx(mbarrier, tx)``: expect ``tx`` bytes and arrive, per thread that runs it
    (``mbarrier.arrive.expect_tx``, PTX ISA 9.7.13.15.13)."""
    _expect(mbarrier, tx, True, "T.mbarrier_arrive_expect_tx")


class WarpSpecialize:
    """``with T.ws(*warp_group_idx):`` (``T.WarpSpecialize``): the body runs on those warpgroups only."""

    def __init__(self, *warp_group_idx: Any) -> None:
        self.trace, self.loc = _begin("T.ws")
        groups = []
        for g in warp_group_idx:
            if isinstance(g, (list, tuple)):
                raise UnsupportedError(f"T.ws({list(g)!r}): egtile's T.ws takes warpgroup indices, e.g. T.ws(0, 1)",
                                       self.loc)
            groups.append(_static_int(g, "T.ws", "a warpgroup index", self.loc))
        if not groups:
            raise DSLError("T.ws(): name at least one warpgroup", self.loc)
        n = self.trace.threads // WARPGROUP
        if self.trace.threads % WARPGROUP:
            raise DSLError(f"T.ws needs whole warpgroups: T.Kernel(threads={self.trace.threads}) is not a multiple of "
                           f"{WARPGROUP}", self.loc)
        bad = [g for g in groups if not 0 <= g < n]
        if bad:
            raise DSLError(f"T.ws({', '.join(map(str, groups))}): the block's {self.trace.threads} threads have "
                           f"warpgroups 0..{n - 1}", self.loc)
        g = sorted(set(groups))
        if g != list(range(g[0], g[-1] + 1)):
            raise UnsupportedError(f"T.ws({', '.join(map(str, groups))}): only consecutive warpgroups (one thread "
                                   "range) are supported", self.loc)
        if any(f.kind == "T.ws" for f in self.trace.frames):
            raise UnsupportedError("T.ws inside T.ws: nested role blocks are not supported", self.loc)
        self.groups = tuple(g)
        self.frame: tracer.Frame | None = None
        self.sid = 0

    def __enter__(self) -> None:
        self.sid = self.trace.sid()
        self.frame = self.trace.open("T.ws", self.loc)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            return
        assert self.frame is not None
        body = roles.per_thread_role_body(self.trace.close(self.frame), self.groups, self.trace)
        self.trace.emit(RoleBlock(self.sid, Const(True, "bool"), body, (), self.loc, self.groups), "T.ws")


ws = WarpSpecialize


def fence_proxy_async() -> None:
    """``T.fence_proxy_async()``: order this thread's generic-proxy shared-memory writes before later async-proxy
    accesses (``fence.proxy.async.shared::cta``, PTX ISA 9.7.13.19). Accepted and nothing to add: in a
    hand-written protocol the only async-proxy operations are egtile's own TMA copies (``T.wgmma_gemm`` runs as
    a ``T.gemm`` of the role's threads), and egtile places the fences those need itself (the verifier's L6
    checks every one), so the user's fence orders nothing egtile does not already order."""
    _begin("T.fence_proxy_async")


def _tma_box(r: Region, loc: SourceLoc | None, trace: tracer.Trace) -> Region:
    """The global source box of a TMA load: it must start inside the tensor in every dimension, and may run past
    its end (then it is marked ``Region.clip``).

    Past the end is the TMA unit's own semantics: the box elements outside the tensor map's global dimensions are
    zero-filled (CUDA driver API, ``cuTensorMapEncodeTiled``, ``CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE``) and still
    count toward the mbarrier's transaction bytes (PTX ISA 9.7.9.27, ``cp.async.bulk.tensor``: the whole box
    completes), so the ``expect_tx`` of the whole box egtile emits stays right: the ragged last K tile of a GEMM
    (K = 56, a 16-wide box). Every executor zero-fills the clipped elements (:mod:`egtile.sim.ops.tma`,
    :mod:`egtile.interp`); the generated tensor map has the tensor's own dimensions. A box that starts outside
    the tensor is refused: it loads nothing of the tensor, which is a wrong start, not a ragged edge.

    Raises:
        ShapeError: an extent below 1 or above the dimension, or a start that can lie outside the dimension
            (over the loop and block variables' ranges).
    """
    ranges = trace.var_ranges if trace.guard_depth == 0 else {}
    from egtile.ir.printer import format_expr

    clip = False
    for dim, (off, ext, size) in enumerate(zip(r.offsets, r.extents, r.buffer.shape)):
        if ext > size or ext < 1:
            raise ShapeError(f"T.tma_copy ({r.buffer.name}): extent {ext} in dimension {dim} of {r.buffer.name} is "
                             f"outside 1..{size} (buffer shape {r.buffer.shape})", loc)
        b = bounds(off, ranges)
        if b is not None and (b[0] < 0 or b[1] > size - 1):
            span = f"{b[0]}..{b[1]}" if b[0] != b[1] else f"{b[0]}"
            raise ShapeError(
                f"T.tma_copy ({r.buffer.name}): the TMA box starts outside {r.buffer.name} in dimension {dim}: its "
                f"start `{format_expr(off)}` takes {span}; expected 0..{size - 1} (buffer shape {r.buffer.shape}). "
                "A box may run past the tensor's end (the TMA unit zero-fills that part), but it must start inside",
                loc)
        inner = bounds(off, trace.var_ranges)  # a guard only narrows the ranges: sound inside T.If too
        if inner is None or inner[0] < 0 or inner[1] + ext > size:
            clip = True
    return replace(r, clip=True) if clip else r


def tma_copy(src: Any, dst: Any, *, barrier: Any = None, cluster_mask: Any = None, leader_scope_threads: Any = None,
             eviction_policy: Any = None, annotations: Any = None) -> None:
    """``T.tma_copy(src, dst, barrier=bar)``: a TMA tile load from global to shared memory that does not wait:
    the first thread of the ``T.ws`` role (of the block outside one) expects ``dst``'s bytes on ``bar`` and
    issues it; the load completes them (PTX ISA 9.7.9.27). Wait on ``bar`` before reading ``dst``.

    Without ``barrier``, a shared -> global copy is TileLang's TMA store; egtile runs it as a ``T.copy`` with
    ``prefer_instruction="tma"`` (which also waits for it, a stronger order than TileLang's).

    The global box of a load may run past the tensor's end, never start outside it (:func:`_tma_box`).

    Raises:
        DSLError: a load without ``barrier``, a load that is not global -> shared, or extents that differ.
        ShapeError: a load's box that can start outside its tensor; a shared region out of its buffer.
        UnsupportedError: ``cluster_mask`` (clusters).
    """
    trace, loc = _begin("T.tma_copy")
    if cluster_mask is not None:
        raise UnsupportedError("T.tma_copy(cluster_mask=...): thread-block clusters are not supported yet", loc)
    if leader_scope_threads is not None:
        raise UnsupportedError("T.tma_copy(leader_scope_threads=...): egtile issues the load from the role's first "
                               "thread only", loc)
    a = operand(src, "T.tma_copy", "src", loc)
    b = operand(dst, "T.tma_copy", "dst", loc)
    if isinstance(a, Load) and isinstance(b, Load):
        raise DSLError("T.tma_copy: copy a tile (a region or a buffer), not one element", loc)
    ra, rb = resolve_pair(a, b, "T.tma_copy", loc, check=False)
    if barrier is not None and ra.buffer.scope == "global":
        ra = _tma_box(ra, loc, trace)
    else:
        check_region(ra.buffer, ra.offsets, ra.extents, f"T.tma_copy ({ra.buffer.name})", loc)
    check_region(rb.buffer, rb.offsets, rb.extents, f"T.tma_copy ({rb.buffer.name})", loc)
    if ra.squeezed != rb.squeezed:
        raise ShapeError(f"T.tma_copy: src {ra.buffer.name} region extents {ra.extents} and dst {rb.buffer.name} "
                         f"region extents {rb.extents} differ", loc)
    if barrier is None:
        if ra.buffer.scope == "global":
            raise DSLError("T.tma_copy: a load from global memory needs barrier= (an mbarrier from "
                           "T.alloc_barrier, which the load completes and which you wait on)", loc)
        trace.emit(Copy(trace.sid(), ra, rb, "tma", loc), "T.tma_copy")
        return
    if ra.buffer.scope != "global" or rb.buffer.scope != "shared":
        raise DSLError(f"T.tma_copy(..., barrier=): a TMA load copies global memory into shared memory, got "
                       f"{ra.buffer.scope} {ra.buffer.name} -> {rb.buffer.scope} {rb.buffer.name}", loc)
    name, idx = _ref(barrier, "T.tma_copy", loc)
    trace.emit(BarrierCopy(trace.sid(), ra, rb, "tma", loc, name, idx), "T.tma_copy")


__all__ = [
    "BarrierArray", "BarrierRef", "WarpSpecialize", "alloc_barrier", "barrier_arrive", "barrier_wait", "fence_proxy_async",
    "mbarrier_arrive", "mbarrier_arrive_expect_tx", "mbarrier_expect_tx", "mbarrier_wait_parity", "tma_copy", "ws",
]
