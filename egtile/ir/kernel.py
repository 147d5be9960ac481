"""The tile-level IR: data only.

``ir.Kernel`` is what tracing a ``@T.prim_func`` produces and what every later stage reads: the e-graph
encoder, the analyses, the reference interpreter. Tile statements (``Copy``, ``Gemm``, ``Fill``,
``Reduce``) stay opaque here; how they run (which instruction, which threads) is decided by the
scheduler and recorded in :mod:`egtile.ir.scheduled`.

Conventions:
  * Every node is a frozen dataclass; sums are ``TypeAlias`` unions, consumed with ``match``.
  * Every statement has a ``sid`` unique within its kernel (assigned in trace order) and a ``loc``
    pointing at the user's source line. ``loc`` is excluded from equality so that structurally equal
    programs compare equal whatever file they came from.
  * Buffer shapes are static Python ints. Index expressions may be symbolic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from egtile.errors import SourceLoc

Scope: TypeAlias = Literal["global", "shared", "fragment", "local"]
"""Where a buffer lives. ``global``: device memory (kernel parameters). ``shared``: the block's
shared memory. ``fragment``: a tile distributed over the block's threads. ``local``: per-thread
registers (every thread holds the whole shape)."""

Layout: TypeAlias = Literal["linear", "swizzle32", "swizzle64", "swizzle128"]
"""Layout slot of a buffer. Only ``linear`` is produced today; the swizzle modes name the TMA
swizzle patterns (CUDA driver API ``CUtensorMapSwizzle``) a rule may choose later."""

LoopKind: TypeAlias = Literal["serial", "parallel", "pipelined", "unroll"]


def _loc() -> SourceLoc | None:
    return field(default=None, compare=False, repr=False)  # type: ignore[return-value]


@dataclass(frozen=True)
class Buffer:
    """A named array.

    Attributes:
        name: unique within the kernel.
        shape: extents, outermost first (elements).
        dtype: TileLang dtype name (see :mod:`egtile.ir.dtypes`).
        scope: where it lives.
        layout: layout slot.
        loc: the user's line that allocated it (``None`` for parameters and buffers egtile makes); not part of
            equality, so two traces of one kernel compare equal.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    scope: Scope
    layout: Layout = "linear"
    loc: SourceLoc | None = _loc()

    @property
    def numel(self) -> int:
        n = 1
        for e in self.shape:
            n *= e
        return n


# ----------------------------------------------------------------------------------------------------
# Scalar expressions


@dataclass(frozen=True)
class Const:
    """A literal. ``dtype`` is ``"int32"``, ``"float32"``, ``"bool"`` or the dtype it was cast to."""

    value: int | float | bool
    dtype: str = "int32"


@dataclass(frozen=True)
class Var:
    """A scalar variable: a loop index, a block index (``T.Kernel``) or a thread index."""

    name: str
    dtype: str = "int32"


BinOpName: TypeAlias = Literal[
    "+", "-", "*", "/", "//", "%", "floormod", "min", "max", "==", "!=", "<", "<=", ">", ">=", "and", "or", "&", "|", "^",
    "<<", ">>",
]


@dataclass(frozen=True)
class BinOp:
    """``a op b``. On integers ``/`` truncates toward zero and ``%`` is C's remainder (sign of ``a``);
    ``//`` floors and ``floormod`` is the matching floor modulo (sign of ``b``), so that
    ``(a // b) * b + floormod(a, b) == a``. Python's ``//`` and ``%`` on a traced value give ``//`` and
    ``floormod``, as TileLang's (TVM's ``floordiv``/``floormod``) do."""

    op: BinOpName
    a: Expr
    b: Expr


@dataclass(frozen=True)
class UnOp:
    """``op a`` for ``op`` in ``-``, ``not``, ``~``, ``abs``, or a one-operand math intrinsic of
    ``egtile.mathfns.MATH`` (``exp``, ``erf``, ``floor``, ``isnan`` ...; a two-operand one, ``pow``, is a
    ``BinOp``)."""

    op: str
    a: Expr


@dataclass(frozen=True)
class Load:
    """``buffer[indices]``: one element."""

    buffer: Buffer
    indices: tuple[Expr, ...]


@dataclass(frozen=True)
class Select:
    """``T.if_then_else(cond, a, b)``."""

    cond: Expr
    a: Expr
    b: Expr


