"""``@T.prim_func``, ``T.Tensor`` and ``T.Kernel``: the frame of a kernel.

``@T.prim_func`` traces the decorated function right away (TileLang parses it at decoration time too):
each parameter annotated ``T.Tensor(shape, dtype)`` becomes a global buffer, the body runs once with
symbolic values, and the result is a :class:`PrimFunc` whose ``.kernel`` is the ``ir.Kernel``.

``with T.Kernel(*grid, threads=128) as bx:`` opens the body of one block; ``bx`` (or ``(bx, by)``) are
the block indices. Grid extents and ``threads`` must be static. A prim_func with several ``T.Kernel`` blocks
is several kernels with the same parameters, launched one after another (:mod:`egtile.kernelseq`).
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Any, Callable

from egtile import limits
from egtile.errors import DSLError, DTypeError, ResourceError, ShapeError, SourceLoc, UnsupportedError, public
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import PARTIAL_WARPS, Buffer, Kernel as IRKernel, Var, block_size_ok
from egtile.language import carried, letbind, source, trace_memo, tracer
from egtile.language.buffer import TileBuffer, static_value
from egtile.language.expr import DTypeName, Value, as_expr, dtype_text


def check_dtype(dtype: Any, what: str, loc: SourceLoc | None) -> str:
    """Canonical name of ``dtype``; :class:`DTypeError` naming ``what`` if unknown."""
    try:
        return lookup_dtype(dtype_text(dtype)).name
    except DTypeError as err:
        raise DTypeError(f"{what}: {err.message}", loc) from None


def check_shape(shape: Any, what: str, loc: SourceLoc | None) -> tuple[int, ...]:
    """``shape`` as a tuple of positive Python ints; :class:`ShapeError` / :class:`UnsupportedError`."""
    if isinstance(shape, (int, Value)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise ShapeError(f"{what}: shape must be a tuple of ints, got {type(shape).__name__} {shape!r}", loc)
    out = []
    for e in shape:
        if isinstance(e, Value):
            v = static_value(e.expr)
            if v is None:
                raise UnsupportedError(f"{what}: symbolic shape entry (shapes must be static ints)", loc)
            e = v
        if isinstance(e, bool) or not isinstance(e, int):
            raise ShapeError(f"{what}: shape entries must be ints, got {type(e).__name__} {e!r}", loc)
        if e < 1:
            raise ShapeError(f"{what}: shape entries must be positive, got {tuple(shape)}", loc)
        out.append(int(e))
    return tuple(out)


@dataclass(frozen=True)
class Tensor:
    """``T.Tensor(shape, dtype)``: the annotation of a global (device memory) kernel parameter.

    Args:
        shape: static extents, outermost first (elements).
        dtype: TileLang dtype name.

    Raises:
        DTypeError: unknown dtype.
        ShapeError: shape entries that are not positive ints.
    """

    shape: tuple[int, ...]
    dtype: str

    def __new__(cls, shape: Any = (), dtype: Any = "float32", data: Any = None) -> Any:
        from egtile.language.eager import PendingTensor, Sym

        if data is not None:  # T.Tensor(shape, dtype, buf.data): a view of buf's storage (TileLang's T.reshape)
            from egtile.language import bufview

            return bufview.over_storage(data, shape, dtype)
        entries = shape if isinstance(shape, (tuple, list)) else (shape,)
        if any(isinstance(e, Sym) for e in entries):  # an eager kernel's binding pass: names not yet ints
            return PendingTensor(tuple(entries), str(dtype_text(dtype)))
        return object.__new__(cls)

    def __class_getitem__(cls, item: Any) -> Any:
        """``T.Tensor[[M, K], dtype]``, TileLang's subscript spelling of ``T.Tensor((M, K), dtype)``."""
        if not isinstance(item, tuple) or len(item) != 2:
            raise DSLError(f"T.Tensor[shape, dtype] expects a shape and a dtype, got {item!r}", tracer.user_loc())
        return cls(item[0], item[1])

    def __init__(self, shape: Any, dtype: Any = "float32", data: Any = None) -> None:
        loc = tracer.user_loc()
        object.__setattr__(self, "shape", check_shape(shape, "T.Tensor", loc))
        object.__setattr__(self, "dtype", check_dtype(dtype, "T.Tensor", loc))


