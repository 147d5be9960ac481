"""Element loads past a global tensor's edge read zero: TileLang's ``LegalizeSafeMemoryAccess`` for loads.

Definition (TileLang's meaning, ``src/transform/legalize_safe_memory_access.cc``). An element load
``A[i0, i1, ...]`` of a *global* tensor, in any dimension whose index is not a constant and cannot be proved
to lie in ``0 .. shape - 1``, is guarded: it reads ``A[...]`` where every such index is inside the tensor and
the element type's zero where one is outside (TileLang's "safe value"; egtile has no ``T.annotate_safe_value``).
Only the chosen side is read: the guarded load is ``T.if_then_else(inside, A[...], 0)``, an ``ir.Select``, so the
reference interpreter, the simulator (which reads the load only where the condition holds, also in its numpy
batches) and the CUDA generator (C's ``?:``) give it the same meaning without knowing about it.

*Proved inside* (no guard) means: every variable of the index has a constant range while tracing (loop, block and
thread indices: ``Trace.var_ranges``) and the index's interval over those ranges (:func:`interval`: ``+ - *``,
``//`` / ``%`` / ``floormod`` by a positive constant of a non-negative value, ``min`` / ``max``, integer casts)
lies inside the dimension. An index that reads memory (``A[Idx[i]]``, a let-bound value read from a tensor), a
variable without a constant range (a loop bounded by tensor data, a scalar parameter) or an expression the
interval does not follow is not proved, and is guarded, as TileLang's analyzer leaves it unproved. A guard is
only ever added: where the index is inside, the value is the load's, as before.

Not guarded (as in TileLang): constant indices (checked at the user's line instead: ``ShapeError``), shared,
fragment and local buffers (an access past their end stays undefined in TileLang; egtile's simulator reports
it), and an element taken as a place rather than a value (``T.atomic_add``'s target, ``T.address_of``, a copy's
start point), which use the plain element (:class:`GuardedLoad`'s ``origin``, as :func:`letbind.lvalue`).
"""

from __future__ import annotations

from typing import Callable

from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import BinOp, Buffer, Cast, Const, Expr, Load, Select, UnOp, Var
from egtile.language import tracer
from egtile.language.expr import Value

Interval = tuple[int, int]


class GuardedLoad(Value):
    """A global element load under its edge guard (``expr`` is the ``Select``); ``origin`` is the plain element
    (``Value(Load)``), which operations that take an element as a place use in its place."""

    __slots__ = ("origin",)

    def __init__(self, expr: Expr, origin: Value) -> None:
        super().__init__(expr, origin.dtype)
        self.origin = origin


def interval(e: Expr, ranges: dict[str, Interval],
             leaf: Callable[[Expr], Interval | None] | None = None) -> Interval | None:
    """The closed interval ``(lo, hi)`` of integer expression ``e`` over the variables' ``[lo, hi)`` ranges, or
    ``None`` when it is not known (a load, a variable without a range, an operation not followed here). ``leaf``,
    when given, is asked for every subexpression these rules leave unknown (it may follow more, or bound a load by
    its dtype: :mod:`egtile.language.guarded`)."""
    got = _interval(e, ranges, leaf)
    return leaf(e) if got is None and leaf is not None else got


def _interval(e: Expr, ranges: dict[str, Interval], leaf: Callable[[Expr], Interval | None] | None) -> Interval | None:
    match e:
        case Const(value=v) if isinstance(v, int) and not isinstance(v, bool):
            return v, v
        case Var(name=n):
            r = ranges.get(n)
            if r is None or r[1] <= r[0]:
                return None
            return r[0], r[1] - 1
        case Cast(dtype=t, value=v, bitcast=False) if lookup_dtype(t).kind in ("int", "uint"):
            iv = interval(v, ranges, leaf)
            bits = lookup_dtype(t).bytes * 8
            lo_t, hi_t = ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if lookup_dtype(t).kind == "int"
                          else (0, (1 << bits) - 1))
            return iv if iv is not None and lo_t <= iv[0] and iv[1] <= hi_t else None
        case UnOp(op="-", a=a):
            ia = interval(a, ranges, leaf)
            return None if ia is None else (-ia[1], -ia[0])
        case BinOp(op=op, a=a, b=b):
            ia, ib = interval(a, ranges, leaf), interval(b, ranges, leaf)
            if ia is None or ib is None:
                return None
            if op == "+":
                return ia[0] + ib[0], ia[1] + ib[1]
            if op == "-":
                return ia[0] - ib[1], ia[1] - ib[0]
            if op == "*":
                ps = (ia[0] * ib[0], ia[0] * ib[1], ia[1] * ib[0], ia[1] * ib[1])
                return min(ps), max(ps)
            if op == "min":
                return min(ia[0], ib[0]), min(ia[1], ib[1])
            if op == "max":
                return max(ia[0], ib[0]), max(ia[1], ib[1])
            if op in ("//", "/", "%", "floormod") and ib[0] == ib[1] and ib[0] > 0 and ia[0] >= 0:
                c = ib[0]  # a non-negative value by a positive constant: floor, truncation and modulo agree
                if op in ("//", "/"):
                    return ia[0] // c, ia[1] // c
                return (ia[0] % c, ia[1] % c) if ia[0] // c == ia[1] // c else (0, c - 1)
    return None


def condition(buffer: Buffer, indices: tuple[Expr, ...]) -> Expr | None:
    """The condition under which element ``buffer[indices]`` of a global tensor is inside it, over the
    dimensions whose index is not proved inside (module docstring); ``None``: nothing to guard."""
    trace = tracer.active()
    if trace is None or buffer.scope != "global":
        return None
    ranges = trace.var_ranges
    conds: list[Expr] = []
    for off, size in zip(indices, buffer.shape):
        if isinstance(off, Const):
            continue  # checked at the user's line (buffer.TileBuffer.__getitem__)
        iv = interval(off, ranges)
        if iv is None or iv[0] < 0:
            conds.append(BinOp(">=", off, Const(0, "int32")))
        if iv is None or iv[1] >= size:
            conds.append(BinOp("<", off, Const(size, "int32")))
    if not conds:
        return None
    out = conds[0]
    for c in conds[1:]:
        out = BinOp("and", out, c)
    return out


def zero(dtype: str) -> Const:
    """The element type's zero (TileLang's default safe value)."""
    kind = lookup_dtype(dtype).kind
    return Const(False if kind == "bool" else 0.0 if kind == "float" else 0, dtype)


def load(buffer: Buffer, indices: tuple[Expr, ...]) -> Value:
    """``buffer[indices]`` as a value: the plain load, or the guarded one where the index may leave a global
    tensor (module docstring)."""
    plain = Value(Load(buffer, indices))
    cond = condition(buffer, indices)
    if cond is None:
        return plain
    return GuardedLoad(Select(cond, plain.expr, zero(buffer.dtype)), plain)
