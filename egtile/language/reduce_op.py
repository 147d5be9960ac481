"""``T.reduce_sum`` / ``reduce_max`` / ``reduce_min`` / ``reduce_abssum`` / ``reduce_absmax``.

``T.reduce_<kind>(src, dst, dim=-1, clear=True)`` reduces the whole buffer ``src`` along ``dim`` into
``dst``, whose shape is ``src``'s without ``dim``. With ``clear=False`` the old ``dst`` joins the reduction.
"""

from __future__ import annotations

from typing import Any

from egtile.errors import DSLError, ShapeError
from egtile.ir.kernel import Reduce, ReduceKind
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
    trace.emit(Reduce(trace.sid(), kind, s, d, dim, bool(clear), loc), what)


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
