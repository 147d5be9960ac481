"""Loops: ``T.Parallel``, ``T.Pipelined``, ``T.serial`` / ``T.Serial``, ``T.unroll`` / ``T.Unroll``.

Tracing a loop: ``for v in T.Parallel(n):`` yields one symbolic index once, records the body the Python
``for`` runs, then closes it into an ``ir.For``. The loop variable is named after the Python target
(``for ko in ...`` gives ``ko``), made unique within the kernel (a second ``i`` becomes ``i_1``).

Notes on semantics and constraints:

* ``T.Parallel(*extents)``: a nest of ``parallel`` loops whose iterations are independent and may run
  in any order on any threads. Rationale: the scheduler maps it onto threads (partitioned, or
  replicated when the body's effect is thread-local), so a body that depends on iteration order is a
  bug the simulator reports, not something egtile orders for you. Extents must be static.
* ``T.Pipelined(n | start, stop, num_stages=S)``: serial semantics; with ``S > 0`` the scheduler may keep
  ``S`` versions of the shared buffers the body fills and overlap copies with compute (software
  pipelining or producer/consumer warp specialization). ``num_stages=0`` is a plain serial loop, as in
  TileLang. TileLang's manual schedule (``order``, ``stage``, ``group``, ``sync``: each scheduled statement's
  emission order, pipeline stage and grouping) is a hint: it changes when statements run, never what they compute.
  egtile checks its form and ignores it, choosing the loop's schedule in the e-graph, and ``explain()`` says so
  (when ``num_stages`` is omitted, egtile infers ``max(stage) + 1`` stages from ``stage`` as TileLang does, and
  ``explain()`` says so).
* ``T.serial`` / ``T.unroll``: serial loops with step 1. Python's ``range`` over ints inside a kernel
  unrolls while tracing, which has the same meaning.
* A start read from tensor data (``T.Pipelined(cu[b], stop)``: varlen attention) is a loop over the trip count
  ``max(stop - start, 0)`` from 0 whose handle is ``start + k``, as a stepped loop's: the IR's loops start where
  the block knows their start (:mod:`egtile.verifier.tripcount` checks the count as any runtime trip count).
* ``break``, ``continue`` and ``return`` inside a traced loop cannot be traced (the body runs once);
  leaving a loop early raises :class:`DSLError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from egtile.errors import DSLError, UnsupportedError
from egtile.ir.kernel import Const, Expr, For, LoopKind, Var
from egtile.language import letbind, tracer
from egtile.language.buffer import static_value
from egtile.language.expr import IntImm, Value, as_expr
from egtile.language.expr import max as expr_max
from egtile.verifier.loads import loads_in  # a pure walk of ir.kernel expressions

_FALLBACK = ("i", "j", "k", "l", "m", "n")


def _bound(x: Any, what: str, loc) -> Expr:
    if isinstance(x, IntImm):
        return Const(int(x), "int32")
    convert = getattr(x, "_egtile_value", None)
    if convert is not None:  # a T.alloc_var used as a bound: its value, read when the loop starts
        x = convert()
    if isinstance(x, bool) or not isinstance(x, (int, Value)):
        raise DSLError(f"{what}: loop bounds must be ints or integer expressions, got {type(x).__name__} {x!r}", loc)
    return as_expr(x, "int32")


class _LoopNest:
    """An iterable that records a nest of ``For`` loops around the body of the Python ``for``."""

    def __init__(self, kind: LoopKind, bounds: list[tuple[Expr, Expr]], what: str, num_stages: int = 0,
                 name: str | None = None) -> None:
        self.loc = tracer.user_loc()
        self.name = name  # the variable's name when no `for <name> in` stands on the line (a counted `while`)
        self.trace = tracer.current(what)
        self.kind = kind
        self.bounds = bounds
        self.what = what
        self.num_stages = num_stages
        self.used = False

    def __iter__(self) -> Iterator[Any]:
        trace, loc = self.trace, self.loc
        if self.used:
            raise DSLError(f"a {self.what} loop object can be iterated only once", loc)
        self.used = True
        trace.require_kernel(self.what)
        depth = len(self.bounds)
        wanted = tracer.for_target_names(loc, depth) or [self.name] * depth
        levels = []
        for d, ((start, stop), w) in enumerate(zip(self.bounds, wanted)):
            var = Var(trace.fresh_var_name(w, _FALLBACK[d % len(_FALLBACK)]))
            sid = trace.sid()
            frame = trace.open(self.what, loc)
            lo, hi = static_value(start), static_value(stop)
            if lo is not None and hi is not None:
                trace.var_ranges[var.name] = (lo, hi)
            levels.append((var, start, stop, sid, frame))
        handles = tuple(Value(v) for v, *_ in levels)
        yield handles[0] if depth == 1 else handles
        inner: tuple = ()
        for var, start, stop, sid, frame in reversed(levels):
            if inner:
                frame.stmts.append(inner[0])
            body = trace.close(frame)
            trace.var_ranges.pop(var.name, None)
            stages = self.num_stages if self.kind == "pipelined" else 0
            inner = (For(sid, var, start, stop, self.kind, body, stages, loc),)
        trace.emit(inner[0], self.what)


def _start_stop(start: Any, stop: Any, what: str, loc) -> tuple[Expr, Expr]:
    """``[start, stop)`` bounds (``[0, start)`` with one argument). Static bounds with ``stop < start``
    (``T.serial(5, 2)``, ``T.Pipelined(-4)``) are an empty loop, as in TileLang (TVM's ``For`` with a negative
    extent runs nothing) and Python's ``range``: the bounds become ``[start, start)``."""
    lo, hi = (Const(0, "int32"), _bound(start, what, loc)) if stop is None else \
        (_bound(start, what, loc), _bound(stop, what, loc))
    a, b = static_value(lo), static_value(hi)
    if a is not None and b is not None and b < a:
        return lo, lo
    return lo, hi