@dataclass(frozen=True)
class PrimFunc:
    """A traced ``@T.prim_func``.

    Attributes:
        kernel: the ``ir.Kernel`` (of the first ``with T.Kernel`` block when there are several).
        fn: the Python function it was traced from.
    """

    kernel: IRKernel
    fn: Callable[..., Any]
    more: tuple[IRKernel, ...] = ()  # the kernels of the further T.Kernel blocks, launched after ``kernel``
    hidden: int = 0  # trailing parameters that are T.alloc_global scratch, allocated by each call

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def kernels(self) -> tuple[IRKernel, ...]:
        """Every kernel of the prim_func, in launch order (one per ``with T.Kernel`` block)."""
        return (self.kernel, *self.more)

    def __str__(self) -> str:
        return str(self.kernel)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise DSLError(f"prim_func {self.kernel.name!r} cannot be called directly; compile it first with "
                       "egtile.compile(func) or @egtile.jit", tracer.user_loc())


# _def_loc by (code object, file, its modification time): reading and tokenizing the source was most of a
# warm compile's trace (issue 11); an edited file has another time and is read again
_DEF_LOCS: dict[Any, SourceLoc | None] = {}


def _def_loc(fn: Callable[..., Any]) -> SourceLoc | None:
    code = getattr(fn, "__code__", None)
    if code is None:
        return _read_def_loc(fn)
    try:
        key = (code, code.co_filename, os.stat(code.co_filename).st_mtime_ns)
    except OSError:
        return _read_def_loc(fn)
    if key not in _DEF_LOCS:
        if len(_DEF_LOCS) >= 4096:
            _DEF_LOCS.clear()
        _DEF_LOCS[key] = _read_def_loc(fn)
    return _DEF_LOCS[key]


def _read_def_loc(fn: Callable[..., Any]) -> SourceLoc | None:
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    for offset, text in enumerate(lines):
        if text.lstrip().startswith(("def ", "async def ")):
            return SourceLoc(inspect.getsourcefile(fn) or "<unknown>", start + offset, text.strip())
    return SourceLoc(inspect.getsourcefile(fn) or "<unknown>", start, lines[0].strip() if lines else "")


@public
def prim_func(fn: Callable[..., Any]) -> Any:
    """Trace ``fn`` into an ``ir.Kernel``.

    Every parameter must be annotated ``T.Tensor(shape, dtype)`` or, for a scalar kernel parameter, a dtype
    (``max_seqlen: T.int32``); the body must contain exactly one ``with T.Kernel(...)``. A prim_func with
    scalar parameters, or with ``T.dynamic`` sizes of its factory, is traced when it is called, once per
    binding (a :class:`egtile.language.calltime.DeferredPrimFunc`).

    Raises:
        DSLError: a parameter without a ``T.Tensor`` annotation, no or several ``T.Kernel``, or any
            tracing error of the body (each names the user's line).
    """
    if isinstance(fn, PrimFunc):
        return fn
    loc = _def_loc(fn)
    sig = inspect.signature(fn)
    # Under ``from __future__ import annotations`` the annotations are strings, and the factory's variables
    # they name (``M``, ``block_K``) are not captured by the closure: evaluate them in the frame that
    # applies the decorator, which is where the ``def`` stands.
    caller = tracer.user_frame()
    scope = dict(caller.f_locals) if caller is not None else {}
    try:
        annotations = _annotations(fn, scope)
    except Exception as err:
        raise DSLError(f"cannot evaluate the parameter annotations of prim_func {fn.__name__!r} ({err}); "
                       "annotate parameters with T.Tensor(shape, dtype)", loc) from None
    names = list(sig.parameters)
    annotations = {name: annotations.get(name, p.annotation) for name, p in sig.parameters.items()}
    from egtile.language import calltime as dynamic

    if dynamic.deferred_reason(annotations, names):
        # sizes or scalars bound when the kernel is called (egtile.language.calltime)
        return dynamic.make_deferred(fn, annotations, names, loc)
    p = dynamic.current()
    scalars = {n: p.scalars[n] for n in names if isinstance(annotations[n], DTypeName)} if p is not None else {}
    return trace_prim_func(fn, annotations, loc, scalars)


