"""Extern code and atomics: ``T.call_extern``, ``T.address_of``, ``T.import_source``, ``T.atomic_add``,
``T.atomic_addx2`` / ``T.atomic_addx4``.

``T.call_extern(ret_dtype, name, *args)`` is recorded as a statement (its result, if any, is discarded:
extern calls used as values are not supported). An ``T.address_of(buf[i])`` argument hands the callee a
pointer into ``buf``; the analyses treat such a call as reading and writing ``buf``. CPU executors run
the call through the Python model registered with ``egtile.register_extern(name, fn)``; a model
registered with ``pure=True`` at trace time marks the call pure (then pointer arguments are an error).
"""

from __future__ import annotations

from typing import Any

from egtile.errors import DSLError, ShapeError, UnsupportedError
from egtile.ir.kernel import AddressOf, AtomicAdd, Extern, If, Load
from egtile.language import tracer
from egtile.language.expr import Value, as_expr
from egtile.language.kernel import check_dtype
from egtile.language.buffer import check_region, past_edge
from egtile.language.letbind import lvalue


class ExternResult:
    """What ``T.call_extern`` returns: using it as a value raises, because the call is a statement."""

    _egtile_unusable = True  # egtile.language.expr.as_expr refuses it with _fail's message

    def __init__(self, name: str) -> None:
        self.name = name

    def _fail(self, *_: Any) -> Any:
        raise UnsupportedError(f"the result of T.call_extern({self.name!r}) used as a value; egtile supports extern "
                               "calls as statements only", tracer.user_loc())

    __bool__ = __add__ = __radd__ = __mul__ = __rmul__ = __sub__ = __rsub__ = __index__ = _fail
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __neg__ = __float__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = __int__ = _fail


def address_of(element: Any) -> Value:
    """``T.address_of(buf[i, j])``: a pointer to one element, only valid as a ``T.call_extern`` argument; the callee
    may read and write that element and no other (``T.access_ptr`` declares more: :class:`egtile.ir.kernel.AddressOf`).

    Raises:
        DSLError: the argument is not a buffer element.
    """
    loc = tracer.user_loc()
    tracer.current("T.address_of")
    element = lvalue(element)
    if not (isinstance(element, Value) and isinstance(element.expr, Load)):
        raise DSLError(f"T.address_of expects a buffer element such as buf[i], got {element!r}", loc)
    return Value(AddressOf(element.expr))


def call_extern(*args: Any, dtype: Any = None) -> ExternResult:
    """``T.call_extern(ret_dtype, name, *args)``: call the device function ``name`` (defined with
    ``T.import_source``) for its side effects. TileLang's keyword form ``T.call_extern(name, *args, dtype=ret)``
    means the same.

    Raises:
        DTypeError: unknown ``ret_dtype`` (``"void"`` is allowed).
        DSLError: a non-string ``name``, a pointer argument to a model registered as pure.
    """
    loc = tracer.user_loc()
    trace = tracer.current("T.call_extern")
    trace.require_kernel("T.call_extern")
    if dtype is not None:
        if len(args) >= 2 and isinstance(args[1], str) and isinstance(args[0], str):
            raise DSLError(f"T.call_extern({args[0]!r}, {args[1]!r}, ..., dtype=...): both forms at once; write "
                           f"T.call_extern(ret_dtype, name, *args) or T.call_extern(name, *args, dtype=ret_dtype)", loc)
        ret_dtype = dtype
    elif args:
        ret_dtype, args = args[0], args[1:]
    else:
        raise DSLError("T.call_extern needs the return dtype and the function's name: T.call_extern(ret_dtype, name, "
                       "*args) or T.call_extern(name, *args, dtype=ret_dtype)", loc)
    if not args:
        raise DSLError("T.call_extern: the function's name is missing", loc)
    name, args = args[0], args[1:]
    if dtype is None and isinstance(ret_dtype, str) and not isinstance(name, str) and ret_dtype != "void":
        raise DSLError(f"T.call_extern({ret_dtype!r}, ...): the second argument must be the function's name; for "
                       f"TileLang's keyword form give the return dtype as dtype=: T.call_extern({ret_dtype!r}, ..., "
                       "dtype='void')", loc)
    ret = "void" if ret_dtype in ("void", None) else check_dtype(ret_dtype, f"T.call_extern({name!r})", loc)
    if not isinstance(name, str) or not name.isidentifier():
        raise DSLError(f"T.call_extern: name must be a C identifier string, got {name!r}", loc)
    exprs = []
    for a in args:
        if isinstance(a, ExternResult):
            a._fail()
        from egtile.language.cp_async import AccessPtr

        if isinstance(a, AccessPtr):
            # the pointer's declared elements and access mode are the call's contract (egtile.ir.kernel.AddressOf)
            a = Value(AddressOf(a.load, a.numel, a.mask))
        exprs.append(as_expr(a))
    from egtile import externs

    model = externs.registered(name)
    pure = bool(model is not None and model.pure)
    if pure and any(isinstance(e, AddressOf) for e in exprs):
        raise DSLError(f"T.call_extern({name!r}): the extern is registered as pure but receives a pointer "
                       "(T.address_of) argument", loc)
    trace.emit(Extern(trace.sid(), name, ret, tuple(exprs), pure, loc), "T.call_extern")
    return ExternResult(name)