def Parallel(*extents: Any, coalesced_width: int | None = None, loop_layout: Any = None,  # noqa: N802
             prefer_async: bool | None = None, annotations: dict | None = None) -> _LoopNest:
    """``for i, j in T.Parallel(M, N):``: a nest of parallel loops over ``[0, M) x [0, N)``.

    ``coalesced_width`` and ``prefer_async`` are accepted as hints and ignored.

    Raises:
        UnsupportedError: symbolic extents, ``loop_layout``, ``annotations``.
    """
    loc = tracer.user_loc()
    if not extents:
        raise DSLError("T.Parallel needs at least one extent", loc)
    if loop_layout is not None or annotations:
        raise UnsupportedError("T.Parallel(loop_layout=/annotations=)", loc)
    bounds = []
    for n in extents:
        e = _bound(n, "T.Parallel", loc)
        v = static_value(e)
        if v is None:
            raise UnsupportedError("symbolic extent in T.Parallel (extents must be static ints)", loc)
        if v < 0:
            raise DSLError(f"T.Parallel{tuple(extents)!r}: extent {v} is negative; expected an int >= 0", loc)
        bounds.append((Const(0, "int32"), Const(v, "int32")))
    return _LoopNest("parallel", bounds, "T.Parallel")


def Pipelined(start: Any, stop: Any = None, num_stages: int = 0, order: Any = None,  # noqa: N802
              stage: Any = None, sync: Any = None, group: Any = None, annotations: Any = None) -> _LoopNest:
    """``for k in T.Pipelined(n, num_stages=S):`` (or ``T.Pipelined(start, stop, num_stages=S)``).

    Args:
        start, stop: bounds (``[0, start)`` when ``stop`` is omitted); ints or integer expressions.
        num_stages: shared-buffer versions the scheduler may use (0: plain serial loop).
        order, stage, group, sync: TileLang's manual schedule, checked and ignored (module docstring,
            :func:`_manual_schedule`).

    Raises:
        DSLError: ``num_stages`` is not an int >= 0, or the manual schedule is malformed.
        UnsupportedError: ``annotations`` (TVM loop annotations).
    """
    loc = tracer.user_loc()
    if annotations is not None:
        raise UnsupportedError("T.Pipelined(annotations=...) (TVM loop annotations)", loc)
    if isinstance(num_stages, bool) or not isinstance(num_stages, int) or num_stages < 0:
        raise DSLError(f"T.Pipelined num_stages must be an int >= 0, got {num_stages!r}", loc)
    num_stages = _manual_schedule(order, stage, group, sync, num_stages, loc)
    kind: LoopKind = "pipelined" if num_stages > 0 else "serial"
    return _stepped(kind, start, stop, None, "T.Pipelined", loc, int(num_stages))


def _int_list(value: Any, what: str, loc: Any) -> list[int]:
    if not isinstance(value, (list, tuple)) or any(isinstance(x, bool) or not isinstance(x, int) for x in value):
        raise DSLError(f"{what}: expected a list of Python ints, got {value!r}", loc)
    return list(value)


