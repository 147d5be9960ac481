"""``T.alloc_shared`` / ``T.alloc_fragment`` / ``T.alloc_local``: on-chip buffers of one block; ``T.alloc_global``:
a scratch tensor in device memory shared by the prim_func's kernels.

Each call adds an ``ir.Buffer`` to the kernel's allocations (in call order) and returns its handle.
The buffer is named after the Python variable it is assigned to (``A_shared = T.alloc_shared(...)``),
made unique within the kernel. Contents start undefined (executors poison them).
"""

from __future__ import annotations

from typing import Any

from egtile.ir.kernel import Buffer, Scope
from egtile.language import tracer
from egtile.language.buffer import TileBuffer, VarBuffer
from egtile.language.kernel import check_dtype, check_shape


def _alloc(scope: Scope, shape: Any, dtype: Any, what: str) -> TileBuffer:
    loc = tracer.user_loc()
    trace = tracer.current(what)
    trace.require_kernel(what)
    shape_t = check_shape(shape, what, loc)
    dtype_s = check_dtype(dtype, what, loc)
    name = trace.fresh_buffer_name(tracer.assign_target_name(loc), f"{scope}_buf")
    buf = Buffer(name, shape_t, dtype_s, scope, loc=loc)
    trace.allocs.append(buf)
    return TileBuffer(buf, trace)


def alloc_shared(shape: Any, dtype: Any, scope: str = "shared.dyn") -> TileBuffer:
    """A tile in the block's shared memory.

    Args:
        shape: static extents (elements).
        dtype: TileLang dtype name.
        scope: accepted for TileLang compatibility (``"shared"`` / ``"shared.dyn"``).

    Raises:
        DTypeError, ShapeError: bad dtype or shape.
    """
    return _alloc("shared", shape, dtype, "T.alloc_shared")


_SCOPES: dict[str, Scope] = {"local.fragment": "fragment", "local": "local", "local.var": "local",
                             "shared": "shared", "shared.dyn": "shared"}


def _scope(scope: Any, what: str) -> Scope:
    """The storage TileLang's ``scope`` argument names: TileLang's ``alloc_fragment`` / ``alloc_local`` are
    ``T.alloc_buffer(shape, dtype, scope=scope)``, so ``T.alloc_fragment(shape, dtype, "local")`` is a per-thread
    buffer, not a fragment (TileLang's stream-K example keeps its loop counter in one).

    Raises:
        DSLError: a scope that is none of TileLang's on-chip scopes.
    """
    from egtile.errors import DSLError

    if not isinstance(scope, str) or scope not in _SCOPES:
        raise DSLError(f"{what}(..., scope={scope!r}): expected one of {', '.join(map(repr, _SCOPES))}",
                       tracer.user_loc())
    return _SCOPES[scope]


def alloc_fragment(shape: Any, dtype: Any, scope: str = "local.fragment") -> TileBuffer:
    """A tile distributed over the block's threads (in registers when its users admit a register layout, else in
    shared memory); another ``scope`` is that storage (:func:`_scope`)."""
    return _alloc(_scope(scope, "T.alloc_fragment"), shape, dtype, "T.alloc_fragment")


def alloc_local(shape: Any, dtype: Any, scope: str = "local") -> TileBuffer:
    """Per-thread registers: every thread holds the whole ``shape``; another ``scope`` is that storage
    (:func:`_scope`)."""
    return _alloc(_scope(scope, "T.alloc_local"), shape, dtype, "T.alloc_local")