def import_source(source: str) -> None:
    """``T.import_source(src)``: device C++ source placed before the kernel (e.g. an extern's definition)."""
    loc = tracer.user_loc()
    trace = tracer.current("T.import_source")
    if not isinstance(source, str):
        raise DSLError(f"T.import_source expects a string, got {type(source).__name__}", loc)
    trace.sources.append(source)


def atomic_add(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False,
               use_tma: bool = False) -> None:
    """``T.atomic_add(buf[i, j], value)``: one atomic read-modify-write of one element; with a tile ``value`` (a
    buffer), every element of it into the tile of ``dst`` (a start point or a region), each one atomic.

    ``use_tma=True`` on a tile asks TileLang for a TMA reduction (``cp.reduce.async.bulk .add``), whose result is
    that of the element atomics; egtile emits the element ``atomicAdd``s (same result, not the TMA instruction).

    Raises:
        UnsupportedError: ``return_prev``, ``use_tma`` on one element, ``memory_order`` other than relaxed.
    """
    loc = tracer.user_loc()
    trace = tracer.current("T.atomic_add")
    trace.require_kernel("T.atomic_add")
    # memory_order="relaxed" is what atomicAdd is (PTX atom without .sem is .relaxed, PTX ISA 9.7.13.5); stronger
    # orders would need fences egtile does not emit
    from egtile.language.buffer import RegionRef, TileBuffer

    if return_prev or (use_tma and not isinstance(value, TileBuffer)) or memory_order not in (None, "relaxed"):
        raise UnsupportedError("T.atomic_add(return_prev=/use_tma= of one element/memory_order= other than "
                               "'relaxed')", loc)
    dst = lvalue(dst)

    if isinstance(dst, RegionRef) and isinstance(value, TileBuffer) and dst.buffer.scope == "global":
        _region_atomic_add(dst.region, value, loc)
        return
    if not (isinstance(dst, Value) and isinstance(dst.expr, Load)):
        raise UnsupportedError("T.atomic_add on a region or buffer (only one element, buf[i, ...], is supported)", loc)
    ld = dst.expr

    if isinstance(value, RegionRef):
        raise UnsupportedError(f"T.atomic_add of a buffer region into {ld.buffer.name}: copy the region into a "
                               "fragment first (T.copy), or write `for i, j in T.Parallel(...): T.atomic_add(dst[...], "
                               "src[i, j])`", loc)
    from egtile.language import bufview as view

    if isinstance(value, view.BufferView) or (isinstance(dst, view.ViewPoint) and isinstance(value, TileBuffer)):
        raise UnsupportedError("T.atomic_add of a whole tile with a buffer view (T.reshape / T.view) on either side: "
                               "write `for i, j in T.Parallel(...): T.atomic_add(dst[...], src[i, j])`", loc)
    if isinstance(value, TileBuffer):
        _tile_atomic_add(ld, value, loc)
        return
    _element_atomic(ld, value, loc, "T.atomic_add")


