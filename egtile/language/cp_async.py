"""TileLang's per-thread asynchronous copies of a hand-written protocol: ``T.access_ptr``, ``T.ptx_cp_async`` and
``T.cp_async_barrier_noinc``.

Names, argument order and meaning are TileLang's (``tilelang/language/builtin.py`` ``access_ptr`` and
``cp_async_barrier_noinc``, ``tilelang/language/tir/op.py`` ``ptx_cp_async``; a35008a):

* ``T.access_ptr(buf[i, ..., j], mode, n)``: a pointer to ``buf[i, ..., j]`` through which ``n`` consecutive
  elements are accessed (``mode``: ``"r"``, ``"w"``, ``"rw"`` or TileLang's bitmask 1, 2, 3). egtile takes it as the
  region ``buf[i, ..., j : j + n]``: the ``n`` elements must lie along the last dimension from the element given.
  It is an operand of ``T.ptx_cp_async`` only; of one element (``n`` 1, the default), ``T.call_extern`` also takes
  it as ``T.address_of(buf[...])``. Anywhere else it is an error at its line.
* ``T.ptx_cp_async(dst, src, num_elems)``: the executing thread copies ``num_elems`` elements from global memory
  (``src``) to shared memory (``dst``) asynchronously, ``num_elems`` x the element size being 4, 8 or 16 bytes
  (``cp.async.ca.shared.global`` for 4 and 8, ``.cg`` for 16; PTX ISA 9.7.9.25.3.1). TileLang's third argument is
  the number of *elements* (its codegen derives the byte width from the pointer's dtype).
* ``T.cp_async_barrier_noinc(bar)``: the executing thread arrives on ``bar`` once every ``cp.async`` it issued
  before has completed (``cp.async.mbarrier.arrive.noinc.shared::cta.b64``, PTX ISA 9.7.9.25.3.3); ``.noinc``: the
  arrival counts against ``bar``'s ``arrive_count`` like a ``T.mbarrier_arrive``. A thread that waits on that phase
  then sees the copies.

Where. These run per thread: ``T.ptx_cp_async`` belongs in the per-thread code of a warpgroup role of a kernel with
``T.alloc_barrier`` (TileLang's producer ``elif tx >= 256:``, :mod:`egtile.language.roles`), and nothing but a
``T.cp_async_barrier_noinc`` completes it (egtile has no ``cp.async.wait_group``), so it is refused elsewhere.
"""

from __future__ import annotations

from typing import Any

from egtile.errors import DSLError, ShapeError, SourceLoc, UnsupportedError
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import Const, Load, Region
from egtile.ir.protocol import CpAsync, CpAsyncArriveNoinc
from egtile.language import roles, tracer
from egtile.language.expr import Value, as_expr

CP_ASYNC_BYTES = (4, 8, 16)
"""The cp-size operand of ``cp.async`` (PTX ISA 9.7.9.25.3.1)."""

_MODES = {"r": 1, "w": 2, "rw": 3, 1: 1, 2: 2, 3: 3}


class AccessPtr:
    """What ``T.access_ptr`` returns: ``region`` (``n`` consecutive elements from the element given, or the whole
    buffer) and the access ``mask`` (1 read, 2 write, 3 both). Not a value: only ``T.ptx_cp_async`` and
    ``T.call_extern`` take it."""

    _egtile_unusable = True

    def __init__(self, load: Load, region: Region, mask: int, loc: SourceLoc | None) -> None:
        self.load, self.region, self.mask, self.loc = load, region, mask, loc

    @property
    def numel(self) -> int:
        """How many consecutive elements (row-major) the pointer reaches."""
        return self.region.numel

    def _fail(self, *_: Any) -> Any:
        raise DSLError(f"T.access_ptr({self.region.buffer.name}[...]) is a pointer for T.ptx_cp_async or a "
                       "T.call_extern argument; egtile does not compute with pointers",
                       tracer.user_loc() or self.loc)

    __bool__ = __add__ = __radd__ = __mul__ = __rmul__ = __sub__ = __rsub__ = __index__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = __int__ = __float__ = __neg__ = _fail

    def __repr__(self) -> str:
        return f"<T.access_ptr {self.region.buffer.name} x{self.region.extents[-1]}>"


def _static(v: Any, what: str, loc: SourceLoc | None) -> int:
    e = as_expr(v) if not isinstance(v, int) else Const(v)
    if isinstance(v, bool) or not isinstance(e, Const) or not isinstance(e.value, int) or isinstance(e.value, bool):
        raise DSLError(f"{what} must be an int known when the kernel is traced, got {v!r}", loc)
    return int(e.value)