def _manual_schedule(order: Any, stage: Any, group: Any, sync: Any, num_stages: int, loc: Any) -> int:
    """Check TileLang's manual pipeline schedule and record it as an ignored hint; returns the loop's number of stages
    (``num_stages``, or, as TileLang infers it when ``num_stages`` is omitted, ``max(stage) + 1``).

    Its form, as TileLang reads it (``tilelang/language/loop.py``, ``docs/programming_guides/software_pipeline.md``,
    and the ``PipelineInfo`` of its warp-specialized rewriter): ``order`` and ``stage`` are lists of ints, one entry
    per scheduled statement of the body (``-1`` marks a statement left to the producer), and ``group`` a list of
    lists of statement indices, one per entry of ``order``; the three have one length. ``sync`` is a list of lists
    of ints. The hint changes when statements run, never what they compute, so egtile, which chooses the loop's
    schedule in the e-graph, ignores it: ``explain()`` says so (``ir.Kernel.notes``).

    Raises:
        DSLError: a malformed entry, or lengths that differ.
    """
    given = {n: v for n, v in (("order", order), ("stage", stage), ("group", group), ("sync", sync)) if v is not None}
    if not given:
        return num_stages
    lengths = {}
    for name in ("order", "stage"):
        if name in given:
            lengths[name] = len(_int_list(given[name], f"T.Pipelined({name}=...)", loc))
    for name in ("group", "sync"):
        if name in given:
            v = given[name]
            if not isinstance(v, (list, tuple)):
                raise DSLError(f"T.Pipelined({name}=...): expected a list of lists of Python ints, got {v!r}", loc)
            for k, entry in enumerate(v):
                _int_list(entry, f"T.Pipelined({name}=...) entry {k}", loc)
    if "group" in given:
        lengths["group"] = len(given["group"])
    if len(set(lengths.values())) > 1:
        spelled = ", ".join(f"{n} has {k}" for n, k in lengths.items())
        raise DSLError(f"T.Pipelined: {spelled} entries; TileLang aligns them to the loop body's scheduled statements, "
                       "one entry each, so they must have the same length", loc)
    inferred = num_stages == 0 and bool(stage) and max(stage) >= 1
    if inferred:
        num_stages = max(stage) + 1  # TileLang pipelines such a loop max(stage) + 1 deep
    trace = tracer.active()
    if trace is not None:
        frozen = {n: tuple(tuple(x) if isinstance(x, (list, tuple)) else x for x in v) for n, v in given.items()}
        trace.hints.append(("pipelined_schedule", tuple(frozen.items()), loc))
        names = ", ".join(f"{n}=[...]" for n in given)
        depth = (f"; num_stages={num_stages} inferred from stage=[...] as TileLang does (max(stage) + 1)"
                 if inferred else "")
        trace.notes.append(f"T.Pipelined(..., {names}) at line {loc.line if loc else '?'}: TileLang's manual pipeline "
                           "schedule, accepted as a hint and ignored (it changes when statements run, never what they "
                           f"compute); egtile chose this loop's schedule itself{depth}")
    return num_stages


class _Stepped:
    """``T.serial(start, stop, step)`` with ``step != 1``, or a start read from tensor data: a loop over the
    iteration count ``k`` whose handle is ``start + k * step`` (the IR's loops have step 1 and a start known when
    the block runs)."""

    def __init__(self, nest: _LoopNest, start: Any, step: int) -> None:
        self.nest, self.start, self.step = nest, start, step

    def __iter__(self) -> Iterator[Any]:
        for k in self.nest:
            yield self.start + k * self.step


def static_trips(it: Any) -> int | None:
    """The trip count of loop object ``it`` (``T.serial`` / ``T.Parallel`` / ... before or after it ran) when its
    bounds are constants; ``None`` when they are not, or ``it`` is not such an object."""
    nest = it.nest if isinstance(it, _Stepped) else it
    if not isinstance(nest, _LoopNest):
        return None
    n = 1
    for start, stop in nest.bounds:
        lo, hi = static_value(start), static_value(stop)
        if lo is None or hi is None:
            return None
        n *= max(hi - lo, 0)
    return n


def _reads_data(x: Any) -> bool:
    """Whether the loop bound ``x`` (an int or a traced value) reads memory."""
    return isinstance(x, Value) and bool(loads_in(as_expr(x, "int32")))