@dataclass(frozen=True)
class Cast:
    """``T.cast(value, dtype)``: the value converted to ``dtype`` (rounded, saturated: ``egtile.evaluate``).

    With ``bitcast``, ``T.reinterpret(value, dtype)``: the value's bits read as ``dtype``, which has the same
    width (TVM's ``reinterpret``; CUDA's ``__float_as_uint`` and kin). Not a conversion: no analysis may read
    it as one (a bit cast of an integer index is not that index)."""

    dtype: str
    value: Expr
    bitcast: bool = False


POINTER_READ, POINTER_WRITE = 1, 2
"""The bits of :attr:`AddressOf.mode` (TileLang's ``T.access_ptr`` access mask)."""


@dataclass(frozen=True)
class AddressOf:
    """A pointer handed to an extern, only valid as a ``T.call_extern`` argument: ``T.address_of(buffer[indices])``
    (one element, read and written) or ``T.access_ptr(buffer[indices], mode, n)`` / ``T.access_ptr(buffer, mode)``.

    It is the extern's *contract*: the callee touches ``extent`` consecutive elements (row-major) from ``load``'s,
    reading them when ``mode`` has :data:`POINTER_READ` and writing them when it has :data:`POINTER_WRITE`. The
    verifier takes those accesses as the call's; the CPU executors hand the model a pointer that refuses any
    other (egtile.externs.Pointer), so a model that steps outside is an error, not an access no checker saw.

    The elements lie inside the dimensions from :meth:`run_dim` on: the trailing indices from there are
    constants (a whole per-thread buffer: all zeros) or, when the last index is not a constant, the run stays in
    the last dimension (the executors check it where the index is known)."""

    load: Load
    extent: int = 1
    mode: int = POINTER_READ | POINTER_WRITE

    def run_dim(self) -> int:
        """The first dimension of the block of trailing dimensions the run lies in (module docstring)."""
        idx = self.load.indices
        d = len(idx)
        while d > 0 and isinstance(idx[d - 1], Const):
            d -= 1
        return min(d, len(idx) - 1) if idx else 0

    def element_indices(self) -> tuple[tuple[Expr, ...], ...]:
        """The indices of each element the callee may touch, in order (``extent`` tuples)."""
        idx, shape = self.load.indices, self.load.buffer.shape
        if not idx:
            return ((),) * min(self.extent, 1)
        d = self.run_dim()
        if d == len(idx) - 1 and not isinstance(idx[-1], Const):
            last = idx[-1]
            return tuple(idx[:-1] + (last if k == 0 else BinOp("+", last, Const(k, "int32")),)
                         for k in range(self.extent))
        start = 0
        for i, n in zip(idx[d:], shape[d:]):
            start = start * n + int(i.value)  # type: ignore[union-attr]
        out = []
        for k in range(self.extent):
            f, tail = start + k, []
            for n in reversed(shape[d:]):
                tail.append(Const(f % n, "int32"))
                f //= n
            out.append(idx[:d] + tuple(reversed(tail)))
        return tuple(out)

    def run_fits(self, values: tuple[int, ...]) -> bool:
        """Whether, at the element ``values`` (the load's indices evaluated), the ``extent`` elements lie inside
        the dimensions from :meth:`run_dim` on."""
        shape = self.load.buffer.shape
        d = self.run_dim()
        start, size = 0, 1
        for v, n in zip(values[d:], shape[d:]):
            if not 0 <= v < n:
                return False
            start, size = start * n + v, size * n
        return start + self.extent <= size


Expr: TypeAlias = Const | Var | BinOp | UnOp | Load | Select | Cast | AddressOf


