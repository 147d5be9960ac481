"""Buffer views: ``T.reshape(buf, shape)`` and ``T.view(buf, shape=None, dtype=None)``.

A view is another shape over the *same storage*, in row-major order (TileLang's ``tilelang/language/
customize.py``: ``T.Tensor(shape, src.dtype, src.data)``, no copy): element ``v`` of the view is the element of
the base whose row-major position is ``v``'s. egtile keeps no second buffer for it: every access through a
view is traced as the access of the base element it names (:meth:`BufferView.base_indices`), so the IR, the
verifier, the simulator and the code generator only ever see the base buffer. A race, a missing barrier or an
out-of-range access through a view is therefore one on the base, reported with the base's name.

The index map is exact and kept affine where it can be: the two shapes are cut into groups of consecutive
dimensions with equal products (``(N, Q * H)`` and ``(N, Q, H)``: ``[N] | [Q * H]`` and ``[N] | [Q, H]``);
within a group the view's indices make one row-major position, which is the base index itself when the group
has one base dimension (a split: ``s[n, q * H + h]``), and is cut with ``//`` and ``%`` when it has several (a
merge).

Tile operations on a view (``T.copy``, ``T.fill`` / ``T.clear``, ``T.reduce_*``) are traced as the
``T.Parallel`` nest of element statements they mean (a reduction: one serial loop per output element,
accumulating in the reduction's accumulator dtype, ``egtile.tilemath.reduce_accumulator``), since their
operands are rectangles of the view that need not be rectangles of the base. ``T.gemm`` on a view is refused
(copy the view into a buffer of its shape first).

A ``T.copy`` between a view and a global tensor (or a view of one) keeps ``T.copy``'s meaning past the tensor's
edge: an element outside the tensor (the view's shape, for a view) reads as zero and is never written.

A view with another dtype than its base's (TileLang's ``T.view(buf, shape, dtype=)``: the storage's bytes read as
another type) is kept apart: egtile models no reinterpretation of bits (bit casts of values are
``T.reinterpret``). Such a view of a shared buffer becomes a buffer of its own (a new allocation, its own storage,
at most the base's bytes) and an ``ir.Overlay`` record of whose storage it is laid over. The two programs (one
storage in TileLang, two in egtile) then agree exactly when no read observes the other buffer's bits: the view is
*scratch over dead storage*. ``egtile.analysis.overlay`` proves that before scheduling and refuses the kernel at
the statement that could observe a reinterpretation; the interpreter checks it on every access.

Not supported (refused at the user's line): a view with another dtype of anything but a shared buffer, or one
needing more bytes than its storage, a view whose element count differs from the base's (same dtype; TileLang
asserts the same), and symbolic view shapes.
"""

from __future__ import annotations

from typing import Any

from egtile.errors import DSLError, ShapeError, SourceLoc, UnsupportedError
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import BinOp, Const, Expr, Load
from egtile.language import tracer
from egtile.language.buffer import TileBuffer, _index_expr, check_region, static_value
from egtile.language.expr import IntImm, Value


