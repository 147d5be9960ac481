"""Which buffers a statement reads and writes.

Definition. For a statement ``s``:

1. ``reads(s)`` is the set of :class:`Access` records of every buffer element ``s`` may load when it
   runs: ``Load`` expressions anywhere in it (values, indices, region offsets, conditions, loop bounds),
   the source region of a ``Copy``, the operands of a ``Gemm`` / ``Reduce`` (see below), the element an
   ``AtomicAdd`` updates, and every buffer an extern call can reach through a pointer argument.
2. ``writes(s)`` is the set of :class:`Access` records of every element ``s`` may store.
3. For ``For`` and ``If`` both are the union over the body (both branches of an ``If``).

Conservative choices (each may over-approximate, never under-approximate):

* ``T.address_of(buf[i])`` / ``T.access_ptr`` hands the callee a pointer; C pointer arithmetic reaches every
  element of ``buf``. So an extern that receives ``AddressOf`` of ``buf`` READS the whole of ``buf`` when the
  pointer is declared readable and WRITES the whole of it when declared writable (``region=None``,
  ``via_pointer=True``; ``T.address_of``: both), whatever ``buf``'s scope. The same holds for an ``AddressOf``
  found anywhere inside a statement. (TileLang's seed bug 1 was this fact missing: ``address_of(shared)``
  inside ``call_extern`` was not a store.) The access mode is the call's contract, which the CPU executors
  enforce on the extern's model (:class:`egtile.ir.kernel.AddressOf`).
* A pointer-typed argument that is not an ``AddressOf`` (an expression of dtype ``handle`` or ``T*``)
  may alias any buffer: it is recorded as an access of :data:`ANY_BUFFER` in ``global`` scope, which
  :func:`overlaps` treats as overlapping every buffer name.
* Atomics read and write their element. ``Gemm`` reads A, B and, unless ``clear_accum``, C; it writes C.
  ``Reduce`` reads ``src`` and, unless ``clear``, ``dst``; it writes ``dst`` (whole buffers).
* Loop-variable-dependent regions are widened when leaving the loop: a dimension whose offset mentions
  the loop variable becomes ``[start + c, stop - 1 + c + extent)`` when the offset is ``var + c`` with
  constant bounds, and the whole dimension otherwise. Other dimensions keep their offsets.

Not handled yet: aliasing between distinct buffer names (egtile has no buffer views), and element-level
disjointness (two accesses of one buffer always "overlap" for :func:`overlaps`).

Derived in the e-graph too (:mod:`egtile.schedule.dataflow`: ``reads`` / ``writes`` relations per statement
and list e-class, from each statement's own accesses, its ``own_read`` / ``own_write`` base rows).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import assert_never

from egtile.ir import (
    POINTER_READ, POINTER_WRITE, AddressOf, AtomicAdd, BinOp, Buffer, Cast, Const, Copy, Expr, Extern, Fill, For, Gemm,
    If, Load, Reduce, Region, Scope, Select, Stmt, Store, UnOp, Var,
)
from egtile.ir.protocol import PROTOCOL_LEAVES

ANY_BUFFER = "*"
"""Buffer name of an access through a pointer whose target is unknown; aliases every buffer."""


@dataclass(frozen=True)
class Access:
    """One buffer access of a statement.

    Attributes:
        buffer: the buffer's name, or :data:`ANY_BUFFER` for a pointer of unknown target.
        scope: the buffer's scope (``global`` for :data:`ANY_BUFFER`).
        region: the elements touched, or ``None`` when unknown (whole buffer), e.g. through a pointer.
        via_pointer: the access happens through a pointer handed to an extern call.
    """

    buffer: str
    scope: Scope
    region: Region | None
    via_pointer: bool = False


# ----------------------------------------------------------------------------------------------------
# Expressions


def expr_children(e: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``e`` (an ``AddressOf``'s child is its ``Load``)."""
    match e:
        case Const() | Var():
            return ()
        case BinOp(a=a, b=b):
            return (a, b)
        case UnOp(a=a) | Cast(value=a):
            return (a,)
        case Select(cond=c, a=a, b=b):
            return (c, a, b)
        case Load(indices=idx):
            return idx
        case AddressOf(load=ld):
            return (ld,)
        case _:
            assert_never(e)


