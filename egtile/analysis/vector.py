"""Which vector width a ``T.Parallel`` nest can use for its memory accesses (a hardware oracle).

Definition. ``vector_width(loop)`` is the largest ``w`` in {8, 4, 2} such that, with the nest's iteration
space flattened row-major (perfectly nested static ``T.Parallel`` loops folded, the last variable ``v``
varying fastest), every group of ``w`` consecutive iterations can be run by one thread with one ``w``-wide
load per read buffer and one ``w``-wide store per written buffer; ``1`` when none fits. It holds when:

1. ``v``'s loop starts at 0 and its extent is a multiple of ``w`` (a group never straddles two rows);
2. the body is straight-line stores, each indexed by ``v`` (no nested loops or branches, no atomics, no extern
   calls), and no load indexed by ``v`` sits in a branch of a ``T.if_then_else`` (read only where the condition
   picks it, e.g. a global load past a tensor's edge; a vector load would read every lane);
3. every global or shared access whose indices mention ``v`` has ``v`` only in its last index, which is
   ``base + v`` with ``base`` provably a multiple of ``w`` (and not mentioning ``v``), and the buffer's last
   dimension is a multiple of ``w`` (so every row starts aligned); accesses not mentioning ``v`` are the same
   for the whole group (a broadcast);
4. no ``local`` buffer is indexed by ``v`` (a thread's registers hold one iteration's values); a ``fragment``
   counts as shared memory here, where it is stored unless the schedule places it in registers, and a
   register fragment's loop runs by its layout instead (``rules.fragment.by_layout``), never as vectors;
5. every vector access moves 4, 8 or 16 bytes (``w x element size``): CUDA's vector types, whose
   addresses must be aligned to their size (PTX ISA "ld"/"st" ``.v2``/``.v4``: the address is aligned to the
   access size). Kernel parameters are checked at launch to be aligned to the access (the codegen's
   ``param_align``); shared buffers start 128-byte aligned.

Conservative choices: an index that is not literally ``base + v`` (e.g. ``2 * v``, ``v - c``) makes the nest
scalar; alignment is judged from constants and products in ``base`` (``bx * 32 + v``: 32), like the TMA
and cp.async oracles of :mod:`egtile.analysis.producer`.
"""

from __future__ import annotations

from math import gcd

from egtile.analysis.access import free_vars, walk_expr
from egtile.ir import BinOp, Const, Expr, For, Load, Select, Store, Var, dtype

WIDTHS = (8, 4, 2)
VECTOR_BYTES = (4, 8, 16)


def _divisor(e: Expr) -> int:
    match e:
        case Const(value=v) if type(v) is int:
            return abs(v)
        case BinOp(op="+" | "-", a=a, b=b):
            return gcd(_divisor(a), _divisor(b))
        case BinOp(op="*", a=a, b=b):
            return _divisor(a) * _divisor(b)
    return 1


def _split(e: Expr, v: str) -> Expr | None:
    """``base`` when ``e`` is ``base + v`` / ``v + base`` / ``v`` with ``v`` not in ``base``, else ``None``."""
    match e:
        case Var(name=n) if n == v:
            return Const(0)
        case BinOp(op="+", a=a, b=Var(name=n)) if n == v and v not in free_vars(a):
            return a
        case BinOp(op="+", a=Var(name=n), b=b) if n == v and v not in free_vars(b):
            return b
    return None


def _branch_loads(e: Expr) -> list[Load]:
    """The loads of ``e`` inside a ``Select``'s branches (read only where its condition picks that side, as a
    global load past a tensor's edge is: ``egtile.language.safeload``)."""
    out: list[Load] = []
    for x in walk_expr(e):
        if isinstance(x, Select):
            out += [y for br in (x.a, x.b) for y in walk_expr(br) if isinstance(y, Load)]
    return out


def nest(loop: For, static: bool = True) -> tuple[list[For], tuple]:
    """The perfectly nested ``T.Parallel`` loops of ``loop`` (outermost first) and the innermost body; with
    ``static``, only inner loops whose bounds are constants."""
    loops = [loop]
    body = loop.body
    while (len(body) == 1 and isinstance(body[0], For) and body[0].kind == "parallel"
           and (not static or (isinstance(body[0].start, Const) and isinstance(body[0].stop, Const)))):
        loops.append(body[0])
        body = body[0].body
    return loops, body


def vector_width(loop: For) -> int:
    """The vector width of ``loop``'s nest (see the module docstring); 1 when it stays scalar."""
    loops, body = nest(loop)
    inner = loops[-1]
    if not (isinstance(inner.start, Const) and isinstance(inner.stop, Const)):
        return 1
    start, stop = int(inner.start.value), int(inner.stop.value)
    v = inner.var.name
    if not body or not all(isinstance(s, Store) for s in body):
        return 1
    if not all(any(v in free_vars(i) for i in s.indices) for s in body):
        return 1  # every lane would store the same element
    if any(v in free_vars(i) for s in body for e in (*s.indices, s.value) for x in _branch_loads(e)
           for i in x.indices):
        return 1  # a load read only where a select's condition holds: a vector load would read every lane
    accesses: list[tuple[object, tuple[Expr, ...]]] = []
    for s in body:
        accesses.append((s.buffer, s.indices))
        for e in (*s.indices, s.value):
            for x in walk_expr(e):
                if isinstance(x, Load):
                    accesses.append((x.buffer, x.indices))
    best = 1
    for w in WIDTHS:
        if start != 0 or stop % w:
            continue
        ok = True
        for buf, idx in accesses:
            if not any(v in free_vars(i) for i in idx):
                continue
            if buf.scope not in ("global", "shared", "fragment"):
                ok = False
                break
            if any(v in free_vars(i) for i in idx[:-1]) or not idx:
                ok = False
                break
            base = _split(idx[-1], v)
            if base is None or (_divisor(base) % w) or buf.shape[-1] % w:
                ok = False
                break
            if w * dtype(buf.dtype).bytes not in VECTOR_BYTES:
                ok = False
                break
        if ok:
            best = w
            break
    return best


__all__ = ["VECTOR_BYTES", "WIDTHS", "nest", "vector_width"]