def _element_atomic(ld: Load, value: Any, loc, what: str) -> None:
    """One element atomic ``ld += value``. TileLang masks an atomic into a global tensor whose index it cannot prove
    inside, as it masks a store (:func:`egtile.language.buffer.past_edge`): outside the edge it adds nothing."""
    trace = tracer.current(what)
    edge = past_edge(ld.buffer, ld.indices) if ld.buffer.scope == "global" else None
    if edge is None:
        check_region(ld.buffer, ld.indices, (1,) * len(ld.indices), f"{what} ({ld.buffer.name})", loc)
    stmt = AtomicAdd(trace.sid(), ld.buffer, ld.indices, as_expr(value, ld.buffer.dtype), loc)
    if edge is not None:
        trace.emit(If(trace.sid(), edge, (stmt,), (), loc), what)
        return
    trace.emit(stmt, what)


def _lanes(x: Any, n: int, name: str, what: str, loc) -> tuple[Any, tuple[Any, ...]]:
    """The buffer and first element of ``n`` consecutive elements of the last dimension named by ``x``: an element
    (``B[i, j]``, the first of the ``n``) or a region of extent ``n`` in the last dimension and 1 in the others
    (``B[i, j:j + n]``)."""
    from egtile.language.buffer import RegionRef

    x = lvalue(x)
    if isinstance(x, Value) and isinstance(x.expr, Load):
        return x.expr.buffer, tuple(x.expr.indices)
    if isinstance(x, RegionRef):
        r = x.region
        if tuple(r.extents[:-1]) == (1,) * (len(r.extents) - 1) and r.extents[-1] == n:
            return r.buffer, tuple(r.offsets)
        raise ShapeError(f"{name}: the {what} region of {r.buffer.name} has extents {tuple(r.extents)}; it must be {n} "
                         "consecutive elements of the last dimension", loc)
    raise UnsupportedError(f"{name}: the {what} must be an element or {n} consecutive elements of a buffer "
                           f"(buf[i, j] or buf[i, j:j + {n}])", loc)


def _vector_atomic_add(n: int):
    name = f"T.atomic_addx{n}"

    def atomic_addxn(dst: Any, value: Any, return_prev: bool = False) -> None:
        loc = tracer.user_loc()
        trace = tracer.current(name)
        trace.require_kernel(name)
        if return_prev:
            raise UnsupportedError(f"{name}(return_prev=True): egtile's atomics return nothing", loc)
        db, di = _lanes(dst, n, name, "destination", loc)
        vb, vi = _lanes(value, n, name, "value", loc)
        if db.dtype != vb.dtype:
            raise UnsupportedError(f"{name}: {db.name} is {db.dtype} and {vb.name} {vb.dtype}; the vector atomic "
                                   "adds lanes of one type", loc)
        lanes = (1,) * (len(di) - 1) + (n,)
        for b, idx, what in ((db, di, "destination"), (vb, vi, "value")):
            if b.scope != "global" or past_edge(b, idx) is None:
                check_region(b, idx, lanes, f"{name} ({what} {b.name})", loc)
        # each lane is one atomic read-modify-write, as in the vector atomics TileLang emits (atomicAdd on a
        # float2/float4 or half2 is atomic per element, not as a whole: CUDA C++ Programming Guide, atomicAdd); a
        # lane of a global tensor past its edge reads zero and adds nothing, as an element load and atomic do
        from egtile.language import safeload

        for k in range(n):
            lane = lambda idx: tuple(as_expr(Value(i) + k if d == len(idx) - 1 else Value(i), "int32")
                                     for d, i in enumerate(idx))
            _element_atomic(Load(db, lane(di)), safeload.load(vb, lane(vi)), loc, name)

    atomic_addxn.__name__ = atomic_addxn.__qualname__ = f"atomic_addx{n}"
    atomic_addxn.__doc__ = (f"``{name}(dst[i, j], src[i, j])``: ``dst[i, j + k] += src[i, j + k]`` for k < {n}, each "
                            "lane one atomic (TileLang's vector atomic; egtile emits the lanes' element atomics, "
                            "the same result).")
    return atomic_addxn