def trace_prim_func(fn: Callable[..., Any], annotations: dict[str, Any], loc: SourceLoc | None,
                    scalars: dict[str, Any]) -> PrimFunc:
    """Trace ``fn``'s body: each ``T.Tensor`` parameter a global buffer, each scalar parameter (annotated with
    a dtype) the Python number ``scalars`` gives it, a compile-time constant of this kernel."""
    memo_key = trace_memo.key(fn, annotations) if not scalars else None
    memo = trace_memo.get(memo_key)
    if memo is not None:  # traced before with everything the body reads unchanged (egtile.language.trace_memo)
        return PrimFunc(memo, fn)
    trace = tracer.Trace(fn.__name__, loc)
    handles: list[Any] = []
    for name, ann in annotations.items():
        if isinstance(ann, DTypeName) and name in scalars:
            handles.append(scalars[name])
            continue
        if not isinstance(ann, Tensor):
            raise DSLError(f"parameter {name!r} of prim_func {fn.__name__!r} must be annotated "
                           f"T.Tensor(shape, dtype), got {ann!r}", loc)
        buf = Buffer(trace.fresh_buffer_name(name, "arg"), ann.shape, ann.dtype, "global")
        trace.params.append(buf)
        handles.append(TileBuffer(buf, trace))
    runner = source.rewrite(fn, "prim_func")
    token = tracer.start(trace)
    try:
        runner(*handles)
    finally:
        tracer.stop(token)
    if trace.body is None:
        raise DSLError(f"prim_func {fn.__name__!r} has no `with T.Kernel(...)` block", loc)
    if trace.parts or trace.hidden:  # several T.Kernel blocks, global scratch: launched by egtile.kernelseq
        parts = [*trace.parts, trace]
        for t in parts:  # every kernel has every parameter, the scratch ones too (T.alloc_global comes first)
            t.params = list(trace.params)
        kernels = build_kernels(parts, fn.__name__, loc)
        return PrimFunc(kernels[0], fn, tuple(kernels[1:]), len(trace.hidden))
    kernel = build_kernel(trace, fn.__name__, loc)
    trace_memo.put(memo_key, kernel)
    return PrimFunc(kernel, fn)


def _annotations(fn: Callable[..., Any], scope: dict[str, Any]) -> dict[str, Any]:
    """``fn``'s annotations, those written as strings (``from __future__ import annotations``) evaluated in
    ``scope``. A dtype constant (``T.int32``, a ``str`` subclass) is a value already, never source text."""
    raw = inspect.get_annotations(fn)
    glb = getattr(fn, "__globals__", {})
    return {k: eval(v, glb, scope) if type(v) is str else v for k, v in raw.items()}  # noqa: S307 - user's own source


def build_kernel(trace: tracer.Trace, name: str, loc: SourceLoc | None) -> IRKernel:
    """The ``ir.Kernel`` of a finished trace: let-bindings decided (:mod:`egtile.language.letbind`), per-thread
    variables carried across a barrier kept per thread (:mod:`egtile.language.carried`), then the
    whole-kernel checks (:func:`check_traced`)."""
    if trace.body is None:
        raise DSLError(f"kernel {name!r} has no `with T.Kernel(...)` block", loc)
    body, allocs = letbind.finish(trace, trace.body, trace.allocs)
    body, allocs = carried.promote(trace, body, allocs)
    carried.refuse_carried_across_iterations(trace, body)
    kernel = IRKernel(
        name=name, params=tuple(trace.params), grid=trace.grid or (1,), block_vars=trace.block_vars,
        threads=trace.threads, allocs=tuple(allocs), body=body, sources=tuple(trace.sources),
        loc=loc, overlays=tuple(trace.overlays), notes=tuple(trace.notes))
    depth = check_traced(kernel)
    limits.ensure_recursion(max(depth, 4 * trace.deepest))
    return kernel


def build_kernels(parts: list[tracer.Trace], name: str, loc: SourceLoc | None) -> list[IRKernel]:
    """The ``ir.Kernel`` of each part of a prim_func with several kernels (``T.Kernel`` blocks, or a block split at
    ``T.sync_grid()``), named ``name``, ``name_1``...; a block split at a grid barrier declares only the buffers
    each kernel uses and carries no block state across it (:mod:`egtile.language.grid_sync`)."""
    from egtile.language import grid_sync

    kernels = [build_kernel(t, name if i == 0 else f"{name}_{i}", loc) for i, t in enumerate(parts)]
    for i, t in enumerate(parts):
        if t.after_grid_sync is not None:
            first = i - 1  # the block's first kernel: block state survives none of its grid barriers
            while parts[first].after_grid_sync is not None:
                first -= 1
            grid_sync.check_state_not_carried(kernels[first:i], kernels[i],
                                              [r for p in parts[first:i] for r in p.lets], t.after_grid_sync)
        if t.after_grid_sync is not None or (i + 1 < len(parts) and parts[i + 1].after_grid_sync is not None):
            kernels[i] = grid_sync.prune(kernels[i])
    return kernels