def walk_expr(e: Expr) -> Iterator[Expr]:
    """Every sub-expression of ``e``, pre-order, ``e`` included."""
    yield e
    for c in expr_children(e):
        yield from walk_expr(c)


def free_vars(e: Expr) -> frozenset[str]:
    """Names of the :class:`Var` nodes in ``e``."""
    return frozenset(x.name for x in walk_expr(e) if isinstance(x, Var))


def mentions(exprs: Iterable[Expr], var: Var | str) -> bool:
    """Whether ``var`` occurs in any of ``exprs``."""
    name = var if isinstance(var, str) else var.name
    return any(name in free_vars(e) for e in exprs)


def is_pointer_dtype(dtype: str) -> bool:
    """A dtype string that denotes a pointer (``handle``, or a C spelling ending in ``*``)."""
    return dtype == "handle" or dtype.rstrip().endswith("*")


def _is_opaque_pointer(e: Expr) -> bool:
    match e:
        case Var(dtype=d) | Cast(dtype=d) | Const(dtype=d):
            return is_pointer_dtype(d)
        case _:
            return False


def _element(load: Load) -> Access:
    buf = load.buffer
    return Access(buf.name, buf.scope, Region(buf, load.indices, tuple(1 for _ in load.indices)))


def _pointer(buf: Buffer) -> Access:
    return Access(buf.name, buf.scope, None, via_pointer=True)


_ANY = Access(ANY_BUFFER, "global", None, via_pointer=True)


def _expr_reads(e: Expr) -> set[Access]:
    out: set[Access] = set()
    for x in walk_expr(e):
        match x:
            case AddressOf(load=ld, mode=mode):
                if mode & POINTER_READ:
                    out.add(_pointer(ld.buffer))
            case Load():
                out.add(_element(x))
            case _:
                if _is_opaque_pointer(x):
                    out.add(_ANY)
    # The Load under an AddressOf is not dereferenced by itself; the pointer access covers it.
    for x in walk_expr(e):
        if isinstance(x, AddressOf):
            out.discard(_element(x.load))
    return out


def _expr_pointer_writes(e: Expr) -> set[Access]:
    out: set[Access] = set()
    for x in walk_expr(e):
        if isinstance(x, AddressOf):
            if x.mode & POINTER_WRITE:
                out.add(_pointer(x.load.buffer))
        elif _is_opaque_pointer(x):
            out.add(_ANY)
    return out


def pointer_args(stmt: Extern) -> tuple[Expr, ...]:
    """The arguments of ``stmt`` that carry a pointer (contain an ``AddressOf`` or are pointer-typed)."""
    return tuple(a for a in stmt.args if any(isinstance(x, AddressOf) or _is_opaque_pointer(x) for x in walk_expr(a)))


def _exprs_reads(es: Iterable[Expr]) -> set[Access]:
    out: set[Access] = set()
    for e in es:
        out |= _expr_reads(e)
    return out


def _exprs_pointer_writes(es: Iterable[Expr]) -> set[Access]:
    out: set[Access] = set()
    for e in es:
        out |= _expr_pointer_writes(e)
    return out


def _region(r: Region) -> Access:
    return Access(r.buffer.name, r.buffer.scope, r)


def _whole(b: Buffer) -> Access:
    return Access(b.name, b.scope, Region.full(b))


# ----------------------------------------------------------------------------------------------------
# Loop widening