atomic_addx2 = _vector_atomic_add(2)
atomic_addx4 = _vector_atomic_add(4)


def _tile_atomic_add(ld: Load, src: Any, loc) -> None:
    """TileLang's tile atomic ``T.atomic_add(C[o0, o1], C_local)``: ``C[o0 + i, o1 + j] += C_local[i, j]`` for every
    element of the tile, each one atomic (``atomicAdd``), the tile at the origin the element names (a source of
    fewer dimensions fills the destination's last ones). Traced as the ``T.Parallel`` nest of element atomics the
    refusal used to ask for, so the scheduler, verifier and simulator see exactly that."""
    from egtile.language.loop import Parallel

    shape = tuple(src.shape)
    nd = len(ld.indices)
    if len(shape) > nd:
        raise UnsupportedError(f"T.atomic_add of tile {src.name} {shape} into {ld.buffer.name}: the tile has more "
                               f"dimensions than the destination ({nd})", loc)
    extents = (1,) * (nd - len(shape)) + shape
    if ld.buffer.scope == "global":
        # the start point names the region of the tile's shape there: past the tensor's edge it clips as the
        # region form (and T.copy) does, instead of refusing what TileLang runs
        from egtile.ir.kernel import Region

        _region_atomic_add(Region(ld.buffer, ld.indices, extents), src, loc)
        return
    check_region(ld.buffer, ld.indices, extents, f"T.atomic_add ({ld.buffer.name} += {src.name})", loc)
    lead = nd - len(shape)
    for idx in Parallel(*shape):
        idx = idx if isinstance(idx, tuple) else (idx,)
        dst = tuple(Value(o) if d < lead else Value(o) + idx[d - lead] for d, o in enumerate(ld.indices))
        atomic_add(Value(Load(ld.buffer, tuple(as_expr(x, "int32") for x in dst))), src[idx])


def _region_atomic_add(r: Any, src: Any, loc) -> None:
    """``T.atomic_add(dQ[a:b, h, :], dq)``: the tile atomic into a region of a global tensor, element ``i`` of the
    tile (row-major) into the region's element of the same position over its non-unit dimensions. Elements
    outside the tensor are skipped, as a ``T.copy`` past the edge never writes them: each element atomic carries the
    edge guard where its index is not provably inside (:func:`_element_atomic`)."""
    from egtile.language.copy_op import bounded
    from egtile.language.loop import Parallel

    trace = tracer.current("T.atomic_add")
    r = bounded(r, f"T.atomic_add ({r.buffer.name})", loc, trace)
    shape = tuple(src.shape)
    if r.squeezed != tuple(d for d in shape if d != 1):
        raise ShapeError(f"T.atomic_add: region of {r.buffer.name} with extents {r.extents} and tile {src.name} "
                         f"{shape} differ (unit dimensions ignored)", loc)
    wide = [d for d, e in enumerate(r.extents) if e != 1]
    tile_dims = [d for d, e in enumerate(shape) if e != 1]
    for idx in Parallel(*shape):
        idx = idx if isinstance(idx, tuple) else (idx,)
        at = dict(zip(wide, (idx[t] for t in tile_dims)))
        dst = tuple(Value(o) + at[d] if d in at else Value(o) for d, o in enumerate(r.offsets))
        atomic_add(Value(Load(r.buffer, tuple(as_expr(x, "int32") for x in dst))), src[idx])