def _stepped(kind: LoopKind, start: Any, stop: Any, step: Any, what: str, loc, num_stages: int = 0,
             name: str | None = None) -> Any:
    """A loop with step 1 (``_LoopNest``) or a :class:`_Stepped` one (a step other than 1, or a start read from
    tensor data). ``name`` names the loop variable where the line has no ``for <name> in``.

    Raises:
        DSLError: a step that is not a Python int, or 0.
    """
    if step is None:
        step = 1
    if isinstance(step, bool) or not isinstance(step, int) or step == 0:
        raise DSLError(f"{what}: the step must be a non-zero Python int, got {step!r}", loc)
    lo, hi = (0, start) if stop is None else (start, stop)
    if step == 1 and not _reads_data(lo):
        return _LoopNest(kind, [_start_stop(start, stop, what, loc)], what, num_stages, name)
    for b in (lo, hi):
        _bound(b, what, loc)  # an int or an integer expression, named at the user's line
    if _reads_data(lo) and not isinstance(lo, letbind.LetValue):
        # the handle's start is the value read when the loop starts, as the count's (a let-binding, inlined
        # when no statement of the body can change what it reads)
        lo = letbind.bind(tracer.current(what), "loop_start", lo)
    if step != 1 and not (isinstance(hi, int) and isinstance(lo, int)):
        # a runtime count: ceildiv without `+ step - 1`, and no difference taken when the range is empty (0 then),
        # either of which would wrap around to a large positive count for a bound near its dtype's extremes
        from egtile.language.expr import if_then_else

        span, size, runs = (hi - lo, step, hi > lo) if step > 0 else (lo - hi, -step, lo > hi)
        count = if_then_else(runs, span // size + if_then_else(span % size != 0, 1, 0), 0)
    else:
        if step == 1:
            count = hi - lo
        else:
            count = (hi - lo + step - 1) // step if step > 0 else (lo - hi + (-step) - 1) // (-step)
        # Python's range (and TVM's For with a negative extent): an empty loop, never a negative count
        count = max(count, 0) if isinstance(count, int) else expr_max(count, 0)
    return _Stepped(_LoopNest(kind, [_start_stop(0, count, what, loc)], what, num_stages, name), lo, step)


def serial(start: Any, stop: Any = None, step: Any = None, annotations: Any = None) -> Any:
    """``for k in T.serial(n)`` / ``T.serial(start, stop[, step])``: an ordinary sequential loop. A step (a
    non-zero Python int) runs ``start, start + step, ...`` while short of ``stop``, as Python's ``range``."""
    return _stepped("serial", start, stop, step, "T.serial", tracer.user_loc())


def unroll(start: Any, stop: Any = None, step: Any = None, explicit: bool = False,  # noqa: ARG001
           unroll_factor: int | None = None, annotations: Any = None) -> Any:
    """``for k in T.unroll(n)``: a sequential loop the backend unrolls (a step as in :func:`serial`)."""
    return _stepped("unroll", start, stop, step, "T.unroll", tracer.user_loc())


Serial = serial
Unroll = unroll


def Persistent(domain: Any, wave_size: Any, index: Any, group_size: Any = 8) -> Iterator[Any]:  # noqa: N802, ARG001
    """``for bx, by in T.Persistent([m_tiles, n_tiles], wave_size, block_id):`` a persistent loop: block
    ``index`` of ``wave_size`` blocks visits tiles ``index, index + wave_size, ...`` of the row-major tile grid
    ``domain``, each tile by exactly one block. Traced as ``T.serial(ceildiv(tiles, wave_size))`` over waves with
    ``T.If(tile < tiles)`` around the body, and the tile's coordinates (row-major: the last dimension fastest).

    The order differs from TileLang's grouped rasterization (``group_size``, accepted and unused): which block
    computes which tile changes L2 locality, never a result, since each tile is still computed once.
    """
    from egtile.language.control import If

    loc = tracer.user_loc()
    if not isinstance(domain, (list, tuple)) or not domain:
        raise DSLError(f"T.Persistent: domain must be a non-empty list of tile counts, got {domain!r}", loc)
    total: Any = 1
    for d in domain:
        total = total * d
    waves = (total + wave_size - 1) // wave_size
    for w in _stepped("serial", waves, None, None, "T.Persistent", loc):
        tile = w * wave_size + index
        with If(tile < total):
            coords = []
            rest = tile
            for d in reversed(domain[1:]):
                coords.append(rest % d)
                rest = rest // d
            coords.append(rest)
            yield tuple(reversed(coords)) if len(domain) > 1 else coords[0]