def access_ptr(base: Any, access_type: Any = "r", *extents: Any, offset: Any = 0, extent: Any = None,
               ignore_last_ndim: int = 0) -> AccessPtr:
    """``T.access_ptr(buf[i, ..., j], mode, n)``: ``n`` consecutive elements of ``buf`` from ``buf[i, ..., j]``
    along its last dimension (module docstring).

    Raises:
        DSLError: ``base`` is not a buffer element, an unknown ``mode``, an extent that is not a positive int.
        UnsupportedError: ``offset``, ``ignore_last_ndim``, or extents over more than the last dimension.
        ShapeError: the elements run past the last dimension.
    """
    from egtile.language.letbind import lvalue

    from egtile.language.buffer import TileBuffer

    loc = tracer.user_loc()
    tracer.current("T.access_ptr").require_kernel("T.access_ptr")
    whole = None
    if isinstance(base, TileBuffer):
        # TileLang's pointer to a whole buffer (`T.access_ptr(B_local, "r")`): its first element, all of it
        whole = base
        base = base[tuple(0 for _ in base.buffer.shape)] if base.buffer.shape else None
        if not (isinstance(base, Value) and isinstance(base.expr, Load) and base.expr.buffer == whole.buffer
                and all(isinstance(i, Const) and i.value == 0 for i in base.expr.indices)):
            raise UnsupportedError(f"T.access_ptr({whole.buffer.name}): a pointer to a whole view of another buffer "
                                   "is not supported; pass the element it starts at and the number of elements, "
                                   "T.access_ptr(buf[i, j], mode, n)", loc)
    base = lvalue(base)
    if not (isinstance(base, Value) and isinstance(base.expr, Load)):
        named = getattr(getattr(base, "buffer", None), "name", None)
        raise UnsupportedError(
            f"T.access_ptr({named or repr(base)}): egtile takes a buffer element (buf[i, j], the start of `n` "
            "consecutive elements) or a whole buffer as the base", loc)
    if access_type not in _MODES:
        raise DSLError(f"T.access_ptr: access_type must be 'r', 'w', 'rw' (or 1, 2, 3), got {access_type!r}", loc)
    if ignore_last_ndim:
        raise UnsupportedError("T.access_ptr(ignore_last_ndim=...) is not supported: name the element", loc)
    if not (isinstance(offset, int) and offset == 0):
        raise UnsupportedError("T.access_ptr(offset=...) is not supported: add the offset to the element's last index",
                               loc)
    if len(extents) == 1 and isinstance(extents[0], (list, tuple)):
        extents = tuple(extents[0])
    sizes = [_static(x, "T.access_ptr: an extent", loc) for x in extents]
    n = _static(extent, "T.access_ptr: extent", loc) if extent is not None else (sizes[-1] if sizes else 1)
    if extent is None and any(x != 1 for x in sizes[:-1]):
        raise UnsupportedError(f"T.access_ptr with extents {sizes}: egtile takes consecutive elements along the last "
                               "dimension only (one extent)", loc)
    ld = base.expr
    buf = ld.buffer
    if whole is not None:
        if extents or extent is not None:
            raise UnsupportedError(f"T.access_ptr({buf.name}, ...) with an extent: of a whole buffer it is all of it; "
                                   "name the element the run starts at instead, T.access_ptr(buf[i, j], mode, n)", loc)
        return AccessPtr(ld, Region(buf, tuple(ld.indices), tuple(buf.shape)), _MODES[access_type], loc)
    if n < 1:
        raise DSLError(f"T.access_ptr: the extent must be at least 1, got {n}", loc)
    if n > buf.shape[-1]:
        raise ShapeError(f"T.access_ptr({buf.name}[...], {n}): {n} elements do not fit the last dimension of "
                         f"{buf.name} {buf.shape}", loc)
    last = ld.indices[-1]
    if isinstance(last, Const) and isinstance(last.value, int) and not 0 <= last.value <= buf.shape[-1] - n:
        raise ShapeError(f"T.access_ptr({buf.name}[..., {last.value}], {n}): elements {last.value}..{last.value + n - 1}"
                         f" run past the last dimension of {buf.name} {buf.shape}", loc)
    region = Region(buf, tuple(ld.indices), (1,) * (len(buf.shape) - 1) + (n,))
    return AccessPtr(ld, region, _MODES[access_type], loc)