@dataclass(frozen=True)
class Region:
    """A rectangular tile of a buffer.

    Attributes:
        buffer: the buffer.
        offsets: start index per dimension (may be symbolic).
        extents: static size per dimension (elements); ``len(extents) == len(buffer.shape)``.
        clip: the region may extend past its (global) buffer's edge, on either side of any dimension, and
            is *clipped* to it: an element whose index ``offsets[d] + t_d`` lies outside ``0..shape[d] - 1``
            in some dimension ``d`` reads as zero and is never written (TileLang's ``T.copy`` past a
            tensor's edge; only ``T.copy`` makes such regions, see ``egtile.language.copy_op``). Elements
            pair by their row-major position in the unclipped box, so a clipped element keeps its place.
    """

    buffer: Buffer
    offsets: tuple[Expr, ...]
    extents: tuple[int, ...]
    clip: bool = False

    @staticmethod
    def full(buffer: Buffer) -> Region:
        return Region(buffer, tuple(Const(0) for _ in buffer.shape), buffer.shape)

    @property
    def numel(self) -> int:
        n = 1
        for e in self.extents:
            n *= e
        return n

    @property
    def whole(self) -> bool:
        """Whether the region is its whole buffer: every offset the constant 0, every extent the buffer's."""
        return tuple(self.extents) == tuple(self.buffer.shape) and all(
            isinstance(o, Const) and o.value == 0 for o in self.offsets)

    @property
    def squeezed(self) -> tuple[int, ...]:
        """Extents with unit dimensions dropped: two regions copy into each other iff these match."""
        return tuple(e for e in self.extents if e != 1)

    def inside(self, offsets: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
        """For the region placed at the evaluated ``offsets``: per dimension, the relative range ``[lo, hi)`` of
        box positions ``t_d`` whose index ``offsets[d] + t_d`` lies inside the buffer (``lo >= hi``: none do).
        The elements of a clipped region that exist are exactly the product of these ranges."""
        return tuple((min(max(0, -o), e), max(min(e, n - o), 0)) for o, e, n in zip(offsets, self.extents,
                                                                               self.buffer.shape))


# ----------------------------------------------------------------------------------------------------
# Statements


@dataclass(frozen=True)
class Store:
    """``buffer[indices] = value``."""

    sid: int
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class Copy:
    """``T.copy(src, dst)``: element-wise copy, row-major over the squeezed extents (which must match).
    Synchronous semantics: ``dst`` holds the data at the next statement. ``prefer`` is the user's
    instruction request (``T.copy(..., prefer_instruction=)``, ``T.async_copy`` -> ``cp_async``,
    ``disable_tma=True`` -> ``simt``); ``auto`` leaves the choice to the ``copy`` rules."""

    sid: int
    src: Region
    dst: Region
    prefer: Literal["auto", "tma", "cp_async", "simt"] = "auto"
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class Fill:
    """``T.fill(dst, value)`` / ``T.clear(dst)`` (value 0)."""

    sid: int
    dst: Region
    value: Expr
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class Gemm:
    """``T.gemm(A, B, C, transpose_A, transpose_B, clear_accum)``: ``C (+)= op(A) @ op(B)``, accumulated
    in float32 (or C's dtype if wider). Shapes after transposition: A (M, K), B (K, N), C (M, N)."""

    sid: int
    a: Region
    b: Region
    c: Region
    trans_a: bool = False
    trans_b: bool = False
    clear_accum: bool = False
    loc: SourceLoc | None = _loc()


ReduceKind: TypeAlias = Literal["sum", "max", "min", "abssum", "absmax"]


@dataclass(frozen=True)
class Reduce:
    """``T.reduce_<kind>(src, dst, dim, clear)``: reduce ``src`` along ``dim`` into ``dst`` (``dst`` has
    ``src``'s shape without ``dim``). With ``clear=False`` the old ``dst`` value joins the reduction."""

    sid: int
    kind: ReduceKind
    src: Buffer
    dst: Buffer
    dim: int
    clear: bool = True
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class AtomicAdd:
    """``T.atomic_add(buffer[indices], value)``: one atomic read-modify-write of one element."""

    sid: int
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class Extern:
    """``T.call_extern(ret_dtype, name, *args)`` used as a statement.

    ``args`` are expressions; an :class:`AddressOf` argument hands the callee a pointer into that
    buffer. ``pure`` marks a call the user declared free of side effects (no pointer arguments allowed
    then)."""

    sid: int
    name: str
    ret_dtype: str
    args: tuple[Expr, ...]
    pure: bool = False
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class For:
    """A loop ``for var in [start, stop)``.

    ``kind``: ``parallel`` (``T.Parallel``: iterations independent, any order, may run on different
    threads), ``serial`` (``T.serial``/``range``), ``unroll``, or ``pipelined`` (``T.Pipelined``: serial
    semantics, and ``num_stages`` shared-buffer versions may be used to overlap copies with compute).
    ``num_stages`` is 0 except for pipelined loops.
    """

    sid: int
    var: Var
    start: Expr
    stop: Expr
    kind: LoopKind
    body: tuple[Stmt, ...]
    num_stages: int = 0
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class If:
    """``with T.If(cond): ... with T.Else(): ...``."""

    sid: int
    cond: Expr
    then_body: tuple[Stmt, ...]
    else_body: tuple[Stmt, ...] = ()
    loc: SourceLoc | None = _loc()


Stmt: TypeAlias = Store | Copy | Fill | Gemm | Reduce | AtomicAdd | Extern | For | If


#: Block sizes below a warp a kernel may have: a partial warp of 1, 2, 4, 8 or 16 threads (TileLang's ``rand_uint``
#: example runs ``threads=1``). CUDA launches any block size; egtile keeps to the powers of two that divide a warp, so
#: that a ``T.Parallel``'s share per thread and the serial forms of the warp-collective constructs stay exact. Other
#: blocks are whole warps, 32..1024 threads.
PARTIAL_WARPS = (1, 2, 4, 8, 16)


def block_size_ok(threads: int) -> bool:
    """Whether a block of ``threads`` threads is one egtile runs: whole warps up to 1024, or :data:`PARTIAL_WARPS`."""
    return threads in PARTIAL_WARPS or (threads % 32 == 0 and 32 <= threads <= 1024)


@dataclass(frozen=True)
class Overlay:
    """``view = T.view(base, shape, dtype=other)``: a buffer of another dtype laid over ``base``'s storage.

    egtile gives ``view`` a storage of its own (it is an allocation like any other) and keeps this record of what
    the program wrote: TileLang's view shares the bytes, so the two programs agree exactly when no read observes
    the other buffer's bits (``egtile.analysis.overlay`` proves it before scheduling; the interpreter checks it on
    every access, :mod:`egtile.interp`).

    Attributes:
        view: the view's buffer (an allocation of the kernel).
        base: the buffer whose storage it is laid over (an allocation of the kernel, ``shared``).
        loc: the user's ``T.view`` line; not part of equality.
    """

    view: str
    base: str
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class Kernel:
    """One traced ``@T.prim_func`` with its launch configuration.

    Attributes:
        name: the prim_func's Python name.
        params: global buffers, in parameter order.
        grid: blocks per grid dimension (``T.Kernel(*grid)``).
        block_vars: one :class:`Var` per grid dimension (what ``T.Kernel`` yields).
        threads: threads per block the user asked for (``T.Kernel(..., threads=)``).
        allocs: shared / fragment / local buffers allocated in the kernel, in allocation order.
        body: the statements of one block.
        sources: ``T.import_source`` strings, in order.
        loc: the ``def`` line of the prim_func.
        overlays: the views of another dtype over an allocation's storage (:class:`Overlay`), in ``T.view`` order.
        notes: what the front end made of the source that the listing does not show (a block split at
            ``T.sync_grid()``, a branch on the thread index run on the whole block), for ``explain()``; not part of
            equality.
    """

    name: str
    params: tuple[Buffer, ...]
    grid: tuple[int, ...]
    block_vars: tuple[Var, ...]
    threads: int
    allocs: tuple[Buffer, ...]
    body: tuple[Stmt, ...]
    sources: tuple[str, ...] = ()
    loc: SourceLoc | None = _loc()
    overlays: tuple[Overlay, ...] = ()
    notes: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __str__(self) -> str:
        """TileLang-like listing with statement ids (:func:`egtile.ir.printer.format_kernel`)."""
        from egtile.ir.printer import format_kernel

        return format_kernel(self)

    def buffer(self, name: str) -> Buffer:
        """The parameter or allocation called ``name`` (``KeyError`` if none)."""
        for b in self.params + self.allocs:
            if b.name == name:
                return b
        raise KeyError(name)


def walk(stmts: tuple[Stmt, ...]):
    """Yield every statement of ``stmts``, pre-order, descending into loop and if bodies."""
    for s in stmts:
        yield s
        match s:
            case For(body=body):
                yield from walk(body)
            case If(then_body=t, else_body=e):
                yield from walk(t)
                yield from walk(e)
            case _:
                pass


# The statements of a hand-written barrier protocol (egtile.ir.protocol, which imports this module, hence here,
# at the end) are tile statements: every body typed ``tuple[Stmt, ...]`` admits them (the cache's type-directed
# codec, egtile.codec, decodes by these annotations; RoleBlock and BarrierCopy are an If and a Copy already).
from egtile.ir.protocol import BarrierAlloc, BarrierArrive, BarrierExpectTx, BarrierWait, CpAsyncArriveNoinc  # noqa: E402

Stmt = Stmt | BarrierAlloc | BarrierWait | BarrierArrive | BarrierExpectTx | CpAsyncArriveNoinc  # type: ignore[misc]
