"""Tile-op operands: buffers, regions and start points, resolved to ``ir.Region``.

A tile op (``T.copy``, ``T.gemm``, ``T.fill``) takes, for each operand:

* a buffer handle: the whole buffer;
* a region ``buf[a:b, k]``: that tile (an integer index is an extent-1 dimension);
* a start point ``buf[i, j]``: "the tile starting here with the other operand's shape" (TileLang's
  convention for ``T.copy(A[by * bm, ko * bk], A_shared)``). The other operand's extents are aligned to
  the right: missing leading dimensions get extent 1, extra leading extent-1 dimensions are dropped.
"""

from __future__ import annotations

from typing import Any

from egtile.errors import DSLError, ShapeError, SourceLoc, UnsupportedError
from egtile.ir.kernel import Load, Region
from egtile.language.buffer import RegionRef, TileBuffer, check_region
from egtile.language.expr import Value
from egtile.language.letbind import lvalue

Operand = Region | Load


def operand(x: Any, what: str, role: str, loc: SourceLoc | None) -> Operand:
    """``x`` as a region, or a ``Load`` for a start point.

    Raises:
        DSLError: ``x`` is not a buffer, region or buffer element.
    """
    if isinstance(x, TileBuffer):
        x.check_owner(loc)
        return Region.full(x.buffer)
    from egtile.language import bufview as view

    if view.is_view(x):
        raise UnsupportedError(f"{what} on a buffer view (T.reshape / T.view of {x.view.name if not isinstance(x, view.BufferView) else x.name}) "
                               f"as its {role}: T.copy, T.fill, T.clear and T.reduce_* take views; T.copy the view "
                               "into a buffer of its shape first", loc)
    if isinstance(x, RegionRef):
        return x.region
    x = lvalue(x)
    if isinstance(x, Value) and isinstance(x.expr, Load):
        return x.expr
    raise DSLError(f"{what}: {role} must be a buffer, a region buf[a:b, ...] or a start point buf[i, ...], "
                   f"got {type(x).__name__} {x!r}", loc)


def _fit(extents: tuple[int, ...], ndim: int, buffer_name: str, what: str, loc: SourceLoc | None) -> tuple[int, ...]:
    ext = list(extents)
    while len(ext) > ndim and ext[0] == 1:
        ext.pop(0)
    if len(ext) > ndim:
        raise ShapeError(f"{what}: the other operand's extents {extents} do not fit the {ndim}-dimensional "
                         f"start point into {buffer_name}", loc)
    return tuple([1] * (ndim - len(ext)) + ext)


def start_region(point: Load, other: tuple[int, ...], what: str, loc: SourceLoc | None) -> Region:
    """The region that starts at ``point`` and has the shape ``other`` (right-aligned)."""
    ext = _fit(other, len(point.buffer.shape), point.buffer.name, what, loc)
    return Region(point.buffer, point.indices, ext)


def resolve_pair(a: Operand, b: Operand, what: str, loc: SourceLoc | None,
                 check: bool = True) -> tuple[Region, Region]:
    """Both operands as regions (a start point takes the other's shape), range-checked unless ``check`` is
    false (``T.copy`` bounds its global regions itself: :func:`egtile.language.copy_op.bounded`)."""
    if isinstance(a, Load) and isinstance(b, Load):
        ra = Region(a.buffer, a.indices, (1,) * len(a.indices))
        rb = Region(b.buffer, b.indices, (1,) * len(b.indices))
    elif isinstance(a, Load):
        assert isinstance(b, Region)
        ra, rb = start_region(a, b.extents, what, loc), b
    elif isinstance(b, Load):
        ra, rb = a, start_region(b, a.extents, what, loc)
    else:
        ra, rb = a, b
    if check:
        check_region(ra.buffer, ra.offsets, ra.extents, f"{what} ({ra.buffer.name})", loc)
        check_region(rb.buffer, rb.offsets, rb.extents, f"{what} ({rb.buffer.name})", loc)
    return ra, rb


def as_region(x: Operand, what: str, loc: SourceLoc | None) -> Region:
    """A single operand as a region (a start point means one element), range-checked."""
    r = x if isinstance(x, Region) else Region(x.buffer, x.indices, (1,) * len(x.indices))
    check_region(r.buffer, r.offsets, r.extents, f"{what} ({r.buffer.name})", loc)
    return r