def _prod(xs: tuple[int, ...]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def _groups(view: tuple[int, ...], base: tuple[int, ...]) -> list[tuple[range, range]]:
    """Consecutive dimension groups ``(view dims, base dims)`` with equal element counts (both shapes have the
    same total). Unit dimensions join the group before them (or the first group)."""
    groups: list[tuple[range, range]] = []
    i = j = 0
    while i < len(view) or j < len(base):
        i0, j0 = i, j
        pv = pb = 1
        if i < len(view):
            pv, i = view[i], i + 1
        if j < len(base):
            pb, j = base[j], j + 1
        while pv != pb:
            if pv < pb and i < len(view):
                pv, i = pv * view[i], i + 1
            elif j < len(base):
                pb, j = pb * base[j], j + 1
            else:
                pv, i = pv * view[i], i + 1
        # trailing unit dimensions belong to this group (their index is 0)
        while i < len(view) and view[i] == 1 and (j >= len(base) or base[j] != 1):
            i += 1
        groups.append((range(i0, i), range(j0, j)))
    return groups


def _add(a: Expr, b: Expr) -> Expr:
    if static_value(a) == 0:
        return b
    if static_value(b) == 0:
        return a
    return BinOp("+", a, b)


def _mul(a: Expr, k: int) -> Expr:
    if k == 1:
        return a
    if static_value(a) == 0 or k == 0:
        return Const(0, "int32")
    return BinOp("*", a, Const(k, "int32"))


class ViewPoint(Value):
    """``view[i, j]``: the base element it names (a :class:`Value` holding the base's ``Load``), remembering the
    view and the view's indices so that a tile op taking it as a start point reads it in the view's shape."""

    __slots__ = ("view", "vindices")

    def __init__(self, expr: Expr, view: BufferView, vindices: tuple[Expr, ...]) -> None:
        super().__init__(expr)
        self.view = view
        self.vindices = vindices


class ViewRegion:
    """``view[a:b, k]``: a rectangle of the view (offsets and static extents in the view's dimensions), as a
    tile-op operand."""

    __slots__ = ("view", "offsets", "extents")

    def __init__(self, view: BufferView, offsets: tuple[Expr, ...], extents: tuple[int, ...]) -> None:
        self.view, self.offsets, self.extents = view, offsets, extents


class BufferView:
    """``T.reshape(base, shape)`` / ``T.view(base, shape)``: ``shape`` over ``base``'s storage (module docstring).

    Attributes:
        base: the buffer (or view) whose storage this is.
        shape: the view's shape.
    """

    def __init__(self, base: TileBuffer | BufferView, shape: tuple[int, ...]) -> None:
        self.base = base
        self.shape = shape
        self._groups = _groups(shape, base.shape)

    @property
    def root(self) -> TileBuffer:
        """The buffer that owns the storage."""
        b = self.base
        return b.root if isinstance(b, BufferView) else b

    @property
    def buffer(self):  # the IR buffer of the storage
        return self.root.buffer

    @property
    def dtype(self) -> str:
        return self.root.dtype

    @property
    def scope(self) -> str:
        return self.root.scope

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def data(self) -> Storage:
        """The storage, for ``T.Tensor(shape, dtype, view.data)``."""
        return Storage(self)

    def __repr__(self) -> str:
        return f"BufferView({self.name}{list(self.base.shape)} as {list(self.shape)})"

    def __bool__(self) -> bool:
        return True

    def base_indices(self, vidx: tuple[Expr, ...]) -> tuple[Expr, ...]:
        """The indices into :attr:`base` of the view element ``vidx`` (row-major, group by group)."""
        out: list[Expr] = []
        for vd, bd in self._groups:
            flat: Expr = Const(0, "int32")
            for d in vd:
                flat = _add(_mul(flat, self.shape[d]), vidx[d])
            bdims = list(bd)
            if len(bdims) == 1:
                out.append(flat)
                continue
            for k, d in enumerate(bdims):
                stride = _prod(tuple(self.base.shape[e] for e in bdims[k + 1:]))
                q = flat if stride == 1 else BinOp("//", flat, Const(stride, "int32"))
                out.append(q if k == 0 else BinOp("floormod", q, Const(self.base.shape[d], "int32")))
        return tuple(out)

    def _root_indices(self, vidx: tuple[Expr, ...]) -> tuple[Expr, ...]:
        idx = self.base_indices(vidx)
        return self.base._root_indices(idx) if isinstance(self.base, BufferView) else idx

    def _key(self, key: Any, loc: SourceLoc | None) -> tuple[Any, ...]:
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != len(self.shape):
            raise ShapeError(f"view of {self.name} has {len(self.shape)} dimension(s) (shape {self.shape}), indexed "
                             f"with {len(key)}", loc)
        return key

    def _element(self, key: Any, loc: SourceLoc | None) -> tuple[Expr, ...]:
        vidx = tuple(_index_expr(k, None, loc) for k in self._key(key, loc))
        for dim, (e, size) in enumerate(zip(vidx, self.shape)):
            v = static_value(e)
            if v is not None and not 0 <= v < size:
                raise ShapeError(f"index {v} in dimension {dim} of a view of {self.name} is out of range; expected "
                                 f"0..{size - 1} (view shape {self.shape})", loc)
        return vidx

    def __getitem__(self, key: Any) -> ViewPoint | ViewRegion:
        loc = tracer.user_loc()
        self.root.check_owner(loc)
        k = self._key(key, loc)
        if any(isinstance(x, slice) for x in k):
            return self._region(k, loc)
        vidx = self._element(k, loc)
        return ViewPoint(Load(self.buffer, self._root_indices(vidx)), self, vidx)

    def __setitem__(self, key: Any, value: Any) -> None:
        loc = tracer.user_loc()
        k = self._key(key, loc)
        if any(isinstance(x, slice) for x in k):
            raise UnsupportedError(f"slice assignment to a view of {self.name}; use T.fill(region, value) or "
                                   "T.copy(src, region)", loc)
        vidx = self._element(k, loc)
        self.root[tuple(Value(e) for e in self._root_indices(vidx))] = value

    def _region(self, key: tuple[Any, ...], loc: SourceLoc | None) -> ViewRegion:
        offsets: list[Expr] = []
        extents: list[int] = []
        for dim, (k, size) in enumerate(zip(key, self.shape)):
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise UnsupportedError(f"strided slice of a view of {self.name} (step {k.step!r})", loc)
                start = _index_expr(0 if k.start is None else k.start, None, loc)
                stop = _index_expr(size if k.stop is None else k.stop, None, loc)
                ext = static_value(BinOp("-", stop, start))
                if ext is None or ext < 1:
                    raise ShapeError(f"slice of a view of {self.name} (dimension {dim}) has no static extent >= 1",
                                     loc)
                offsets.append(start)
                extents.append(ext)
            else:
                offsets.append(_index_expr(k, None, loc))
                extents.append(1)
        return ViewRegion(self, tuple(offsets), tuple(extents))


# ---- construction ------------------------------------------------------------------------------------------


def _shape(shape: Any, what: str, loc: SourceLoc | None) -> tuple[int, ...]:
    items = shape if isinstance(shape, (tuple, list)) else (shape,)
    out = []
    for s in items:
        if isinstance(s, IntImm):
            s = int(s)
        if isinstance(s, Value):
            v = static_value(s.expr)
            if v is None:
                raise UnsupportedError(f"{what}: a symbolic view shape ({s!r}); view shapes must be static ints", loc)
            s = v
        if isinstance(s, bool) or not isinstance(s, int) or s < 1:
            raise DSLError(f"{what}: shape entries must be ints >= 1, got {s!r}", loc)
        out.append(s)
    return tuple(out)


def _make(src: Any, shape: Any, dtype: Any, what: str) -> BufferView | TileBuffer:
    loc = tracer.user_loc()
    tracer.current(what)
    if not isinstance(src, (TileBuffer, BufferView)):
        raise DSLError(f"{what}: expected a buffer (a parameter, an allocation or a view), got {type(src).__name__}",
                       loc)
    if isinstance(src, TileBuffer):
        src.check_owner(loc)
    if dtype is not None:
        from egtile.language.kernel import check_dtype

        d = check_dtype(dtype, what, loc)
        if d != lookup_dtype(src.dtype).name:
            return _overlay(src, shape, d, what, loc)
    new = tuple(src.shape) if shape is None else _shape(shape, what, loc)
    if _prod(new) != _prod(tuple(src.shape)):
        raise ShapeError(f"{what}: shape {new} has {_prod(new)} elements but {src.name} of shape {tuple(src.shape)} "
                         f"has {_prod(tuple(src.shape))}; a view keeps the element count", loc)
    if new == tuple(src.shape):
        return src
    return BufferView(src, new)


def _overlay(src: TileBuffer | BufferView, shape: Any, d: str, what: str, loc: SourceLoc | None) -> TileBuffer:
    """A view of another dtype: a buffer of its own laid over ``src``'s storage (``ir.Overlay``; module docstring).

    Raises:
        UnsupportedError: ``src`` is not in shared memory (a register fragment or a tensor reinterpreted), or the
            view needs more bytes than the storage has.
    """
    from egtile.ir.kernel import Buffer, Overlay

    trace = tracer.current(what)
    root = src.root if isinstance(src, BufferView) else src
    base = next((o.base for o in trace.overlays if o.view == root.name), root.name)
    storage = next((b for b in trace.allocs if b.name == base), None)
    if storage is None or storage.scope != "shared":
        scope = storage.scope if storage is not None else root.scope
        raise UnsupportedError(
            f"{what}(..., dtype={d}) of {src.name} ({src.dtype}, {scope}): a view with another dtype is supported over "
            "a shared buffer only (as scratch laid over storage the program no longer reads); allocate a buffer of "
            "that dtype instead, or bit-cast values with T.reinterpret", loc)
    new = tuple(src.shape) if shape is None else _shape(shape, what, loc)
    nbytes = _prod(new) * lookup_dtype(d).bits // 8
    have = storage.numel * lookup_dtype(storage.dtype).bits // 8
    if nbytes > have or _prod(new) * lookup_dtype(d).bits % 8:
        raise ShapeError(f"{what}(..., dtype={d}): shape {new} of {d} needs {nbytes} bytes but {storage.name} of shape "
                         f"{tuple(storage.shape)} ({storage.dtype}) has {have}; a view must fit its storage", loc)
    name = trace.fresh_buffer_name(tracer.assign_target_name(loc), f"{storage.name}_as_{d}")
    buf = Buffer(name, new, d, "shared", loc=loc)
    trace.allocs.append(buf)
    trace.overlays.append(Overlay(name, storage.name, loc))
    return TileBuffer(buf, trace)


class Storage:
    """``buf.data``: the storage of a buffer, for ``T.Tensor(shape, dtype, buf.data)`` (TileLang's own spelling of
    :func:`reshape`: a buffer declared over another's data pointer)."""

    __slots__ = ("buffer",)

    def __init__(self, buffer: TileBuffer | BufferView) -> None:
        self.buffer = buffer

    def __repr__(self) -> str:
        return f"{self.buffer.name}.data"


def over_storage(data: Any, shape: Any, dtype: Any) -> BufferView | TileBuffer:
    """``T.Tensor(shape, dtype, data)`` inside a kernel: :func:`view` of the buffer whose ``.data`` ``data`` is.

    Raises:
        UnsupportedError: ``data`` is not a buffer's ``.data`` (a raw pointer: TileLang's ``T.make_tensor``).
    """
    if not isinstance(data, Storage):
        raise UnsupportedError(f"T.Tensor(shape, dtype, {data!r}): the third argument must be a buffer's .data (a view "
                               "of its storage); tensors over raw pointers are not supported", tracer.user_loc())
    return _make(data.buffer, shape, dtype, "T.Tensor(shape, dtype, buf.data)")


def reshape(src: Any, shape: Any) -> BufferView | TileBuffer:
    """``T.reshape(src, shape)``: ``src``'s storage as a buffer of ``shape`` (same element count, row-major; no
    copy: writes through either are seen by both).

    Raises:
        ShapeError: another element count. UnsupportedError: a symbolic shape.
    """
    return _make(src, shape, None, "T.reshape")


def view(src: Any, shape: Any = None, dtype: Any = None) -> BufferView | TileBuffer:
    """``T.view(src, shape=None, dtype=None)``: as :func:`reshape`; ``shape`` defaults to ``src``'s.

    With a ``dtype`` other than ``src``'s: a buffer of that dtype laid over ``src``'s storage, for scratch over
    storage the program no longer reads (module docstring; ``egtile.analysis.overlay`` proves it).

    Raises:
        UnsupportedError: a ``dtype`` view of a buffer outside shared memory. ShapeError: a view larger than its
            storage.
    """
    return _make(src, shape, dtype, "T.view")


# ---- tile ops on views --------------------------------------------------------------------------------------


def is_view(x: Any) -> bool:
    """Whether ``x`` is a view, a rectangle of one or an element of one (a start point)."""
    return isinstance(x, (BufferView, ViewRegion, ViewPoint))


class _Side:
    """One operand of a tile op lowered to element statements: its extents, and its element at a box position."""

    def __init__(self, handle: Any, offsets: tuple[Expr, ...], extents: tuple[int, ...] | None) -> None:
        self.handle, self.offsets, self.extents = handle, offsets, extents

    def at(self, pos: tuple[Value, ...]) -> tuple[Value, ...]:
        """The handle's indices of the element at box position ``pos`` (one entry per box dimension)."""
        return tuple(Value(o) if isinstance(p, int) and p == 0 else (Value(o) + p if static_value(o) != 0 else p)
                     for o, p in zip(self.offsets, pos))


def _side(x: Any, what: str, role: str, loc: SourceLoc | None) -> _Side:
    from egtile.language.buffer import RegionRef
    from egtile.language.letbind import lvalue

    x = lvalue(x)
    if isinstance(x, BufferView):
        return _Side(x, tuple(Const(0, "int32") for _ in x.shape), x.shape)
    if isinstance(x, ViewRegion):
        return _Side(x.view, x.offsets, x.extents)
    if isinstance(x, ViewPoint):
        return _Side(x.view, x.vindices, None)
    if isinstance(x, TileBuffer):
        x.check_owner(loc)
        return _Side(x, tuple(Const(0, "int32") for _ in x.shape), tuple(x.shape))
    if isinstance(x, RegionRef):
        r = x.region
        return _Side(_handle(r.buffer, loc), r.offsets, r.extents)
    if isinstance(x, Value) and isinstance(x.expr, Load):
        return _Side(_handle(x.expr.buffer, loc), x.expr.indices, None)
    raise DSLError(f"{what}: {role} must be a buffer, a view, a region or a start point, got {type(x).__name__}", loc)


def _handle(buffer: Any, loc: SourceLoc | None) -> TileBuffer:
    return TileBuffer(buffer, tracer.active())


def _fit(extents: tuple[int, ...], ndim: int, what: str, loc: SourceLoc | None) -> tuple[int, ...]:
    ext = list(extents)
    while len(ext) > ndim and ext[0] == 1:
        ext.pop(0)
    while len(ext) > ndim and 1 in ext:
        ext.remove(1)
    if len(ext) > ndim:
        raise ShapeError(f"{what}: the other operand's extents {extents} do not fit a {ndim}-dimensional start point",
                         loc)
    return tuple([1] * (ndim - len(ext)) + ext)


def _squeezed_positions(extents: tuple[int, ...], loop: tuple[Value, ...]) -> tuple[Any, ...]:
    it = iter(loop)
    return tuple(0 if e == 1 else next(it) for e in extents)


def _check(side: _Side, what: str, loc: SourceLoc | None) -> None:
    if isinstance(side.handle, TileBuffer) and side.handle.scope != "global":
        check_region(side.handle.buffer, side.offsets, side.extents, what, loc)


def _inside(side: _Side, idx: tuple[Any, ...]) -> Any:
    """For a side over a global tensor (a view of one, or a region of it): the condition that the element ``idx``
    lies inside it, or ``None`` when the trace proves it does (the loop and block variables' ranges). ``T.copy``
    past a tensor's edge reads zero there and writes nothing, as for a plain region (``egtile.language.copy_op``)."""
    from egtile.language.buffer import bounds
    from egtile.language.expr import And, as_expr

    if side.handle.scope != "global":
        return None
    ranges = tracer.current("T.copy").var_ranges
    cond = None
    for i, n in zip(idx, side.handle.shape):
        e = as_expr(i, "int32")
        b = bounds(e, ranges)
        if b is not None and b[0] >= 0 and b[1] < n:
            continue
        c = And(Value(e) >= 0, Value(e) < n)
        cond = c if cond is None else And(cond, c)
    return cond


def _move(a: _Side, b: _Side, pos_a: tuple[Any, ...], pos_b: tuple[Any, ...]) -> None:
    """``b[pos_b] = a[pos_a]``, clipped at a global tensor's edge (:func:`_inside`)."""
    from egtile.language import control
    from egtile.language.expr import if_then_else

    ia, ib = a.at(pos_a), b.at(pos_b)
    value = a.handle[ia]
    ca = _inside(a, ia)
    if ca is not None:
        value = if_then_else(ca, value, 0)
    cb = _inside(b, ib)
    if cb is None:
        b.handle[ib] = value
        return
    with control.If(cb):
        b.handle[ib] = value


def copy(src: Any, dst: Any, what: str = "T.copy") -> None:
    """``T.copy`` with a view on either side: the ``T.Parallel`` nest of element copies (row-major over the
    extents with unit dimensions dropped, as a copy pairs them)."""
    from egtile.language.loop import Parallel

    loc = tracer.user_loc()
    a, b = _side(src, what, "src", loc), _side(dst, what, "dst", loc)
    if a.extents is None and b.extents is None:
        a.extents = b.extents = (1,) * len(a.offsets)
        b.extents = (1,) * len(b.offsets)
    elif a.extents is None:
        a.extents = _fit(b.extents, len(a.offsets), what, loc)
    elif b.extents is None:
        b.extents = _fit(a.extents, len(b.offsets), what, loc)
    sa = tuple(e for e in a.extents if e != 1)
    sb = tuple(e for e in b.extents if e != 1)
    if sa != sb:
        raise ShapeError(f"{what}: src extents {a.extents} and dst extents {b.extents} differ (unit dimensions "
                         f"ignored: expected {sb}, got {sa})", loc)
    _check(a, f"{what} (src)", loc)
    _check(b, f"{what} (dst)", loc)
    if not sa:
        _move(a, b, _squeezed_positions(a.extents, ()), _squeezed_positions(b.extents, ()))
        return
    for pos in Parallel(*sa):
        pos = pos if isinstance(pos, tuple) else (pos,)
        _move(a, b, _squeezed_positions(a.extents, pos), _squeezed_positions(b.extents, pos))


def fill(dst: Any, value: Any, what: str = "T.fill") -> None:
    """``T.fill`` / ``T.clear`` of a view: the ``T.Parallel`` nest of element stores."""
    from egtile.language.loop import Parallel

    loc = tracer.user_loc()
    side = _side(dst, what, "buffer", loc)
    ext = side.extents if side.extents is not None else (1,) * len(side.offsets)
    kind = lookup_dtype(side.handle.dtype).kind
    if not isinstance(value, Value):
        value = (0.0 if kind == "float" else 0) if value is None else value
    squeezed = tuple(e for e in ext if e != 1)
    if not squeezed:
        side.handle[side.at(_squeezed_positions(ext, ()))] = value
        return
    for pos in Parallel(*squeezed):
        pos = pos if isinstance(pos, tuple) else (pos,)
        side.handle[side.at(_squeezed_positions(ext, pos))] = value


def reduce(kind: str, src: Any, dst: Any, dim: int, clear: bool) -> None:
    """``T.reduce_<kind>`` with a view as ``src`` or ``dst``: per output element, a serial loop over ``dim``
    accumulating in the reduction's accumulator dtype, then one store (the order of a sequential sum)."""
    from egtile import language as T
    from egtile.language.loop import Parallel, serial
    from egtile.tilemath import reduce_accumulator

    what = f"T.reduce_{kind}"
    loc = tracer.user_loc()
    for role, x in (("src", src), ("dst", dst)):
        if not isinstance(x, (TileBuffer, BufferView)):
            raise DSLError(f"{what}: {role} must be a whole buffer or view (regions are not supported), got "
                           f"{type(x).__name__}", loc)
    nd = len(src.shape)
    if isinstance(dim, bool) or not isinstance(dim, int) or not -nd <= dim < nd:
        raise ShapeError(f"{what}: dim must be an int in [{-nd}, {nd}) for {src.name} of shape {tuple(src.shape)}, "
                         f"got {dim!r}", loc)
    dim %= nd
    expected = tuple(src.shape[:dim]) + tuple(src.shape[dim + 1:])
    if tuple(dst.shape) != expected and not (expected == () and tuple(dst.shape) == (1,)):
        raise ShapeError(f"{what}: dst {dst.name} must have shape {expected or (1,)} ({src.name} of shape "
                         f"{tuple(src.shape)} without dimension {dim}), got {tuple(dst.shape)}", loc)
    acc_dtype = reduce_accumulator(src.dtype, dst.dtype).name
    acc_dtype = {"float32": "float32", "float64": "float64", "int64": "int64"}.get(acc_dtype, "float32")
    absolute = kind in ("abssum", "absmax")

    def term(v: Any) -> Any:
        v = T.cast(v, acc_dtype) if lookup_dtype(v.dtype).name != acc_dtype else v
        return T.abs(v) if absolute else v

    def combine(a: Any, b: Any) -> Any:
        if kind in ("sum", "abssum"):
            return a + b
        return T.max(a, b) if kind in ("max", "absmax") else T.min(a, b)

    def body(out: tuple[Any, ...]) -> None:
        didx = out if out else (0,)
        acc = T.alloc_var(acc_dtype)
        first = src[out[:dim] + (0,) + out[dim:]]
        old = dst[didx]
        old = T.cast(old, acc_dtype) if lookup_dtype(old.dtype).name != acc_dtype else old
        acc[0] = term(first) if clear else combine(old, term(first))
        for r in serial(1, src.shape[dim]):
            acc[0] = combine(acc[0], term(src[out[:dim] + (r,) + out[dim:]]))
        dst[didx] = acc[0]

    if not expected:
        body(())
        return
    for pos in Parallel(*expected):
        body(pos if isinstance(pos, tuple) else (pos,))
