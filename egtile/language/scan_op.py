"""``T.cumsum(src, dst=None, dim=0, reverse=False)``: the inclusive prefix sum of a buffer along one dimension.

TileLang's meaning: ``dst[..., i, ...] = sum(src[..., 0..i, ...])`` along ``dim`` (``reverse``: the sum of
``i..n-1``), ``dst`` defaults to ``src`` (in place), negative ``dim`` counts from the end, and ``dst`` has ``src``'s
shape. egtile writes it with its own constructs, which the scheduler, verifier and simulator already treat: a copy
into ``dst`` when it is another buffer, then a ``T.Parallel`` over the other dimensions whose each iteration runs
the scan serially (``n - 1`` dependent adds, in order, as a sequential reading of the sum would: the rounding is
that of a left-to-right float32 sum in the buffer's dtype).
"""

from __future__ import annotations

from typing import Any

from egtile.errors import DSLError, ShapeError
from egtile.language import tracer
from egtile.language.buffer import TileBuffer


def cumsum(src: Any, dst: Any = None, dim: int = 0, reverse: bool = False, annotations: Any = None) -> None:
    """Inclusive prefix sum of ``src`` along ``dim`` into ``dst`` (default: in place; module docstring)."""
    from egtile.language.copy_op import copy
    from egtile.language.loop import Parallel, serial

    what = "T.cumsum"
    loc = tracer.user_loc()
    tracer.current(what).require_kernel(what)
    dst = src if dst is None else dst
    for role, x in (("src", src), ("dst", dst)):
        if not isinstance(x, TileBuffer):
            raise DSLError(f"{what}: {role} must be a whole shared or fragment buffer (regions are not supported), "
                           f"got {type(x).__name__}", loc)
        x.check_owner(loc)
    shape = tuple(src.buffer.shape)
    if tuple(dst.buffer.shape) != shape:
        raise ShapeError(f"{what}: dst {dst.buffer.name} of shape {dst.buffer.shape} must have src "
                         f"{src.buffer.name}'s shape {shape}", loc)
    nd = len(shape)
    if isinstance(dim, bool) or not isinstance(dim, int) or not -nd <= dim < nd:
        raise ShapeError(f"{what}: dim must be an int in [{-nd}, {nd}) for {src.buffer.name} of shape {shape}, "
                         f"got {dim!r}", loc)
    dim %= nd
    if dst is not src:
        copy(src, dst)
    n = shape[dim]
    if n < 2:
        return
    others = [e for d, e in enumerate(shape) if d != dim] or [1]
    for outer in Parallel(*others):
        outer = outer if isinstance(outer, tuple) else (outer,)
        for t in serial(n - 1):
            to, frm = ((n - 2) - t, (n - 1) - t) if reverse else (t + 1, t)
            head = list(outer[:dim]) if nd > 1 else []
            tail = list(outer[dim:]) if nd > 1 else []
            dst[(*head, to, *tail)] = dst[(*head, to, *tail)] + dst[(*head, frm, *tail)]


__all__ = ["cumsum"]