def check_traced(kernel: IRKernel) -> int:
    """Check what tracing cannot see locally and return the deepest expression's depth.

    Every buffer a statement names must be one of this kernel's parameters or allocations (the very
    objects: a Value built while tracing another prim_func may carry a load of that one's buffer).

    Raises:
        DSLError: a statement uses a buffer of another prim_func; names the buffer and the statement's line.
    """
    from egtile.ir.kernel import AddressOf, BinOp, Cast, Load, Select, UnOp, walk

    own = {id(b) for b in kernel.params + kernel.allocs}
    deepest = 0
    for st in walk(kernel.body):
        stack: list[tuple[Any, int]] = [(x, 1) for x in _operands(st)]
        while stack:
            x, d = stack.pop()
            deepest = max(deepest, d)
            buf = getattr(x, "buffer", None)
            if buf is not None and id(buf) not in own:
                raise DSLError(f"prim_func {kernel.name!r} uses buffer {buf.name!r} of another prim_func "
                               f"(statement {st.sid}); a prim_func can only use its own parameters and "
                               "allocations", st.loc)
            match x:
                case BinOp(a=a, b=b):
                    stack += [(a, d + 1), (b, d + 1)]
                case UnOp(a=a) | Cast(value=a):
                    stack.append((a, d + 1))
                case Select(cond=c, a=a, b=b):
                    stack += [(c, d + 1), (a, d + 1), (b, d + 1)]
                case Load(indices=idx):
                    stack += [(i, d + 1) for i in idx]
                case AddressOf(load=ld):
                    stack.append((ld, d + 1))
                case _:
                    stack += [(o, d + 1) for o in getattr(x, "offsets", ())]
    _check_loop_vars(kernel)
    return deepest


def _check_loop_vars(kernel: IRKernel) -> None:
    """Refuse a loop's variable used outside the loop: a value computed in a loop and read after it, which without
    the source front end (a kernel whose source egtile cannot read, or ``EGTILE_SOURCE_FRONTEND=0``) is an expression
    of the loop variable. The interpreter and the simulator would fail on it with a bare ``KeyError``."""
    from egtile.analysis.access import free_vars
    from egtile.ir.kernel import For, If, Region, walk

    loop_vars = {st.var.name for st in walk(kernel.body) if isinstance(st, For)}
    if not loop_vars:
        return

    def names(x: Any) -> set[str]:
        if isinstance(x, Region):
            return {n for o in x.offsets for n in free_vars(o)}
        return set(free_vars(x))

    def visit(stmts: tuple[Any, ...], bound: frozenset[str]) -> None:
        for st in stmts:
            stray = sorted({n for o in _operands(st) for n in names(o)} & loop_vars - bound)
            if stray:
                raise DSLError(
                    f"the loop variable {stray[0]!r} is used outside its loop: this statement reads a value computed "
                    f"from it in the loop. Carry a value out of a loop in a variable (`acc = T.alloc_var(...)`, "
                    f"`acc += ...` in the loop); without the source front end (docs/language.md, 'The source front "
                    f"end') a name assigned in a loop holds an expression of the loop variable, not a value", st.loc)
            if isinstance(st, For):
                visit(st.body, bound | {st.var.name})
            elif isinstance(st, If):
                visit(st.then_body, bound)
                visit(st.else_body, bound)

    visit(kernel.body, frozenset())


def _operands(st: Any) -> list[Any]:
    """The expressions and regions of one statement (not of nested statements)."""
    from egtile.ir.kernel import AtomicAdd, Copy, Extern, Fill, For, Gemm, If, Load, Reduce, Store

    match st:
        case Store(buffer=b, indices=idx, value=v) | AtomicAdd(buffer=b, indices=idx, value=v):
            return [Load(b, idx), v]
        case Copy(src=a, dst=b):
            return [a, b]
        case Fill(dst=d, value=v):
            return [d, v]
        case Gemm(a=a, b=b, c=c):
            return [a, b, c]
        case Reduce(src=a, dst=b):
            return [Load(a, ()), Load(b, ())]
        case Extern(args=args):
            return list(args)
        case For(start=a, stop=b):
            return [a, b]
        case If(cond=c):
            return [c]
    return []


def check_threads(threads: int, loc: SourceLoc | None) -> None:
    """Refuse a block size egtile cannot run: whole warps up to 1024 threads, or a partial warp of
    :data:`egtile.ir.kernel.PARTIAL_WARPS` threads. What a partial warp cannot run (wgmma, warp specialization, a
    hand-written barrier protocol, a named barrier) is refused where it is chosen or written (``docs/language.md``,
    "Blocks smaller than a warp").

    Raises:
        DSLError: any other count (named barriers count whole warps, PTX ISA 9.7.13.4; a partial warp of another
            size would leave thread partitions uneven).
    """
    if block_size_ok(threads):
        return
    raise DSLError(f"T.Kernel threads={threads}: expected a multiple of 32 (whole warps) in [32, 1024], or a partial "
                   f"warp of {', '.join(map(str, PARTIAL_WARPS))} threads", loc)


