"""``T.copy`` and ``T.async_copy``: element-wise copies between regions of any scopes.

Semantics: synchronous (``dst`` holds the data at the next statement), row-major over the extents
with unit dimensions dropped, which must match on both sides; values convert to ``dst``'s dtype as a
store does. Into a per-thread (local) ``dst`` every thread copies the whole tile
(:mod:`egtile.language.per_thread`). Which instruction moves the data (TMA, cp.async, SIMT loads/stores) is the scheduler's
choice; ``prefer_instruction`` / ``disable_tma`` / ``T.async_copy`` only record the user's request.

Past a tensor's edge (TileLang's semantics, ``src/op/copy.cc`` ``MakePredicate``: each dimension of each
side gets the predicate ``0 <= start + i < shape`` unless its analyzer proves it): a region of a *global*
tensor may extend past the tensor on either side of any dimension, also with an extent larger than the
dimension. Its elements outside the tensor read as zero (converted to ``dst``'s dtype) and are never
written; the elements pair by their row-major position in the whole box, so the rest land where they
would without the edge. The region is marked ``Region.clip`` wherever the trace cannot prove it inside
the tensor (a bound over the loop and block variables' ranges past the edge, or a start read from data);
every executor then clips it (:meth:`egtile.ir.Region.inside`). Still refused (``ShapeError``): a region
of a shared, fragment or local buffer outside it (the tile itself; a copy past its end is a bug in the
kernel, not an edge of the problem), an extent below 1, and a negative *constant* start (``A[-1:...]``,
which Python reads as counting from the end and TileLang as an index before the start: egtile accepts
neither reading silently).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from egtile.errors import DSLError, ShapeError, SourceLoc
from egtile.ir.kernel import Copy, Load, Region, Store
from egtile.language import bufview as view, tracer
from egtile.language.buffer import bounds, check_region, static_value
from egtile.language.expr import Value
from egtile.language.operand import operand, resolve_pair
from egtile.language.per_thread import emit_stores, is_per_thread, points

_PREFER = {None: "auto", "auto": "auto", "tma": "tma", "cp_async": "cp_async", "cp.async": "cp_async",
           "sync": "simt", "simt": "simt"}


def _copy(src: Any, dst: Any, prefer: str, what: str) -> None:
    loc = tracer.user_loc()
    trace = tracer.current(what)
    trace.require_kernel(what)
    if view.is_view(src) or view.is_view(dst):  # T.reshape / T.view: element copies on the base's storage
        view.copy(src, dst, what)
        return
    a = operand(src, what, "src", loc)
    b = operand(dst, what, "dst", loc)
    if isinstance(a, Load) and isinstance(b, Load):
        # TileLang lowers a scalar-to-scalar copy to a plain store.
        resolve_pair(a, b, what, loc)
        trace.emit(Store(trace.sid(), b.buffer, b.indices, a, loc), what)
        return
    ra, rb = resolve_pair(a, b, what, loc, check=False)
    ra, rb = bounded(ra, what, loc, trace), bounded(rb, what, loc, trace)
    if ra.squeezed != rb.squeezed:
        raise ShapeError(f"{what}: src {ra.buffer.name} region extents {ra.extents} and dst {rb.buffer.name} region "
                         f"extents {rb.extents} differ (unit dimensions ignored: expected {rb.squeezed}, "
                         f"got {ra.squeezed})", loc)
    if is_per_thread(rb) and not ra.clip:
        # every thread copies the whole tile into its own copy (egtile.language.per_thread); the squeezed
        # extents agree, so the k-th elements of both row-major orders pair up
        src = points(ra)
        emit_stores(trace, rb, lambda k: Load(ra.buffer, src[k]), what, loc)
        return
    _refuse_overlap(ra, rb, what, loc)
    trace.emit(Copy(trace.sid(), ra, rb, prefer, loc), what)  # type: ignore[arg-type]


def _refuse_overlap(ra: Region, rb: Region, what: str, loc: SourceLoc | None) -> None:
    """A copy between two different, overlapping regions of one buffer (``T.copy(s[0:31], s[1:32])``) is a race in
    every schedule: its element copies run on many threads in any order, so an element may be read before or after
    another thread overwrites it (the interpreter's answer, a memmove, is one order of many). Found when every
    offset is a constant."""
    from egtile.errors import KernelRaceError
    from egtile.ir.kernel import Const

    if ra.buffer is not rb.buffer or ra.buffer.scope == "local":
        return
    if not all(isinstance(o, Const) for o in (*ra.offsets, *rb.offsets)):
        return
    a0 = [int(o.value) for o in ra.offsets]
    b0 = [int(o.value) for o in rb.offsets]
    if a0 == b0:
        return  # each element onto itself
    if all(x < y + m and y < x + n for x, y, n, m in zip(a0, b0, ra.extents, rb.extents)):
        raise KernelRaceError(f"{what}: the source and destination regions of {ra.buffer.name} overlap (offsets "
                              f"{tuple(a0)} and {tuple(b0)}, extents {tuple(ra.extents)}): the element copies run on "
                              "many threads in any order, so an element may be read before or after it is "
                              "overwritten. Copy through a second buffer", loc)


def bounded(r: Region, what: str, loc: SourceLoc | None, trace: tracer.Trace) -> Region:
    """``r`` as a copy operand: range-checked for a non-global buffer; for a global tensor, marked ``clip``
    unless every element provably lies inside the tensor (see the module docstring).

    Raises:
        ShapeError: a non-global region out of its buffer, an extent below 1, a negative constant start.
    """
    label = f"{what} ({r.buffer.name})"
    if r.buffer.scope != "global":
        check_region(r.buffer, r.offsets, r.extents, label, loc)
        return r
    clip = False
    for dim, (off, ext, size) in enumerate(zip(r.offsets, r.extents, r.buffer.shape)):
        if ext < 1:
            raise ShapeError(f"{label}: extent {ext} in dimension {dim} of {r.buffer.name} is below 1", loc)
        v = static_value(off)
        if v is not None and v < 0:
            raise ShapeError(f"{label}: {r.buffer.name} dimension {dim} starts at the constant {v}; a copy region "
                             "may run past a tensor's edge, but a negative constant start reads as Python's "
                             "from-the-end index, which T.copy does not mean: write the start as an expression "
                             f"of the kernel's indices, or start at 0 (buffer shape {r.buffer.shape})", loc)
        # The variables' ranges hold inside T.If too (a guard only narrows them), so this bound is sound there;
        # a start read from data has none, and is clipped like TileLang's unproven predicate.
        b = bounds(off, trace.var_ranges)
        if b is None or b[0] < 0 or b[1] + ext > size:
            clip = True
    return replace(r, clip=True) if clip else r


def copy(src: Any, dst: Any, *, coalesced_width: int | None = None, disable_tma: bool = False,
         eviction_policy: str | None = None, prefer_instruction: str | None = None, annotations: Any = None,
         loop_layout: Any = None) -> None:
    """``T.copy(src, dst)``: copy a tile.

    Args:
        src, dst: a buffer, a region ``buf[a:b, k]`` or a start point ``buf[i, j]`` (the tile starting
            there with the other operand's shape).
        disable_tma: request a non-TMA copy (recorded as ``prefer="simt"``).
        prefer_instruction: ``"tma"``, ``"cp_async"`` or ``"sync"`` (SIMT); ``None`` lets the rules choose.

    Raises:
        ShapeError: extents that differ; a shared, fragment or local region statically out of its buffer; a
            negative constant start (a global region may run past the tensor's edge: the module docstring).
        DSLError: unknown ``prefer_instruction``, or ``prefer_instruction="tma"`` with ``disable_tma``.
    """
    loc = tracer.user_loc()
    if prefer_instruction not in _PREFER:
        raise DSLError(f"T.copy: prefer_instruction must be one of 'tma', 'cp_async', 'sync', got "
                       f"{prefer_instruction!r}", loc)
    prefer = _PREFER[prefer_instruction]
    if disable_tma:
        if prefer == "tma":
            raise DSLError("T.copy: prefer_instruction='tma' contradicts disable_tma=True", loc)
        if prefer == "auto":
            prefer = "simt"
    _copy(src, dst, prefer, "T.copy")


def async_copy(src: Any, dst: Any, **_: Any) -> None:
    """``T.async_copy(src, dst)``: a copy the user asks to run with ``cp.async`` (PTX ISA 9.7.9.25).
    Same operands and semantics as :func:`copy`."""
    _copy(src, dst, "cp_async", "T.async_copy")


def im2col(img: Any, col: Any, nhw_step: Any, c_step: Any, kernel: int, stride: int, dilation: int, pad: int,
           eviction_policy: str | None = None, annotations: Any = None) -> None:
    """``T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)``: one ``(block_m, block_k)`` tile of
    the im2col matrix of an NHWC image, for a 2-D convolution as a GEMM (TileLang's ``tl.tileop.im2col``,
    ``src/op/copy.cc`` ``LowerIm2ColSIMT``, whose arithmetic this is).

    With ``H, W, C = img.shape[1:]``, ``OH = (H + 2 pad - (kernel - 1) dilation - 1) // stride + 1`` (and ``OW``
    alike), the tile's element ``(i, j)`` is row ``m = nhw_step * block_m + i`` (the output pixel ``m // (OH OW)``,
    ``m % (OH OW) // OW``, ``m % OW``) and column ``k = c_step * block_k + j`` (the filter tap ``k // (kernel C)``,
    ``k // C % kernel`` and channel ``k % C``): the image element that tap reads, or zero where it falls in the
    padding. A row past the last image (the grid's last tile) also reads zero, as TileLang's safe-memory
    legalization predicates it. Traced as that ``T.Parallel`` nest of element stores into ``col``'s last two
    dimensions (a tile of ``col`` as a region or start point, or all of it).

    Raises:
        ShapeError: ``img`` is not 4-D, ``col`` has fewer than two dimensions, or other dtypes.
    """
    from egtile.language.buffer import TileBuffer
    from egtile.language.expr import And, if_then_else
    from egtile.language.loop import Parallel
    from egtile.language.operand import as_region

    loc = tracer.user_loc()
    trace = tracer.current("T.im2col")
    trace.require_kernel("T.im2col")
    if not isinstance(img, TileBuffer) or len(img.shape) != 4:
        raise ShapeError(f"T.im2col: img must be a 4-D (N, H, W, C) buffer, got {img!r}", loc)
    dst = as_region(operand(col, "T.im2col", "col", loc), "T.im2col", loc)
    if len(dst.extents) < 2:
        raise ShapeError(f"T.im2col: col must have at least two dimensions, got extents {dst.extents}", loc)
    if dst.buffer.dtype != img.dtype:
        raise ShapeError(f"T.im2col: img ({img.dtype}) and col ({dst.buffer.dtype}) must have one dtype", loc)
    n_img, h_dim, w_dim, c_dim = img.shape
    out_h = (h_dim + 2 * pad - (kernel - 1) * dilation - 1) // stride + 1
    out_w = (w_dim + 2 * pad - (kernel - 1) * dilation - 1) // stride + 1
    block_m, block_k = dst.extents[-2], dst.extents[-1]
    out = TileBuffer(dst.buffer, trace)
    for i, j in Parallel(block_m, block_k):
        k = c_step * block_k + j
        m = nhw_step * block_m + i
        ah = (m % (out_h * out_w)) // out_w * stride + k // (kernel * c_dim) * dilation - pad
        aw = m % out_w * stride + (k // c_dim) % kernel * dilation - pad
        n = m // (out_h * out_w)
        inside = And(And(And(ah >= 0, aw >= 0), And(ah < h_dim, aw < w_dim)), n < n_img)
        rows = Value(dst.offsets[-2]) + i
        cols = Value(dst.offsets[-1]) + j
        out[tuple(Value(o) for o in dst.offsets[:-2]) + (rows, cols)] = if_then_else(
            inside, img[n, ah, aw, k % c_dim], 0)