def alloc_var(dtype: Any, *args: Any, scope: str = "local.var", init: Any = None) -> VarBuffer:
    """``T.alloc_var(dtype[, init][, scope], init=)``: a per-thread scalar variable (TileLang's ``local.var``).

    ``x = T.alloc_var(T.int32, 0)`` then ``x = x + 1`` stores into it (under the source front end; ``x[0] =``
    works everywhere), and ``x`` reads as its value. Without ``init`` its value starts undefined (executors
    poison it). A single string positional argument is the scope, two are ``(init, scope)``, as in TileLang.

    Raises:
        DSLError: the initializer given twice, a scope that is not a string, more than two positional arguments.
    """
    from egtile.errors import DSLError

    loc = tracer.user_loc()
    if len(args) == 1:
        if isinstance(args[0], str) and init is None:
            scope = args[0]
        elif init is not None:
            raise DSLError("T.alloc_var: initializer given twice", loc)
        else:
            init = args[0]
    elif len(args) == 2:
        if init is not None:
            raise DSLError("T.alloc_var: initializer given twice", loc)
        init, scope = args
    elif len(args) > 2:
        raise DSLError(f"T.alloc_var expects at most 3 positional arguments, got {len(args) + 1}", loc)
    if not isinstance(scope, str):
        raise DSLError(f"T.alloc_var: scope must be a string, got {scope!r}", loc)
    trace = tracer.current("T.alloc_var")
    trace.require_kernel("T.alloc_var")
    dtype_s = check_dtype(dtype, "T.alloc_var", loc)
    name = trace.fresh_buffer_name(tracer.assign_target_name(loc), "var")
    buf = Buffer(name, (1,), dtype_s, "local", loc=loc)
    trace.allocs.append(buf)
    var = VarBuffer(buf, trace)
    if init is not None:
        var.assign(init)
    return var


def alloc_global(shape: Any, dtype: Any) -> TileBuffer:
    """``T.alloc_global(shape, dtype)`` before the ``T.Kernel`` blocks of a prim_func: a scratch tensor in
    device memory that its kernels share (a split-KV attention's partial results, written by the first kernel
    and combined by the next). It is a parameter the caller does not pass: each call allocates it
    (uninitialized, as TileLang's) and drops it after the last kernel (:mod:`egtile.kernelseq`).

    Raises:
        DSLError: inside a ``T.Kernel`` block.
        UnsupportedError: in an eager function.
        DTypeError, ShapeError: bad dtype or shape.
    """
    from egtile.errors import DSLError, UnsupportedError
    from egtile.language import eager

    loc = tracer.user_loc()
    trace = tracer.current("T.alloc_global")
    if trace.in_kernel:
        raise DSLError("T.alloc_global inside a T.Kernel block: allocate the global scratch before the kernels, at "
                       "the top of the prim_func", loc)
    if eager.active() is not None:
        raise UnsupportedError("T.alloc_global in an eager function: allocate the scratch with T.empty (returned or "
                               "not), or write the kernels as a @T.prim_func in a factory", loc)
    shape_t = check_shape(shape, "T.alloc_global", loc)
    dtype_s = check_dtype(dtype, "T.alloc_global", loc)
    buf = Buffer(trace.fresh_buffer_name(tracer.assign_target_name(loc), "global_buf"), shape_t, dtype_s, "global",
                 loc=loc)
    trace.params.append(buf)
    trace.hidden.append(buf)
    return TileBuffer(buf, trace)


_BUFFER_SCOPES = {"global": "global", "shared": "shared", "shared.dyn": "shared", "local.fragment": "fragment",
                  "local": "local"}


def alloc_buffer(shape: Any, dtype: Any = "float32", scope: str = "global", **_: Any) -> TileBuffer:
    """TVM's ``T.alloc_buffer(shape, dtype, scope="global")``: the allocation of that scope. ``"global"`` (the
    default) is :func:`alloc_global` (a scratch tensor before the kernels), ``"shared"`` / ``"shared.dyn"``
    :func:`alloc_shared`, ``"local.fragment"`` :func:`alloc_fragment`, ``"local"`` :func:`alloc_local`.

    Raises:
        UnsupportedError: another scope.
    """
    from egtile.errors import UnsupportedError

    kind = _BUFFER_SCOPES.get(scope)
    if kind is None:
        raise UnsupportedError(f"T.alloc_buffer(scope={scope!r}): egtile allocates the scopes "
                               f"{', '.join(sorted(_BUFFER_SCOPES))}", tracer.user_loc())
    if kind == "global":
        return alloc_global(shape, dtype)
    if kind == "shared":
        return alloc_shared(shape, dtype)
    return alloc_fragment(shape, dtype) if kind == "fragment" else alloc_local(shape, dtype)
