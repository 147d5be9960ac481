"""Buffer handles: what ``T.Tensor`` parameters and ``T.alloc_*`` give the kernel body.

``buf[i, j]`` is a :class:`Value` holding an ``ir.Load`` (also a copy's start point, an atomic's target,
``T.address_of``'s argument); ``buf[i, j] = v`` records an ``ir.Store``; ``buf[a:b, :]`` or
``buf[k, :]`` is a :class:`RegionRef` (a rectangular tile, only valid as a tile-op operand).

Static range checks: an index or region whose bounds are known while tracing (constants, and linear
forms of loop / block indices with constant ranges) must lie inside the buffer, else
:class:`ShapeError` at the user's line. Inside ``T.If`` only constant positions are checked, because the
guard may be what keeps a symbolic one in range.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from egtile.errors import DSLError, ShapeError, SourceLoc, UnsupportedError
from egtile.evaluate import dtype_of
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import BinOp, Buffer, Const, Expr, If, Load, Region, Store, UnOp, Var
from egtile.language import safeload, tracer
from egtile.language.expr import IntImm, Value, as_expr


# ----------------------------------------------------------------------------------------------------
# Linear forms, for static bounds


def linear(e: Expr, atoms: bool = False) -> tuple[dict[Any, int], int] | None:
    """``e`` as ``sum(coef * var) + const`` with integer coefficients, or ``None`` if it is not linear.

    With ``atoms``, a subexpression that is not linear (a load, a division, ...) is a term of its own, keyed
    by the expression (IR expressions compare structurally): ``(A[i] + 64) - A[i]`` is the constant 64.
    That is sound where the occurrences are evaluated together (one slice's start and stop), since
    expressions have no side effects; only integer terms are atoms (float ``+``/``-`` do not cancel exactly).
    """
    match e:
        case Const(value=v) if isinstance(v, int) and not isinstance(v, bool):
            return {}, int(v)
        case Var(name=n):
            return {n: 1}, 0
        case UnOp(op="-", a=a):
            la = linear(a, atoms)
            return None if la is None else ({k: -c for k, c in la[0].items()}, -la[1])
        case BinOp(op="+" | "-" as op, a=a, b=b):
            la, lb = linear(a, atoms), linear(b, atoms)
            if la is None or lb is None:
                return None
            sign = 1 if op == "+" else -1
            coef = dict(la[0])
            for k, c in lb[0].items():
                coef[k] = coef.get(k, 0) + sign * c
            return {k: c for k, c in coef.items() if c != 0}, la[1] + sign * lb[1]
        case BinOp(op="*", a=a, b=b):
            la, lb = linear(a, atoms), linear(b, atoms)
            if la is None or lb is None:
                return None
            if not la[0]:
                la, lb = lb, la
            if lb[0]:
                return ({e: 1}, 0) if atoms and _integral(e) else None  # product of two variables
            k = lb[1]
            return {n: c * k for n, c in la[0].items() if c * k != 0}, la[1] * k
    if atoms and isinstance(e, Expr) and _integral(e):
        return {e: 1}, 0
    return None


def _integral(e: Expr) -> bool:
    """Whether ``e`` has an integer dtype (two's-complement ``+ - *`` cancel exactly; float ones do not)."""
    try:
        return lookup_dtype(dtype_of(e)).kind in ("int", "uint")
    except Exception:  # noqa: BLE001 - an expression whose dtype cannot be read is not an atom
        return False


def static_value(e: Expr) -> int | None:
    """The integer value of ``e`` if it is known while tracing (terms that cancel, such as the two loads of
    ``A[i] + 64 - A[i]``, are known: :func:`linear` with ``atoms``)."""
    lf = linear(e, atoms=True)
    if lf is None or lf[0]:
        return None
    return lf[1]


def bounds(e: Expr, ranges: dict[str, tuple[int, int]]) -> tuple[int, int] | None:
    """Exact ``(min, max)`` of a linear ``e`` over the rectangular ranges ``ranges`` (``[lo, hi)``), or
    ``None`` when ``e`` is not linear or mentions a variable without a constant range."""
    lf = linear(e)
    if lf is None:
        return None
    lo = hi = lf[1]
    for name, c in lf[0].items():
        if name not in ranges:
            return None
        vlo, vhi = ranges[name]
        if vhi <= vlo:
            return None  # empty loop: nothing runs
        a, b = c * vlo, c * (vhi - 1)
        lo += a if a < b else b
        hi += b if a < b else a
    return lo, hi


def past_edge(buffer: Buffer, indices: tuple[Expr, ...]) -> Expr | None:
    """The condition under which an element store ``buffer[indices]`` into a global tensor lies inside it, over
    the dimensions whose index the trace cannot prove inside (``None``: proved inside, or constant).

    TileLang's meaning (its ``LegalizeSafeMemoryAccess`` pass): a store into a *global* buffer whose index the
    compiler cannot prove inside the shape is guarded by ``0 <= index < shape`` per such dimension, and skipped
    when outside: the tensor's edge masks it. egtile proves and guards exactly as for an element load
    (:func:`egtile.language.safeload.condition`: the index's interval over the trace's ranges; an index read
    from data or a variable without a constant range is guarded too, also inside a ``T.If``), so the store runs
    under ``if <condition>:``. Shared, fragment and local buffers keep the range check: TileLang leaves an access
    past their end undefined (it only warns), and egtile refuses it; so does a constant index past the edge
    (TileLang skips the guard for constants).
    """
    return safeload.condition(buffer, indices)


def check_region(buffer: Buffer, offsets: tuple[Expr, ...], extents: tuple[int, ...], what: str,
                 loc: SourceLoc | None) -> None:
    """Raise :class:`ShapeError` if the region is statically out of ``buffer``'s range."""
    trace = tracer.active()
    ranges = trace.var_ranges if trace is not None and trace.guard_depth == 0 else {}
    from egtile.ir.printer import format_expr

    for dim, (off, ext, size) in enumerate(zip(offsets, extents, buffer.shape)):
        if ext > size or ext < 1:
            raise ShapeError(f"{what}: extent {ext} in dimension {dim} of {buffer.name} is outside 1..{size} "
                             f"(buffer shape {buffer.shape})", loc)
        b = bounds(off, ranges)
        if b is None:
            continue
        lo, hi = b
        if lo < 0 or hi + ext > size:
            span = f"{lo}..{hi + ext - 1}" if ext > 1 or lo != hi else f"{lo}"
            raise ShapeError(
                f"{what}: {buffer.name} dimension {dim} is accessed at `{format_expr(off)}`"
                f"{f' (+{ext})' if ext > 1 else ''}, i.e. indices {span}; expected 0..{size - 1} "
                f"(buffer shape {buffer.shape})", loc)


# ----------------------------------------------------------------------------------------------------
# Handles


@dataclass(frozen=True)
class RegionRef:
    """``buf[a:b, k]``: a rectangular tile of a buffer, as a tile-op operand."""

    region: Region

    @property
    def buffer(self) -> Buffer:
        return self.region.buffer


def _index_expr(i: Any, buffer: Buffer | None = None, loc: SourceLoc | None = None) -> Expr:
    if isinstance(i, IntImm):
        return Const(int(i), "int32")
    e = as_expr(i, "int32") if not isinstance(i, Value) else i.expr
    kind = lookup_dtype(dtype_of(e)).kind
    if kind not in ("int", "uint"):
        what = f"index of {buffer.name}" if buffer is not None else "buffer index"
        raise DSLError(f"{what} has dtype {dtype_of(e)}; indices must be integers (use T.cast(x, 'int32') to "
                       "convert explicitly)", loc)
    return e


class TileBuffer:
    """A buffer as seen by the kernel body (parameter or allocation).

    Attributes:
        buffer: the ``ir.Buffer``.
        owner: the name of the prim_func whose trace made it (``None`` for a handle made outside tracing).

    A handle belongs to the trace that made it: using it while another prim_func is traced (a handle kept
    in a closure or a global) raises :class:`DSLError` naming the buffer and both functions.
    """

    __slots__ = ("buffer", "owner", "_trace")

    def __init__(self, buffer: Buffer, trace: tracer.Trace | None = None) -> None:
        self.buffer = buffer
        self.owner = trace.name if trace is not None else None
        self._trace = weakref.ref(trace) if trace is not None else None

    def check_owner(self, loc: SourceLoc | None) -> None:
        """Raise :class:`DSLError` if the active trace is not the one this handle belongs to."""
        trace = tracer.active()
        if trace is None or self._trace is None or self._trace() is trace:
            return
        raise DSLError(f"buffer {self.buffer.name!r} belongs to prim_func {self.owner!r} but is used while tracing "
                       f"prim_func {trace.name!r}; a prim_func can only use its own parameters and allocations "
                       "(pass the tensor as a parameter instead)", loc)

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.buffer.shape

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def scope(self) -> str:
        return self.buffer.scope

    @property
    def data(self) -> Any:
        """The buffer's storage, for ``T.Tensor(shape, dtype, buf.data)``: a view (:mod:`egtile.language.bufview`)."""
        from egtile.language.bufview import Storage

        return Storage(self)

    def __repr__(self) -> str:
        return f"TileBuffer({self.buffer.name}: {self.buffer.scope} {self.buffer.dtype}{list(self.buffer.shape)})"

    def __bool__(self) -> bool:
        return True

    def _key(self, key: Any, loc: SourceLoc | None) -> tuple[Any, ...]:
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != len(self.buffer.shape):
            raise ShapeError(f"{self.buffer.name} has {len(self.buffer.shape)} dimension(s) "
                             f"(shape {self.buffer.shape}), indexed with {len(key)}", loc)
        return key

    def __getitem__(self, key: Any) -> Value | RegionRef:
        loc = tracer.user_loc()
        self.check_owner(loc)
        key = self._key(key, loc)
        if any(isinstance(k, slice) for k in key):
            return RegionRef(self._region(key, loc))
        indices = tuple(_index_expr(k, self.buffer, loc) for k in key)
        # Loads may sit under T.if_then_else guards we cannot see here: only constant indices are checked.
        for dim, (e, size) in enumerate(zip(indices, self.buffer.shape)):
            v = static_value(e)
            if v is not None and not 0 <= v < size:
                raise ShapeError(f"index {v} in dimension {dim} of {self.buffer.name} is out of range; expected "
                                 f"0..{size - 1} (buffer shape {self.buffer.shape})", loc)
        # an element of a global tensor whose index may leave it reads zero there (TileLang's meaning: safeload)
        return safeload.load(self.buffer, indices)

    def __setitem__(self, key: Any, value: Any) -> None:
        loc = tracer.user_loc()
        trace = tracer.current(f"storing to {self.buffer.name}")
        self.check_owner(loc)
        key = self._key(key, loc)
        if any(isinstance(k, slice) for k in key):
            raise UnsupportedError(f"slice assignment to {self.buffer.name}; use T.fill(region, value) or "
                                   "T.copy(src, region)", loc)
        indices = tuple(_index_expr(k, self.buffer, loc) for k in key)
        edge = past_edge(self.buffer, indices) if self.buffer.scope == "global" else None
        if edge is None:
            check_region(self.buffer, indices, (1,) * len(indices), f"store to {self.buffer.name}", loc)
        trace.require_kernel(f"storing to {self.buffer.name}")
        stmt = Store(trace.sid(), self.buffer, indices, as_expr(value, self.buffer.dtype), loc)
        if edge is not None:  # TileLang's masked store past a global tensor's edge (past_edge)
            trace.emit(If(trace.sid(), edge, (stmt,), (), loc), f"storing to {self.buffer.name}")
            return
        trace.emit(stmt, f"storing to {self.buffer.name}")

    def _region(self, key: tuple[Any, ...], loc: SourceLoc | None) -> Region:
        offsets: list[Expr] = []
        extents: list[int] = []
        for dim, (k, size) in enumerate(zip(key, self.buffer.shape)):
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise UnsupportedError(f"strided slice of {self.buffer.name} (step {k.step!r})", loc)
                for end in (k.start, k.stop) if self.buffer.scope != "global" else ():
                    if isinstance(end, int) and not isinstance(end, bool) and end < 0:
                        # Python counts a negative end from the back; a tile region's ends are indices (a global
                        # tensor's copy region may run past its edge: T.copy names a negative start itself)
                        raise ShapeError(f"slice {k.start if k.start is not None else ''}:"
                                         f"{k.stop if k.stop is not None else ''} of {self.buffer.name} (dimension "
                                         f"{dim}): constant {end} is negative; region ends are indices, not counted "
                                         f"from the back as in Python (write {size + end} for that place)", loc)
                start = _index_expr(0 if k.start is None else k.start, self.buffer, loc)
                stop = _index_expr(size if k.stop is None else k.stop, self.buffer, loc)
                ext = static_value(BinOp("-", stop, start))
                if ext is None:
                    from egtile.ir.printer import format_expr

                    raise ShapeError(f"slice {format_expr(start)}:{format_expr(stop)} of {self.buffer.name} "
                                     f"(dimension {dim}) has no static extent; expected stop - start to be a "
                                     "constant", loc)
                offsets.append(start)
                extents.append(ext)
            else:
                offsets.append(_index_expr(k, self.buffer, loc))
                extents.append(1)
        return Region(self.buffer, tuple(offsets), tuple(extents))


def unwrap_buffer(x: Any) -> Buffer | None:
    """The ``ir.Buffer`` of a :class:`TileBuffer`, else ``None``."""
    return x.buffer if isinstance(x, TileBuffer) else None


class VarBuffer(TileBuffer):
    """``T.alloc_var(dtype)``: a per-thread scalar variable (a one-element ``local`` buffer), TileLang's
    ``local.var``.

    It reads as its value wherever a scalar is expected (``x + 1``, ``A[x]``, ``if x > 0:``) and, under the
    source front end (:mod:`egtile.language.source`), ``x = e`` / ``x += e`` store into it; ``x[0]`` reads
    and writes it explicitly, as in TileLang. ``fresh`` is true until the variable is first bound to a name.
    """

    __slots__ = ("fresh",)

    def __init__(self, buffer: Buffer, trace: tracer.Trace | None = None) -> None:
        super().__init__(buffer, trace)
        self.fresh = True

    def value(self) -> Value:
        """The variable's current value (a read of element 0)."""
        self.check_owner(tracer.user_loc())
        return Value(Load(self.buffer, (Const(0, "int32"),)))

    _egtile_value = value  # egtile.language.expr.as_expr reads a variable as its value

    def assign(self, value: Any) -> None:
        """``x = value``: one store into the variable, here."""
        self[0] = value

    def __repr__(self) -> str:
        return f"VarBuffer({self.buffer.name}: {self.buffer.dtype})"

    def __bool__(self) -> bool:
        return bool(self.value())  # raises: a runtime value has no truth while tracing

    def __index__(self) -> int:
        return self.value().__index__()

    __int__ = __index__

    def __float__(self) -> float:
        return float(self.value())

    def astype(self, dtype: str) -> Value:
        return self.value().astype(dtype)

    __hash__ = object.__hash__


def _forward(op: str):
    def method(self: VarBuffer, *args: Any) -> Any:
        return getattr(self.value(), op)(*args)

    method.__name__ = op
    return method


def _in_place(op: str):
    def method(self: VarBuffer, other: Any) -> VarBuffer:
        self.assign(getattr(self.value(), op)(other))
        return self

    method.__name__ = op.replace("__", "__i", 1)
    return method


# `v += e` stores into the variable here, whether or not the source front end rewrote the line (a plain helper, or
# EGTILE_SOURCE_FRONTEND=0): falling back to __add__ would only rebind the name to an expression, silently. Under
# the front end the rebinding that follows (pyops.assign) sees the variable itself and stores nothing more.
for _op in ("__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__and__", "__or__", "__xor__",
            "__lshift__", "__rshift__", "__pow__"):
    setattr(VarBuffer, _op.replace("__", "__i", 1), _in_place(_op))

for _op in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
            "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__and__", "__rand__", "__or__", "__ror__",
            "__xor__", "__rxor__", "__lshift__", "__rlshift__", "__rshift__", "__rrshift__", "__eq__", "__ne__",
            "__lt__", "__le__", "__gt__", "__ge__", "__neg__", "__pos__", "__invert__", "__abs__", "__pow__",
            "__rpow__"):
    setattr(VarBuffer, _op, _forward(_op))