def ptx_cp_async(dst_access_ptr: Any, src_access_ptr: Any, num_elems: Any, predicate: Any = None) -> None:
    """``T.ptx_cp_async(dst, src, num_elems)``: this thread's asynchronous copy of ``num_elems`` elements, global
    ``src`` -> shared ``dst`` (module docstring).

    Raises:
        DSLError: operands that are not ``T.access_ptr`` pointers, global -> shared, of one dtype, with the access
            modes and extents the copy needs; a byte count other than 4, 8 or 16.
        UnsupportedError: ``predicate`` (TileLang's zero-filling form), or the call outside the per-thread code of a
            warpgroup role of a kernel with ``T.alloc_barrier``.
    """
    loc = tracer.user_loc()
    trace = tracer.current("T.ptx_cp_async")
    trace.require_kernel("T.ptx_cp_async")
    if predicate is not None:
        raise UnsupportedError("T.ptx_cp_async(..., predicate=): the zero-filling predicated form is not supported; "
                               "put the copy under an `if` on the condition (and write the zeros yourself)", loc)
    if not roles.is_protocol_kernel(trace) or not roles.in_role(trace):
        raise UnsupportedError("T.ptx_cp_async outside a warpgroup role of a hand-written barrier protocol: egtile "
                               "completes a per-thread cp.async only through T.cp_async_barrier_noinc on an mbarrier "
                               "(it has no cp.async.wait_group), so write it in the per-thread code of a role "
                               "(`if tx >= 256:` or `with T.ws(g):` in a kernel with T.alloc_barrier), or use "
                               "T.copy / T.async_copy and let egtile choose cp.async", loc)
    for arg, name, need in ((dst_access_ptr, "dst", 2), (src_access_ptr, "src", 1)):
        if not isinstance(arg, AccessPtr):
            raise DSLError(f"T.ptx_cp_async: {name} must be a T.access_ptr(buf[...], mode, n), got {arg!r}", loc)
        if not arg.mask & need:
            raise DSLError(f"T.ptx_cp_async: {name} T.access_ptr({arg.region.buffer.name}[...]) has access mode "
                           f"{ {1: 'r', 2: 'w', 3: 'rw'}[arg.mask]!r}, but the copy "
                           f"{'writes' if need == 2 else 'reads'} it", loc)
    dst, src = dst_access_ptr.region, src_access_ptr.region
    if src.buffer.scope != "global" or dst.buffer.scope != "shared":
        raise DSLError(f"T.ptx_cp_async copies global memory into shared memory (cp.async.shared.global), got "
                       f"{src.buffer.scope} {src.buffer.name} -> {dst.buffer.scope} {dst.buffer.name}", loc)
    if src.buffer.dtype != dst.buffer.dtype:
        raise DSLError(f"T.ptx_cp_async: {src.buffer.name} ({src.buffer.dtype}) and {dst.buffer.name} "
                       f"({dst.buffer.dtype}) have different dtypes: cp.async copies bytes", loc)
    n = _static(num_elems, "T.ptx_cp_async: num_elems", loc)
    nbytes = n * lookup_dtype(dst.buffer.dtype).bytes
    if nbytes not in CP_ASYNC_BYTES:
        raise DSLError(f"T.ptx_cp_async: {n} elements of {dst.buffer.dtype} are {nbytes} bytes; cp.async copies 4, 8 "
                       "or 16 bytes (num_elems counts elements, as in TileLang)", loc)
    for r, name in ((dst, "dst"), (src, "src")):
        if r.numel != n or r.extents[-1] != n:
            raise DSLError(f"T.ptx_cp_async: {name} T.access_ptr({r.buffer.name}[...]) covers {r.numel} "
                           f"elements, the copy moves {n}: give the pointer the copy's extent", loc)
    trace.emit(CpAsync(trace.sid(), src, dst, "cp_async", loc, nbytes), "T.ptx_cp_async")


def cp_async_barrier_noinc(barrier: Any) -> None:
    """``T.cp_async_barrier_noinc(bar)``: this thread's arrival on ``bar`` once its earlier cp.async copies have
    completed (module docstring).

    Raises:
        DSLError: ``bar`` is not a barrier of ``T.alloc_barrier``.
    """
    from egtile.language.barrier import _begin, _ref

    trace, loc = _begin("T.cp_async_barrier_noinc")
    name, idx = _ref(barrier, "T.cp_async_barrier_noinc", loc)
    trace.emit(CpAsyncArriveNoinc(trace.sid(), name, idx, loc), "T.cp_async_barrier_noinc")


__all__ = ["AccessPtr", "access_ptr", "cp_async_barrier_noinc", "ptx_cp_async"]