def _affine_shift(e: Expr, var: Var) -> int | None:
    """``c`` when ``e`` is ``var``, ``var + c`` or ``c + var`` (``c`` an int constant), else ``None``."""
    match e:
        case Var(name=n) if n == var.name:
            return 0
        case BinOp(op="+", a=Var(name=n), b=Const(value=c)) if n == var.name and type(c) is int:
            return c
        case BinOp(op="+", a=Const(value=c), b=Var(name=n)) if n == var.name and type(c) is int:
            return c
        case BinOp(op="-", a=Var(name=n), b=Const(value=c)) if n == var.name and type(c) is int:
            return -c
        case _:
            return None


def _widen(a: Access, loop: For) -> Access:
    r = a.region
    if r is None or not mentions(r.offsets, loop.var):
        return a
    lo = loop.start.value if isinstance(loop.start, Const) and type(loop.start.value) is int else None
    hi = loop.stop.value if isinstance(loop.stop, Const) and type(loop.stop.value) is int else None
    offsets: list[Expr] = []
    extents: list[int] = []
    for d, (off, ext) in enumerate(zip(r.offsets, r.extents)):
        if not mentions((off,), loop.var):
            offsets.append(off)
            extents.append(ext)
            continue
        size = r.buffer.shape[d] if d < len(r.buffer.shape) else ext
        shift = _affine_shift(off, loop.var)
        if shift is not None and lo is not None and hi is not None and hi > lo:
            first, last = lo + shift, hi - 1 + shift + ext  # [first, last)
            if 0 <= first and last <= size:
                offsets.append(Const(first))
                extents.append(last - first)
                continue
        offsets.append(Const(0))
        extents.append(size)
    return Access(a.buffer, a.scope, Region(r.buffer, tuple(offsets), tuple(extents)), a.via_pointer)


# ----------------------------------------------------------------------------------------------------
# Statements


def _body(stmts: Iterable[Stmt], f) -> set[Access]:
    out: set[Access] = set()
    for s in stmts:
        out |= f(s)
    return out


# The accesses of a loop or branch, memoized by identity (statements are immutable): every enclosing
# statement's summary, and the CTA-barrier placement at each nesting level, asks for the same nested
# statements again, which made a kernel of n nested statements O(n^2) (if_nest in benchmarks/compile_time.py).
_MEMO_READS: dict[int, tuple[Stmt, frozenset[Access]]] = {}
_MEMO_WRITES: dict[int, tuple[Stmt, frozenset[Access]]] = {}
_MEMO_MAX = 8192


def _memoized(memo: dict[int, tuple[Stmt, frozenset[Access]]], s: Stmt, f) -> frozenset[Access]:
    hit = memo.get(id(s))
    if hit is not None and hit[0] is s:
        return hit[1]
    got = frozenset(f(s))
    if len(memo) >= _MEMO_MAX:
        memo.clear()
    memo[id(s)] = (s, got)  # holds s, so its id is not reused while the entry lives
    return got


def _reads(s: Stmt) -> set[Access] | frozenset[Access]:
    if isinstance(s, (For, If)):
        return _memoized(_MEMO_READS, s, _reads_of)
    return _reads_of(s)


def _writes(s: Stmt) -> set[Access] | frozenset[Access]:
    if isinstance(s, (For, If)):
        return _memoized(_MEMO_WRITES, s, _writes_of)
    return _writes_of(s)


def _reads_of(s: Stmt) -> set[Access]:
    match s:
        case Store(indices=idx, value=v):
            return _exprs_reads((*idx, v))
        case Copy(src=src, dst=dst):
            return {_region(src)} | _exprs_reads((*src.offsets, *dst.offsets))
        case Fill(dst=dst, value=v):
            return _exprs_reads((*dst.offsets, v))
        case Gemm(a=a, b=b, c=c, clear_accum=clear):
            out = {_region(a), _region(b)} | _exprs_reads((*a.offsets, *b.offsets, *c.offsets))
            return out if clear else out | {_region(c)}
        case Reduce(src=src, dst=dst, clear=clear):
            return {_whole(src)} if clear else {_whole(src), _whole(dst)}
        case AtomicAdd(buffer=buf, indices=idx, value=v):
            return {_element(Load(buf, idx))} | _exprs_reads((*idx, v))
        case Extern(args=args):
            return _exprs_reads(args)
        case For(start=lo, stop=hi):
            return _exprs_reads((lo, hi)) | {_widen(a, s) for a in _body(s.body, _reads)}
        case If(cond=c, then_body=t, else_body=e):
            return _exprs_reads((c,)) | _body(t, _reads) | _body(e, _reads)
        case _ if isinstance(s, PROTOCOL_LEAVES):  # a hand-written barrier statement (egtile.ir.protocol)
            return _exprs_reads(tuple(getattr(s, f) for f in ("index", "parity") if hasattr(s, f)))
        case _:
            assert_never(s)


