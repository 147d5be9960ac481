"""``T.reduce_sum`` / ``reduce_max`` / ``reduce_min`` / ``reduce_abssum`` / ``reduce_absmax``.

``T.reduce_<kind>(src, dst, dim=-1, clear=True)`` reduces the whole buffer ``src`` along ``dim`` into
``dst``, whose shape is ``src``'s without ``dim``. With ``clear=False`` the old ``dst`` joins the reduction.

A reduction of a per-thread (``local``) buffer into another runs on every thread, over its own copies, as TileLang
lowers it: element stores (:mod:`egtile.language.per_thread`) that fold ``src``'s elements in order in the
reduction's accumulator type, as the block-level reduction does (:func:`egtile.tilemath.reduce_accumulator`). A
cooperative ``Reduce`` would split the output elements over the threads and read one thread's copies only.
"""

from __future__ import annotations

from typing import Any

from egtile.errors import DSLError, ShapeError, UnsupportedError
from egtile.ir.kernel import Expr, Reduce, ReduceKind, Store
from egtile.language import bufview as view, tracer
from egtile.language.buffer import TileBuffer


def _reduce(kind: ReduceKind, src: Any, dst: Any, dim: int, clear: bool) -> None:
    what = f"T.reduce_{kind}"
    loc = tracer.user_loc()
    trace = tracer.current(what)
    trace.require_kernel(what)
    if isinstance(src, view.BufferView) or isinstance(dst, view.BufferView):  # T.reshape / T.view
        view.reduce(kind, src, dst, dim, clear)
        return
    for role, x in (("src", src), ("dst", dst)):
        if not isinstance(x, TileBuffer):
            raise DSLError(f"{what}: {role} must be a whole buffer (regions are not supported), got "
                           f"{type(x).__name__}", loc)
        x.check_owner(loc)
    s, d = src.buffer, dst.buffer
    nd = len(s.shape)
    if isinstance(dim, bool) or not isinstance(dim, int) or not -nd <= dim < nd:
        raise ShapeError(f"{what}: dim must be an int in [{-nd}, {nd}) for {s.name} of shape {s.shape}, got {dim!r}",
                         loc)
    dim = dim % nd
    expected = s.shape[:dim] + s.shape[dim + 1:]
    if d.shape != expected and not (expected == () and d.shape == (1,)):
        raise ShapeError(f"{what}: dst {d.name} must have shape {expected or (1,)} ({s.name} of shape {s.shape} "
                         f"without dimension {dim}), got {d.shape}", loc)
    if s.scope == "local" or d.scope == "local":
        _per_thread_reduce(trace, kind, s, d, dim, bool(clear), what, loc)
        return
    trace.emit(Reduce(trace.sid(), kind, s, d, dim, bool(clear), loc), what)


def _per_thread_reduce(trace, kind: ReduceKind, s, d, dim: int, clear: bool, what: str, loc) -> None:
    """``dst[e] = fold(src[e with k inserted at dim] for k)``, each element of the thread's own ``dst`` (module
    docstring).

    Raises:
        UnsupportedError: only one of the two buffers is per-thread (every thread would reduce its own copies into
            one shared element, or each its own copy of a shared source: say which with per-thread code).
    """
    import itertools

    from egtile.ir.kernel import BinOp, Cast, Const, Load, UnOp
    from egtile.language import per_thread
    from egtile.tilemath import reduce_accumulator

    if s.scope != d.scope:
        local, other = (s, d) if s.scope == "local" else (d, s)
        raise UnsupportedError(
            f"{what} between the per-thread buffer {local.name} and the {other.scope} buffer {other.name}: a "
            "reduction of per-thread (local) buffers runs on every thread over its own copies, so both must be "
            "per-thread; copy the shared data into a local buffer first (or reduce fragments at the block's level)",
            loc)
    acc = str(reduce_accumulator(s.dtype, d.dtype))

    def term(idx) -> Expr:
        x = Cast(acc, Load(s, idx))
        return UnOp("abs", x) if kind in ("abssum", "absmax") else x

    def combine(a: Expr, b: Expr) -> Expr:
        return BinOp("+" if kind in ("sum", "abssum") else "min" if kind == "min" else "max", a, b)

    outer = [range(e) for i, e in enumerate(s.shape) if i != dim]
    points = list(itertools.product(*outer)) if outer else [()]
    n = len(points) * s.shape[dim]
    if n > per_thread.MAX_ELEMENTS:
        raise UnsupportedError(f"{what} of the per-thread buffer {s.name} of {n} elements: egtile runs a reduction "
                               f"of local buffers on every thread as element stores, at most {per_thread.MAX_ELEMENTS}; "
                               "write a T.serial loop", loc)
    for out in points:
        dst_idx = tuple(Const(i, "int32") for i in (out or (0,)))
        value: Expr | None = Cast(acc, Load(d, dst_idx)) if not clear else None
        for k in range(s.shape[dim]):
            idx = tuple(Const(i, "int32") for i in (*out[:dim], k, *out[dim:]))
            value = term(idx) if value is None else combine(value, term(idx))
        trace.emit(Store(trace.sid(), d, dst_idx, Cast(d.dtype, value), loc), what)


def reduce_sum(src: Any, dst: Any, dim: int = -1, clear: bool = True) -> None:
    """Sum of ``src`` along ``dim`` into ``dst``."""
    _reduce("sum", src, dst, dim, clear)


def reduce_max(src: Any, dst: Any, dim: int = -1, clear: bool = True) -> None:
    """Maximum of ``src`` along ``dim`` into ``dst``."""
    _reduce("max", src, dst, dim, clear)


def reduce_min(src: Any, dst: Any, dim: int = -1, clear: bool = True) -> None:
    """Minimum of ``src`` along ``dim`` into ``dst``."""
    _reduce("min", src, dst, dim, clear)


def reduce_abssum(src: Any, dst: Any, dim: int = -1, clear: bool = True) -> None:
    """Sum of absolute values of ``src`` along ``dim`` into ``dst``."""
    _reduce("abssum", src, dst, dim, clear)


def reduce_absmax(src: Any, dst: Any, dim: int = -1, clear: bool = True) -> None:
    """Maximum absolute value of ``src`` along ``dim`` into ``dst``."""
    _reduce("absmax", src, dst, dim, clear)
