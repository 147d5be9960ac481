"""``T.fill`` and ``T.clear``: set every element of a tile to one value."""

from __future__ import annotations

from typing import Any

from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import Const, Fill
from egtile.language import bufview as view, tracer
from egtile.language.expr import Value, as_expr
from egtile.language.operand import as_region, operand
from egtile.language.per_thread import emit_stores, is_per_thread


def fill(buffer: Any, value: Any) -> None:
    """``T.fill(buf, value)``: ``buf`` may be a buffer or a region; ``value`` a number or expression
    (a Python number becomes a constant of the buffer's dtype). A per-thread (local) ``buf`` is set on
    every thread (:mod:`egtile.language.per_thread`).

    Raises:
        ShapeError: a region out of range.
    """
    loc = tracer.user_loc()
    trace = tracer.current("T.fill")
    trace.require_kernel("T.fill")
    if view.is_view(buffer):  # T.reshape / T.view: element stores on the base's storage
        view.fill(buffer, value, "T.fill")
        return
    region = as_region(operand(buffer, "T.fill", "buffer", loc), "T.fill", loc)
    d = region.buffer.dtype
    kind = lookup_dtype(d).kind
    if isinstance(value, Value):
        v = value.expr
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        v = as_expr(value, d)
    elif kind == "float":
        v = Const(float(value), d)
    elif kind == "bool":
        v = Const(bool(value), d)
    elif isinstance(value, float):
        v = as_expr(value)  # a float into an integer buffer converts at the store, as C assignment does
    else:
        v = Const(int(value), d)
    _emit(trace, region, v, "T.fill", loc)


def _emit(trace: Any, region: Any, v: Any, what: str, loc: Any) -> None:
    if is_per_thread(region):  # every thread sets its own copy (egtile.language.per_thread)
        emit_stores(trace, region, lambda _: v, what, loc)
        return
    trace.emit(Fill(trace.sid(), region, v, loc), what)


def clear(buffer: Any) -> None:
    """``T.clear(buf)``: ``T.fill(buf, 0)``."""
    loc = tracer.user_loc()
    trace = tracer.current("T.clear")
    trace.require_kernel("T.clear")
    if view.is_view(buffer):
        view.fill(buffer, None, "T.clear")
        return
    region = as_region(operand(buffer, "T.clear", "buffer", loc), "T.clear", loc)
    kind = lookup_dtype(region.buffer.dtype).kind
    zero = 0.0 if kind == "float" else (False if kind == "bool" else 0)
    _emit(trace, region, Const(zero, region.buffer.dtype), "T.clear", loc)