def _writes_of(s: Stmt) -> set[Access]:
    match s:
        case Store(buffer=buf, indices=idx, value=v):
            return {_element(Load(buf, idx))} | _exprs_pointer_writes((*idx, v))
        case Copy(dst=dst):
            return {_region(dst)}
        case Fill(dst=dst):
            return {_region(dst)}
        case Gemm(c=c):
            return {_region(c)}
        case Reduce(dst=dst):
            return {_whole(dst)}
        case AtomicAdd(buffer=buf, indices=idx, value=v):
            return {_element(Load(buf, idx))} | _exprs_pointer_writes((*idx, v))
        case Extern(args=args):
            return _exprs_pointer_writes(args)
        case For(start=lo, stop=hi):
            return _exprs_pointer_writes((lo, hi)) | {_widen(a, s) for a in _body(s.body, _writes)}
        case If(cond=c, then_body=t, else_body=e):
            return _exprs_pointer_writes((c,)) | _body(t, _writes) | _body(e, _writes)
        case _ if isinstance(s, PROTOCOL_LEAVES):  # synchronization only: no buffer written
            return set()
        case _:
            assert_never(s)


def reads(stmt: Stmt) -> frozenset[Access]:
    """Every buffer access ``stmt`` may load (see the module docstring for the definition).

    For ``For``/``If`` this is the union over the body; regions that depend on a loop variable are
    widened to the range that variable covers (whole dimension when not provably affine).
    """
    return frozenset(_reads(stmt))


def writes(stmt: Stmt) -> frozenset[Access]:
    """Every buffer access ``stmt`` may store (see the module docstring; same widening as :func:`reads`)."""
    return frozenset(_writes(stmt))


def own_reads(stmt: Stmt) -> frozenset[Access]:
    """What ``stmt`` itself reads: every access of a leaf statement; for a ``For`` or ``If`` only its head
    (loop bounds, condition), its body excluded. ``reads(s)`` is ``own_reads(s)`` plus the body's reads."""
    match stmt:
        case For(start=lo, stop=hi):
            return frozenset(_exprs_reads((lo, hi)))
        case If(cond=c):
            return frozenset(_exprs_reads((c,)))
        case _:
            return reads(stmt)


def own_writes(stmt: Stmt) -> frozenset[Access]:
    """What ``stmt`` itself writes (see :func:`own_reads`)."""
    match stmt:
        case For(start=lo, stop=hi):
            return frozenset(_exprs_pointer_writes((lo, hi)))
        case If(cond=c):
            return frozenset(_exprs_pointer_writes((c,)))
        case _:
            return writes(stmt)


def names(accesses: Iterable[Access]) -> frozenset[str]:
    """The buffer names of ``accesses``."""
    return frozenset(a.buffer for a in accesses)


def overlaps(a: Iterable[str], b: Iterable[str]) -> frozenset[str]:
    """Buffer names common to ``a`` and ``b``; :data:`ANY_BUFFER` on one side matches every name on the
    other (so a non-empty result means "may touch the same memory")."""
    sa, sb = frozenset(a), frozenset(b)
    if not sa or not sb:
        return frozenset()
    if ANY_BUFFER in sa:
        return sb | (sa & sb)
    if ANY_BUFFER in sb:
        return sa
    return sa & sb