GRID_LIMITS = (2 ** 31 - 1, 65535, 65535)
"""Maximum grid extent per dimension (x, y, z) on compute capability 9.0."""


class Kernel:
    """``with T.Kernel(*grid, threads=128) as bx:``: the body of one thread block.

    Args:
        grid: blocks per grid dimension (static ints; ``T.ceildiv`` of ints is fine), 1 to 3 of them.
        threads: threads per block (an int; TileLang's ``[x, y, z]`` form is not supported).

    Yields the block index (one grid dimension) or a tuple of them.

    Raises:
        DSLError: nested or repeated ``T.Kernel``.
        UnsupportedError: symbolic grid, multi-dimensional ``threads``, ``prelude``.
        ResourceError: a grid beyond sm_90's limits (:data:`GRID_LIMITS`), on every target.
    """

    def __init__(self, *grid: Any, threads: Any = 128, prelude: str | None = None, **kwargs: Any) -> None:
        from egtile.language import eager

        eager.stop_if_binding()
        self._loc = tracer.user_loc()
        self._trace = tracer.current("T.Kernel")
        if kwargs:
            raise UnsupportedError(f"T.Kernel({', '.join(f'{k}=' for k in kwargs)}...)", self._loc)
        if not 1 <= len(grid) <= 3:
            raise DSLError(f"T.Kernel expects 1 to 3 grid extents, got {len(grid)}", self._loc)
        extents = []
        for g in grid:
            e = as_expr(g) if isinstance(g, Value) else None
            if e is not None:
                v = static_value(e)
                if v is None:
                    raise UnsupportedError("symbolic grid extent in T.Kernel (grids must be static ints)", self._loc)
                g = v
            if isinstance(g, bool) or not isinstance(g, int) or g < 1:
                raise DSLError(f"T.Kernel grid extents must be positive ints, got {g!r}", self._loc)
            extents.append(int(g))
        for axis, (g, cap) in enumerate(zip(extents, GRID_LIMITS)):
            if g > cap:
                raise ResourceError(
                    f"kernel {self._trace.name!r}: T.Kernel grid {tuple(extents)} has {g} blocks in dimension "
                    f"{'xyz'[axis]}; sm_90 allows at most {cap} (x: 2^31-1, y and z: 65535; CUDA C++ Programming "
                    "Guide, 'Technical Specifications per Compute Capability')", self._loc)
        dims: tuple[int, ...] = (threads,) if not isinstance(threads, (list, tuple)) else tuple(threads)
        if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
            raise DSLError(f"T.Kernel threads must be a positive int or 1 to 3 of them, got {threads!r}", self._loc)
        threads = 1
        for d in dims:
            threads *= d  # threads=(x, y, z): x*y*z threads, x fastest (egtile.language.threads)
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise DSLError(f"T.Kernel threads must be a positive int, got {threads!r}", self._loc)
        check_threads(threads, self._loc)
        if prelude is not None:
            raise UnsupportedError("T.Kernel(prelude=...); use T.import_source(src)", self._loc)
        self._grid = tuple(extents)
        self._threads = int(threads)
        self._thread_dims = tuple(int(d) for d in dims)
        self._frame: tracer.Frame | None = None

    def __enter__(self) -> Value | tuple[Value, ...]:
        trace = self._trace
        if trace.in_kernel:
            raise DSLError("`with T.Kernel(...)` inside another T.Kernel block", self._loc)
        if trace.body is not None:
            trace.next_kernel()  # several kernels in one prim_func or eager function, launched one after another
        wanted = tracer.with_target_names(self._loc, len(self._grid)) or [None] * len(self._grid)
        fallback = ("bx", "by", "bz")
        block_vars = tuple(Var(trace.fresh_var_name(w, fallback[d])) for d, w in enumerate(wanted))
        for v, g in zip(block_vars, self._grid):
            trace.var_ranges[v.name] = (0, g)
        trace.grid, trace.block_vars, trace.threads = self._grid, block_vars, self._threads
        trace.thread_dims = self._thread_dims
        trace.in_kernel = True
        self._frame = trace.open("T.Kernel", self._loc)
        handles = tuple(Value(v) for v in block_vars)
        return handles[0] if len(handles) == 1 else handles

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            return  # the trace is abandoned; keep the user's exception
        assert self._frame is not None
        self._trace.body = self._trace.close(self._frame)
        self._trace.in_kernel = False
